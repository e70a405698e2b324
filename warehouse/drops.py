"""Drops by stage and reason: the one count of what the lake holds back, for the run summary
(and through it the manifest) and the release report alike.

A drop is an `images` row rejected at ingestion, a `rejections` row (every stage), a dedup
decision `dropped`, a failed annotation, or a failed generation. Annotation and generation
record a reason code before the first `:` of their `error`.
"""

from __future__ import annotations

from collections import Counter

from lookbench_live.warehouse.lake import Lake


def _code(error: str | None) -> str:
    return (error or "failed").split(":")[0]


def drops_by_reason(lake: Lake) -> dict[tuple[str, str], int]:
    """Every recorded drop in the lake as {(stage, reason): count}, sorted by stage then reason."""
    counts: Counter[tuple[str, str]] = Counter()
    for row in lake.read("images", columns=["status", "rejection_reason"]).to_pylist():
        if row["status"] == "rejected":
            counts["ingest", row["rejection_reason"] or "rejected"] += 1
    for row in lake.read("rejections", columns=["stage", "reason"]).to_pylist():
        counts[row["stage"], row["reason"]] += 1
    for row in lake.read("dedup_decisions", columns=["decision", "reason"]).to_pylist():
        if row["decision"] == "dropped":
            counts["dedup", row["reason"] or "dropped"] += 1
    for row in lake.read("annotations", columns=["status", "error"]).to_pylist():
        if row["status"] == "failed":
            counts["annotate", _code(row["error"])] += 1
    for row in lake.read("generations", columns=["status", "error"]).to_pylist():
        if row["status"] == "failed":
            counts["generate", _code(row["error"])] += 1
    return dict(sorted(counts.items()))
