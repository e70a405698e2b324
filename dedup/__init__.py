"""lookbench_live.dedup: perceptual-hash deduplication within a run and against every release.

The flow calls `run_dedup(lake, settings.dedup, run_id) -> DedupResult`.

The names are loaded on first use: the CLI imports `lookbench_live.dedup.cli` for every command,
and `decide` pulls in faiss, pyarrow and pandas (about 0.9 s) that `extract` or `--help` never use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lookbench_live.dedup.decide import REASONS, DedupResult, run_dedup

__all__ = ["REASONS", "DedupResult", "run_dedup"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from lookbench_live.dedup import decide

        return getattr(decide, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
