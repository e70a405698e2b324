"""The release report: one self-contained `report.html` (inline CSS, SVG and JPEG thumbnails).

It opens from disk with no server and loads nothing from the network. Sections: the run's
crawl outcomes and gate (when the flow gives them); counts per subset and category; what
changed since the previous committed release (new and vanished sources, category drift,
freshness); the evaluation table and the leaderboard across releases; image grids of sample
queries with a model's top-5, hits marked; attribute value distributions and their drift;
sources and freshness (`first_seen_at` histogram); dedup decisions and rejection reasons (lake
totals at report time); judge accuracy per attribute group with 95% Wilson intervals.

This module gathers the data; the markup is in `templates/` (Jinja2, autoescaped). It never
runs an evaluation: the flow passes the runs it scored (`evaluate_release_run`), and the grids
show the first of them.

For a committed release the flow writes it into the staging folder before commit
(`<release>/report.html`, listed in the manifest); afterwards `lookbench-live report`
writes `<lake>/reports/<version>/report.html`, since a committed release is immutable.
"""

from __future__ import annotations

import base64
import datetime as dt
import io
import json
import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import jinja2
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from PIL import Image

from lookbench_live.evaluation.baseline import BASELINE_NAME
from lookbench_live.evaluation.evaluate import EvaluationRun
from lookbench_live.evaluation.release_data import NOISE, SUBSETS, ReleaseData, iter_images, load_release
from lookbench_live.schema.release import version_key
from lookbench_live.warehouse.lake import Lake, atomic_write_bytes
from lookbench_live.warehouse.release import MANIFEST, current_versions, release_dir

THUMB = 96  # px, longest side
GRID_K = 5
HISTOGRAM_BINS = 24
REPORT_NAME = "report.html"
TEMPLATES = Path(__file__).parent / "templates"
SHOWN_METRICS = (
    "coarse_recall@1",
    "fine_recall@1",
    "fine_recall@5",
    "strict_recall@1",
    "item_recall@1",
    "ndcg@5",
    "mrr",
)
LEADERBOARD_METRIC = "fine_recall@1"
COLUMNS = ["category", "main_attribute", "source", "first_seen_at", "attributes", "taxonomy_version"]

Row = list[Any]


@cache
def _environment() -> jinja2.Environment:
    # Autoescaping on for every template: values from the lake (sources, reasons, errors) are text.
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def thumbnail(data: bytes, size: int = THUMB) -> str:
    """A `data:` URI of a small JPEG of the image (longest side `size`)."""
    with Image.open(io.BytesIO(data)) as image:
        image.draft("RGB", (size * 2, size * 2))
        small = image.convert("RGB")
        small.thumbnail((size, size))
    out = io.BytesIO()
    small.save(out, format="JPEG", quality=70)
    return "data:image/jpeg;base64," + base64.b64encode(out.getvalue()).decode()


