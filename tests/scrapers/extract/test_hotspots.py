"""Issue 22 §3: a look page's hotspots become boxes where the page says the items are.

Percent hotspots (boxes and points) are scaled by the stored photo's size; values off the photo
and degenerate boxes are refused with a reason, never turned into a tiny crop.
"""

from __future__ import annotations

import datetime as dt
import io
import json
from pathlib import Path

import numpy as np
import pytest
from annotation_fixtures import build_lake
from ingest_fixtures import TO_RAW
from ingest_server import Route, serve
from PIL import Image

from lookbench_live.annotation.hotspots import HotspotError, hotspot_box, parse_hotspots
from lookbench_live.annotation.run import run_annotation
from lookbench_live.config import AnnotationSettings, IngestSettings
from lookbench_live.ingest import ImageRequest, ingest_images
from lookbench_live.ingest.orientation import ORIENTATION_TAG
from lookbench_live.schema.records import DedupDecision, Look, product_key, utcnow
from lookbench_live.schema.taxonomy import default_taxonomy
from lookbench_live.scrapers.extract.looks import extract_looks

TAXONOMY = default_taxonomy()
T0 = dt.datetime(2026, 5, 1, tzinfo=dt.UTC)  # first seen of the looks ingested here
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


# Where the page's hotspots say each item is, in the displayed picture, and its colour there.
ITEMS = {
    "1002": ((100, 300, 600, 1350), (200, 30, 30)),
    "1001": ((200, 150, 500, 450), (30, 200, 30)),
    "1003": ((350, 1050, 650, 1350), (30, 30, 200)),
}


def phone_photo(orientation: int) -> bytes:
    """The look photo as a phone stores it: raw pixels turned, an EXIF Orientation to undo it.

    Displayed upright it is 1000 × 1500 with each item's region painted in its colour (in order, each
    over the ones before: the dress and the pants' square cover parts of the shirt's box)."""
    view = np.full((HEIGHT, WIDTH, 3), 128, dtype=np.uint8)
    for (x0, y0, x1, y1), colour in ITEMS.values():
        view[y0:y1, x0:x1] = colour
    raw = Image.fromarray(view)
    if TO_RAW[orientation] is not None:
        raw = raw.transpose(TO_RAW[orientation])
    exif = Image.Exif()
    exif[ORIENTATION_TAG] = orientation
    out = io.BytesIO()
    raw.save(out, "JPEG", quality=92, exif=exif.tobytes())
    return out.getvalue()


@pytest.mark.parametrize("orientation", [1, 6, 8, 3])
def test_a_look_page_with_percent_hotspots_is_cropped_where_they_say(
    tmp_path: Path, orientation: int
) -> None:
    """The issue's case end to end: page → extractor → ingestion (EXIF turned) → annotation crops."""
    fx = build_lake(tmp_path / "lake")
    (look_data,) = extract_looks(PAGE, "https://shop.example/looks/2").looks
    now = utcnow()
    key = product_key("shop", look_data.look_id)
    routes = {
        "/robots.txt": Route(body=b"User-agent: *\nAllow: /\n", headers={"Content-Type": "text/plain"}),
        "/img/look2.jpg": Route(body=phone_photo(orientation), headers={"Content-Type": "image/jpeg"}),
    }
    settings = IngestSettings(allow_private_addresses=True, workers=0, min_side=32)
    with serve(routes) as server:
        request = ImageRequest(server.base + "/img/look2.jpg", "look", key, "shop", 0, T0)
        assert ingest_images(fx.lake, settings, [request], run_id="r").ok == 1
    (row,) = [r for r in fx.lake.read("images").to_pylist() if r["owner_id"] == key]
    sha = row["sha256"]
    assert (row["width"], row["height"]) == (WIDTH, HEIGHT)  # upright, as the page shows it
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
    fx.lake.append([DedupDecision(sha256=sha, hash_method="test", decision="kept", run_id="r0")])
    run_annotation(fx.lake, AnnotationSettings(), TAXONOMY, "r1")
    crops = {r.item_ref: r.bbox for r in fx.lake.records("annotations") if r.sha256 == sha and r.bbox}
    assert crops == {fx.keys[pid]: ",".join(map(str, box)) for pid, (box, _) in ITEMS.items()}
    # Each crop of the stored photo shows its item's colour: the box is where the item is.
    stored = Image.open(io.BytesIO(fx.lake.get_image(sha))).convert("RGB")
    for pid in ("1001", "1003"):  # the shirt's box holds the pants' square too
        box, colour = ITEMS[pid]
        mean = np.asarray(stored.crop(box), dtype=float).reshape(-1, 3).mean(axis=0)
        assert np.abs(mean - colour).max() < 12, (pid, mean)
