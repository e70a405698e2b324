"""Issue 22 §3: a look page's hotspots become boxes where the page says the items are.

Percent hotspots (boxes and points) are scaled by the stored photo's size; values off the photo
and degenerate boxes are refused with a reason, never turned into a tiny crop.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from annotation_fixtures import build_lake, jpeg

from lookbench_live.annotation.hotspots import HotspotError, hotspot_box, parse_hotspots
from lookbench_live.annotation.run import run_annotation
from lookbench_live.config import AnnotationSettings
from lookbench_live.schema.records import DedupDecision, ImageRecord, Look, product_key, utcnow
from lookbench_live.schema.taxonomy import default_taxonomy
from lookbench_live.scrapers.extract.looks import extract_looks

TAXONOMY = default_taxonomy()
# The photo: 1000 × 1500, a hotspot at 10%,20%,60%,90%.
WIDTH, HEIGHT = 1000, 1500
PAGE = (
    "<html><body><section class='shop-the-look'>"
    "<img class='look-photo' src='/img/look2.jpg' alt='Street'>"
    "<a class='hotspot' href='/products/1002' data-bbox='10%,20%,60%,90%'>Shirt</a>"
    "<span class='pin' style='left: 20%; top: 10%; width: 30%; height: 20%'><a href='/products/1001'>Dress</a></span>"
    "<span class='pin' style='left: 50%; top: 80%'><a href='/products/1003'>Pants</a></span>"
    "</section></body></html>"
)


def test_percent_boxes_and_points_are_scaled_by_the_photo_size() -> None:
    assert hotspot_box({"bbox": [10, 20, 60, 90], "unit": "percent"}, WIDTH, HEIGHT) == (100, 300, 600, 1350)
    # A point is sized by the documented default: 30% of the shorter side, centred on it.
    assert hotspot_box({"point": [50, 80], "unit": "percent"}, WIDTH, HEIGHT) == (350, 1050, 650, 1350)
    assert hotspot_box({"point": [500, 1200], "unit": "px"}, WIDTH, HEIGHT) == (350, 1050, 650, 1350)
    assert hotspot_box({"bbox": [10, 20, 60, 90], "unit": "px"}, WIDTH, HEIGHT) == (10, 20, 60, 90)
    assert hotspot_box({"bbox": [10, 20, 60, 90]}, WIDTH, HEIGHT) == (10, 20, 60, 90)  # no unit: pixels


@pytest.mark.parametrize(
    "entry",
    [
        {"bbox": [10, 20, 160, 90], "unit": "percent"},  # past 100%
        {"bbox": [-5, 20, 60, 90], "unit": "percent"},
        {"point": [50, 101], "unit": "percent"},
        {"bbox": [60, 20, 10, 90], "unit": "percent"},  # x0 > x1
        {"bbox": [10, 20, 10.01, 90], "unit": "percent"},  # rounds to zero pixels wide
        {"bbox": [0, 0, 1001, 10], "unit": "px"},  # off the photo
        {"bbox": [10, 20, 60], "unit": "percent"},
        {"bbox": ["10", 20, 60, 90], "unit": "percent"},
        {"bbox": [10, 20, 60, 90], "unit": "em"},
        {"ref": "x"},
    ],
)
def test_unusable_hotspots_are_refused_with_a_reason(entry: dict) -> None:
    with pytest.raises(HotspotError):
        hotspot_box(entry, WIDTH, HEIGHT)
    spots, problems = parse_hotspots(json.dumps([entry]), WIDTH, HEIGHT)
    assert spots == [] and len(problems) == 1


def test_a_look_page_with_percent_hotspots_is_cropped_where_they_say(tmp_path: Path) -> None:
    fx = build_lake(tmp_path / "lake")
    (look_data,) = extract_looks(PAGE, "https://shop.example/looks/2").looks
    now = utcnow()
    key = product_key("shop", look_data.look_id)
    sha = fx.lake.put_image(jpeg(77, (WIDTH, HEIGHT)))
    fx.lake.append(
        [
            Look(
                look_id=look_data.look_id,
                source="shop",
                url=look_data.url,
                photo_url=look_data.photo_url,
                product_refs=look_data.product_refs,
                boxes_json=json.dumps(look_data.boxes),
                first_seen_at=now,
            )
        ]
    )
    fx.lake.append(
        [
            ImageRecord(
                source_url=look_data.photo_url,
                owner_kind="look",
                owner_id=key,
                source="shop",
                status="ok",
                sha256=sha,
                width=WIDTH,
                height=HEIGHT,
                format="JPEG",
                fetched_at=now,
                first_seen_at=now,
            )
        ]
    )
    fx.lake.append([DedupDecision(sha256=sha, hash_method="test", decision="kept", run_id="r0")])
    run_annotation(fx.lake, AnnotationSettings(), TAXONOMY, "r1")
    crops = {r.item_ref: r.bbox for r in fx.lake.records("annotations") if r.sha256 == sha and r.bbox}
    assert crops == {
        fx.keys["1002"]: "100,300,600,1350",
        fx.keys["1001"]: "200,150,500,450",
        fx.keys["1003"]: "350,1050,650,1350",
    }
