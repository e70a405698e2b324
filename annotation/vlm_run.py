"""VLM mode: asynchronous workers pull units and write each unit's rows through the sink."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lookbench_live import interrupt
from lookbench_live.annotation import images as imgs
from lookbench_live.annotation.annotator import GroundedItem, VLMAnnotator, items_from_json, link_items
from lookbench_live.annotation.endpoint import (
    BudgetExhausted,
    EndpointRefused,
    EndpointUnavailable,
    RequestFailed,
)
from lookbench_live.annotation.plan import Unit
from lookbench_live.annotation.pool import pool_for
from lookbench_live.annotation.prior import Prior
from lookbench_live.annotation.product_box import ProductBox, pick_product_box
from lookbench_live.annotation.result import AnnotationResult
from lookbench_live.annotation.sink import UNIT_INTERRUPTED, Sink, rejection
from lookbench_live.config import AnnotationSettings
from lookbench_live.schema.records import Annotation, BoxSource, Record, bbox_text
from lookbench_live.schema.taxonomy import Taxonomy
from lookbench_live.warehouse.lake import Lake


class VLMRun:
    """The asynchronous part: workers pull units and write rows through the sink."""

    def __init__(
        self,
        lake: Lake,
        settings: AnnotationSettings,
        taxonomy: Taxonomy,
        run_id: str,
        result: AnnotationResult,
        sink: Sink,
        stored: set[tuple[Any, ...]],
    ) -> None:
        self.lake = lake
        self.settings = settings
        self.taxonomy = taxonomy
        self.run_id = run_id
        self.result = result
        self.sink = sink
        self.stored = stored
        self.endpoint = pool_for(settings)
        self.annotator = VLMAnnotator(
            self.endpoint, taxonomy, prompt_version=result.prompt_version, max_tokens=settings.max_tokens
        )
        self.stop: str | None = None
        self.fatal: Exception | None = None
        self.consecutive_failures = 0
        self.grounding_rows: dict[str, Annotation] = {}

    def key(self, sha: str, bbox: str, task: str) -> tuple[Any, ...]:
        return (sha, bbox, task, self.taxonomy.version, self.result.prompt_version, self.settings.model)

    def _add(self, unit: Unit, record: Record) -> None:
        self.sink.add(record, unit.sha256)

    def _load_grounding(self, units: list[Unit]) -> None:
        """Stored grounding rows of this run's versions, of the planned images only."""
        if not units:
            return
        where = (
            pc.field("sha256").isin(pa.array(sorted({u.sha256 for u in units}), pa.string()))
            & (pc.field("task") == "grounding")
            & (pc.field("model") == self.settings.model)
            & (pc.field("prompt_version") == self.result.prompt_version)
            & (pc.field("taxonomy_version") == self.taxonomy.version)
        )
        for row in self.lake.read("annotations", where=where).to_pylist():
            record = Annotation.from_row(row)
            assert isinstance(record, Annotation)
            self.grounding_rows[record.sha256] = record

    def _image(self, sha: str) -> imgs.Image.Image:
        return imgs.open_image(self.lake.get_image(sha))

    def _prepare(self, image: imgs.Image.Image, box: tuple[int, int, int, int] | None) -> imgs.PreparedImage:
        region = imgs.crop(image, box) if box else image
        return imgs.prepare(
            region, max_pixels=self.settings.max_pixels, max_payload_bytes=self.settings.max_payload_bytes
        )

    def _terminal(
        self, unit: Unit, bbox: str, task: str, reason: str, detail: str, **fields: Any
    ) -> Annotation:
        return Annotation(
            sha256=unit.sha256,
            bbox=bbox,
            task=task,  # type: ignore[arg-type]
            taxonomy_version=self.taxonomy.version,
            prompt_version=self.result.prompt_version,
            model=self.settings.model,
            source="vlm",
            status="failed",
            error=reason,
            error_detail=detail[:2000],
            run_id=self.run_id,
            **fields,
        )

    async def run(self, units: list[Unit]) -> None:
        await self.endpoint.check()
        self._load_grounding(units)
        pending = iter(units)
        workers = [
            asyncio.create_task(self._worker(pending))
            for _ in range(min(self.settings.concurrency * len(self.endpoint.members), len(units)))
        ]
        try:
            await asyncio.gather(*workers)
        finally:
            for worker in workers:
                worker.cancel()
            usage = self.endpoint.usage
            self.result.requests = usage.requests
            self.result.prompt_tokens = usage.prompt_tokens
            self.result.completion_tokens = usage.completion_tokens
            self.result.cost_usd = round(usage.cost_usd, 6)
            await self.endpoint.close()

    async def _worker(self, pending: Iterator[Unit]) -> None:
        for unit in pending:
            # A safe point: after Ctrl-C/SIGTERM no request begins; finished rows are flushed.
            interrupt.check("annotate")
            if self.stop is not None:
                self.result.deferred += 1
                continue
            try:
                await self._unit(unit)
            except BudgetExhausted as exc:
                self.stop = self.stop or f"budget: {exc}"
                self.result.deferred += 1
            except EndpointRefused as exc:
                self.stop = self.stop or f"endpoint_refused: {exc}"
                self.fatal = self.fatal or exc
                self.result.deferred += 1
            except EndpointUnavailable as exc:  # every endpoint of the pool is down
                self.stop = self.stop or f"endpoint_unavailable: {exc}"
                self.fatal = self.fatal or exc
                self.result.deferred += 1

    def _transient(self, unit: Unit, bbox: str, task: str, exc: RequestFailed) -> None:
        self.result.retry_later[exc.reason] = self.result.retry_later.get(exc.reason, 0) + 1
        self._add(
            unit, rejection(unit, exc.reason, exc.detail, self.run_id, item=f"{unit.sha256}|{bbox}|{task}")
        )
        self.consecutive_failures += 1
        if self.consecutive_failures >= self.settings.max_consecutive_failures:
            self.stop = self.stop or (
                f"endpoint_unhealthy: {self.consecutive_failures} transient failures in a row (last {exc.reason})"
            )

    async def _request(self, unit: Unit, bbox: str, task: str, call: Any) -> Any:
        """Run one annotator call; failures become rows. Returns the call's result or None."""
        try:
            outcome = await call()
        except RequestFailed as exc:
            if exc.transient:
                self._transient(unit, bbox, task, exc)
            else:
                self.consecutive_failures = 0
                failed = self._terminal(
                    unit, bbox, task, exc.reason, exc.detail, attempts=exc.attempts, latency_ms=exc.latency_ms
                )
                self._add(unit, failed)
                if task == "grounding":
                    self.grounding_rows[unit.sha256] = failed  # final: a product photo goes on whole
            return None
        self.consecutive_failures = 0
        return outcome

    async def _unit(self, unit: Unit) -> None:
        finished = False
        try:
            await self._unit_work(unit)
            finished = True
        finally:
            if not finished and self.sink.has_open(unit.sha256):
                # Stopped part-way (budget, endpoint, interrupt): the rows already made are kept,
                # and this row makes the next run's planning look at the image again.
                self._add(unit, rejection(unit, UNIT_INTERRUPTED, "the run stopped part-way", self.run_id))
            self.sink.unit_done(unit.sha256)

    async def _unit_work(self, unit: Unit) -> None:
        if unit.problem and not unit.multi:
            self._add(unit, rejection(unit, *unit.problem, self.run_id))
            return
        if unit.kind == "product" and self.settings.product_boxes:
            await self._product(unit)
            return
        if not unit.multi and unit.category and self.key(unit.sha256, "", "attributes") in self.stored:
            self.result.skipped_existing += 1
            return
        try:
            image = await asyncio.to_thread(self._image, unit.sha256)
        except imgs.ImageRejected as exc:
            self._add(
                unit,
                self._terminal(unit, "", "grounding" if unit.multi else "attributes", exc.reason, exc.detail),
            )
            return
        if unit.multi:
            await self._multi(unit, image)
            return
        category = unit.category
        if category is None:
            # The source names no category: the largest grounded item decides it.
            items = await self._grounding(unit, image)
            if not items:
                return
            largest = max(items, key=lambda i: (i.bbox[2] - i.bbox[0]) * (i.bbox[3] - i.bbox[1]))
            category = largest.category
            if self.key(unit.sha256, "", "attributes") in self.stored:
                self.result.skipped_existing += 1
                return
        await self._attributes(unit, image, None, category, unit.item_ref, unit.prior)

    async def _product(self, unit: Unit) -> None:
        """A product photo: ground it, annotate the product's own item (its box), else the whole image.

        The box is chosen by `pick_product_box` from the grounding row, so a rerun finds the same
        key without a request. Grounding that failed transiently leaves the photo for the next run;
        grounding that failed for good, or found no matching item, gives whole-image attributes
        and a `rejections` row with the reason (docs/annotation.md, "Product photos").
        """
        image: imgs.Image.Image | None = None
        if (
            unit.sha256 not in self.grounding_rows
            and self.key(unit.sha256, "", "grounding") not in self.stored
        ):
            image = await self._load(unit, "grounding")
            if image is None:
                return
        items = await self._grounding(unit, image)
        row = self.grounding_rows.get(unit.sha256)
        if row is None and self.key(unit.sha256, "", "grounding") not in self.stored:
            return  # transient: recorded in `rejections`, tried again by the next run
        size = (unit.width or 0, unit.height or 0)
        if (not size[0] or not size[1]) and image is not None:
            size = image.size
        if row is None or row.status != "ok":
            pick = ProductBox(
                None,
                unit.category,
                "product_grounding_failed",
                f"grounding failed ({row.error if row else 'unknown'}): whole image",
            )
        else:
            pick = pick_product_box(self.taxonomy, unit.category, items, size)
        if pick.category is None:
            return  # no category from the source and nothing detected: nothing to annotate
        outcome = "box" if pick.box else (pick.reason or "fills_image")
        bbox = bbox_text(pick.box)
        if self.key(unit.sha256, bbox, "attributes") in self.stored:
            self.result.skipped_existing += 1
            return
        self.result.product_boxes[outcome] = self.result.product_boxes.get(outcome, 0) + 1
        if pick.reason:
            self._add(unit, rejection(unit, pick.reason, pick.detail, self.run_id))
        if image is None:
            image = await self._load(unit, "attributes")
            if image is None:
                return
        await self._attributes(
            unit, image, pick.box, pick.category, unit.item_ref, unit.prior, "product_photo"
        )

    async def _load(self, unit: Unit, task: str) -> imgs.Image.Image | None:
        """The unit's image, or None after recording why it cannot be read."""
        try:
            return await asyncio.to_thread(self._image, unit.sha256)
        except imgs.ImageRejected as exc:
            self._add(unit, self._terminal(unit, "", task, exc.reason, exc.detail))
            return None

    async def _grounding(self, unit: Unit, image: imgs.Image.Image | None) -> list[GroundedItem]:
        stored = self.grounding_rows.get(unit.sha256)
        if stored is not None or self.key(unit.sha256, "", "grounding") in self.stored:
            self.result.skipped_existing += 1
            if stored is None or stored.status != "ok":
                return []
            return link_items(items_from_json(stored.items_json), unit.refs)
        assert image is not None  # only a stored grounding is read without the image
        try:
            prepared = await asyncio.to_thread(self._prepare, image, None)
        except imgs.ImageRejected as exc:
            self._add(unit, self._terminal(unit, "", "grounding", exc.reason, exc.detail))
            return []

        async def call() -> tuple[Annotation, list[GroundedItem]]:
            return await self.annotator.ground(unit.sha256, prepared, refs=unit.refs)

        outcome = await self._request(unit, "", "grounding", call)
        if outcome is None:
            return []
        row, items = outcome
        row.run_id = self.run_id
        self._add(unit, row)
        self.grounding_rows[unit.sha256] = row
        return items

    async def _multi(self, unit: Unit, image: imgs.Image.Image) -> None:
        # A composed scene's layout is where its garments are: the VLM annotates them, not locates them.
        items = unit.layout or await self._grounding(unit, image)
        source: BoxSource = "layout" if unit.layout else "vlm"
        deferred = False
        for item in items:
            if self.stop is not None:
                self.result.deferred += 1
                deferred = True
                continue
            prior = unit.ref_priors.get(item.ref) if item.ref else None
            await self._attributes(unit, image, item.bbox, item.category, item.ref, prior, source)
        if deferred:  # some crops wait for a later run: planning must find the image again
            self._add(
                unit, rejection(unit, UNIT_INTERRUPTED, "the run stopped before some crops", self.run_id)
            )

    async def _attributes(
        self,
        unit: Unit,
        image: imgs.Image.Image,
        box: tuple[int, int, int, int] | None,
        category: str,
        item_ref: str | None,
        prior: Prior | None,
        bbox_source: BoxSource | None = None,
    ) -> None:
        bbox = bbox_text(box)
        if self.key(unit.sha256, bbox, "attributes") in self.stored:
            self.result.skipped_existing += 1
            return
        try:
            prepared = await asyncio.to_thread(self._prepare, image, box)
        except imgs.ImageRejected as exc:
            self._add(
                unit,
                self._terminal(
                    unit, bbox, "attributes", exc.reason, exc.detail, category=category, item_ref=item_ref
                ),
            )
            return
        context = (("product title", unit.title),) if self.settings.page_text_in_prompt and unit.title else ()

        async def call() -> Annotation:
            return await self.annotator.attributes(
                unit.sha256,
                prepared,
                category=category,
                bbox=box,
                item_ref=item_ref,
                prior=prior,
                context=context,
            )

        row = await self._request(unit, bbox, "attributes", call)
        if row is not None:
            row.run_id = self.run_id
            row.bbox_source = bbox_source if box else None
            self._add(unit, row)
