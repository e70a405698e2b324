"""Completion markers: what a run has finished, so that a rerun resumes (datatrove-style).

Completion is decided by these rows in the lake, never by Prefect state: a run killed
with SIGKILL may stay `Running` in Prefect, but its markers say exactly what is done.
"""

from __future__ import annotations

from lookbench_live.schema.records import Completion
from lookbench_live.warehouse.lake import Lake


def is_done(lake: Lake, run_key: str, stage: str, shard: str = "all") -> bool:
    return (run_key, stage, shard) in lake.keys("completions")


def mark_done(
    lake: Lake, run_key: str, stage: str, shard: str = "all", *, rows: int = 0, detail: str = ""
) -> None:
    lake.append([Completion(run_key=run_key, stage=stage, shard=shard, rows=rows, detail=detail or None)])


def details(lake: Lake, run_key: str) -> dict[tuple[str, str], str]:
    """(stage, shard) -> detail text of every marker of a run."""
    table = lake.read("completions").to_pylist()
    return {(r["stage"], r["shard"]): r["detail"] or "" for r in table if r["run_key"] == run_key}
