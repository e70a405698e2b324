"""lookbench_live.dedup: perceptual-hash deduplication within a run and against every release.

The flow calls `run_dedup(lake, settings.dedup, run_id) -> DedupResult`.
"""

from lookbench_live.dedup.decide import REASONS, DedupResult, run_dedup

__all__ = ["REASONS", "DedupResult", "run_dedup"]
