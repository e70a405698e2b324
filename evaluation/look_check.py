"""Does a conditioned look show its product? An embedding check (issue 22 §4 phase B).

An AIGen look conditioned on a product (an image-conditioned AIGen-Studio query, or a garment of
a street look worn from a product's photo) is published with the product's photos as its
gallery: the look must show that product. Each such look (the whole studio image, or the
garment's box of a street scene: its layout box, or a crop the annotation linked to the product)
is embedded with `evidence.conditioned_embedder`, and so is every photo of the product; the best
cosine is the look's score. Under `evidence.look_threshold` it fails, and the label rules hold
the row back (`conditioned_look_mismatch`, `warehouse/labels.py`).

Both sides are compared on their foreground (`foreground`): a product shot and a generated look
rarely share a backdrop, and a whole-image descriptor would compare the backdrops. Results go to
`evidence_checks` (check `conditioned_look`, method `<embedder>@<threshold>`); a stored result of
the same method is not computed again.
"""

from __future__ import annotations

import io
import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from PIL import Image

from lookbench_live.config import EvidenceSettings
from lookbench_live.evaluation.embedders import ImageEmbedder, load_embedder
from lookbench_live.schema.records import Annotation, EvidenceCheck, Generation, evidence_todo
from lookbench_live.warehouse.lake import Lake
from lookbench_live.warehouse.views import Window

CHECK: Final = "conditioned_look"
BACKDROP_TOLERANCE = 24  # a pixel this far (max over RGB) from the border's median colour is foreground
MIN_FOREGROUND = 0.02  # under this share of the image the whole image is used
SIDE = 320  # both sides are compared at this longer side at most (embedders take 64-336 px)


def _bytes(image: Image.Image) -> bytes:
    out = io.BytesIO()
    image.save(out, "BMP")  # lossless and fast: these bytes only go to the embedder
    return out.getvalue()


def foreground(data: bytes) -> bytes:
    """Image bytes of the box around the pixels that differ from the backdrop (the median colour
    of the image's outermost pixels), at most `SIDE` px; the whole image when almost nothing
    differs."""
    with Image.open(io.BytesIO(data)) as img:
        img.draft("RGB", (SIDE, SIDE))
        rgb = img.convert("RGB")
    if max(rgb.size) > SIDE:
        rgb.thumbnail((SIDE, SIDE), Image.Resampling.BOX)
    pixels = np.asarray(rgb, dtype=np.int16)
    border = np.concatenate([pixels[0], pixels[-1], pixels[:, 0], pixels[:, -1]])
    backdrop = np.median(border, axis=0)
    differs = np.abs(pixels - backdrop).max(axis=2) > BACKDROP_TOLERANCE
    ys, xs = np.nonzero(differs)
    if len(xs) < MIN_FOREGROUND * differs.size:
        return _bytes(rgb)
    return _bytes(rgb.crop((int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1)))


def crop(data: bytes, bbox: str) -> bytes:
    """Image bytes of the box "x0,y0,x1,y1" of `data`."""
    x0, y0, x1, y1 = (int(v) for v in bbox.split(","))
    with Image.open(io.BytesIO(data)) as img:
        return _bytes(img.convert("RGB").crop((x0, y0, x1, y1)))


@dataclass(frozen=True, slots=True)
class Look:
    generation_id: str
    sha256: str  # the generated image
    bbox: str  # "" (the whole image) or the garment's box
    product_key: str


@dataclass(slots=True)
class LookCheckResult:
    method: str
    looks: int = 0
    checked: int = 0
    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped_existing: int = 0
    failures: list[str] = field(default_factory=list)  # "<sha256>|<bbox> <product> <score>"


