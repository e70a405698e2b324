"""The product's own garment on product photos: which detected item is the product, what the
annotator stores, and what the release publishes (docs/annotation.md "Product photos")."""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import os
from pathlib import Path

import lakefill
import pyarrow.parquet as pq
from annotation_fixtures import build_lake
from PIL import Image

from lookbench_live.annotation.annotator import GroundedItem
from lookbench_live.annotation.prior import Prior
from lookbench_live.annotation.product_box import pick_product_box
from lookbench_live.annotation.run import annotate_with_prior, plan_units, run_annotation
from lookbench_live.config import AnnotationSettings
from lookbench_live.schema.records import Annotation, product_key
from lookbench_live.schema.taxonomy import default_taxonomy
from lookbench_live.testing.loopback_server import LoopbackServer
from lookbench_live.warehouse.freshness import record_baseline
from lookbench_live.warehouse.lake import Lake
from lookbench_live.warehouse.release import build_release

os.environ.setdefault("HF_HUB_OFFLINE", "1")
TAXONOMY = default_taxonomy()
SIZE = (400, 600)


def item(category: str, box: tuple[int, int, int, int]) -> GroundedItem:
    return GroundedItem(category, box)


# ----------------------------------------------------------------- which item is the product


def test_the_products_category_wins_and_a_pair_is_one_box() -> None:
    items = [
        item("jacket", (0, 0, 400, 300)),
        item("dress", (50, 100, 350, 550)),
        item("sneakers", (60, 560, 150, 600)),
    ]
    pick = pick_product_box(TAXONOMY, "dress", items, SIZE)
    assert pick.box == (50, 100, 350, 550) and pick.reason is None and pick.category == "dress"
    pair = [
        item("sneakers", (40, 500, 150, 590)),
        item("sneakers", (220, 510, 330, 600)),
        item("pants", (40, 0, 330, 500)),
    ]
    assert pick_product_box(TAXONOMY, "sneakers", pair, SIZE).box == (40, 500, 330, 600)


def test_close_categories_match_only_when_unambiguous() -> None:
    # Same published name: boots detected for a sneakers product.
    assert pick_product_box(TAXONOMY, "sneakers", [item("boots", (0, 400, 200, 600))], SIZE).box == (
        0,
        400,
        200,
        600,
    )
    # Same body region and super-category: a blouse detected as a shirt, beside pants.
    shirt = pick_product_box(
        TAXONOMY, "blouse", [item("shirt", (0, 0, 400, 280)), item("pants", (0, 280, 400, 600))], SIZE
    )
    assert shirt.box == (0, 0, 400, 280) and shirt.category == "blouse"
    # Two candidates of the same region: a guess, so the whole image and the reason.
    two = pick_product_box(
        TAXONOMY, "blouse", [item("shirt", (0, 0, 200, 280)), item("jacket", (0, 0, 400, 300))], SIZE
    )
    assert two.box is None and two.reason == "product_item_ambiguous" and "jacket" in two.detail


def test_no_match_is_the_whole_image_with_the_reason() -> None:
    none = pick_product_box(TAXONOMY, "belt", [], SIZE)
    assert none.box is None and none.reason == "product_item_none"
    other = pick_product_box(TAXONOMY, "belt", [item("dress", (0, 0, 300, 500))], SIZE)
    assert other.box is None and other.reason == "product_item_not_found" and "dress" in other.detail
    # A flat shot: the product fills the photo, no crop and nothing to explain.
    flat = pick_product_box(TAXONOMY, "belt", [item("belt", (5, 5, 398, 596))], SIZE)
    assert flat.box is None and flat.reason is None
    # A speck or a sliver is a detection error, not the product.
    speck = pick_product_box(TAXONOMY, "belt", [item("belt", (10, 10, 30, 30))], SIZE)
    assert speck.box is None and speck.reason == "product_item_implausible"
    sliver = pick_product_box(TAXONOMY, "belt", [item("belt", (0, 100, 400, 110))], SIZE)
    assert sliver.box is None and sliver.reason == "product_item_implausible"
    # The source names no category: the largest item is the product.
    unknown = pick_product_box(
        TAXONOMY, None, [item("hat", (0, 0, 100, 80)), item("coat", (0, 60, 400, 500))], SIZE
    )
    assert unknown.category == "coat" and unknown.box == (0, 60, 400, 500)


def test_every_category_has_a_body_region_ordered_head_to_feet() -> None:
    assert all(TAXONOMY.body_region(c) in TAXONOMY.body_regions for c in TAXONOMY.category_names())
    order = ["headband", "glasses", "scarf", "tie", "shirt", "belt", "skirt", "tights", "socks"]
    ranks = [TAXONOMY.body_rank(c) for c in order]
    assert ranks == sorted(ranks) and ranks[0] < ranks[-1]
    assert TAXONOMY.body_rank("socks") == TAXONOMY.body_rank("sneakers") == len(TAXONOMY.body_regions) - 1


def test_a_street_scene_without_a_layout_gets_no_box_in_prior_mode(tmp_path: Path) -> None:
    """Issue 22 §3: no horizontal band is guessed; every item is held back box_not_located."""
    fx = build_lake(tmp_path / "lake")
    [unit] = [u for u in plan_units(fx.lake, TAXONOMY) if u.owner_id == "gen-street"]
    unit.ref_priors = {"ai:a": Prior("socks"), "ai:b": Prior("headband"), "ai:c": Prior("leg warmers")}
    records = list(annotate_with_prior(unit, TAXONOMY, "r", set()))
    assert not [r for r in records if isinstance(r, Annotation)]
    assert sorted((r.reason, r.item) for r in records) == [
        ("box_not_located", f"{unit.sha256}|{ref}") for ref in ("ai:a", "ai:b", "ai:c")
    ]


