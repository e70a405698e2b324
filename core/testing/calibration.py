"""Labelled image pairs for choosing the Hamming radius, drawn offline with PIL.

Positives are copies of one studio product photo as the web makes them: resized, JPEG
re-encoded at several qualities, slightly cropped, mirrored, brightness-shifted, and
combinations. Negatives are distinct garments that share the kind (dress, shirt, pants), the
colour and the silhouette, and differ in pattern, neckline, sleeves or length: the hard case
for a grayscale low-frequency hash. A third family, `other_view`, is the back view of the same
garment (same pattern and silhouette, other neckline and no front details): the near-identical
views of one product that must not knock each other out.

Every image goes through the pipeline's own path (JPEG bytes, `hash_bytes`), and a pair's
distance is the pipeline's: min(d(a, b), d(a, mirror(b))).
"""

from __future__ import annotations

import io
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw, ImageEnhance, ImageFilter, ImageOps

from lookbench_live.schema.hashing import ImageHashes, fine_phash, hamming, hash_bytes

KINDS = ("dress", "shirt", "pants")
COLOURS = {
    "navy": (28, 38, 84),
    "red": (178, 32, 40),
    "black": (24, 24, 26),
    "beige": (206, 184, 150),
    "green": (46, 110, 70),
}
PATTERNS = ("solid", "stripes", "vstripes", "dots", "plaid", "floral", "chevron")
NECKLINES = ("round", "v", "square", "collar", "boat")
SLEEVES = ("none", "short", "long")
TRANSFORMS = (
    "resize50",
    "resize75",
    "resize150",
    "jpeg30",
    "jpeg50",
    "jpeg75",
    "jpeg90",
    "crop3",
    "crop6",
    "mirror",
    "brighter",
    "darker",
    "resize50+jpeg50",
    "mirror+jpeg75",
)


@dataclass(frozen=True, slots=True)
class GarmentSpec:
    kind: str
    colour: str
    pattern: str
    neckline: str
    sleeves: str
    length: float  # 0.8 .. 1.0 of the full silhouette height
    seed: int
    view: str = "front"


@dataclass(frozen=True, slots=True)
class LabelledPair:
    family: str  # positive transform name, "distinct" or "other_view"
    duplicate: bool
    distance: int  # the pipeline's pHash distance (mirror-aware)
    dhash_distance: int
    fine_distance: int = -1  # 256-bit pHash distance (mirror-aware); -1 when not computed


def _shade(base: tuple[int, int, int], factor: float) -> tuple[int, int, int]:
    return tuple(max(0, min(255, int(c * factor))) for c in base)  # type: ignore[return-value]


def _silhouette(spec: GarmentSpec, w: int, h: int) -> list[tuple[float, float]]:
    cx = w / 2
    top = h * 0.12
    bottom = top + h * 0.78 * spec.length
    if spec.kind == "pants":
        waist = w * 0.22
        return [
            (cx - waist, top),
            (cx + waist, top),
            (cx + waist * 1.25, bottom),
            (cx + waist * 0.15, bottom),
            (cx, top + h * 0.3),
            (cx - waist * 0.15, bottom),
            (cx - waist * 1.25, bottom),
        ]
    shoulder = w * 0.2
    waist = w * (0.14 if spec.kind == "dress" else 0.19)
    hem = w * (0.3 if spec.kind == "dress" else 0.2)
    if spec.kind == "shirt":
        bottom = top + h * 0.55 * spec.length
    waist_y = top + (bottom - top) * 0.42
    return [
        (cx - shoulder, top),
        (cx + shoulder, top),
        (cx + waist, waist_y),
        (cx + hem, bottom),
        (cx - hem, bottom),
        (cx - waist, waist_y),
    ]


def _noise(size: tuple[int, int], sigma: float, rng: random.Random) -> Image.Image:
    """Seeded grey Gaussian noise around mid-grey (Pillow's effect_noise is not seedable)."""
    gen = np.random.default_rng(rng.randrange(1 << 32))
    values = np.clip(128 + gen.normal(0, sigma, (size[1], size[0])), 0, 255).astype(np.uint8)
    return Image.fromarray(values, "L").convert("RGB")