def wilson(correct: int, total: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a proportion (0–1); (0, 1) when total is 0."""
    if total <= 0:
        return 0.0, 1.0
    p = correct / total
    denom = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denom
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def _share(value: Any) -> str:
    return "?" if value is None else f"{100 * float(value):.1f}"


def _pct(value: Any) -> str:
    return "–" if value is None else f"{float(value):.2f}"


def _day(moment: dt.datetime | None) -> str:
    return "–" if moment is None else f"{moment:%Y-%m-%d}"


# ---------------------------------------------------------------------- reading releases
def previous_version(lake: Lake, version: str) -> str | None:
    """The committed release with the greatest version below `version` (through manifests)."""
    older = [v for v in current_versions(lake) if version_key(v) < version_key(version)]
    return older[-1] if older else None


def _release_rows(lake: Lake, data: ReleaseData, columns: Sequence[str]) -> dict[str, pa.Table]:
    out = {}
    for name, path in data.files.items():
        with lake.fs.open(path, "rb") as handle:
            names = pq.read_schema(handle).names
            handle.seek(0)
            out[name] = pq.read_table(handle, columns=[c for c in columns if c in names])
    return out


def _published(tables: Mapping[str, pa.Table]) -> list[pa.Table]:
    """Query and gallery tables of the subsets (noise left out)."""
    return [t for name, t in tables.items() if not name.startswith(f"{NOISE}/")]


def _column(table: pa.Table, name: str) -> list[Any]:
    return table.column(name).to_pylist() if name in table.column_names else [None] * table.num_rows


def _attribute_shares(tables: Mapping[str, pa.Table]) -> dict[str, Counter[str]]:
    """Attribute group -> value counts over every non-noise row of a release."""
    shares: dict[str, Counter[str]] = defaultdict(Counter)
    for table in _published(tables):
        for attrs in _column(table, "attributes"):
            for kv in attrs or []:
                shares[kv["key"]][kv["value"]] += 1
    return shares


def _values(tables: Mapping[str, pa.Table], column: str, missing: str) -> Counter[str]:
    counts: Counter[str] = Counter()
    for table in _published(tables):
        counts.update(v or missing for v in _column(table, column))
    return counts


def _moments(tables: Mapping[str, pa.Table]) -> list[dt.datetime]:
    return [m for table in _published(tables) for m in _column(table, "first_seen_at") if m is not None]


def _group_counts(table: pa.Table, columns: Sequence[str]) -> Counter[tuple[Any, ...]]:
    if table.num_rows == 0:
        return Counter()
    present = [c for c in columns if c in table.column_names]
    values = [table.column(c).to_pylist() for c in present]
    return Counter(zip(*values, strict=True))


def _drift(current: Counter[str], previous: Counter[str] | None) -> tuple[list[Row], float | None]:
    """Rows (value, count, share[, Δ points]) by count, and the total variation distance."""
    total = sum(current.values())
    prev_total = sum(previous.values()) if previous else 0
    rows: list[Row] = []
    tv = 0.0
    for value in sorted(set(current) | set(previous or {}), key=lambda v: (-current.get(v, 0), v)):
        share = current.get(value, 0) / total if total else 0.0
        row: Row = [value, current.get(value, 0), f"{share * 100:.1f}%"]
        if previous is not None:
            prev_share = previous.get(value, 0) / prev_total if prev_total else 0.0
            tv += abs(share - prev_share) / 2
            row.append(f"{(share - prev_share) * 100:+.1f}")
        rows.append(row)
    return rows, (tv if previous is not None else None)


def _histogram(moments: Sequence[dt.datetime], bins: int = HISTOGRAM_BINS) -> dict[str, Any] | None:
    """Counts of `first_seen_at` in equal bins between its extremes (what the SVG macro draws)."""
    if not moments:
        return None
    lo, hi = min(moments), max(moments)
    span = max((hi - lo).total_seconds(), 1.0)
    counts = [0] * bins
    for m in moments:
        counts[min(bins - 1, int((m - lo).total_seconds() / span * bins))] += 1
    return {"counts": counts, "top": max(counts), "lo": _day(lo), "hi": _day(hi)}


def _freshness(moments: Sequence[dt.datetime]) -> dict[str, Any]:
    ordered = sorted(moments)
    return {
        "rows": len(ordered),
        "earliest": _day(ordered[0] if ordered else None),
        "median": _day(ordered[len(ordered) // 2] if ordered else None),
        "latest": _day(ordered[-1] if ordered else None),
    }


# ---------------------------------------------------------------------- sections
def _counts(tables: Mapping[str, pa.Table]) -> dict[str, Any]:
    rows: list[Row] = []
    for subset in (*SUBSETS, NOISE):
        q = tables.get(f"{subset}/query")
        g = tables.get(f"{subset}/gallery")
        rows.append([subset, q.num_rows if q is not None else "–", g.num_rows if g is not None else "–"])
    per_cat: dict[str, Counter[str]] = defaultdict(Counter)
    for name, table in tables.items():
        for cat in _column(table, "category"):
            per_cat[cat or "(none)"][name] += 1
    names = [n for n in (f"{s}/{p}" for s in (*SUBSETS, NOISE) for p in ("query", "gallery")) if n in tables]
    cat_rows = [
        [cat, *[per_cat[cat].get(n, 0) for n in names], sum(per_cat[cat].values())] for cat in sorted(per_cat)
    ]
    return {"subsets": rows, "category_headers": ["category", *names, "total"], "categories": cat_rows}


def _changes(
    tables: Mapping[str, pa.Table], previous: Mapping[str, pa.Table] | None, prev_name: str | None
) -> dict[str, Any]:
    """What changed since the previous committed release (issue 11 §5): sources, drift, freshness."""
    if previous is None:
        return {"previous": None}
    sources, prev_sources = _values(tables, "source", "(unknown)"), _values(previous, "source", "(unknown)")
    categories, category_tv = _drift(
        _values(tables, "category", "(none)"), _values(previous, "category", "(none)")
    )
    current_attrs, prev_attrs = _attribute_shares(tables), _attribute_shares(previous)
    attribute_drift = sorted(
        (
            (group, _drift(current_attrs.get(group, Counter()), prev_attrs.get(group, Counter()))[1] or 0.0)
            for group in set(current_attrs) | set(prev_attrs)
        ),
        key=lambda item: (-item[1], item[0]),
    )
    moments, prev_moments = _moments(tables), _moments(previous)
    prev_latest = max(prev_moments) if prev_moments else None
    newer = sum(1 for m in moments if prev_latest is None or m > prev_latest)
    return {
        "previous": prev_name,
        "new_sources": [[s, n] for s, n in sources.most_common() if s not in prev_sources],
        "gone_sources": [[s, n] for s, n in prev_sources.most_common() if s not in sources],
        "kept_sources": sum(1 for s in sources if s in prev_sources),
        "categories": categories,
        "category_tv": f"{category_tv or 0.0:.3f}",
        "attribute_drift": [[g, f"{tv:.3f}"] for g, tv in attribute_drift],
        "freshness": [
            [prev_name, *_freshness(prev_moments).values()],
            ["this release", *_freshness(moments).values()],
        ],
        "newer_rows": newer,
        "newer_share": f"{100 * newer / len(moments):.1f}%" if moments else "–",
        "previous_latest": _day(prev_latest),
        "histogram": _histogram(moments),
        "previous_histogram": _histogram(prev_moments),
    }


def _attributes(
    current: dict[str, Counter[str]], previous: dict[str, Counter[str]] | None
) -> list[dict[str, Any]]:
    groups = []
    for group in sorted(current):
        prev = previous.get(group, Counter()) if previous is not None else None
        rows, tv = _drift(current[group], prev)
        groups.append(
            {
                "name": group,
                "tv": None if tv is None else f"{tv:.3f}",
                "headers": ["value", "rows", "share"] + (["Δ points"] if prev is not None else []),
                "rows": rows[:15],
            }
        )
    return groups


def _sources(tables: Mapping[str, pa.Table], now: dt.datetime) -> dict[str, Any]:
    per_source: Counter[str] = Counter()
    newest: dict[str, dt.datetime] = {}
    for table in _published(tables):
        for source, moment in zip(_column(table, "source"), _column(table, "first_seen_at"), strict=True):
            key = source or "(unknown)"
            per_source[key] += 1
            if moment is not None:
                newest[key] = max(newest.get(key, moment), moment)
    rows = [
        [s, n, _day(newest.get(s)), f"{(now - newest[s]).days} d" if s in newest else "–"]
        for s, n in per_source.most_common()
    ]
    return {"rows": rows, "histogram": _histogram(_moments(tables))}


def _lake_reasons(lake: Lake) -> list[dict[str, Any]]:
    blocks = []
    dedup = _group_counts(
        lake.read("dedup_decisions", columns=["decision", "reason"]), ["decision", "reason"]
    )
    blocks.append(
        {
            "title": "Dedup decisions",
            "headers": ["decision", "reason", "images"],
            "rows": [[d, r or "–", n] for (d, r), n in dedup.most_common()],
        }
    )
    images = lake.read("images", columns=["status", "rejection_reason"])
    rejected = images.filter(pc.equal(images.column("status"), "rejected")) if images.num_rows else images
    blocks.append(
        {
            "title": "Images rejected at ingestion",
            "headers": ["reason", "images"],
            "rows": [
                [r or "–", n] for (r,), n in _group_counts(rejected, ["rejection_reason"]).most_common()
            ],
        }
    )
    rejections = _group_counts(lake.read("rejections", columns=["stage", "reason"]), ["stage", "reason"])
    blocks.append(
        {
            "title": "Other rejections",
            "headers": ["stage", "reason", "rows"],
            "rows": [[s, r, n] for (s, r), n in rejections.most_common()],
        }
    )
    annotations = lake.read("annotations", columns=["status", "error"])
    failed = (
        annotations.filter(pc.equal(annotations.column("status"), "failed"))
        if annotations.num_rows
        else annotations
    )
    reasons: Counter[str] = Counter(
        ((e or "–").split(":")[0][:60]) for e in failed.column("error").to_pylist()
    )
    blocks.append(
        {
            "title": "Failed annotations",
            "headers": ["error", "rows"],
            "rows": [[r, n] for r, n in reasons.most_common()],
        }
    )
    return blocks


def _audit_rows_from_table(
    lake: Lake, version_taxonomy: set[str]
) -> tuple[dict[str, tuple[int, int]], str | None]:
    table = lake.read("audits", columns=["status", "verdicts", "judge_model", "taxonomy_version"])
    per_group: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    judges = set()
    for row in table.to_pylist():
        if row["status"] != "ok" or (version_taxonomy and row["taxonomy_version"] not in version_taxonomy):
            continue
        judges.add(row["judge_model"])
        for kv in row["verdicts"] or []:
            if kv["value"] in ("correct", "wrong"):  # cannot_tell is no evidence either way
                per_group[kv["key"]][1] += 1
                per_group[kv["key"]][0] += kv["value"] == "correct"
    return {g: (c, t) for g, (c, t) in per_group.items()}, ", ".join(sorted(judges)) or None


def _audit(lake: Lake, audit: dict[str, Any] | None, taxonomy_versions: set[str]) -> dict[str, Any]:
    """Per-group accuracy from the flow's audit summary (`annotation.judge` shape), else the `audits` table."""
    if audit is not None and str(audit.get("status", "")).lower() == "skipped":
        return {"skipped": audit.get("reason") or audit.get("detail") or "no judge configured"}
    confidence = float((audit or {}).get("confidence") or 0.95)
    judge = (audit or {}).get("judge_model") or (audit or {}).get("model")
    entries: dict[str, dict[str, Any]] = {}
    for name, entry in ((audit or {}).get("per_group") or (audit or {}).get("groups") or {}).items():
        if isinstance(entry, dict):
            entries[name] = dict(entry)
    if not entries:
        counts, judge = _audit_rows_from_table(lake, taxonomy_versions)
        entries = {g: {"correct": c, "total": t} for g, (c, t) in counts.items()}
        confidence = 0.95
    if not entries:
        status = (audit or {}).get("status")
        why = f" (audit status: {status})" if status else ""
        return {"skipped": f"no judge verdicts for this release{why}"}
    overall = (audit or {}).get("overall")
    if isinstance(overall, dict):
        entries = {**entries, "(all groups)": overall}
    rows = []
    for name, e in entries.items():
        correct, total = e.get("correct"), e.get("total", e.get("n"))
        acc, low, high = e.get("accuracy"), e.get("low", e.get("ci_low")), e.get("high", e.get("ci_high"))
        # The judge's own interval wins (it knows its confidence); counts alone get a 95% Wilson interval.
        if (low is None or high is None) and correct is not None and total:
            low, high = wilson(int(correct), int(total))
        if acc is None and correct is not None and total:
            acc = int(correct) / int(total)
        rows.append(
            [name, "–" if total is None else total, f"{_share(acc)}%", f"{_share(low)}–{_share(high)}%"]
        )
    return {
        "skipped": None,
        "judge": judge or "unknown",
        "headers": ["group", "judged", "accuracy", f"{round(confidence * 100)}% interval"],
        "rows": rows,
    }


def _runs(
    evaluations: Sequence[EvaluationRun | Mapping[str, Any]], context: Mapping[str, Any]
) -> list[EvaluationRun]:
    """The runs whose top-K the grids may show: `context["baseline_run"]`, then those in `evaluations`."""
    given = context.get("baseline_run")
    runs = [given] if isinstance(given, EvaluationRun) else []
    return runs + [e for e in evaluations if isinstance(e, EvaluationRun) and e is not given]


def _results(evaluations: Sequence[EvaluationRun | Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [e.result() if isinstance(e, EvaluationRun) else e for e in evaluations]


def _evaluation(version: str, results: Sequence[Mapping[str, Any]], stored: pa.Table) -> list[Row]:
    rows: list[Row] = []
    seen = set()
    for result in results:
        for subset, entry in [("overall", result["overall"]), *result["subsets"].items()]:
            key = (result["model"], subset, result.get("after") or "")
            seen.add(key)
            rows.append(
                [
                    result["model"],
                    subset,
                    result.get("after") or "",
                    entry["queries"],
                    *[_pct(entry.get(m)) for m in SHOWN_METRICS],
                ]
            )
    for row in stored.to_pylist():
        if row["release"] != version or (row["model"], row["subset"], row["after"]) in seen:
            continue
        metrics = {kv["key"]: float(kv["value"]) for kv in row["metrics"] or []}
        rows.append(
            [
                row["model"],
                row["subset"],
                row["after"],
                row["queries"],
                *[_pct(metrics.get(m)) for m in SHOWN_METRICS],
            ]
        )
    rows.sort(key=lambda r: (r[0], r[2], r[1] != "overall", r[1]))
    return rows


def _leaderboard(
    lake: Lake, version: str, results: Sequence[Mapping[str, Any]], stored: pa.Table
) -> dict[str, Any]:
    """Models × releases: overall `LEADERBOARD_METRIC` (all queries, no `--after`) of each committed
    release up to this one, from the `evaluations` table, this release's runs taking precedence."""
    releases = [v for v in current_versions(lake) if version_key(v) < version_key(version)] + [version]
    scores: dict[str, dict[str, str]] = defaultdict(dict)
    for row in stored.to_pylist():
        if row["subset"] != "overall" or row["after"] or row["release"] not in releases:
            continue
        metrics = {kv["key"]: kv["value"] for kv in row["metrics"] or []}
        if LEADERBOARD_METRIC in metrics:
            scores[row["model"]][row["release"]] = _pct(metrics[LEADERBOARD_METRIC])
    for result in results:
        if not result.get("after"):
            scores[result["model"]][version] = _pct(result["overall"].get(LEADERBOARD_METRIC))
    shown = [r for r in releases if any(r in by_release for by_release in scores.values())]
    rows = [[model, *[scores[model].get(r, "–") for r in shown]] for model in sorted(scores)]
    return {"metric": LEADERBOARD_METRIC, "headers": ["model", *shown], "rows": rows}


def _grids(
    lake: Lake, data: ReleaseData, runs: Sequence[EvaluationRun], samples: int
) -> dict[str, Any] | None:
    """Sample queries of each subset with the run's top-K; the baseline's run when there is one."""
    if not runs or samples <= 0:
        return None
    run = next((r for r in runs if r.model == BASELINE_NAME and r.after is None), runs[0])
    picks: list[tuple[str, int]] = []
    for name, sub in run.subsets.items():
        n = len(sub.query_sha)
        if n:
            step = max(1, n // max(samples, 1))
            picks += [(name, i) for i in range(0, n, step)[:samples]]
    wanted = set()
    for name, i in picks:
        sub = run.subsets[name]
        wanted.add(sub.query_sha[i])
        wanted.update(sub.corpus_sha[j] for j in sub.retrieval.indices[i, :GRID_K])
    thumbs = {sha: thumbnail(img) for sha, img in iter_images(lake, data, wanted)}
    subsets: dict[str, list[list[dict[str, Any]]]] = {}
    for name, i in picks:
        sub = run.subsets[name]
        cells = [
            {
                "cls": "query",
                "alt": "query",
                "src": thumbs.get(sub.query_sha[i], ""),
                "label": "",
                "category": sub.query_rows.column("category")[i].as_py(),
                "main": sub.query_rows.column("main_attribute")[i].as_py(),
                "title": None,
            }
        ]
        for rank, j in enumerate(sub.retrieval.indices[i, :GRID_K], start=1):
            fine = sub.corpus_labels.fine[j] == sub.query_labels.fine[i]
            coarse = sub.corpus_labels.category[j] == sub.query_labels.category[i]
            cls, mark = ("fine", "✓") if fine else ("coarse", "~") if coarse else ("miss", "✗")
            cells.append(
                {
                    "cls": cls,
                    "alt": f"rank {rank}",
                    "src": thumbs.get(sub.corpus_sha[j], ""),
                    "label": f"{rank}. {mark} ",
                    "category": sub.corpus_rows.column("category")[int(j)].as_py(),
                    "main": sub.corpus_rows.column("main_attribute")[int(j)].as_py(),
                    "title": f"cosine {float(sub.retrieval.scores[i, rank - 1]):.3f}",
                }
            )
        subsets.setdefault(name, []).append(cells)
    return {"model": run.model, "subsets": subsets}


def _run_outcomes(context: Mapping[str, Any]) -> dict[str, Any] | None:
    """The crawl's per-site outcomes and the audit gate, when the flow passes them."""
    sites = [
        [str(s.get("site", "?")), str(s.get("status", "?")), str(s.get("reason") or "")]
        for s in context.get("sites") or []
    ]
    gate = context.get("gate")
    failures = [
        [str(f.get("model", "?")), str(f.get("error", ""))] for f in context.get("evaluation_failures") or []
    ]
    if not sites and not gate and not failures:
        return None
    return {
        "sites": sites,
        "evaluation_failures": failures,
        "failed": [s[0] for s in sites if s[1] == "failed"],
        "over_budget": [s[0] for s in sites if s[1] == "over_budget"],
        "gate": None
        if not gate
        else {"passed": bool(gate.get("passed")), "reason": str(gate.get("reason") or "")},
    }


# ---------------------------------------------------------------------- entry points
def default_report_path(lake: Lake, version: str) -> str:
    """Where `lookbench-live report` reads or writes the report of a committed release."""
    in_release = f"{release_dir(lake, version)}/{REPORT_NAME}"
    manifest_path = f"{release_dir(lake, version)}/{MANIFEST}"
    if lake.fs.exists(manifest_path):
        listed = json.loads(lake.fs.cat_file(manifest_path)).get("files") or {}
        if REPORT_NAME in listed and lake.fs.exists(in_release):
            return in_release
    return lake.path("reports", version, REPORT_NAME)


def render_report(
    lake: Lake,
    version: str,
    *,
    release_path: str | None = None,
    evaluations: Sequence[EvaluationRun | Mapping[str, Any]] | None = None,
    audit: dict[str, Any] | None = None,
    context: Mapping[str, Any] | None = None,
    samples: int = 4,
    now: dt.datetime | None = None,
) -> str:
    """The report's HTML text (see `write_report`)."""
    now = now or dt.datetime.now(dt.UTC)
    context = context or {}
    evaluations = list(evaluations or ())
    data = load_release(lake, version, release_path)
    tables = _release_rows(lake, data, COLUMNS)
    prev_name = context.get("previous_version") or previous_version(lake, data.version)
    previous = _release_rows(lake, load_release(lake, prev_name), COLUMNS) if prev_name else None
    taxonomy_versions = {v for t in tables.values() for v in _column(t, "taxonomy_version") if v}
    manifest = data.manifest
    facts = [
        ("release", data.version),
        ("written", f"{now:%Y-%m-%d %H:%M} UTC"),
        ("taxonomy", ", ".join(sorted(taxonomy_versions)) or manifest.get("taxonomy_version")),
        ("annotation", ", ".join(manifest.get("annotation_models") or []) or manifest.get("annotation_mode")),
        ("window", json.dumps(manifest.get("window")) if manifest.get("window") else None),
        ("previous release", prev_name or "none"),
    ]
    results = _results(evaluations)
    stored = lake.read("evaluations")
    page = {
        "version": data.version,
        "facts": [(k, v) for k, v in facts if v],
        "run": _run_outcomes(context),
        "counts": _counts(tables),
        "changes": _changes(tables, previous, prev_name),
        "evaluation": {"metrics": SHOWN_METRICS, "rows": _evaluation(data.version, results, stored)},
        "leaderboard": _leaderboard(lake, data.version, results, stored),
        "grids": _grids(lake, data, _runs(evaluations, context), samples),
        "previous": prev_name,
        "attributes": _attributes(
            _attribute_shares(tables), _attribute_shares(previous) if previous is not None else None
        ),
        "sources": _sources(tables, now),
        "rejections": _lake_reasons(lake),
        "audit": _audit(lake, audit, taxonomy_versions),
    }
    return _environment().get_template("report.html.j2").render(page=page)


def write_report(
    lake: Lake,
    version: str,
    path: str,
    *,
    release_path: str | None = None,
    evaluations: Sequence[EvaluationRun | Mapping[str, Any]] | None = None,
    audit: dict[str, Any] | None = None,
    context: Mapping[str, Any] | None = None,
    samples: int = 4,
) -> str:
    """Write the report to `path` (a path on `lake.fs`, atomically) and return that path.

    `release_path`: a staging folder before commit (then `version` must be its vYYYYMMDD).
    `evaluations`: what the caller scored, as `EvaluationRun`s (`evaluate_release_run`; the
    grids show the baseline's, else the first) or result dicts (`evaluate_release`); the
    `evaluations` table's rows of this release are shown too. Nothing is evaluated here.
    `audit`: the judge's summary, or `{"status": "skipped", "reason": …}`; None reads the
    `audits` table. `context`: what the run knows and the lake does not: `sites` (crawl
    outcomes, dicts with site/status/reason; status ok, failed or over_budget), `gate`
    ({passed, reason}), `previous_version` (the release to compare with; default: the greatest
    committed version below this one) and `baseline_run` (an `EvaluationRun` for the grids, when
    `evaluations` holds result dicts).
    `samples`: sample queries per subset in the grids (0: none).
    """
    text = render_report(
        lake,
        version,
        release_path=release_path,
        evaluations=evaluations,
        audit=audit,
        context=context,
        samples=samples,
    )
    parent = path.rsplit("/", 1)[0]
    if parent and parent != path:
        lake.fs.makedirs(parent, exist_ok=True)
    atomic_write_bytes(lake.fs, path, text.encode("utf-8"))
    return path
