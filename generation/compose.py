"""Street scenes composed from generated garments pasted at known positions.

With no street-scene model configured (the embedded default's tiny pipeline depicts nothing),
an AIGen-StreetLook query is composed: each garment of the look is generated on its own (a
text-to-image request, or an IP-Adapter one fed the real product's photo) and pasted, scaled
to fit, into its own cell of a plain seeded scene. The layout (each garment's item, category,
box and source image) is recorded in `Generation.layout_json`, so the boxes annotation
publishes are where the garments truly are (`bbox_source = "layout"`, docs/release.md).

A caller may rely on: the same garments, size and seed give byte-identical PNG bytes and the
same layout; boxes never overlap and lie inside the scene, so every pixel inside a box is its
garment's (`fit_garment` of the source image).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from PIL import Image

from lookbench_live.generation.runner import png_bytes

# The resampling every garment is scaled with: `fit_garment` is the one place it is applied.
RESAMPLE = Image.Resampling.LANCZOS
# A garment fills between this share and all of its cell's shorter side (seeded), so boxes vary.
MIN_FILL = 0.7

# `Generation.pipeline_class` of a composed scene: "ComposedScene(<the garments' pipeline>)".
COMPOSED_PIPELINE = "ComposedScene"

Box = tuple[int, int, int, int]


@dataclass(frozen=True, slots=True)
class Garment:
    """One garment image to place: the item it shows and where its pixels come from."""

    item_id: str
    category: str
    image: Image.Image
    sha256: str  # the garment image's bytes in the lake (its source image)


@dataclass(frozen=True, slots=True)
class Composition:
    png: bytes
    width: int
    height: int
    layout: list[dict[str, object]]  # [{"item_id", "category", "bbox": [x0,y0,x1,y1], "sha256"}]


def fit_garment(image: Image.Image, box: Box) -> Image.Image:
    """The garment's pixels as pasted into `box` (x1/y1 exclusive)."""
    return image.convert("RGB").resize((box[2] - box[0], box[3] - box[1]), RESAMPLE)


def plan_layout(width: int, height: int, sizes: Sequence[tuple[int, int]], seed: int) -> list[Box]:
    """One box per garment, each inside its own grid cell (so none overlap), aspect kept."""
    count = len(sizes)
    if count == 0:
        return []
    cols = math.ceil(math.sqrt(count))
    rows = math.ceil(count / cols)
    cell_w, cell_h = width // cols, height // rows
    if cell_w < 1 or cell_h < 1:
        raise ValueError(f"a {width}x{height} scene has no room for {count} garments")
    rng = random.Random(f"layout:{seed}")
    boxes: list[Box] = []
    for index, (gw, gh) in enumerate(sizes):
        row, col = divmod(index, cols)
        scale = min(cell_w / gw, cell_h / gh) * rng.uniform(MIN_FILL, 1.0)
        bw, bh = max(1, min(cell_w, round(gw * scale))), max(1, min(cell_h, round(gh * scale)))
        x0 = col * cell_w + rng.randint(0, cell_w - bw)
        y0 = row * cell_h + rng.randint(0, cell_h - bh)
        boxes.append((x0, y0, x0 + bw, y0 + bh))
    return boxes


def compose_scene(garments: Sequence[Garment], width: int, height: int, seed: int) -> Composition:
    """The scene PNG and its layout; deterministic in (garments, width, height, seed)."""
    rng = random.Random(f"scene:{seed}")
    # A plain, light backdrop (a seeded colour): nothing in it can be mistaken for a garment.
    backdrop = tuple(rng.randint(200, 245) for _ in range(3))
    scene = Image.new("RGB", (width, height), backdrop)
    boxes = plan_layout(width, height, [g.image.size for g in garments], seed)
    layout: list[dict[str, object]] = []
    for garment, box in zip(garments, boxes, strict=True):
        scene.paste(fit_garment(garment.image, box), box[:2])
        layout.append(
            {
                "item_id": garment.item_id,
                "category": garment.category,
                "bbox": list(box),
                "sha256": garment.sha256,
            }
        )
    return Composition(png_bytes(scene), width, height, layout)
