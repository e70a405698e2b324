"""Drops by stage and reason: the one count of what the lake holds back, for the run summary
(and through it the manifest) and the release report alike.

A drop is an `images` row rejected at ingestion, a `rejections` row (every stage), a dedup
decision `dropped`, a failed annotation, or a failed generation. Annotation and generation
record a reason code before the first `:` of their `error`.

Counted as DuckDB aggregates over the lake's fragments, so the count never holds the whole
history in memory (issue 28).
"""

from __future__ import annotations

from collections import Counter

from lookbench_live.warehouse.lake import Lake

# (table, the SQL over it as `t` giving (stage, reason, count)); a blank reason counts as the
# stage's generic one, as a missing one does.
QUERIES = (
    (
        "images",
        "SELECT 'ingest', coalesce(nullif(rejection_reason, ''), 'rejected'), count(*) FROM t "
        "WHERE status = 'rejected' GROUP BY 2",
    ),
    ("rejections", "SELECT stage, reason, count(*) FROM t GROUP BY 1, 2"),
    (
        "dedup_decisions",
        "SELECT 'dedup', coalesce(nullif(reason, ''), 'dropped'), count(*) FROM t "
        "WHERE decision = 'dropped' GROUP BY 2",
    ),
    (
        "annotations",
        "SELECT 'annotate', split_part(coalesce(nullif(error, ''), 'failed'), ':', 1), count(*) "
        "FROM t WHERE status = 'failed' GROUP BY 2",
    ),
    (
        "generations",
        "SELECT 'generate', split_part(coalesce(nullif(error, ''), 'failed'), ':', 1), count(*) "
        "FROM t WHERE status = 'failed' GROUP BY 2",
    ),
)


def drops_by_reason(lake: Lake) -> dict[tuple[str, str], int]:
    """Every recorded drop in the lake as {(stage, reason): count}, sorted by stage then reason."""
    import duckdb

    counts: Counter[tuple[str, str]] = Counter()
    for table, sql in QUERIES:
        con = duckdb.connect(":memory:")
        try:
            con.register("t", lake.dataset(table))
            for stage, reason, n in con.execute(sql).fetchall():
                counts[str(stage), str(reason)] += int(n)
        finally:
            con.close()
    return dict(sorted(counts.items()))
