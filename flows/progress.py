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
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TextIO

from prefect.exceptions import CancelledRun
from rich.console import Console
from rich.progress import (
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from lookbench_live import activity
from lookbench_live.interrupt import Interrupted

# Counts worth a place on the line, in this order; the rest stay in the summary.
SHOWN_COUNTS = 4
# Without a terminal, a long stage prints a line with its counts this often (seconds).
PLAIN_EVERY_S = 10.0


def stage_counts(result: Any) -> dict[str, int]:
    """The integer fields of ONE step instance's results, summed over its shards (a dict or a list
    of dicts). Never give it two passes of a stage (`dedup real` and `dedup aigen`): each pass is
    counted on its own (`refresh.run_steps`).

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
        self.position = "-"  # "i/n" of the running step
        self._begun = 0  # steps started: a step that runs twice (dedup, annotate) counts twice
        self._ticker: threading.Thread | None = None
        self._tick = threading.Event()

    @property
    def current(self) -> str | None:
        return self._current

    def start(self, name: str) -> None:
        """Stage `name` begins (a stage still running is first closed as done, without counts)."""
        if self._current is not None:
            self.done()
        self._current, self._started = name, time.monotonic()
        self._begun += 1
        self.position = position = f"{self._begun}/{len(self.stages)}" if name in self.stages else "-"
        activity.reset()  # the counts a long stage reports as it goes (`lookbench_live.activity`)
        if self._progress is not None:
            self._task = self._progress.add_task(
                f"{name:<{self._width}}", total=1, position=position, counts="running"
            )
        elif self._stream is not None and PLAIN_EVERY_S > 0:
            self._tick.clear()
            self._ticker = threading.Thread(target=self._plain_ticks, args=(name,), daemon=True)
            self._ticker.start()

    def _plain_ticks(self, name: str) -> None:
        """Without a terminal: a line every `PLAIN_EVERY_S` while a long stage runs, with its counts."""
        while not self._tick.wait(PLAIN_EVERY_S):
            counts = format_counts(activity.snapshot()) or "running"
            elapsed = time.monotonic() - self._started
            print(f"{name:<{self._width}}  … {counts}  ({elapsed:.0f} s)", file=self._stream, flush=True)

    def done(
        self, counts: Mapping[str, int] | None = None, *, failed: bool = False, stopped: bool = False
    ) -> float:
        """The current stage ends with `counts`; returns its elapsed seconds (0 with no stage)."""
        if self._current is None:
            return 0.0
        name, elapsed = self._current, time.monotonic() - self._started
        self._current = None
        if self._ticker is not None:
            self._tick.set()
            self._ticker.join()
            self._ticker = None
        # Steps are named by instance (`dedup real`, `dedup aigen`): each pass has its own time and
        # counts. A name started twice (a caller's own loop) sums its time.
        self.timings[name] = round(self.timings.get(name, 0.0) + elapsed, 3)
        self.counts[name] = dict(counts or {})
        text = (
            "interrupted" if stopped else "failed" if failed else format_counts(self.counts[name]) or "done"
        )
        if self._progress is not None and self._task is not None:
            mark = "[red]✗[/]" if failed or stopped else "[green]✓[/]"
            self._progress.update(self._task, completed=1, counts=f"{mark} {text}")
            self._progress.stop_task(self._task)
        elif self._stream is not None:
            print(f"{name:<{self._width}}  {text}  ({elapsed:.1f} s)", file=self._stream, flush=True)
        return elapsed


class LiveCounts(ProgressColumn):
    """A finished stage's counts; the running stage's as it counts them (`lookbench_live.activity`)."""

    def render(self, task: Task) -> Text:
        counts = task.fields.get("counts", "")
        if not task.finished:
            counts = format_counts(activity.snapshot()) or counts
        return Text.from_markup(counts)


@contextmanager
def stage_progress(stages: Sequence[str], *, stream: TextIO | None = None) -> Iterator[StageProgress]:
    """Progress lines for `stages` on `stream` (default stderr): live at a terminal, plain elsewhere."""
    stream = stream if stream is not None else sys.stderr
    if not stream.isatty():
        tracker = StageProgress(stages, None, stream)
        try:
            yield tracker
        except BaseException as exc:
            tracker.done(failed=True, stopped=isinstance(exc, Interrupted | CancelledRun))
            raise
        tracker.done()
        return
    columns = (
        SpinnerColumn(finished_text=" "),
        TextColumn("[bold]{task.description}"),
        TextColumn("[dim]{task.fields[position]}"),
        TimeElapsedColumn(),
        LiveCounts(),
    )
    with Progress(*columns, console=Console(file=stream), transient=False) as progress:
        tracker = StageProgress(stages, progress, None)
        try:
            yield tracker
        except BaseException as exc:
            tracker.done(failed=True, stopped=isinstance(exc, Interrupted | CancelledRun))
            raise
        tracker.done()