# ----------------------------------------------------------------- the annotator, end to end


def _attribute_rows(lake: Lake, sha: str) -> list[Annotation]:
    return [
        a
        for a in lake.records("annotations")
        if a.sha256 == sha and a.task == "attributes" and a.source == "vlm"  # type: ignore[attr-defined]
    ]


def test_vlm_annotates_the_products_own_item_and_records_why_not(tmp_path: Path) -> None:
    fx = build_lake(tmp_path / "lake")
    grounding = {
        # the dress worn with sneakers: the dress is the product
        fx.shas["p1001"]: [
            {"category": "dress", "box": [0.2, 0.1, 0.8, 0.85]},
            {"category": "sneakers", "box": [0.3, 0.88, 0.7, 1.0]},
        ],
        # jeans product, but only a shirt is detected: whole image, with the reason
        fx.shas["p1003"]: [{"category": "shirt", "box": [0.0, 0.0, 1.0, 0.5]}],
    }
    with LoopbackServer(model="m", grounding=grounding) as server:
        settings = AnnotationSettings(base_url=server.base_url, model="m", flush_rows=2, concurrency=2)
        result = run_annotation(fx.lake, settings, TAXONOMY, "r1")
        assert result.complete and not result.failed
        assert server.requests_for(fx.shas["p1001"]) == 2  # grounding, then the dress's attributes
        [dress] = _attribute_rows(fx.lake, fx.shas["p1001"])
        w, h = fx.sizes["p1001"]
        box = tuple(int(v) for v in dress.bbox.split(","))
        expected = (0.2 * w, 0.1 * h, 0.8 * w, 0.85 * h)
        assert all(abs(a - b) <= 3 for a, b in zip(box, expected, strict=True)), box
        assert dress.category == "dress" and dress.item_ref == fx.keys["1001"]
        [jeans] = _attribute_rows(fx.lake, fx.shas["p1003"])
        assert jeans.bbox == "" and jeans.item_ref == fx.keys["1003"]
        reasons = {
            (r.item, r.reason)
            for r in fx.lake.records("rejections")
            if r.stage == "annotate"  # type: ignore[attr-defined]
        }
        assert (f"{fx.shas['p1003']}|", "product_item_not_found") in reasons
        assert result.product_boxes["box"] >= 1 and result.product_boxes["product_item_not_found"] == 1
        # A rerun reads the stored grounding, finds the same keys, and sends nothing.
        server.reset_counts()
        again = run_annotation(fx.lake, settings, TAXONOMY, "r2")
        assert server.total == 0 and again.rows_written == 0


# ----------------------------------------------------------------- the release


def test_release_publishes_the_products_box_as_a_crop(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake")
    # The site's baseline crawl came before: its products are new arrivals (the freshness rules).
    record_baseline(lake, "shop", lakefill.T0 - dt.timedelta(days=1), "test")
    lakefill.fill(lake)
    key = product_key("shop", "p0-0")
    photo = next(r for r in lake.records("images") if r.owner_id == key and r.position == 0)  # type: ignore[attr-defined]
    box = (20, 10, 140, 190)
    lake.append(
        [
            Annotation(
                sha256=photo.sha256,  # type: ignore[attr-defined]
                bbox=",".join(map(str, box)),
                task="attributes",
                taxonomy_version="test",
                prompt_version="p2",
                model="vlm-m",
                source="vlm",
                status="ok",
                category="dress",
                main_attribute="leather",
                attributes={"color": "red|white", "material": "leather"},
                item_ref=key,
                created_at=dt.datetime.now(dt.UTC),
            )
        ]
    )

    class PlainTaxonomy:
        version = "test"

        def published_columns(self, category, attributes, main_attribute):
            return main_attribute, ", ".join(v for k, v in sorted(attributes.items()) if v != main_attribute)

    build_release(lake, version="v20261201", taxonomy=PlainTaxonomy())
    base = Path(lake.path("releases", "v20261201"))
    rows = [
        row
        for part in base.rglob("*.parquet")
        for row in pq.read_table(part).to_pylist()
        if row["raw_sha256"] == photo.sha256  # type: ignore[attr-defined]
    ]
    assert rows, "the product photo is in the release"
    for row in rows:
        assert row["bbox"] == list(box)
        crop = Image.open(io.BytesIO(row["image"]["bytes"]))
        assert crop.size == (box[2] - box[0], box[3] - box[1])
        assert row["raw_image"]["bytes"] == lake.get_image(photo.sha256)  # type: ignore[attr-defined]
        assert row["sha256"] == hashlib.sha256(row["image"]["bytes"]).hexdigest() != row["raw_sha256"]
        assert {"key": "color", "value": "red|white"} in row["attributes"]


def test_a_failed_grounding_leaves_the_whole_photo_annotated_with_the_reason(tmp_path: Path) -> None:
    fx = build_lake(tmp_path / "lake")
    with LoopbackServer(model="m") as server:
        server.inject(fx.shas["p1001"], "400")  # the grounding request: refused for good, not retried
        settings = AnnotationSettings(base_url=server.base_url, model="m", flush_rows=2, concurrency=2)
        result = run_annotation(fx.lake, settings, TAXONOMY, "r1")
    [dress] = _attribute_rows(fx.lake, fx.shas["p1001"])
    assert dress.status == "ok" and dress.bbox == "" and dress.category == "dress"
    assert result.product_boxes["product_grounding_failed"] == 1
    reasons = {(r.item, r.reason) for r in fx.lake.records("rejections")}  # type: ignore[attr-defined]
    assert (f"{fx.shas['p1001']}|", "product_grounding_failed") in reasons
