"""Live counts inside a long stage (pages crawled, images ingested, images generated, rows
annotated), for the progress line: a stage counts what it finishes, the terminal shows the
running stage's counts while it runs (`flows/progress.py`).

    activity.count("images generated", len(batch))
    activity.snapshot()  # {"images generated": 48}

Counts are per process: the stages of the flow process (its task threads) report; work on Dask
or Ray workers shows when its stage ends.
"""

from __future__ import annotations

import threading

_counts: dict[str, int] = {}
_lock = threading.Lock()


def count(name: str, n: int = 1) -> None:
    with _lock:
        _counts[name] = _counts.get(name, 0) + n


def snapshot() -> dict[str, int]:
    with _lock:
        return dict(_counts)


def reset() -> None:
    """A new stage starts counting from zero."""
    with _lock:
        _counts.clear()
