"""Prior mode: with no VLM configured, the metadata prior (what the sources state) is the annotation."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from lookbench_live.annotation.annotator import GroundedItem, items_json
from lookbench_live.annotation.plan import Unit
from lookbench_live.annotation.prior import PRIOR_MODEL, PRIOR_VERSION, Prior, choose_main_attribute
from lookbench_live.annotation.sink import rejection
from lookbench_live.schema.records import BOX_NOT_LOCATED, Annotation, BoxSource, Record, bbox_text
from lookbench_live.schema.taxonomy import Taxonomy


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
            yield rejection(
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
