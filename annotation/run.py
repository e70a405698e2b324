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

The run is split by concern: `plan.py` (the work list), `sink.py` (batched writing, a unit's
rows together), `prior_mode.py` (no VLM), `vlm_run.py` (the asynchronous VLM run); this module
is the entry point and re-exports the names callers import.

Planning reads only what the run needs: the kept images with no `annotations` row of the run's
(taxonomy, prompt, model) versions (a DuckDB anti-join over the lake's Parquet), plus, with a
VLM, those some run left part-done (named by a `rejections` row), and the products, looks and
generations of those images.

Resuming: every row is keyed by (sha256, bbox, task, taxonomy_version, prompt_version,
model); a unit of work whose key is stored is not sent again, and results are written in
small batches (`flush_rows`, `flush_seconds`) as they complete, so a killed run loses at
most one batch of answers. Terminal failures (invalid or truncated answers, a 400) are
stored as `failed` rows and not retried by later runs of the same versions; transient ones
(timeouts, 5xx, 429 after all retries) are stored in `rejections` and retried next run.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lookbench_live import interrupt
from lookbench_live.annotation.endpoint import EndpointRefused, EndpointUnavailable
from lookbench_live.annotation.hotspots import parse_hotspots
from lookbench_live.annotation.plan import KIND_ORDER, Unit, layout_items, plan_units
from lookbench_live.annotation.prior import PRIOR_MODEL, PRIOR_VERSION
from lookbench_live.annotation.prior_mode import annotate_with_prior
from lookbench_live.annotation.prompts import prompt_version
from lookbench_live.annotation.result import AnnotationError, AnnotationResult
from lookbench_live.annotation.sink import STAGE, Sink, rejection
from lookbench_live.annotation.vlm_run import VLMRun
from lookbench_live.config import AnnotationSettings
from lookbench_live.schema.records import Annotation
from lookbench_live.schema.taxonomy import Taxonomy
from lookbench_live.warehouse.lake import Lake

log = logging.getLogger(__name__)

# The names callers and tests import from here, wherever they now live.
__all__ = [
    "KIND_ORDER",
    "STAGE",
    "AnnotationError",
    "AnnotationResult",
    "Sink",
    "Unit",
    "VLMRun",
    "annotate_with_prior",
    "in_shard",
    "layout_items",
    "parse_hotspots",
    "plan_units",
    "run_annotation",
]


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
    versions = (taxonomy.version, result.prompt_version, result.model)
    # VLM mode: an image some earlier run left part-done has rows of these versions and a
    # `rejections` row saying so (sink.py); it is planned again with the images that have none.
    also = _rejected_images(lake) if vlm else []
    planned = plan_units(lake, taxonomy, lacking=versions, also=also)
    units = [u for u in planned if shard is None or in_shard(u.sha256, *shard)]
    result.images = len(units)
    stored = _stored_keys(lake, units, versions)
    sink = Sink(lake, result, settings.flush_rows, settings.flush_seconds)
    try:
        if not vlm:
            for unit in units:
                interrupt.check("annotate")  # a safe point between images
                _prior_unit(unit, taxonomy, run_id, stored, sink, result)
                sink.unit_done(unit.sha256)
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


def _prior_unit(
    unit: Unit,
    taxonomy: Taxonomy,
    run_id: str,
    stored: set[tuple[Any, ...]],
    sink: Sink,
    result: AnnotationResult,
) -> None:
    if unit.problem:
        sink.add(rejection(unit, *unit.problem, run_id), unit.sha256)
        if not (unit.kind == "look" and unit.problem[0] == "hotspot_unusable"):
            return
    before = result.ok + sum(result.failed.values())
    for record in annotate_with_prior(unit, taxonomy, run_id, stored):
        sink.add(record, unit.sha256)
    if result.ok + sum(result.failed.values()) == before:
        result.skipped_existing += 1


def _rejected_images(lake: Lake) -> list[str]:
    """sha256 of the images annotation recorded a rejection for (transient failures, units
    stopped part-way, and reasons kept with a finished unit: planning them again is harmless)."""
    table = lake.sql(
        "SELECT DISTINCT split_part(item, '|', 1) AS sha256 FROM rejections WHERE stage = ?",
        ["rejections"],
        [STAGE],
    )
    return table.column("sha256").to_pylist()


def _stored_keys(lake: Lake, units: list[Unit], versions: tuple[str, str, str]) -> set[tuple[Any, ...]]:
    """The stored `annotations` keys of the planned images under the run's versions."""
    if not units:
        return set()
    names = list(Annotation.__key__)
    where = (
        pc.field("sha256").isin(pa.array(sorted({u.sha256 for u in units}), pa.string()))
        & (pc.field("taxonomy_version") == versions[0])
        & (pc.field("prompt_version") == versions[1])
        & (pc.field("model") == versions[2])
    )
    table = lake.read("annotations", columns=names, where=where)
    return set(zip(*(table.column(n).to_pylist() for n in names), strict=True))
