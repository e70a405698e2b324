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
import posixpath
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import jinja2
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

from lookbench_live.evaluation import charts
from lookbench_live.evaluation.baseline import BASELINE_NAME
from lookbench_live.evaluation.evaluate import EvaluationRun, evaluation_records
from lookbench_live.evaluation.leaderboard import SUBSET_TITLES, board_rows, paper_table
from lookbench_live.evaluation.release_data import NOISE, SUBSETS, ReleaseData, iter_images, load_release
from lookbench_live.schema.committed import current_versions, release_dir
from lookbench_live.schema.release import MANIFEST, version_key
from lookbench_live.schema.verify import verify_path
from lookbench_live.warehouse.drops import drops_by_reason
from lookbench_live.warehouse.lake import Lake, atomic_write_bytes

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
CATEGORY_METRIC = "fine_recall@1"
MODELS_PER_TABLE = 8  # per-category recall: at most this many model columns in one table
CARD, CROISSANT = "README.md", "croissant.json"
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


def _histogram(moments: Sequence[dt.datetime], label: str = "first_seen_at histogram") -> Any:
    """The SVG histogram of `first_seen_at` (rows per day; `charts.histogram`), or None."""
    return charts.histogram(moments, label=label)


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
    # One column per subset ("queries / gallery"), not one per file: the table stays narrow.
    present = [s for s in (*SUBSETS, NOISE) if any(n.startswith(f"{s}/") for n in tables)]

    def cell(counts: Counter[str], subset: str) -> str:
        if subset == NOISE:
            return str(counts.get(f"{NOISE}/gallery", 0) or "")
        q, g = counts.get(f"{subset}/query", 0), counts.get(f"{subset}/gallery", 0)
        return f"{q} / {g}" if q or g else ""

    cat_rows = [
        [cat, *[cell(per_cat[cat], s) for s in present], sum(per_cat[cat].values())]
        for cat in sorted(per_cat)
    ]
    headers = ["category", *[f"{s} (gallery)" if s == NOISE else f"{s} (queries / gallery)" for s in present]]
    return {"subsets": rows, "category_headers": [*headers, "total"], "categories": cat_rows}


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
        "histogram": _histogram(moments, "first_seen_at of this release"),
        "previous_histogram": _histogram(prev_moments, f"first_seen_at of {prev_name}"),
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
    drops = drops_by_reason(lake)  # the run summary's count too (manifest `rejections_by_reason`)
    blocks.append(
        {
            "title": "Drops by stage and reason",
            "headers": ["stage", "reason", "rows"],
            "rows": [[s, r, n] for (s, r), n in sorted(drops.items(), key=lambda kv: (-kv[1], kv[0]))],
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


def _records(results: Sequence[Mapping[str, Any]], stored: pa.Table) -> list[dict[str, Any]]:
    """`evaluations` records: the table's, with this report's results in place of the same
    (release, model, subset, after)."""
    merged: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    for row in stored.to_pylist():
        merged[(row["release"], row["model"], row["subset"], row["after"] or "")] = row
    for result in results:
        for record in evaluation_records(dict(result)):
            row = record.model_dump()
            merged[(row["release"], row["model"], row["subset"], row["after"] or "")] = row
    return list(merged.values())


def _legend(models: Sequence[str]) -> list[dict[str, Any]]:
    return [{"name": m, "colour": charts.colour(i), "hollow": charts.hollow(i)} for i, m in enumerate(models)]


def _scores(
    lake: Lake, version: str, results: Sequence[Mapping[str, Any]], stored: pa.Table
) -> dict[str, Any]:
    """The leaderboard in the paper's layout (all queries, no `--after`) over the committed
    releases up to this one, this report's runs taking precedence; the chart of this release's
    Fine R@1 per subset and model; each model's overall Fine R@1 across releases."""
    releases = [v for v in current_versions(lake) if version_key(v) < version_key(version)] + [version]
    rows = [r for r in board_rows(_records(results, stored), releases=releases) if not r["after"]]
    # One colour per model in every chart: the models of this release first, best first.
    models = list(
        dict.fromkeys(
            [r["model"] for r in rows if r["release"] == version] + sorted({r["model"] for r in rows})
        )
    )
    current = [r for r in rows if r["release"] == version]
    groups = [*SUBSETS, "overall"]
    titles = {**SUBSET_TITLES, "overall": "Overall"}
    per_subset: dict[tuple[str, str], float | None] = {}
    for r in current:
        for subset in SUBSETS:
            per_subset[(r["model"], subset)] = (r["subsets"].get(subset) or {}).get("fine_r1")
        per_subset[(r["model"], "overall")] = r["fine_r1"]
    shown = [v for v in releases if any(r["release"] == v for r in rows)]
    across = {(r["model"], r["release"]): r["fine_r1"] for r in rows}
    current_models = [m for m in models if any(r["model"] == m for r in current)]
    index = {m: i for i, m in enumerate(models)}
    return {
        "table": paper_table(rows),
        "legend": _legend(models),
        "subset_chart": charts.grouped_bars(
            groups,
            current_models,
            per_subset,
            label=f"Fine Recall@1 per subset and model, {version}",
            group_titles=titles,
            index=index,
        )
        if current
        else None,
        "release_chart": charts.lines(
            shown, models, across, label="Overall Fine Recall@1 of each model across releases", index=index
        )
        if rows
        else None,
        "releases": shown,
    }


def _per_category(runs: Sequence[EvaluationRun], models: Sequence[str]) -> dict[str, Any] | None:
    """Fine Recall@1 per query category (all subsets pooled) of each run over all queries: a dot
    plot and tables of at most `MODELS_PER_TABLE` models each (wrapped, never wider than the page)."""
    runs = [r for r in runs if r.after is None]
    if not runs:
        return None
    hits: dict[tuple[str, str], list[float]] = defaultdict(list)
    queries: Counter[str] = Counter()
    seen_models: list[str] = []
    for run in runs:
        if run.model in seen_models:
            continue
        seen_models.append(run.model)
        counted = len(seen_models) == 1
        for sub in run.subsets.values():
            if not len(sub.query_sha):
                continue
            categories = sub.query_rows.column("category").to_pylist()
            for cat, hit in zip(categories, sub.per_query[CATEGORY_METRIC].tolist(), strict=True):
                key = cat or "(none)"
                hits[(run.model, key)].append(float(hit))
                if counted:
                    queries[key] += 1
    order = sorted(queries, key=lambda c: (-queries[c], c))
    ordered_models = [m for m in models if m in seen_models] + [m for m in seen_models if m not in models]
    values = {k: 100.0 * sum(v) / len(v) for k, v in hits.items() if v}
    tables = []
    for start in range(0, len(ordered_models), MODELS_PER_TABLE):
        chunk = ordered_models[start : start + MODELS_PER_TABLE]
        tables.append(
            {
                "headers": ["category", "queries", *chunk],
                "rows": [[c, queries[c], *[_pct(values.get((m, c))) for m in chunk]] for c in order],
            }
        )
    return {
        "chart": charts.dot_plot(
            order,
            ordered_models,
            values,
            label="Fine Recall@1 per category and model",
            notes={c: f"{queries[c]} queries" for c in order},
            index={m: i for i, m in enumerate(models)},
        ),
        "tables": tables,
        "models": ordered_models,
    }


def _files(
    lake: Lake, data: ReleaseData, report_path: str, files: Mapping[str, Any] | None, verify: bool
) -> dict[str, Any]:
    """Links to the release's card, manifest and Croissant file (relative to the report, so they
    work wherever the lake is opened or served), the checksums and whether they verify, and the
    lines that load and score the release."""
    here = report_path.rsplit("/", 1)[0]
    committed = bool(data.manifest)  # a staging folder has no manifest until commit
    final = release_dir(lake, data.version) if committed else data.base
    # A report in a staging folder moves with it at commit: its links stay relative to it.
    base = data.base if here == data.base.rstrip("/") else final

    def link(rel: str) -> str:
        return posixpath.relpath(f"{base}/{rel}", here)

    listed: Mapping[str, Any] = (data.manifest or {}).get("files") or files or {}
    checksums = [
        [rel, link(rel), entry.get("rows", ""), entry.get("size", ""), entry.get("sha256", "")]
        for rel, entry in sorted(listed.items())
    ]
    if not committed:
        status = {
            "state": "pending",
            "text": "written before commit: commit writes manifest.json with these checksums, verifies "
            "every file against it and publishes nothing if one differs; "
            f"`lookbench-live release verify {data.version}` checks it again",
            "faults": [],
        }
    elif not verify:
        status = {"state": "pending", "text": "not checked when this report was written", "faults": []}
    else:
        faults = verify_path(lake, data.base)
        status = {
            "state": "failed" if faults else "ok",
            "text": (
                f"{len(faults)} fault(s) when this report was written"
                if faults
                else "every file matches manifest.json (sha256, size, rows) and every row's image "
                "bytes match its sha256, checked when this report was written"
            ),
            "faults": faults[:10],
        }
    links: list[dict[str, Any]] = [
        {"name": CARD, "what": "dataset card (Hugging Face configs, columns, terms)"},
        {"name": MANIFEST, "what": "manifest: every file's sha256, size and rows (written at commit)"},
        {"name": CROISSANT, "what": "Croissant 1.1 metadata"},
    ]
    for entry in links:
        entry["href"] = link(entry["name"])
        # The manifest of a staging folder is written at commit, after this report.
        entry["present"] = (entry["name"] == MANIFEST and not committed) or lake.fs.exists(
            f"{data.base}/{entry['name']}"
        )
    location = lake.url(*release_dir(lake, data.version)[len(lake.root.rstrip("/")) + 1 :].split("/"))
    snippet = "\n".join(
        [
            "# Python: one config per subset (real_studio_flat, aigen_studio, real_streetlook,",
            "# aigen_streetlook, noise); splits query and gallery (noise: gallery only)",
            "from datasets import load_dataset",
            f'ds = load_dataset("{location}", "real_studio_flat")',
            'query, gallery = ds["query"], ds["gallery"]',
            "",
            "# Shell: score a model on this release (it is verified first)",
            f"lookbench-live evaluate {data.version} --model MODEL_ID_OR_FOLDER --json",
            f"lookbench-live evaluate {data.version} --embeddings my_model.parquet --model my-model",
        ]
    )
    return {"links": links, "checksums": checksums, "status": status, "snippet": snippet}


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
    path: str | None = None,
    verify: bool = True,
) -> str:
    """The report's HTML text (see `write_report`). `path`: where it will be written (its links
    are relative to it; default: `default_report_path`, or the staging folder's report.html)."""
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
    scores = _scores(lake, data.version, results, stored)
    runs = _runs(evaluations, context)
    if path is None:
        path = f"{data.base}/{REPORT_NAME}" if release_path else default_report_path(lake, data.version)
    page = {
        "version": data.version,
        "facts": [(k, v) for k, v in facts if v],
        "run": _run_outcomes(context),
        "counts": _counts(tables),
        "changes": _changes(tables, previous, prev_name),
        "evaluation": {"metrics": SHOWN_METRICS, "rows": _evaluation(data.version, results, stored)},
        "leaderboard": scores,
        "categories": _per_category(runs, [m["name"] for m in scores["legend"]]),
        "files": _files(lake, data, path, context.get("files"), verify),
        "grids": _grids(lake, data, runs, samples),
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
        path=path,
    )
    parent = path.rsplit("/", 1)[0]
    if parent and parent != path:
        lake.fs.makedirs(parent, exist_ok=True)
    atomic_write_bytes(lake.fs, path, text.encode("utf-8"))
    return path
