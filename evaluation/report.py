"""The release report: one self-contained `report.html` (inline CSS, SVG and JPEG thumbnails).

It opens from disk with no server and loads nothing from the network. Sections:
counts per subset and category; attribute value distributions and their drift from the
previous committed release; sources and freshness (`first_seen_at` histogram); dedup
decisions and rejection reasons (lake totals at report time); judge accuracy per
attribute group with 95% Wilson intervals; the evaluation table; and image grids of
sample queries with the baseline's top-5, hits marked.

For a committed release the flow writes it into the staging folder before commit
(`<release>/report.html`, listed in the manifest); afterwards `lookbench-live report`
writes `<lake>/reports/<version>/report.html`, since a committed release is immutable.
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import io
import json
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from PIL import Image

from lookbench_live.evaluation.evaluate import EvaluationRun, run_evaluation
from lookbench_live.evaluation.release_data import NOISE, SUBSETS, ReleaseData, iter_images, load_release
from lookbench_live.warehouse.lake import Lake, atomic_write_bytes
from lookbench_live.warehouse.release import MANIFEST, committed_versions, release_dir

THUMB = 96  # px, longest side
GRID_K = 5
REPORT_NAME = "report.html"
SHOWN_METRICS = (
    "coarse_recall@1",
    "fine_recall@1",
    "fine_recall@5",
    "strict_recall@1",
    "item_recall@1",
    "ndcg@5",
    "mrr",
)

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#1d1d1f;max-width:1200px}
h1{font-size:24px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
h3{font-size:15px;margin:16px 0 6px}.muted{color:#666}.skipped{color:#8a5a00;font-weight:600}
table{border-collapse:collapse;margin:6px 0 12px}th,td{border:1px solid #ddd;padding:3px 8px;text-align:right}
th:first-child,td:first-child{text-align:left}th{background:#f4f4f6}
.cols{display:flex;flex-wrap:wrap;gap:18px}.cols>div{flex:1 1 320px}
.grid{display:grid;grid-template-columns:repeat(6,104px);gap:6px;margin:6px 0 14px;align-items:start}
.cell{border:3px solid #bbb;border-radius:4px;padding:2px;text-align:center;font-size:11px;background:#fafafa}
.cell img{display:block;margin:0 auto;max-width:96px;max-height:96px}
.cell.query{border-color:#2b6cb0}.cell.fine{border-color:#2f855a}.cell.coarse{border-color:#d69e2e}
.cell.miss{border-color:#c53030}.up{color:#2f855a}.down{color:#c53030}
.legend span{display:inline-block;padding:0 6px;margin-right:8px;border:3px solid}
svg text{font-size:10px;fill:#444}
"""