def _pattern(
    spec: GarmentSpec, size: tuple[int, int], base: tuple[int, int, int], rng: random.Random
) -> Image.Image:
    w, h = size
    accent = _shade(base, 1.7) if sum(base) < 300 else _shade(base, 0.55)
    layer = Image.new("RGB", size, base)
    d = ImageDraw.Draw(layer)
    step = max(8, w // rng.randint(14, 26))
    if spec.pattern == "stripes":
        for y in range(0, h, step * 2):
            d.rectangle([0, y, w, y + step], fill=accent)
    elif spec.pattern == "vstripes":
        for x in range(0, w, step * 2):
            d.rectangle([x, 0, x + step // 2, h], fill=accent)
    elif spec.pattern == "dots":
        for y in range(0, h, step * 2):
            for x in range((y // step) % 2 * step, w, step * 2):
                d.ellipse([x, y, x + step * 0.7, y + step * 0.7], fill=accent)
    elif spec.pattern == "plaid":
        for y in range(0, h, step * 3):
            d.rectangle([0, y, w, y + step // 2], fill=accent)
        for x in range(0, w, step * 3):
            d.rectangle([x, 0, x + step // 3, h], fill=_shade(accent, 0.9))
    elif spec.pattern == "floral":
        for _ in range(w * h // (step * step * 3)):
            x, y = rng.uniform(0, w), rng.uniform(0, h)
            r = step * rng.uniform(0.3, 0.7)
            for k in range(5):
                a = k * 2 * math.pi / 5
                d.ellipse(
                    [
                        x + r * math.cos(a) - r / 2,
                        y + r * math.sin(a) - r / 2,
                        x + r * math.cos(a) + r / 2,
                        y + r * math.sin(a) + r / 2,
                    ],
                    fill=accent,
                )
    elif spec.pattern == "chevron":
        for y in range(-h, h, step * 2):
            d.line(
                [(x, y + abs((x % (step * 4)) - step * 2)) for x in range(0, w + step, step)],
                fill=accent,
                width=step // 2,
            )
    # Woven texture: fine noise that JPEG and resizing mostly erase, as in real photos.
    return Image.blend(layer, _noise(size, 18, rng), 0.06)


def draw_garment(spec: GarmentSpec, size: tuple[int, int] = (800, 1000)) -> Image.Image:
    """A studio product photo: gradient backdrop, shaded garment, details, soft shadow, noise."""
    rng = random.Random(spec.seed)
    w, h = size
    backdrop = Image.linear_gradient("L").resize(size).point(lambda v: 236 + v // 24)
    photo = Image.merge("RGB", (backdrop, backdrop, backdrop))
    outline = _silhouette(spec, w, h)
    mask = Image.new("L", size, 0)
    md = ImageDraw.Draw(mask)
    md.polygon(outline, fill=255)
    cx, top = w / 2, h * 0.12
    if spec.kind != "pants" and spec.sleeves != "none":
        reach = h * (0.18 if spec.sleeves == "short" else 0.42)
        for side in (-1, 1):
            sx = cx + side * w * 0.2
            md.polygon(
                [
                    (sx, top),
                    (sx + side * w * 0.12, top + reach),
                    (sx + side * w * 0.05, top + reach + h * 0.02),
                    (sx - side * w * 0.02, top + h * 0.1),
                ],
                fill=255,
            )
    # The neckline is cut out of the garment (back views sit higher and plainer).
    neck_w = w * (0.07 if spec.view == "back" else 0.09)
    neck_d = h * (
        0.03 if spec.view == "back" else {"v": 0.13, "square": 0.07, "boat": 0.025}.get(spec.neckline, 0.06)
    )
    if spec.kind != "pants":
        if spec.neckline == "v" and spec.view == "front":
            md.polygon([(cx - neck_w, top - 1), (cx + neck_w, top - 1), (cx, top + neck_d)], fill=0)
        elif spec.neckline == "square" and spec.view == "front":
            md.rectangle([cx - neck_w, top - 1, cx + neck_w, top + neck_d], fill=0)
        else:
            md.ellipse(
                [
                    cx - neck_w * (1.6 if spec.neckline == "boat" else 1),
                    top - neck_d,
                    cx + neck_w * (1.6 if spec.neckline == "boat" else 1),
                    top + neck_d,
                ],
                fill=0,
            )
    mask = mask.filter(ImageFilter.GaussianBlur(1.2))
    base = COLOURS[spec.colour]
    fabric = _pattern(spec, size, base, rng)
    # Light from the upper left: the garment darkens towards the lower right, as under softboxes.
    light = Image.radial_gradient("L").resize((w * 2, h * 2)).crop((w // 3, h // 4, w // 3 + w, h // 4 + h))
    fabric = Image.composite(fabric, ImageEnhance.Brightness(fabric).enhance(0.72), ImageOps.invert(light))
    shadow = mask.filter(ImageFilter.GaussianBlur(18)).point(lambda v: v // 5)
    photo.paste((150, 150, 150), (14, 18), shadow)
    photo.paste(fabric, (0, 0), mask)
    d = ImageDraw.Draw(photo)
    if spec.view == "front" and spec.kind != "pants":
        if spec.neckline == "collar":
            d.polygon(
                [(cx - neck_w * 1.6, top - 4), (cx, top + h * 0.05), (cx - neck_w * 0.3, top + h * 0.07)],
                fill=_shade(base, 1.3),
            )
            d.polygon(
                [(cx + neck_w * 1.6, top - 4), (cx, top + h * 0.05), (cx + neck_w * 0.3, top + h * 0.07)],
                fill=_shade(base, 1.3),
            )
        if spec.kind == "shirt":
            for k in range(5):
                y = top + h * 0.09 + k * h * 0.07
                d.ellipse([cx - 6, y - 6, cx + 6, y + 6], fill=(235, 235, 225))
    if spec.kind == "pants" and spec.view == "front":
        d.rectangle([cx - w * 0.22, top, cx + w * 0.22, top + h * 0.04], fill=_shade(base, 0.8))
        d.line([(cx, top + h * 0.04), (cx, top + h * 0.22)], fill=_shade(base, 0.6), width=3)
    # Each product is shot on its own day: placement, zoom and tilt differ a little between
    # products, while a product's front and back come from the same set-up (same seed).
    place = random.Random(spec.seed ^ 0x5EED)
    zoom = place.uniform(0.96, 1.04)
    photo = photo.rotate(
        place.uniform(-1.5, 1.5),
        Image.Resampling.BICUBIC,
        fillcolor=(240, 240, 240),
        translate=(place.uniform(-0.02, 0.02) * w, place.uniform(-0.02, 0.02) * h),
    )
    zw, zh = round(w / zoom), round(h / zoom)
    photo = photo.crop(((w - zw) // 2, (h - zh) // 2, (w - zw) // 2 + zw, (h - zh) // 2 + zh)).resize(size)
    return Image.blend(photo, _noise(size, 40, rng), 0.025)


def jpeg(image: Image.Image, quality: int = 92) -> bytes:
    out = io.BytesIO()
    image.save(out, "JPEG", quality=quality)
    return out.getvalue()


def transform(image: Image.Image, name: str) -> bytes:
    """The JPEG bytes of one positive copy (`TRANSFORMS`); `+` chains steps."""
    quality = 92
    for step in name.split("+"):
        w, h = image.size
        if step.startswith("resize"):
            scale = int(step[6:]) / 100
            image = image.resize(
                (max(8, round(w * scale)), max(8, round(h * scale))), Image.Resampling.LANCZOS
            )
        elif step.startswith("jpeg"):
            quality = int(step[4:])
        elif step.startswith("crop"):
            m = int(step[4:]) / 100
            image = image.crop((round(w * m), round(h * m), round(w * (1 - m)), round(h * (1 - m))))
        elif step == "mirror":
            image = ImageOps.mirror(image)
        elif step == "brighter":
            image = ImageEnhance.Brightness(image).enhance(1.15)
        elif step == "darker":
            image = ImageEnhance.Brightness(image).enhance(0.85)
        else:
            raise ValueError(f"unknown transform {step!r}")
    return jpeg(image, quality)


def garment_specs(
    per_group: int = 4,
    *,
    kinds: tuple[str, ...] = KINDS,
    colours: tuple[str, ...] | None = None,
    seed: int = 0,
) -> list[GarmentSpec]:
    """Groups of `per_group` distinct garments sharing kind and colour (and so silhouette)."""
    rng = random.Random(seed)
    specs: list[GarmentSpec] = []
    for kind in kinds:
        for colour in colours or tuple(COLOURS):
            # One silhouette per group (kind, length, sleeves); pattern and neckline differ.
            patterns = rng.sample(PATTERNS, k=min(per_group, len(PATTERNS)))
            length, sleeves = rng.choice((0.85, 0.95, 1.0)), rng.choice(SLEEVES)
            for k in range(per_group):
                specs.append(
                    GarmentSpec(
                        kind,
                        colour,
                        patterns[k % len(patterns)],
                        rng.choice(NECKLINES),
                        sleeves,
                        length,
                        rng.randrange(1 << 30),
                    )
                )
    return specs


def _distance(a: ImageHashes, b: ImageHashes) -> int:
    return min(hamming(a.phash, b.phash), hamming(a.phash, b.phash_mirror))


def labelled_pairs(
    specs: list[GarmentSpec],
    *,
    size: tuple[int, int] = (800, 1000),
    transforms: tuple[str, ...] = TRANSFORMS,
    fine: bool = False,
) -> Iterator[LabelledPair]:
    """Positive pairs (each garment with each transform), `other_view` pairs (front vs back),
    and negative pairs (every two garments of one kind and colour). `fine` adds the 256-bit
    pHash distance to positive and `other_view` pairs (what the same-owner rule uses)."""
    originals: dict[GarmentSpec, ImageHashes] = {}

    def pair(family: str, duplicate: bool, a: bytes, b: bytes) -> LabelledPair:
        ha, hb = hash_bytes(a), hash_bytes(b)
        fine_distance = -1
        if fine:
            fa, fb = fine_phash(a), fine_phash(b)
            fine_distance = min(hamming(fa[0], fb[0]), hamming(fa[0], fb[1]))
        return LabelledPair(family, duplicate, _distance(ha, hb), hamming(ha.dhash, hb.dhash), fine_distance)

    for spec in specs:
        photo = draw_garment(spec, size)
        own = jpeg(photo)
        originals[spec] = hash_bytes(own)
        for name in transforms:
            yield pair(name, True, own, transform(photo, name))
        back = jpeg(draw_garment(GarmentSpec(**{**_fields(spec), "view": "back"}), size))
        yield pair("other_view", False, own, back)
    groups: dict[tuple[str, str], list[GarmentSpec]] = {}
    for spec in specs:
        groups.setdefault((spec.kind, spec.colour), []).append(spec)
    for members in groups.values():
        for i, a in enumerate(members):
            for b in members[i + 1 :]:
                ha, hb = originals[a], originals[b]
                yield LabelledPair("distinct", False, _distance(ha, hb), hamming(ha.dhash, hb.dhash))


def _fields(spec: GarmentSpec) -> dict[str, object]:
    return {name: getattr(spec, name) for name in GarmentSpec.__slots__}


@dataclass(frozen=True, slots=True)
class CurvePoint:
    radius: int
    precision: float
    recall: float
    false_positives: int
    other_view_merged: int


def curve(pairs: list[LabelledPair], radii: range = range(17)) -> list[CurvePoint]:
    """Precision and recall of `distance <= radius` over positives and `distinct` negatives;
    `other_view_merged` counts the back views a radius would merge with their front."""
    positives = [p for p in pairs if p.duplicate]
    negatives = [p for p in pairs if p.family == "distinct"]
    views = [p for p in pairs if p.family == "other_view"]
    points = []
    for r in radii:
        tp = sum(p.distance <= r for p in positives)
        fp = sum(p.distance <= r for p in negatives)
        precision = tp / (tp + fp) if tp + fp else 1.0
        recall = tp / len(positives) if positives else 0.0
        points.append(CurvePoint(r, precision, recall, fp, sum(p.distance <= r for p in views)))
    return points
