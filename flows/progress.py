"""A progress bar over the flow's stages for people at a terminal (silent elsewhere)."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn


class StageProgress:
    def __init__(self, progress: Progress | None, stages: Sequence[str]):
        self.progress = progress
        self.task = progress.add_task("starting", total=len(stages)) if progress else None

    def start(self, stage: str) -> None:
        if self.progress is not None and self.task is not None:
            self.progress.update(self.task, description=stage)

    def done(self) -> None:
        if self.progress is not None and self.task is not None:
            self.progress.advance(self.task)


@contextmanager
def stage_progress(stages: Sequence[str]) -> Iterator[StageProgress]:
    if not sys.stderr.isatty():
        yield StageProgress(None, stages)
        return
    columns = (
        TextColumn("[bold]{task.description:<10}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, transient=False) as progress:
        yield StageProgress(progress, stages)