def _esc(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _table(headers: Sequence[str], rows: Iterable[Sequence[Any]], cls: str = "") -> str:
    head = "".join(f"<th>{_esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{_esc(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


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


# ---------------------------------------------------------------------- data gathering
def previous_version(lake: Lake, version: str) -> str | None:
    """The committed release with the greatest version below `version` (through manifests)."""
    older = [v for v in committed_versions(lake) if v < version]
    return older[-1] if older else None


def _release_rows(lake: Lake, data: ReleaseData, columns: Sequence[str]) -> dict[str, pa.Table]:
    out = {}
    for name, path in data.files.items():
        with lake.fs.open(path, "rb") as handle:
            names = pq.read_schema(handle).names
            handle.seek(0)
            out[name] = pq.read_table(handle, columns=[c for c in columns if c in names])
    return out


def _attribute_shares(tables: dict[str, pa.Table]) -> dict[str, Counter[str]]:
    """Attribute group -> value counts over every non-noise row of a release."""
    shares: dict[str, Counter[str]] = defaultdict(Counter)
    for name, table in tables.items():
        if name.startswith(f"{NOISE}/") or "attributes" not in table.column_names:
            continue
        for attrs in table.column("attributes").to_pylist():
            for kv in attrs or []:
                shares[kv["key"]][kv["value"]] += 1
    return shares


def _group_counts(table: pa.Table, columns: Sequence[str]) -> Counter[tuple[Any, ...]]:
    if table.num_rows == 0:
        return Counter()
    present = [c for c in columns if c in table.column_names]
    values = [table.column(c).to_pylist() for c in present]
    return Counter(zip(*values, strict=True))


# ---------------------------------------------------------------------- sections
def _counts_section(tables: dict[str, pa.Table]) -> str:
    rows = []
    for subset in (*SUBSETS, NOISE):
        q = tables.get(f"{subset}/query")
        g = tables.get(f"{subset}/gallery")
        rows.append([subset, q.num_rows if q is not None else "–", g.num_rows if g is not None else "–"])
    per_cat: dict[str, Counter[str]] = defaultdict(Counter)
    for name, table in tables.items():
        for cat in table.column("category").to_pylist():
            per_cat[cat or "(none)"][name] += 1
    names = [n for n in (f"{s}/{p}" for s in (*SUBSETS, NOISE) for p in ("query", "gallery")) if n in tables]
    cat_rows = [
        [cat, *[per_cat[cat].get(n, 0) for n in names], sum(per_cat[cat].values())] for cat in sorted(per_cat)
    ]
    return (
        '<section id="counts"><h2>Counts</h2><div class="cols"><div><h3>Per subset</h3>'
        + _table(["subset", "queries", "gallery"], rows)
        + "</div><div><h3>Per category</h3>"
        + _table(["category", *names, "total"], cat_rows)
        + "</div></div></section>"
    )


def _attributes_section(
    current: dict[str, Counter[str]], previous: dict[str, Counter[str]] | None, prev_name: str | None
) -> str:
    parts = ['<section id="attributes"><h2>Attribute values</h2>']
    if previous is None:
        parts.append('<p class="muted">No earlier committed release: no drift to show.</p>')
    else:
        parts.append(
            f'<p class="muted">Drift against {_esc(prev_name)}: change of each value\'s share in points; '
            "TV = total variation distance of the group's distribution.</p>"
        )
    parts.append('<div class="cols">')
    for group in sorted(current):
        counts = current[group]
        total = sum(counts.values())
        prev = previous.get(group, Counter()) if previous is not None else None
        prev_total = sum(prev.values()) if prev else 0
        rows = []
        tv = 0.0
        for value in sorted(set(counts) | set(prev or {}), key=lambda v: (-counts.get(v, 0), v)):
            share = counts.get(value, 0) / total if total else 0.0
            row: list[Any] = [value, counts.get(value, 0), f"{share * 100:.1f}%"]
            if prev is not None:
                prev_share = prev.get(value, 0) / prev_total if prev_total else 0.0
                delta = (share - prev_share) * 100
                tv += abs(share - prev_share) / 2
                row.append(f"{delta:+.1f}")
            rows.append(row)
        headers = ["value", "rows", "share"] + (["Δ points"] if prev is not None else [])
        title = f"{_esc(group)}" + (f' <span class="muted">TV {tv:.3f}</span>' if prev is not None else "")
        parts.append(f"<div><h3>{title}</h3>{_table(headers, rows[:15])}</div>")
    if not current:
        parts.append('<p class="muted">No attribute values in this release.</p>')
    parts.append("</div></section>")
    return "".join(parts)


def _svg_histogram(moments: list[dt.datetime], bins: int = 24) -> str:
    if not moments:
        return '<p class="muted">No first_seen_at values.</p>'
    lo, hi = min(moments), max(moments)
    span = max((hi - lo).total_seconds(), 1.0)
    counts = [0] * bins
    for m in moments:
        counts[min(bins - 1, int((m - lo).total_seconds() / span * bins))] += 1
    width, height, bar = 600, 140, 600 / bins
    top = max(counts)
    rects = []
    for i, c in enumerate(counts):
        h = 0 if top == 0 else (height - 30) * c / top
        rects.append(
            f'<rect x="{i * bar + 1:.1f}" y="{height - 20 - h:.1f}" width="{bar - 2:.1f}" height="{h:.1f}" fill="#4a7bd0">'
            f"<title>{c}</title></rect>"
        )
    labels = (
        f'<text x="0" y="{height - 5}">{lo:%Y-%m-%d}</text>'
        f'<text x="{width}" y="{height - 5}" text-anchor="end">{hi:%Y-%m-%d}</text>'
        f'<text x="0" y="10">max {top} rows per bin</text>'
    )
    return f'<svg role="img" aria-label="first_seen_at histogram" width="{width}" height="{height}" viewBox="0 0 {width} {height}">{"".join(rects)}{labels}</svg>'


def _sources_section(tables: dict[str, pa.Table], now: dt.datetime) -> str:
    per_source: Counter[str] = Counter()
    moments: list[dt.datetime] = []
    newest: dict[str, dt.datetime] = {}
    for name, table in tables.items():
        if name.startswith(f"{NOISE}/"):
            continue
        sources = (
            table.column("source").to_pylist() if "source" in table.column_names else [None] * table.num_rows
        )
        seen = (
            table.column("first_seen_at").to_pylist()
            if "first_seen_at" in table.column_names
            else [None] * table.num_rows
        )
        for source, moment in zip(sources, seen, strict=True):
            per_source[source or "(unknown)"] += 1
            if moment is not None:
                moments.append(moment)
                key = source or "(unknown)"
                newest[key] = max(newest.get(key, moment), moment)
    rows = [
        [
            s,
            n,
            f"{newest[s]:%Y-%m-%d}" if s in newest else "–",
            f"{(now - newest[s]).days} d" if s in newest else "–",
        ]
        for s, n in per_source.most_common()
    ]
    return (
        '<section id="sources"><h2>Sources and freshness</h2><div class="cols"><div>'
        + _table(["source", "rows (queries + galleries)", "newest first_seen_at", "age"], rows)
        + "</div><div><h3>first_seen_at</h3>"
        + _svg_histogram(moments)
        + "</div></div></section>"
    )


def _lake_reasons_section(lake: Lake) -> str:
    blocks = []
    dedup = _group_counts(
        lake.read("dedup_decisions", columns=["decision", "reason"]), ["decision", "reason"]
    )
    blocks.append(
        (
            "Dedup decisions",
            ["decision", "reason", "images"],
            [[d, r or "–", n] for (d, r), n in dedup.most_common()],
        )
    )
    images = lake.read("images", columns=["status", "rejection_reason"])
    rejected = images.filter(pc.equal(images.column("status"), "rejected")) if images.num_rows else images
    blocks.append(
        (
            "Images rejected at ingestion",
            ["reason", "images"],
            [[r or "–", n] for (r,), n in _group_counts(rejected, ["rejection_reason"]).most_common()],
        )
    )
    rejections = _group_counts(lake.read("rejections", columns=["stage", "reason"]), ["stage", "reason"])
    blocks.append(
        (
            "Other rejections",
            ["stage", "reason", "rows"],
            [[s, r, n] for (s, r), n in rejections.most_common()],
        )
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
    blocks.append(("Failed annotations", ["error", "rows"], [[r, n] for r, n in reasons.most_common()]))
    parts = [
        '<section id="rejections"><h2>Dedup and rejections</h2><p class="muted">Totals in the lake when the report was written.</p><div class="cols">'
    ]
    for title, headers, rows in blocks:
        body = _table(headers, rows) if rows else '<p class="muted">none</p>'
        parts.append(f"<div><h3>{_esc(title)}</h3>{body}</div>")
    parts.append("</div></section>")
    return "".join(parts)


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


def _audit_section(lake: Lake, audit: dict[str, Any] | None, taxonomy_versions: set[str]) -> str:
    """Per-group accuracy from the flow's audit summary (`annotation.judge` shape), else the `audits` table."""
    head = '<section id="audit"><h2>Judge accuracy per attribute group</h2>'
    if audit is not None and str(audit.get("status", "")).lower() == "skipped":
        reason = audit.get("reason") or audit.get("detail") or "no judge configured"
        return head + f'<p class="skipped">Audit skipped: {_esc(reason)}.</p></section>'
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
        why = f" (audit status: {_esc(status)})" if status else ""
        return (
            head + f'<p class="skipped">Audit skipped: no judge verdicts for this release{why}.</p></section>'
        )
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
    label = f"{round(confidence * 100)}% interval"
    summary = (
        f'<p class="muted">Judge: {_esc(judge or "unknown")}; Wilson score intervals; '
        '"cannot tell" verdicts left out.</p>'
    )
    return head + summary + _table(["group", "judged", "accuracy", label], rows) + "</section>"


def _evaluation_section(version: str, results: Sequence[dict[str, Any]], stored: pa.Table) -> str:
    rows = []
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
    body = (
        _table(["model", "subset", "after", "queries", *SHOWN_METRICS], rows)
        if rows
        else '<p class="muted">No evaluation yet.</p>'
    )
    note = (
        '<p class="muted">Percent. Corpus = subset gallery ∪ noise; fine = same category and main attribute; '
        "strict = every attribute; nDCG gain = share of the query's visible attribute values; MRR over fine hits, cut at 20.</p>"
    )
    return f'<section id="evaluation"><h2>Evaluation</h2>{note}{body}</section>'


def _share(value: Any) -> str:
    return "?" if value is None else f"{100 * float(value):.1f}"


def _pct(value: Any) -> str:
    return "–" if value is None else f"{float(value):.2f}"


def _grids_section(lake: Lake, data: ReleaseData, run: EvaluationRun | None, samples: int) -> str:
    head = (
        '<section id="grids"><h2>Sample queries and the baseline\'s top 5</h2>'
        '<p class="legend"><span style="border-color:#2b6cb0">query</span><span style="border-color:#2f855a">fine hit</span>'
        '<span style="border-color:#d69e2e">category only</span><span style="border-color:#c53030">miss</span></p>'
    )
    if run is None:
        return head + '<p class="muted">No retrieval to show.</p></section>'
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
    parts = [head]
    current = None
    for name, i in picks:
        sub = run.subsets[name]
        if name != current:
            parts.append(f"<h3>{_esc(name)}</h3>")
            current = name
        q_cat = sub.query_rows.column("category")[i].as_py()
        q_main = sub.query_rows.column("main_attribute")[i].as_py()
        cells = [
            f'<div class="cell query"><img alt="query" src="{thumbs.get(sub.query_sha[i], "")}">'
            f"{_esc(q_cat)}<br>{_esc(q_main)}</div>"
        ]
        for rank, j in enumerate(sub.retrieval.indices[i, :GRID_K], start=1):
            fine = sub.corpus_labels.fine[j] == sub.query_labels.fine[i]
            coarse = sub.corpus_labels.category[j] == sub.query_labels.category[i]
            cls, mark = ("fine", "✓") if fine else ("coarse", "~") if coarse else ("miss", "✗")
            c_cat = sub.corpus_rows.column("category")[int(j)].as_py()
            c_main = sub.corpus_rows.column("main_attribute")[int(j)].as_py()
            score = float(sub.retrieval.scores[i, rank - 1])
            cells.append(
                f'<div class="cell {cls}" title="cosine {score:.3f}"><img alt="rank {rank}" src="{thumbs.get(sub.corpus_sha[j], "")}">'
                f"{rank}. {mark} {_esc(c_cat)}<br>{_esc(c_main)}</div>"
            )
        parts.append(f'<div class="grid">{"".join(cells)}</div>')
    parts.append("</section>")
    return "".join(parts)


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
    evaluations: Sequence[dict[str, Any]] = (),
    audit: dict[str, Any] | None = None,
    samples: int = 4,
    now: dt.datetime | None = None,
    context: dict[str, Any] | None = None,
) -> str:
    """The report's HTML text (see module docstring)."""
    now = now or dt.datetime.now(dt.UTC)
    data = load_release(lake, version, release_path)
    columns = ["category", "main_attribute", "source", "first_seen_at", "attributes", "taxonomy_version"]
    tables = _release_rows(lake, data, columns)
    prev_name = previous_version(lake, data.version)
    previous = (
        _attribute_shares(_release_rows(lake, load_release(lake, prev_name), columns)) if prev_name else None
    )
    taxonomy_versions = {
        v
        for t in tables.values()
        if "taxonomy_version" in t.column_names
        for v in t.column("taxonomy_version").to_pylist()
        if v
    }
    # The baseline's retrieval for the grids; embeddings come from the (release, baseline) cache.
    # The flow passes the evaluation it ran (`context["baseline_run"]`): the report never re-evaluates it.
    run = (context or {}).get("baseline_run")
    if run is None and samples:
        run = run_evaluation(lake, data.version, release_path=release_path)
    manifest = data.manifest
    facts = [
        ("release", data.version),
        ("written", f"{now:%Y-%m-%d %H:%M} UTC"),
        ("taxonomy", ", ".join(sorted(taxonomy_versions)) or manifest.get("taxonomy_version")),
        ("annotation", ", ".join(manifest.get("annotation_models") or []) or manifest.get("annotation_mode")),
        ("window", json.dumps(manifest.get("window")) if manifest.get("window") else None),
        ("previous release", prev_name or "none"),
    ]
    facts_html = " · ".join(f"<b>{_esc(k)}</b> {_esc(v)}" for k, v in facts if v)
    body = "".join(
        [
            f"<h1>LookBench live release {_esc(data.version)}</h1><p>{facts_html}</p>",
            '<nav class="muted"><a href="#counts">counts</a> · <a href="#attributes">attributes</a> · '
            '<a href="#sources">sources</a> · <a href="#rejections">rejections</a> · <a href="#audit">audit</a> · '
            '<a href="#evaluation">evaluation</a> · <a href="#grids">retrievals</a></nav>',
            _counts_section(tables),
            _evaluation_section(data.version, evaluations, lake.read("evaluations")),
            _grids_section(lake, data, run, samples),
            _attributes_section(_attribute_shares(tables), previous, prev_name),
            _sources_section(tables, now),
            _lake_reasons_section(lake),
            _audit_section(lake, audit, taxonomy_versions),
        ]
    )
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<meta name=viewport content='width=device-width'><title>LookBench live {_esc(data.version)}</title>"
        f"<style>{CSS}</style></head><body>{body}</body></html>"
    )


def write_report(
    lake: Lake,
    version: str,
    out_path: str,
    *,
    release_path: str | None = None,
    evaluations: Sequence[dict[str, Any]] = (),
    audit: dict[str, Any] | None = None,
    samples: int = 4,
    context: dict[str, Any] | None = None,
) -> str:
    """Write the report to `out_path` (a path on `lake.fs`, atomically) and return that path.

    `release_path`: a staging folder before commit (then `version` must be its vYYYYMMDD).
    `evaluations`: results of `evaluate_release` to show (the `evaluations` table's rows
    for this release are shown too). `audit`: the judge's summary, or `{"status": "skipped",
    "reason": …}`; None reads the `audits` table.
    """
    text = render_report(
        lake,
        version,
        release_path=release_path,
        evaluations=evaluations,
        audit=audit,
        samples=samples,
        context=context,
    )
    parent = out_path.rsplit("/", 1)[0]
    if parent and parent != out_path:
        lake.fs.makedirs(parent, exist_ok=True)
    atomic_write_bytes(lake.fs, out_path, text.encode("utf-8"))
    return out_path
