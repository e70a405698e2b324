"""Issue 22 §3: composed AIGen-StreetLook scenes, whose published boxes are where the garments are.

With no street-scene model (the embedded default), a street query is composed from garments the
tiny pipeline generates, pasted at recorded positions (generation/compose.py); annotation publishes
the layout's boxes (`bbox_source = "layout"`), and nothing else ever gives a street scene a box.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

from generation_fixtures import small_settings, taxonomy, tiny_generator
from PIL import Image

from lookbench_live.annotation.run import run_annotation
from lookbench_live.config import AnnotationSettings, DedupSettings
from lookbench_live.dedup.decide import run_dedup
from lookbench_live.generation import run_generation
from lookbench_live.generation.compose import fit_garment
from lookbench_live.generation.synthesis import plan_generation
from lookbench_live.schema.records import Generation
from lookbench_live.warehouse.lake import Lake

SETTINGS = dict(studio_items=0, street_looks=2, gallery_per_item=1)


def street_queries(lake: Lake) -> list[Generation]:
    rows = [g for g in lake.records("generations") if isinstance(g, Generation)]
    return sorted(
        (g for g in rows if g.subset == "aigen_streetlook" and g.role == "query" and g.status == "ok"),
        key=lambda g: g.generation_id,
    )


def test_a_composed_scene_shows_each_garment_inside_its_recorded_box(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake")
    run_generation(lake, small_settings(**SETTINGS), taxonomy(), "r1", image_generator=tiny_generator())
    queries = street_queries(lake)
    assert queries
    for g in queries:
        scene = Image.open(io.BytesIO(lake.get_image(g.sha256 or ""))).convert("RGB")
        layout = json.loads(g.layout_json or "[]")
        assert [e["item_id"] for e in layout] == g.item_ids  # every garment of the look is placed
        boxes = [tuple(e["bbox"]) for e in layout]
        for i, box in enumerate(boxes):
            assert 0 <= box[0] < box[2] <= scene.width and 0 <= box[1] < box[3] <= scene.height
            for other in boxes[i + 1 :]:  # no overlap: every pixel in a box is its garment's
                assert box[2] <= other[0] or other[2] <= box[0] or box[3] <= other[1] or other[3] <= box[1]
        for entry in layout:
            garment = Image.open(io.BytesIO(lake.get_image(entry["sha256"])))
            box = tuple(entry["bbox"])
            assert scene.crop(box).tobytes() == fit_garment(garment, box).tobytes()


def test_composition_is_deterministic(tmp_path: Path) -> None:
    made = []
    for name in ("a", "b"):
        lake = Lake(tmp_path / name)
        run_generation(lake, small_settings(**SETTINGS), taxonomy(), "r", image_generator=tiny_generator())
        made.append([(g.sha256, g.layout_json, g.prompt, g.seed, g.model) for g in street_queries(lake)])
    assert made[0] and made[0] == made[1]  # same seed: the same bytes and the same layout
    _, planned = plan_generation(small_settings(**SETTINGS), taxonomy())
    assert {r.seed for r in planned if r.garments} == {seed for _, _, _, seed, _ in made[0]}


def test_prior_mode_publishes_the_layout_boxes_and_no_band(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake")
    run_generation(lake, small_settings(**SETTINGS), taxonomy(), "r1", image_generator=tiny_generator())
    run_dedup(lake, DedupSettings(), "d1")
    run_annotation(lake, AnnotationSettings(), taxonomy(), "a1")
    layouts = {g.sha256: json.loads(g.layout_json or "[]") for g in street_queries(lake)}
    crops = [a for a in lake.records("annotations") if a.sha256 in layouts and a.bbox]  # type: ignore[attr-defined]
    assert crops
    for ann in crops:
        expected = {",".join(map(str, e["bbox"])): e["item_id"] for e in layouts[ann.sha256]}  # type: ignore[attr-defined]
        assert ann.bbox in expected and ann.item_ref == expected[ann.bbox]  # type: ignore[attr-defined]
        assert ann.bbox_source == "layout"  # type: ignore[attr-defined]
    for sha, layout in layouts.items():
        published = {a.bbox for a in crops if a.sha256 == sha and a.task == "attributes"}  # type: ignore[attr-defined]
        assert published == {",".join(map(str, e["bbox"])) for e in layout}


def test_every_published_street_box_is_a_layout_box(tmp_path: Path) -> None:
    """The release: each AIGen-StreetLook query row's box is its scene's layout box, named `layout`."""
    import pyarrow.parquet as pq

    from lookbench_live.warehouse.release import build_release

    lake = Lake(tmp_path / "lake")
    run_generation(lake, small_settings(**SETTINGS), taxonomy(), "r1", image_generator=tiny_generator())
    run_dedup(lake, DedupSettings(), "d1")
    run_annotation(lake, AnnotationSettings(), taxonomy(), "a1")
    layouts = {g.sha256: [e["bbox"] for e in json.loads(g.layout_json or "[]")] for g in street_queries(lake)}
    build_release(lake, version="v20261201", taxonomy=taxonomy())
    base = Path(lake.path("releases", "v20261201"))
    rows = [r for part in base.rglob("*.parquet") for r in pq.read_table(part).to_pylist()]
    street = [r for r in rows if r["raw_sha256"] in layouts]
    assert street
    for row in street:
        assert row["bbox"] in layouts[row["raw_sha256"]] and row["bbox_source"] == "layout"
    assert all((r["bbox"] is None) == (r["bbox_source"] is None) for r in rows)
