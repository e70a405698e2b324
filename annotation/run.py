"""`run_annotation`: annotate every kept image in the lake, resumably.

Reads `dedup_decisions` (decision "kept"), `images` (owner of each sha256), `products`
(latest row per product key), `looks` and `generations`; writes `annotations` and, for
work that failed transiently and will be tried again next run, `rejections`.

Per owner kind:
- product image: whole-image attributes; the category is the metadata prior's, or, when
  the prior has none and a VLM is configured, the category of the largest grounded item.
- look photo: grounding, then attributes per crop; each crop is linked (`item_ref`) to the
  look's product of the same category when exactly one product and one crop have it.
- generation: single-item images (aigen_studio, galleries) get whole-image attributes of
  the requested category; street queries get grounding, then attributes per crop, linked
  to the generation's item_ids by requested category.

With no VLM (neither `base_url` nor `base_urls` set) the metadata prior is the annotation
(`source="metadata_prior"`, `model="metadata-prior"`); see docs/annotation.md for what
that means for looks and street scenes.

Resuming: every row is keyed by (sha256, bbox, task, taxonomy_version, prompt_version,
model); a unit of work whose key is stored is not sent again, and results are written in
small batches (`flush_rows`, `flush_seconds`) as they complete, so a killed run loses at
most one batch of answers. Terminal failures (invalid or truncated answers, a 400) are
stored as `failed` rows and not retried by later runs of the same versions; transient ones
(timeouts, 5xx, 429 after all retries) are stored in `rejections` and retried next run.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from lookbench_live import activity, interrupt
from lookbench_live.annotation import images as imgs
from lookbench_live.annotation.annotator import (
    GroundedItem,
    VLMAnnotator,
    items_from_json,
    items_json,
    link_items,
)
from lookbench_live.annotation.endpoint import (
    BudgetExhausted,
    EndpointRefused,
    EndpointUnavailable,
    RequestFailed,
)
from lookbench_live.annotation.hotspots import parse_hotspots
from lookbench_live.annotation.pool import pool_for
from lookbench_live.annotation.prior import (
    PRIOR_MODEL,
    PRIOR_VERSION,
    Prior,
    choose_main_attribute,
    generation_priors,
    product_prior,
)
from lookbench_live.annotation.product_box import ProductBox, pick_product_box
from lookbench_live.annotation.prompts import prompt_version
from lookbench_live.config import AnnotationSettings
from lookbench_live.schema.records import (
    BOX_NOT_LOCATED,
    Annotation,
    BoxSource,
    Record,
    Rejection,
    bbox_text,
)
from lookbench_live.schema.taxonomy import Taxonomy
from lookbench_live.warehouse import views
from lookbench_live.warehouse.lake import Lake

log = logging.getLogger(__name__)

STAGE = "annotate"
KIND_ORDER = {"generation": 0, "look": 1, "product": 2}


class AnnotationError(RuntimeError):
    """The run cannot go on (endpoint unreachable or refusing our key); what was done is stored."""


@dataclass(slots=True)
class AnnotationResult:
    """What a run did; `summary()` is what the manifest records."""

    run_id: str
    mode: Literal["vlm", "metadata_prior"]
    model: str
    taxonomy_version: str
    prompt_version: str
    images: int = 0  # kept images considered
    ok: int = 0  # rows written with status ok (grounding and attributes)
    failed: dict[str, int] = field(
        default_factory=dict
    )  # terminal failures by reason (rows in `annotations`)
    retry_later: dict[str, int] = field(default_factory=dict)  # transient, by reason (rows in `rejections`)
    skipped_existing: int = 0  # already stored, not redone: rows (VLM mode) or images (prior mode)
    deferred: int = 0  # not attempted: a cap was reached or the run stopped
    rows_written: int = 0
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    prior_agreement: dict[str, int] = field(default_factory=dict)  # agree | disagree | prior_missing
    # product photos (VLM mode): "box" (the product's own item), "fills_image", or why whole image
    product_boxes: dict[str, int] = field(default_factory=dict)
    stopped_reason: str | None = None
    seconds: float = 0.0

    @property
    def complete(self) -> bool:
        """True when nothing is left for a rerun to do (no deferred or transient work)."""
        return not self.deferred and not self.retry_later and self.stopped_reason is None

    def summary(self) -> dict[str, Any]:
        data = {name: getattr(self, name) for name in self.__slots__}  # type: ignore[attr-defined]
        data["complete"] = self.complete
        if self.mode == "metadata_prior":
            data["note"] = (
                "no VLM endpoint configured: annotations are the metadata prior (what the sources state), "
                "not a model's reading of the images"
            )
        return data


# ----------------------------------------------------------------- the work list


@dataclass(slots=True)
class Unit:
    """One kept image and what is known about what it shows."""

    sha256: str
    kind: str
    owner_id: str
    width: int | None
    height: int | None
    multi: bool = False
    category: str | None = None  # single-item: the known category
    item_ref: str | None = None
    prior: Prior | None = None
    refs: dict[str, str | None] = field(default_factory=dict)  # multi: category -> unique item
    ref_priors: dict[str, Prior] = field(default_factory=dict)  # multi: item -> its prior
    hotspots: list[tuple[str | None, tuple[int, int, int, int]]] = field(default_factory=list)
    layout: list[GroundedItem] = field(default_factory=list)  # a composed scene: where each garment is
    title: str | None = None
    problem: tuple[str, str] | None = None  # (reason, detail) when the unit cannot be annotated


def _unique_refs(categories: dict[str, str | None]) -> dict[str, str | None]:
    """category -> the one ref of that category, or None when two refs share it."""
    by_category: dict[str, list[str]] = collections.defaultdict(list)
    for ref, category in categories.items():
        if category:
            by_category[category].append(ref)
    return {c: (refs[0] if len(refs) == 1 else None) for c, refs in by_category.items()}


def plan_units(lake: Lake, taxonomy: Taxonomy) -> Iterator[Unit]:
    """The kept images in a stable order (owner kind, owner, position), each sha256 once."""
    # The lake read model (warehouse/views.py): no hand-written joins here.
    kept = set(views.kept_images(lake))
    rows = [r for rows in views.ok_images(lake).values() for r in rows if r["sha256"] in kept]
    rows.sort(
        key=lambda r: (KIND_ORDER.get(r["owner_kind"], 9), r["owner_id"], r["position"] or 0, r["sha256"])
    )
    products = views.latest_products(lake)
    urls = views.url_index(products)
    looks = views.looks_by_key(lake)
    generations = views.generations_by_id(lake, ok_only=True)
    priors: dict[str, Prior] = {}

    def prior_of(key: str) -> Prior:
        if key not in priors:
            priors[key] = product_prior(taxonomy, products[key])
        return priors[key]

    seen: set[str] = set()
    for row in rows:
        sha = row["sha256"]
        if sha in seen:
            continue
        seen.add(sha)
        unit = Unit(sha, row["owner_kind"], row["owner_id"], row["width"], row["height"])
        if unit.kind == "product":
            product = products.get(unit.owner_id)
            if product is None:
                unit.problem = ("owner_missing", f"no products row for {unit.owner_id}")
            else:
                unit.prior = prior_of(unit.owner_id)
                unit.category, unit.item_ref, unit.title = unit.prior.category, unit.owner_id, product.title
        elif unit.kind == "look":
            look = looks.get(unit.owner_id)
            if look is None:
                unit.problem = ("owner_missing", f"no looks row for {unit.owner_id}")
            else:
                unit.multi = True
                resolved = views.resolve_refs(look.product_refs, products, urls)
                linked = [key for key in resolved.values() if key]
                unit.ref_priors = {key: prior_of(key) for key in linked}
                unit.refs = _unique_refs({key: unit.ref_priors[key].category for key in linked})
                spots, problems = parse_hotspots(look.boxes_json, unit.width, unit.height)
                unit.hotspots = [(resolved.get(ref, ref) if ref else None, box) for ref, box in spots]
                if problems:
                    unit.problem = ("hotspot_unusable", "; ".join(problems)[:1000])
        elif unit.kind == "generation":
            generation = generations.get(unit.owner_id)
            if generation is None:
                unit.problem = ("owner_missing", f"no ok generations row for {unit.owner_id}")
            else:
                items = generation_priors(taxonomy, generation)
                unit.ref_priors = {i.item_id: i.prior for i in items if i.item_id}
                street = generation.subset == "aigen_streetlook" and generation.role == "query"
                if street or len(items) > 1:
                    unit.multi = True
                    unit.refs = _unique_refs({i.item_id: i.prior.category for i in items if i.item_id})
                    unit.layout = layout_items(generation.layout_json)
                elif items:
                    unit.prior = items[0].prior
                    unit.category = items[0].prior.category
                    unit.item_ref = items[0].item_id or (
                        generation.item_ids[0] if generation.item_ids else None
                    )
                else:
                    unit.problem = (
                        "prior_no_request",
                        f"generation {unit.owner_id} states no requested item",
                    )
        else:
            unit.problem = ("owner_kind_unknown", f"owner kind {unit.kind!r}")
        yield unit


# ----------------------------------------------------------------- writing


class Sink:
    """Buffers result rows and appends them to the lake in small batches."""

    def __init__(self, lake: Lake, result: AnnotationResult, flush_rows: int, flush_seconds: float) -> None:
        self.lake = lake
        self.result = result
        self.flush_rows = flush_rows
        self.flush_seconds = flush_seconds
        self.annotations: list[Annotation] = []
        self.rejections: list[Rejection] = []
        self._last = time.monotonic()

    def add(self, record: Record) -> None:
        if isinstance(record, Annotation):
            self.annotations.append(record)
            activity.count("items annotated")
            if record.status == "ok":
                self.result.ok += 1
                for verdict in record.prior_agreement.values():
                    self.result.prior_agreement[verdict] = self.result.prior_agreement.get(verdict, 0) + 1
            else:
                reason = record.error or "unknown"
                self.result.failed[reason] = self.result.failed.get(reason, 0) + 1
        else:
            assert isinstance(record, Rejection)
            self.rejections.append(record)
        if len(self.annotations) + len(self.rejections) >= self.flush_rows or (
            time.monotonic() - self._last >= self.flush_seconds
        ):
            self.flush()

    def flush(self) -> None:
        # Annotations first: a rejection without its annotation is harmless, the reverse is not.
        if self.annotations:
            self.result.rows_written += self.lake.append(self.annotations)
            self.annotations = []
        if self.rejections:
            self.lake.append(self.rejections)
            self.rejections = []
        self._last = time.monotonic()


def _rejection(unit: Unit, reason: str, detail: str, run_id: str, item: str | None = None) -> Rejection:
    return Rejection(
        stage=STAGE,
        item=item or f"{unit.sha256}|",
        reason=reason,
        detail=detail[:2000],
        source=f"{unit.kind}:{unit.owner_id}",
        run_id=run_id,
    )


# ----------------------------------------------------------------- prior mode


def _prior_row(
    unit: Unit, taxonomy: Taxonomy, run_id: str, *, bbox: str, task: str, prior: Prior | None, **fields: Any
) -> Annotation:
    base: dict[str, Any] = {
        "sha256": unit.sha256,
        "bbox": bbox,
        "task": task,
        "taxonomy_version": taxonomy.version,
        "prompt_version": PRIOR_VERSION,
        "model": PRIOR_MODEL,
        "source": "metadata_prior",
        "run_id": run_id,
        "attempts": 0,
    }
    if task == "attributes":
        if prior is None or prior.category is None:
            return Annotation(
                **base,
                status="failed",
                error="prior_no_category",
                error_detail="the source states nothing the taxonomy maps to a category",
                **fields,
            )
        return Annotation(
            **base,
            status="ok",
            category=prior.category,
            attributes=dict(prior.attributes),
            main_attribute=choose_main_attribute(taxonomy, prior.category, prior.attributes),
            raw_response=json.dumps({"evidence": prior.evidence}, sort_keys=True),
            **fields,
        )
    return Annotation(**base, **fields)


def annotate_with_prior(
    unit: Unit, taxonomy: Taxonomy, run_id: str, stored: set[tuple[Any, ...]]
) -> Iterator[Record]:
    """The prior as the annotation of one unit (no model, no request)."""

    def key(bbox: str, task: str) -> tuple[Any, ...]:
        return (unit.sha256, bbox, task, taxonomy.version, PRIOR_VERSION, PRIOR_MODEL)

    def located(items: Iterable[GroundedItem], source: BoxSource) -> Iterator[Record]:
        """Each located item's attributes from its linked product's prior, boxed where `source` says."""
        for item in items:
            bbox = bbox_text(item.bbox)
            if key(bbox, "attributes") not in stored:
                yield _prior_row(
                    unit,
                    taxonomy,
                    run_id,
                    bbox=bbox,
                    task="attributes",
                    prior=unit.ref_priors.get(item.ref or ""),
                    item_ref=item.ref,
                    bbox_source=source,
                )

    if not unit.multi:
        if key("", "attributes") not in stored:
            yield _prior_row(
                unit, taxonomy, run_id, bbox="", task="attributes", prior=unit.prior, item_ref=unit.item_ref
            )
        return
    if unit.kind == "look":
        # The look's stated hotspots are its grounding; their linked products give the attributes.
        items = [
            GroundedItem(unit.ref_priors[ref].category or "", box, ref)
            if ref in unit.ref_priors
            else GroundedItem("", box, ref)
            for ref, box in unit.hotspots
        ]
        if key("", "grounding") not in stored:
            if items:
                yield _prior_row(
                    unit,
                    taxonomy,
                    run_id,
                    bbox="",
                    task="grounding",
                    prior=None,
                    status="ok",
                    items_json=items_json(items),
                )
            else:
                yield _prior_row(
                    unit,
                    taxonomy,
                    run_id,
                    bbox="",
                    task="grounding",
                    prior=None,
                    status="failed",
                    error="prior_no_hotspots",
                    error_detail="the look states no usable hotspot boxes or points",
                )
        yield from located(items, "hotspot")
        return
    # A generated street scene: only a composed scene's layout says where its garments are (the
    # prior cannot locate anything). Without one, each item is held back: no box is guessed.
    if not unit.layout:
        for ref in sorted(unit.ref_priors):
            yield _rejection(
                unit,
                BOX_NOT_LOCATED,
                "nothing located this item: no layout, hotspot or grounding (no VLM configured)",
                run_id,
                item=f"{unit.sha256}|{ref}",
            )
        return
    if key("", "grounding") not in stored:
        yield _prior_row(
            unit,
            taxonomy,
            run_id,
            bbox="",
            task="grounding",
            prior=None,
            status="ok",
            items_json=items_json(unit.layout),
        )
    yield from located(unit.layout, "layout")


def layout_items(layout_json: str | None) -> list[GroundedItem]:
    """A composed scene's garments as grounded items (`Generation.layout_json`; generation/compose.py)."""
    if not layout_json:
        return []
    return [
        GroundedItem(str(entry["category"]), tuple(int(v) for v in entry["bbox"]), str(entry["item_id"]))  # type: ignore[arg-type]
        for entry in json.loads(layout_json)
    ]