def conditioned_looks(lake: Lake, window: Window | None = None) -> list[Look]:
    """Every look of an ok generation that shows a product it was conditioned on; with `window`,
    of the generations first seen in it only (read with a filter pushed into the scan, as are
    the annotations of their images: never the lake's whole history)."""
    where = window.expression() if window is not None else None
    generations = [Generation.from_row(r) for r in lake.read("generations", where=where).to_pylist()]
    shas = sorted({g.sha256 for g in generations if isinstance(g, Generation) and g.sha256})
    crops: dict[str, list[Annotation]] = defaultdict(list)
    among = pc.field("sha256").isin(pa.array(shas, pa.string()))
    for row in lake.read("annotations", where=among).to_pylist():
        record = Annotation.from_row(row)
        assert isinstance(record, Annotation)
        if record.task == "attributes" and record.status == "ok" and record.bbox and record.item_ref:
            crops[record.sha256].append(record)
    looks: set[Look] = set()
    for record in generations:
        assert isinstance(record, Generation)
        keys = {c["product_key"] for c in record.conditioning()}
        if record.status != "ok" or not record.sha256 or not keys:
            continue
        if record.subset == "aigen_studio":
            looks.update(Look(record.generation_id, record.sha256, "", key) for key in keys)
            continue
        for box in json.loads(record.layout_json or "[]"):
            if box["item_id"] in keys:
                bbox = ",".join(str(int(v)) for v in box["bbox"])
                looks.add(Look(record.generation_id, record.sha256, bbox, box["item_id"]))
        for ann in crops.get(record.sha256, []):
            if ann.item_ref in keys:
                looks.add(Look(record.generation_id, record.sha256, ann.bbox, str(ann.item_ref)))
    return sorted(looks, key=lambda look: (look.sha256, look.bbox, look.product_key))


def product_photos(lake: Lake, keys: set[str]) -> dict[str, list[str]]:
    """The ok photos of these products, in table order (a filter pushed into the scan)."""
    photos: dict[str, list[str]] = defaultdict(list)
    if not keys:
        return photos
    where = (pc.field("owner_kind") == "product") & pc.field("owner_id").isin(
        pa.array(sorted(keys), pa.string())
    )
    rows = lake.read("images", columns=["owner_id", "status", "sha256"], where=where).to_pylist()
    for row in rows:
        if row["status"] == "ok" and row["sha256"] and row["sha256"] not in photos[row["owner_id"]]:
            photos[row["owner_id"]].append(row["sha256"])
    return photos


def run_look_check(
    lake: Lake,
    settings: EvidenceSettings,
    run_id: str,
    *,
    embedder: ImageEmbedder | None = None,
    window: Window | None = None,
) -> LookCheckResult:
    """Check every conditioned look not yet checked with the configured embedder and threshold;
    with `window` (a run's), those of the generations first seen in it: the only ones its release
    can publish."""
    threshold = settings.look_threshold
    embedder = embedder or load_embedder(settings.conditioned_embedder)
    method = f"{embedder.name}@{threshold:g}"
    result = LookCheckResult(method=method)
    looks = conditioned_looks(lake, window)
    result.looks = len(looks)
    among = pc.field("sha256").isin(pa.array(sorted({look.sha256 for look in looks}), pa.string()))
    stored = lake.read(EvidenceCheck.__table__, where=among).to_pylist()
    done, attempts = evidence_todo((EvidenceCheck.from_row(r) for r in stored), CHECK, method)
    todo = [look for look in looks if (look.sha256, look.bbox) not in done]
    result.skipped_existing = len(looks) - len(todo)
    photos = product_photos(lake, {look.product_key for look in todo})
    vectors: dict[str, np.ndarray] = {}

    def embed(names: Sequence[str], images: Sequence[bytes]) -> None:
        if names:
            for name, vector in zip(names, embedder.embed([foreground(b) for b in images]), strict=True):
                vectors[name] = vector

    wanted = sorted({sha for look in todo for sha in photos.get(look.product_key, [])})
    embed(wanted, [lake.get_verified_image(sha) for sha in wanted])
    rows = []
    for look in todo:
        row = EvidenceCheck(
            sha256=look.sha256, bbox=look.bbox, check=CHECK, method=method, status="error",
            generation_id=look.generation_id, expected=look.product_key, threshold=threshold, run_id=run_id,
            attempt=attempts.get((look.sha256, look.bbox), 0),
        )  # fmt: skip
        shas = photos.get(look.product_key, [])
        if not shas:
            row.detail = f"no photo of {look.product_key} in the lake"
            result.errors += 1
            rows.append(row)
            continue
        image = lake.get_verified_image(look.sha256)
        name = f"{look.sha256}|{look.bbox}"
        embed([name], [crop(image, look.bbox) if look.bbox else image])
        score = max(float(np.dot(vectors[name], vectors[sha])) for sha in shas)
        row.score = round(score, 4)
        row.status = "pass" if score >= threshold else "fail"
        row.detail = f"best cosine {score:.4f} over {len(shas)} photo(s); threshold {threshold:g}"
        result.checked += 1
        if row.status == "pass":
            result.passed += 1
        else:
            result.failed += 1
            result.failures.append(f"{name} {look.product_key} {score:.4f}")
        rows.append(row)
    lake.append(rows)
    return result
