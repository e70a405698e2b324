"""The run summary: counts, rejections by reason, audit accuracy and the evaluation table, as markdown.

It is printed by the CLI and published as a Prefect artifact of the run.
"""

from __future__ import annotations

from typing import Any

from lookbench_live.warehouse.drops import drops_by_reason
from lookbench_live.warehouse.lake import Lake


def rejection_counts(lake: Lake) -> dict[str, int]:
    """Every recorded drop in the lake, keyed `stage/reason` (`warehouse.drops`, as the report)."""
    return dict(sorted((f"{stage}/{reason}", n) for (stage, reason), n in drops_by_reason(lake).items()))


def stage_lines(summary: dict[str, Any]) -> list[str]:
    """The `Stages` table: seconds and counts per stage, from `summary["timings"]` (seconds, as
    `flows.progress.StageProgress.timings`) and `summary["stage_counts"]` ({stage: {name: n}})."""
    timings: dict[str, float] = summary.get("timings") or {}
    counts: dict[str, dict[str, int]] = summary.get("stage_counts") or {}
    if not timings:
        return []
    lines = ["## Stages", "", "| stage | seconds | counts |", "|---|---|---|"]
    for stage, seconds in timings.items():
        shown = ", ".join(f"{k} {v}" for k, v in (counts.get(stage) or {}).items()) or "–"
        lines.append(f"| {stage} | {seconds:.1f} | {shown} |")
    lines.append(f"| total | {sum(timings.values()):.1f} | |")
    return [*lines, ""]


def _link(path: str) -> str:
    """A link a Prefect server's artifact page can show: the URL of an object store, a file URL."""
    return path if "://" in path else f"file://{path}"


def markdown_summary(lake: Lake, summary: dict[str, Any]) -> str:
    lines = [f"# lookbench-live run `{summary['run_key']}`", ""]
    lines += stage_lines(summary)
    lines += ["## Lake", "", "| table | rows |", "|---|---|"]
    for table in ("products", "looks", "images", "generations", "dedup_decisions", "annotations", "audits"):
        lines.append(f"| {table} | {lake.dataset(table).count_rows()} |")
    lines += ["", "## Rejections by reason", "", "| stage/reason | count |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in rejection_counts(lake).items()] or ["| none | 0 |"]
    release = summary.get("release")
    if release:
        lines += ["", f"## Release {release['version']}", "", f"Path: `{release['path']}`", ""]
        links = [f"[release]({_link(release['path'])})", f"[card]({_link(release['path'] + '/README.md')})"]
        if release.get("report"):
            links.insert(1, f"[report]({_link(release['report'])})")
        lines += ["Links: " + " · ".join(links), ""]
        lines += ["| file | rows |", "|---|---|"] + [f"| {k} | {v} |" for k, v in release["rows"].items()]
        if release.get("published_latest") is False:
            lines += ["", f"**Not published as latest:** {release.get('latest_reason')}"]
        audit = release.get("audit") or {}
        lines += ["", "## Audit", ""]
        if audit.get("status") == "ok" and audit.get("overall"):
            overall = audit["overall"]
            lines.append(
                f"Per-attribute accuracy {overall['accuracy']:.3f} (95% Wilson interval {overall['low']:.3f}–"
                f"{overall['high']:.3f}, {overall['total']} verdicts); gate "
                + ("passed" if audit.get("gate_passed") else f"failed: {audit.get('gate_reason')}")
            )
        else:
            lines.append(f"Skipped: {audit.get('reason', 'not run')}")
        for evaluation in release.get("evaluation") or []:
            overall = evaluation["overall"]
            keys = [
                k
                for k in ("coarse_recall@1", "fine_recall@1", "strict_recall@1", "mrr", "ndcg@5")
                if k in overall
            ]
            lines += [
                "",
                f"## Evaluation: {evaluation['model']}",
                "",
                "| " + " | ".join(keys) + " |",
                "|" + "---|" * len(keys),
                "| " + " | ".join(f"{overall[k]:.2f}" for k in keys) + " |",
            ]
        if release.get("report"):
            lines += ["", f"Report: `{release['report']}`"]
    return "\n".join(lines) + "\n"


def publish_artifact(markdown: str, *, key: str) -> None:
    """Attach the summary to the Prefect run (a no-op outside a run)."""
    from prefect.artifacts import create_markdown_artifact
    from prefect.context import FlowRunContext

    if FlowRunContext.get() is not None:
        create_markdown_artifact(markdown=markdown, key=key, description="lookbench-live run summary")
