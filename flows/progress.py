"""One progress line per stage: its name, what it counted, and how long it took.

At a terminal each line is a live rich row (a spinner, then ✓ or ✗) on stderr; elsewhere (CI, a
log file, a test) a plain line is printed when the stage ends. The timings are kept for the
run summary (`flows/summary.py`).

A pipeline that is a list of steps drives it like this:

    with stage_progress([name for name, _ in steps]) as progress:
        for name, step in steps:
            progress.start(name)
            result = step(...)
            progress.done(stage_counts(result))
        summary["timings"] = progress.timings      # {stage: seconds}
        summary["stage_counts"] = progress.counts  # {stage: {count: n}}

A stage left without `done()` (an exception) is marked failed when the block exits.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TextIO

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn

# Counts worth a place on the line, in this order; the rest stay in the summary.
SHOWN_COUNTS = 4


def stage_counts(result: Any) -> dict[str, int]:
    """The integer fields of a stage's summary, summed over shards (a dict or a list of dicts).

    Booleans and nested values are left out: they are states, not counts.
    """
    items = result if isinstance(result, list | tuple) else [result]
    counts: dict[str, int] = {}
    for item in items:
        if not isinstance(item, Mapping):
            continue
        for key, value in item.items():
            if isinstance(value, int) and not isinstance(value, bool):
                counts[str(key)] = counts.get(str(key), 0) + value
    return counts


def format_counts(counts: Mapping[str, int], limit: int = SHOWN_COUNTS) -> str:
    shown = [f"{value} {key.replace('_', ' ')}" for key, value in counts.items() if value][:limit]
    return ", ".join(shown)


class StageProgress:
    """Drives the stage lines; `timings` and `counts` hold what finished stages reported."""

    def __init__(self, stages: Sequence[str], progress: Progress | None, stream: TextIO | None):
        self.stages = list(stages)
        self.timings: dict[str, float] = {}
        self.counts: dict[str, dict[str, int]] = {}
        self._progress = progress
        self._stream = stream
        self._current: str | None = None
        self._started = 0.0
        self._task: TaskID | None = None
        self._width = max((len(s) for s in self.stages), default=8)

    @property
    def current(self) -> str | None:
        return self._current

    def start(self, name: str) -> None:
        """Stage `name` begins (a stage still running is first closed as done, without counts)."""
        if self._current is not None:
            self.done()
        self._current, self._started = name, time.monotonic()
        position = f"{self.stages.index(name) + 1}/{len(self.stages)}" if name in self.stages else "-"
        if self._progress is not None:
            self._task = self._progress.add_task(
                f"{name:<{self._width}}", total=1, position=position, counts="running"
            )

    def done(self, counts: Mapping[str, int] | None = None, *, failed: bool = False) -> float:
        """The current stage ends with `counts`; returns its elapsed seconds (0 with no stage)."""
        if self._current is None:
            return 0.0
        name, elapsed = self._current, time.monotonic() - self._started
        self._current = None
        # A step that runs twice (dedup and annotate: real, then generated) sums its passes' time;
        # its counts come from the stage's summary, which already holds both passes.
        self.timings[name] = round(self.timings.get(name, 0.0) + elapsed, 3)
        self.counts[name] = dict(counts or {})
        text = "failed" if failed else format_counts(self.counts[name]) or "done"
        if self._progress is not None and self._task is not None:
            mark = "[red]✗[/]" if failed else "[green]✓[/]"
            self._progress.update(self._task, completed=1, counts=f"{mark} {text}")
            self._progress.stop_task(self._task)
        elif self._stream is not None:
            print(f"{name:<{self._width}}  {text}  ({elapsed:.1f} s)", file=self._stream, flush=True)
        return elapsed


@contextmanager
def stage_progress(stages: Sequence[str], *, stream: TextIO | None = None) -> Iterator[StageProgress]:
    """Progress lines for `stages` on `stream` (default stderr): live at a terminal, plain elsewhere."""
    stream = stream if stream is not None else sys.stderr
    if not stream.isatty():
        tracker = StageProgress(stages, None, stream)
        try:
            yield tracker
        except BaseException:
            tracker.done(failed=True)
            raise
        tracker.done()
        return
    columns = (
        SpinnerColumn(finished_text=" "),
        TextColumn("[bold]{task.description}"),
        TextColumn("[dim]{task.fields[position]}"),
        TimeElapsedColumn(),
        TextColumn("{task.fields[counts]}"),
    )
    with Progress(*columns, console=Console(file=stream), transient=False) as progress:
        tracker = StageProgress(stages, progress, None)
        try:
            yield tracker
        except BaseException:
            tracker.done(failed=True)
            raise
        tracker.done()
