"""Writing an annotation run's rows: buffered, a unit's rows together, appended in small batches."""

from __future__ import annotations

import time

from lookbench_live import activity
from lookbench_live.annotation.plan import Unit
from lookbench_live.annotation.result import AnnotationResult
from lookbench_live.schema.records import Annotation, Record, Rejection
from lookbench_live.warehouse.lake import Lake

STAGE = "annotate"
# A unit the run stopped part-way through (some of its rows are stored, some are not).
UNIT_INTERRUPTED = "unit_interrupted"


class Sink:
    """Buffers result rows and appends them to the lake in small batches."""

    def __init__(self, lake: Lake, result: AnnotationResult, flush_rows: int, flush_seconds: float) -> None:
        self.lake = lake
        self.result = result
        self.flush_rows = flush_rows
        self.flush_seconds = flush_seconds
        self.annotations: list[Annotation] = []
        self.rejections: list[Rejection] = []
        self._open: dict[str, list[Record]] = {}  # sha256 -> rows of a unit still in progress
        self._last = time.monotonic()

    def add(self, record: Record, unit: str | None = None) -> None:
        """Count `record`; with `unit` (the unit's sha256) it waits for `unit_done`, else it joins
        the next batch at once."""
        if unit is not None:
            self._open.setdefault(unit, []).append(record)
        else:
            self._queue(record)
            self._maybe_flush()
        self._count(record)

    def has_open(self, unit: str) -> bool:
        return bool(self._open.get(unit))

    def unit_done(self, unit: str) -> None:
        """The unit's rows join the next batch together: a unit's rows reach the lake in one
        append, so an image with any row of the run's versions has all its unit's rows (or a
        `rejections` row saying what is missing), which is what planning relies on."""
        for record in self._open.pop(unit, []):
            self._queue(record)
        self._maybe_flush()

    def _queue(self, record: Record) -> None:
        if isinstance(record, Annotation):
            self.annotations.append(record)
        else:
            assert isinstance(record, Rejection)
            self.rejections.append(record)

    def _maybe_flush(self) -> None:
        if len(self.annotations) + len(self.rejections) >= self.flush_rows or (
            time.monotonic() - self._last >= self.flush_seconds
        ):
            self.flush()

    def _count(self, record: Record) -> None:
        if isinstance(record, Annotation):
            activity.count("items annotated")
            if record.status == "ok":
                self.result.ok += 1
                for verdict in record.prior_agreement.values():
                    self.result.prior_agreement[verdict] = self.result.prior_agreement.get(verdict, 0) + 1
            else:
                reason = record.error or "unknown"
                self.result.failed[reason] = self.result.failed.get(reason, 0) + 1

    def flush(self) -> None:
        """Append the batch (not the rows of units in progress: see `unit_done`)."""
        # Rejections first: an image with annotation rows but without the rejection saying a
        # part of it failed transiently would look finished to the next run's planning; a
        # rejection without its annotations only makes the next run look at the image again.
        if self.rejections:
            self.lake.append(self.rejections)
            self.rejections = []
        if self.annotations:
            self.result.rows_written += self.lake.append(self.annotations)
            self.annotations = []
        self._last = time.monotonic()


def rejection(unit: Unit, reason: str, detail: str, run_id: str, item: str | None = None) -> Rejection:
    return Rejection(
        stage=STAGE,
        item=item or f"{unit.sha256}|",
        reason=reason,
        detail=detail[:2000],
        source=f"{unit.kind}:{unit.owner_id}",
        run_id=run_id,
    )
