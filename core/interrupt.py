"""Ctrl-C (SIGINT) and a scheduler's SIGTERM stop a run at its next safe point, not mid-write.

Python's default turns SIGINT into a `KeyboardInterrupt` raised wherever the main thread is
(inside a release's commit, say) and SIGTERM kills the process outright. While `guard()` is
active both only *request* a stop instead: the stages call `check(stage)` at safe points
(between steps, between batches, while waiting on a crawl subprocess), which raises
`Interrupted` there. What is being written when the signal comes (a batch, a commit renaming
into place) completes; nothing begins after it. A second signal acts as the default would
(stop at once; the lake's ledger still makes the rerun resume).

    with interrupt.guard():
        for name, step in steps:
            interrupt.check(name)
            step()

The request is process-wide (the tasks run in threads of the flow process); worker processes
(Dask, Ray) are not reached and stop with their flow.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)

_requested: int | None = None
_event = threading.Event()
_last: Interrupted | None = None


class Interrupted(Exception):
    """The run stopped at a safe point after SIGINT or SIGTERM; `exit_code` is 128 + the signal.

    An `Exception`, not a `BaseException`: Prefect records it as the failure of the task and
    the flow it ends, where a `BaseException` would crash them instead."""

    def __init__(self, signum: int, stage: str):
        self.signum, self.stage = signum, stage
        self.exit_code = 128 + signum
        name = signal.Signals(signum).name
        global _last
        _last = self
        super().__init__(
            f"interrupted by {name} during {stage}: stopped at a safe point, nothing was published "
            "after the signal; rerun the same command to resume"
        )


def requested() -> int | None:
    """The signal that asked this process to stop, or None."""
    return _requested


def last() -> Interrupted | None:
    """The last `Interrupted` raised in this process (what the command reports), or None."""
    return _last


def check(stage: str) -> None:
    """A safe point of `stage`: raises `Interrupted` if a stop was requested."""
    if _requested is not None:
        raise Interrupted(_requested, stage)


def wait(seconds: float) -> bool:
    """Sleep up to `seconds`, waking at once on a stop request; returns whether one came."""
    return _event.wait(seconds)


def request(signum: int) -> None:
    """Ask this process to stop at its next safe point (what the signal handler does)."""
    global _requested
    if _requested is None:
        _requested = signum
    _event.set()


def reset() -> None:
    """Forget a request (a process that runs again, such as `serve`, after an interrupted run)."""
    global _requested, _last
    _requested, _last = None, None
    _event.clear()


def _handler(signum: int, frame: Any) -> None:
    if _requested is not None:
        # The second signal: stop at once, as the default handler would.
        signal.signal(signum, signal.SIG_DFL)
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        signal.raise_signal(signum)
        return
    request(signum)


@contextlib.contextmanager
def guard() -> Iterator[None]:
    """Turn SIGINT and SIGTERM into stop requests while the block runs; the previous handlers
    come back after it. Outside the main thread (signals cannot be handled there) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, _handler) for signum in SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
