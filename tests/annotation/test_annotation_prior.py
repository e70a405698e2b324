"""The metadata prior on realistic product metadata, and prior mode (no VLM configured)."""

from __future__ import annotations

import json
from pathlib import Path

from annotation_fixtures import PRODUCTS, build_lake

from lookbench_live.annotation.prior import (
    PRIOR_MODEL,
    Prior,
    agreement,
    choose_main_attribute,
    product_prior,
)
from lookbench_live.annotation.run import parse_hotspots, run_annotation
from lookbench_live.config import AnnotationSettings
from lookbench_live.schema.records import Product, utcnow
from lookbench_live.schema.taxonomy import default_taxonomy

TAXONOMY = default_taxonomy()


def product(**fields) -> Product:
    base = dict(
        product_id="x", source="shop", platform="shopify", url="u", first_seen_at=utcnow(), content_hash="h"
    )
    base.update(fields)
    return Product(**base)


def test_prior_reads_category_and_attributes_from_product_fields():
    dress = product_prior(TAXONOMY, product(**PRODUCTS[0]))
    assert dress.category == "dress"
    assert dress.attributes["color"] == "black" and dress.evidence["color"] == "color"
    assert dress.attributes["material"] == "silk"
    assert dress.attributes["neckline"] == "v-neck" and dress.attributes["garment_length"] == "midi"
    # "white sneakers" in the description names another item: the colour field wins.
    assert dress.attributes["color"] != "white"
    shirt = product_prior(TAXONOMY, product(**PRODUCTS[1]))
    assert shirt.category == "shirt" and shirt.attributes["pattern"] == "stripe"
    assert shirt.attributes["sleeve_length"] == "long sleeve"
    assert product_prior(TAXONOMY, product(**PRODUCTS[3])).category is None  # a gift card


def test_category_from_title_when_the_path_says_nothing():
    prior = product_prior(TAXONOMY, product(title="Leather Chelsea Boots", category_path=["New In"]))
    assert prior.category == "boots" and prior.attributes.get("material") == "leather"


def test_main_attribute_follows_the_documented_priority():
    values = {"color": "black", "material": "silk", "neckline": "v-neck"}
    assert choose_main_attribute(TAXONOMY, "dress", values) == "silk"
    assert choose_main_attribute(TAXONOMY, "dress", {"color": "black", "neckline": "v-neck"}) == "v-neck"
    assert choose_main_attribute(TAXONOMY, "dress", {"material": "not_visible"}) is None


def test_agreement_per_group():
    prior = Prior("dress", {"color": "black", "material": "silk"})
    result = agreement(TAXONOMY, "dress", {"color": "black", "material": "cotton", "pattern": "solid"}, prior)
    assert result["category"] == "agree" and result["color"] == "agree"
    assert result["material"] == "disagree" and result["pattern"] == "prior_missing"
    other = agreement(TAXONOMY, "skirt", {"color": "black"}, prior)
    assert other["category"] == "disagree" and other["color"] == "prior_missing"


def test_point_hotspots_become_boxes_and_outside_ones_are_reported():
    spots, problems = parse_hotspots(
        json.dumps([{"ref": "a", "point": [200, 450]}, {"ref": "b", "bbox": [0, 0, 500, 10]}, {"ref": "c"}]),
        400,
        600,
    )
    assert spots == [("a", (140, 390, 260, 510))]  # 30% of the shorter side (400) around the point
    assert len(problems) == 2 and "outside" in problems[0]


def test_prior_mode_annotates_everything_and_says_so(tmp_path: Path):
    fx = build_lake(tmp_path / "lake")
    result = run_annotation(fx.lake, AnnotationSettings(), TAXONOMY, "r1")
    assert result.mode == "metadata_prior" and result.requests == 0
    assert "metadata prior" in result.summary()["note"]
    rows = list(fx.lake.records("annotations"))
    assert {r.model for r in rows} == {PRIOR_MODEL} and {r.source for r in rows} == {"metadata_prior"}
    by = {(r.sha256, r.bbox, r.task): r for r in rows}
    dress = by[(fx.shas["p1001"], "", "attributes")]
    assert dress.status == "ok" and dress.main_attribute == "silk" and dress.item_ref == fx.keys["1001"]
    assert TAXONOMY.published_columns(dress.category, dress.attributes, dress.main_attribute)[0] == "silk"
    gift = by[(fx.shas["p1004"], "", "attributes")]
    assert gift.status == "failed" and gift.error == "prior_no_category"
    assert (fx.shas["dropped"], "", "attributes") not in by
    # The look: its stated hotspots are the grounding, linked products give the crop attributes.
    look_crops = {r.item_ref: r for (sha, bbox, task), r in by.items() if sha == fx.shas["look"] and bbox}
    assert (
        look_crops[fx.keys["1002"]].bbox == "60,40,340,300"
        and look_crops[fx.keys["1002"]].category == "shirt"
    )
    assert look_crops[fx.keys["1003"]].category == "pants"  # linked by URL, point hotspot
    assert by[(fx.shas["look"], "", "grounding")].status == "ok"
    # Studio generation: the requested attributes. A street scene with no layout: nothing located
    # its items, so none gets a box; each is held back with the reason (no band is guessed).
    studio = by[(fx.shas["gen-studio"], "", "attributes")]
    assert studio.category == "skirt" and studio.attributes == {"pattern": "plaid", "material": "wool"}
    assert not [r for (sha, bbox, task), r in by.items() if sha == fx.shas["gen-street"]]
    held = {r.item for r in fx.lake.records("rejections") if r.reason == "box_not_located"}
    assert held == {f"{fx.shas['gen-street']}|ai:2", f"{fx.shas['gen-street']}|ai:3"}
    assert {r.bbox_source for r in look_crops.values()} == {"hotspot"}
    # Rerun: nothing new.
    again = run_annotation(fx.lake, AnnotationSettings(), TAXONOMY, "r2")
    assert again.rows_written == 0 and len(list(fx.lake.records("annotations"))) == len(rows)


def test_cli_annotate_prints_the_run(tmp_path: Path, cli: str):
    import subprocess

    fx = build_lake(tmp_path / "lake")
    done = subprocess.run(
        [cli, "annotate", "--home", fx.lake.home, "--run-id", "cli1"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["mode"] == "metadata_prior" and summary["run_id"] == "cli1" and summary["ok"] > 0