# ----------------------------------------------------------------- VLM mode


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

    def _load_grounding(self) -> None:
        table = self.lake.read("annotations")
        for row in table.to_pylist():
            if (
                row["task"] == "grounding"
                and row["model"] == self.settings.model
                and row["prompt_version"] == self.result.prompt_version
                and row["taxonomy_version"] == self.taxonomy.version
            ):
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
        self._load_grounding()
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
        self.sink.add(
            _rejection(unit, exc.reason, exc.detail, self.run_id, item=f"{unit.sha256}|{bbox}|{task}")
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
                self.sink.add(failed)
                if task == "grounding":
                    self.grounding_rows[unit.sha256] = failed  # final: a product photo goes on whole
            return None
        self.consecutive_failures = 0
        return outcome

    async def _unit(self, unit: Unit) -> None:
        if unit.problem and not unit.multi:
            self.sink.add(_rejection(unit, *unit.problem, self.run_id))
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
            self.sink.add(
                self._terminal(unit, "", "grounding" if unit.multi else "attributes", exc.reason, exc.detail)
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
            self.sink.add(_rejection(unit, pick.reason, pick.detail, self.run_id))
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
            self.sink.add(self._terminal(unit, "", task, exc.reason, exc.detail))
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
            self.sink.add(self._terminal(unit, "", "grounding", exc.reason, exc.detail))
            return []

        async def call() -> tuple[Annotation, list[GroundedItem]]:
            return await self.annotator.ground(unit.sha256, prepared, refs=unit.refs)

        outcome = await self._request(unit, "", "grounding", call)
        if outcome is None:
            return []
        row, items = outcome
        row.run_id = self.run_id
        self.sink.add(row)
        self.grounding_rows[unit.sha256] = row
        return items

    async def _multi(self, unit: Unit, image: imgs.Image.Image) -> None:
        # A composed scene's layout is where its garments are: the VLM annotates them, not locates them.
        items = unit.layout or await self._grounding(unit, image)
        source: BoxSource = "layout" if unit.layout else "vlm"
        for item in items:
            if self.stop is not None:
                self.result.deferred += 1
                continue
            prior = unit.ref_priors.get(item.ref) if item.ref else None
            await self._attributes(unit, image, item.bbox, item.category, item.ref, prior, source)

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
            self.sink.add(
                self._terminal(
                    unit, bbox, "attributes", exc.reason, exc.detail, category=category, item_ref=item_ref
                )
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
            self.sink.add(row)


# ----------------------------------------------------------------- the entry point


def in_shard(sha256: str, index: int, count: int) -> bool:
    """Whether an image belongs to shard `index` of `count`: by its hash, so every worker agrees
    without coordination and shards are even."""
    if not 0 <= index < count:
        raise ValueError(f"shard {index} of {count} does not exist")
    return int(sha256[:12], 16) % count == index


def run_annotation(
    lake: Lake,
    settings: AnnotationSettings,
    taxonomy: Taxonomy,
    run_id: str,
    shard: tuple[int, int] | None = None,
) -> AnnotationResult:
    """Annotate every kept image not annotated yet under the current versions; see the module doc.

    `shard=(i, n)` annotates only the images whose sha256 falls in shard i of n (`in_shard`):
    n such runs, in any order or at once on separate workers, do exactly the work of one. An
    image and its look crops stay in one shard (grounding rows are read per image).

    Raises AnnotationError only when the VLM endpoint is unreachable, serves another model,
    or refuses the key; rows finished before that are stored.
    """
    started = time.monotonic()
    vlm = bool(settings.endpoints)
    result = AnnotationResult(
        run_id=run_id,
        mode="vlm" if vlm else "metadata_prior",
        model=settings.model if vlm else PRIOR_MODEL,
        taxonomy_version=taxonomy.version,
        prompt_version=prompt_version(settings.max_pixels) if vlm else PRIOR_VERSION,
    )
    units = [u for u in plan_units(lake, taxonomy) if shard is None or in_shard(u.sha256, *shard)]
    result.images = len(units)
    stored = set(lake.keys("annotations"))
    sink = Sink(lake, result, settings.flush_rows, settings.flush_seconds)
    try:
        if not vlm:
            for unit in units:
                interrupt.check("annotate")  # a safe point between images
                if unit.problem and not (unit.kind == "look" and unit.problem[0] == "hotspot_unusable"):
                    sink.add(_rejection(unit, *unit.problem, run_id))
                    continue
                if unit.problem:
                    sink.add(_rejection(unit, *unit.problem, run_id))
                before = result.ok + sum(result.failed.values())
                for record in annotate_with_prior(unit, taxonomy, run_id, stored):
                    sink.add(record)
                if result.ok + sum(result.failed.values()) == before:
                    result.skipped_existing += 1
        else:
            runner = VLMRun(lake, settings, taxonomy, run_id, result, sink, stored)
            try:
                asyncio.run(runner.run(units))
            except (EndpointUnavailable, EndpointRefused) as exc:
                result.stopped_reason = str(exc)
                raise AnnotationError(f"annotation stopped: {exc}") from None
            result.stopped_reason = runner.stop
            if runner.fatal is not None:
                raise AnnotationError(f"annotation stopped: {runner.fatal}")
    finally:
        sink.flush()
        result.seconds = round(time.monotonic() - started, 3)
    log.info(
        "annotation run %s (%s): %d ok, failed %s, retry later %s, %d skipped, %d deferred, %d requests",
        run_id,
        result.mode,
        result.ok,
        result.failed,
        result.retry_later,
        result.skipped_existing,
        result.deferred,
        result.requests,
    )
    return result
