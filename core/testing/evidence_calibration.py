"""Labelled sets for the evidence checks' thresholds, drawn offline with PIL (issue 22 §4 phase B).

Two sets, each split by seed into a calibration split (the only one a threshold is chosen on)
and a held-out split (the only one the tests score):

- **photo type**: studio and flat-lay product shots (a plain, gradient, two-tone, vignetted or
  noisy backdrop, soft shadows, flat props, a garment large enough to touch the frame) labelled
  `True`; the same garments in scenes (a street of facades and pavement, a room with wallpaper
  and floorboards, a park of foliage, a brick wall, a market of clutter) labelled `False`. The
  score is `warehouse.photo_type.flat_border_share`.
- **conditioned look**: a product's studio photo against a look showing the same garment
  (re-framed, re-lit, on another plain or scene backdrop, slightly blurred, as a conditioned
  generator returns it) labelled `True`, and against a look of another garment of the same kind
  (another colour, or the same colour in another pattern) labelled `False`. The score is the
  cosine of the configured embedder (the weight-free baseline by default).

`choose_threshold` picks, on calibration scores only, the threshold with the highest recall
whose precision is at least `min_precision` (else the best F1); `score_at` measures precision
and recall of `score >= threshold` on any split.
"""

from __future__ import annotations

import io
import itertools
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw, ImageEnhance, ImageFilter

from lookbench_live.testing.calibration import COLOURS, PATTERNS, GarmentSpec, _pattern, _silhouette

SIZE = (240, 300)
LOOK_SIZE = (160, 200)  # the baseline embeds at 64 px: smaller looks cost less and score the same
CALIBRATION_SEEDS = range(0, 60)
HELD_OUT_SEEDS = range(1000, 1060)
STUDIO_FAMILIES = ("plain", "gradient", "two_tone", "vignette", "flat_props", "close", "noisy")
SCENE_FAMILIES = ("street", "room", "park", "brick", "market")
LIGHT = [(250, 250, 250), (236, 236, 236), (244, 238, 226), (226, 232, 240), (238, 226, 230), (214, 214, 216)]


@dataclass(frozen=True, slots=True)
class Labelled:
    family: str
    positive: bool
    score: float


@dataclass(frozen=True, slots=True)
class Scored:
    threshold: float
    precision: float
    recall: float
    positives: int
    negatives: int


def _spec(rng: random.Random) -> GarmentSpec:
    return GarmentSpec(
        rng.choice(("dress", "shirt", "pants")),
        rng.choice(tuple(COLOURS)),
        rng.choice(PATTERNS),
        "round",
        rng.choice(("none", "short", "long")),
        rng.choice((0.85, 0.95, 1.0)),
        rng.randrange(1 << 30),
    )


def garment(spec: GarmentSpec, size: tuple[int, int]) -> tuple[Image.Image, Image.Image]:
    """The garment's fabric and its mask (L), drawn to fill `size`."""
    mask = Image.new("L", size, 0)
    ImageDraw.Draw(mask).polygon(_silhouette(spec, *size), fill=255)
    fabric = _pattern(spec, size, COLOURS[spec.colour], random.Random(spec.seed))
    return fabric, mask.filter(ImageFilter.GaussianBlur(0.8))


def _place(
    canvas: Image.Image, spec: GarmentSpec, rng: random.Random, scale: float, shadow: bool = True
) -> Image.Image:
    w, h = canvas.size
    gw, gh = round(w * scale), round(h * scale)
    fabric, mask = garment(spec, (gw, gh))
    x = round((w - gw) / 2 + rng.uniform(-0.08, 0.08) * w)
    y = round((h - gh) / 2 + rng.uniform(-0.06, 0.06) * h)
    if shadow:
        soft = mask.filter(ImageFilter.GaussianBlur(6)).point(lambda v: v // 4)
        canvas.paste((110, 110, 110), (x + 6, y + 8), soft)
    canvas.paste(fabric, (x, y), mask)
    return canvas


def _gradient(size: tuple[int, int], top: tuple[int, ...], bottom: tuple[int, ...]) -> Image.Image:
    ramp = Image.linear_gradient("L").resize(size)
    return Image.composite(Image.new("RGB", size, bottom), Image.new("RGB", size, top), ramp)


def _noise(image: Image.Image, sigma: float, rng: random.Random) -> Image.Image:
    gen = np.random.default_rng(rng.randrange(1 << 32))
    pixels = np.asarray(image, dtype=np.float32) + gen.normal(0, sigma, (image.height, image.width, 1))
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), "RGB")


def _jpeg(image: Image.Image, quality: int) -> bytes:
    out = io.BytesIO()
    image.convert("RGB").save(out, "JPEG", quality=quality)
    return out.getvalue()


def studio_photo(family: str, spec: GarmentSpec, rng: random.Random, size: tuple[int, int] = SIZE) -> bytes:
    """A studio or flat-lay product shot of `spec` (a family of `STUDIO_FAMILIES`)."""
    w, h = size
    tone = rng.choice(LIGHT)
    if family == "gradient":
        canvas = _gradient(size, tone, tuple(max(0, c - rng.randint(15, 45)) for c in tone))
    else:
        canvas = Image.new("RGB", size, tone)
    d = ImageDraw.Draw(canvas)
    if family == "two_tone":  # wall and floor, a seamless paper edge
        split, slope = rng.randint(h // 2, 4 * h // 5), rng.randint(-h // 8, h // 8)
        d.polygon(
            [(0, split), (w, split + slope), (w, h), (0, h)],
            fill=tuple(c - rng.randint(20, 50) for c in tone),
        )
    if family == "flat_props":  # flat-lay props: solid shapes, as on a styled table
        for _ in range(rng.randint(2, 4)):
            x, y, r = rng.randint(0, w), rng.randint(0, h), rng.randint(12, 40)
            d.ellipse([x - r, y - r, x + r, y + r], fill=tuple(rng.randint(90, 235) for _ in range(3)))
    scale = rng.uniform(1.0, 1.25) if family == "close" else rng.uniform(0.7, 0.92)
    canvas = _place(canvas, spec, rng, scale)
    if family == "vignette":
        light = (
            Image.radial_gradient("L").resize(size).point(lambda v: min(255, v * rng.randint(50, 100) // 255))
        )
        canvas = Image.composite(Image.new("RGB", size, (40, 40, 40)), canvas, light)
    if family == "noisy":
        canvas = _noise(canvas, rng.uniform(2.0, 5.0), rng)
    return _jpeg(canvas, rng.randint(80, 94))


def _windows(d: ImageDraw.ImageDraw, box: tuple[int, int, int, int], rng: random.Random) -> None:
    x0, y0, x1, y1 = box
    step_x, step_y = rng.randint(12, 22), rng.randint(14, 24)
    glass = tuple(rng.randint(30, 120) for _ in range(3))
    for y in range(y0 + 4, y1 - 8, step_y):
        for x in range(x0 + 3, x1 - 6, step_x):
            d.rectangle([x, y, x + step_x // 2, y + step_y // 2], fill=glass)


def scene_photo(family: str, spec: GarmentSpec, rng: random.Random, size: tuple[int, int] = SIZE) -> bytes:
    """The garment `spec` in a scene (a family of `SCENE_FAMILIES`): not a studio photo."""
    w, h = size
    canvas = Image.new("RGB", size, (128, 128, 128))
    d = ImageDraw.Draw(canvas)
    if family == "street":
        canvas.paste(_gradient((w, h // 3), (120, 170, 230), (200, 220, 240)), (0, 0))
        x = 0
        while x < w:
            bw = rng.randint(40, 90)
            top = rng.randint(h // 10, h // 3)
            d.rectangle([x, top, x + bw, h], fill=tuple(rng.randint(70, 200) for _ in range(3)))
            _windows(d, (x, top, x + bw, h * 3 // 4), rng)
            x += bw
        for y in range(h * 3 // 4, h, 8):  # paving
            d.line([(0, y), (w, y)], fill=(90, 90, 95), width=1)
        for x in range(0, w, 14):
            d.line([(x, h * 3 // 4), (x - 20, h)], fill=(95, 95, 100), width=1)
    elif family == "room":
        wall = tuple(rng.randint(150, 230) for _ in range(3))
        d.rectangle([0, 0, w, h], fill=wall)
        accent = tuple(max(0, c - 60) for c in wall)
        step = rng.randint(6, 12)
        for x in range(0, w, step):  # wallpaper
            d.line([(x, 0), (x, h * 2 // 3)], fill=accent, width=2)
        for y in range(h * 2 // 3, h, 7):  # floorboards
            d.line([(0, y), (w, y)], fill=(120, 80, 50), width=3)
        d.rectangle(
            [rng.randint(0, w // 2), h // 2, w, h * 5 // 6],
            fill=tuple(rng.randint(40, 160) for _ in range(3)),
        )
    elif family == "park":
        d.rectangle([0, 0, w, h], fill=(70, 120, 60))
        for _ in range(900):
            x, y, r = rng.randint(0, w), rng.randint(0, h), rng.randint(2, 7)
            d.ellipse(
                [x - r, y - r, x + r, y + r],
                fill=(rng.randint(20, 90), rng.randint(90, 180), rng.randint(20, 80)),
            )
    elif family == "brick":
        mortar = (200, 195, 185)
        d.rectangle([0, 0, w, h], fill=mortar)
        bh, bw = rng.randint(8, 12), rng.randint(20, 30)
        for row, y in enumerate(range(0, h, bh)):
            for x in range(-(row % 2) * bw // 2, w, bw):
                red = (rng.randint(140, 180), rng.randint(50, 80), rng.randint(40, 60))
                d.rectangle([x + 1, y + 1, x + bw - 2, y + bh - 2], fill=red)
    else:  # market: clutter
        d.rectangle([0, 0, w, h], fill=tuple(rng.randint(80, 180) for _ in range(3)))
        for _ in range(160):
            x, y, r = rng.randint(0, w), rng.randint(0, h), rng.randint(3, 16)
            fill = tuple(rng.randint(0, 255) for _ in range(3))
            if rng.random() < 0.5:
                d.rectangle([x - r, y - r, x + r, y + r], fill=fill)
            else:
                d.ellipse([x - r, y - r, x + r, y + r], fill=fill)
    canvas = _place(canvas, spec, rng, rng.uniform(0.55, 0.8), shadow=False)
    return _jpeg(canvas, rng.randint(80, 94))


def photo_type_set(seeds: Sequence[int], score: Callable[[bytes], float]) -> list[Labelled]:
    """One studio shot and one scene per seed and family (the families round-robin over seeds)."""
    out = []
    for seed in seeds:
        rng = random.Random(f"photo-type:{seed}")
        spec = _spec(rng)
        studio = STUDIO_FAMILIES[seed % len(STUDIO_FAMILIES)]
        scene = SCENE_FAMILIES[seed % len(SCENE_FAMILIES)]
        out.append(Labelled(studio, True, score(studio_photo(studio, spec, rng))))
        out.append(Labelled(scene, False, score(scene_photo(scene, spec, rng))))
    return out


def look_of(spec: GarmentSpec, rng: random.Random, size: tuple[int, int] = SIZE) -> bytes:
    """A look showing the garment `spec` as a conditioned generator returns it: re-framed, re-lit,
    on another light backdrop (a studio query, or a garment's cell of a composed street scene, as
    `generation/compose.py` pastes it), a little soft."""
    canvas = Image.new("RGB", size, rng.choice(LIGHT))
    canvas = _place(canvas, spec, rng, rng.uniform(0.7, 1.0))
    canvas = ImageEnhance.Brightness(canvas).enhance(rng.uniform(0.88, 1.12))
    canvas = ImageEnhance.Color(canvas).enhance(rng.uniform(0.85, 1.15))
    canvas = canvas.filter(ImageFilter.GaussianBlur(rng.uniform(0.3, 1.2)))
    return _jpeg(canvas, rng.randint(80, 94))


def _other(spec: GarmentSpec, rng: random.Random) -> GarmentSpec:
    """Another garment of the same kind: another colour, or the same colour in another pattern."""
    if rng.random() < 0.5:
        colour = rng.choice([c for c in COLOURS if c != spec.colour])
        return GarmentSpec(
            spec.kind,
            colour,
            rng.choice(PATTERNS),
            "round",
            spec.sleeves,
            spec.length,
            rng.randrange(1 << 30),
        )
    pattern = rng.choice([p for p in PATTERNS if p != spec.pattern])
    return GarmentSpec(
        spec.kind, spec.colour, pattern, "round", spec.sleeves, spec.length, rng.randrange(1 << 30)
    )


def look_pairs(seeds: Sequence[int]) -> list[tuple[bool, bytes, bytes]]:
    """(same product, product photo, look) per seed: one matching and one non-matching pair."""
    out = []
    for seed in seeds:
        rng = random.Random(f"look:{seed}")
        spec = _spec(rng)
        product = studio_photo("plain", spec, rng, LOOK_SIZE)
        out.append((True, product, look_of(spec, rng, LOOK_SIZE)))
        out.append((False, product, look_of(_other(spec, rng), rng, LOOK_SIZE)))
    return out


def look_set(
    seeds: Sequence[int],
    embed: Callable[[Sequence[bytes]], np.ndarray],
    prepare: Callable[[bytes], bytes] = lambda data: data,
) -> list[Labelled]:
    """Cosines of the pairs of `look_pairs(seeds)` under `embed` (rows of unit length), each image
    first passed through `prepare` (the check's own `foreground`)."""
    pairs = look_pairs(seeds)
    vectors = embed([prepare(image) for _, a, b in pairs for image in (a, b)])
    out = []
    for k, (same, _, _) in enumerate(pairs):
        cosine = float(np.dot(vectors[2 * k], vectors[2 * k + 1]))
        out.append(Labelled("same_product" if same else "other_product", same, round(cosine, 4)))
    return out


def score_at(items: Sequence[Labelled], threshold: float) -> Scored:
    """Precision and recall of the positive class under `score >= threshold`."""
    positives = [i for i in items if i.positive]
    negatives = [i for i in items if not i.positive]
    tp = sum(i.score >= threshold for i in positives)
    fp = sum(i.score >= threshold for i in negatives)
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / len(positives) if positives else 0.0
    return Scored(threshold, round(precision, 4), round(recall, 4), len(positives), len(negatives))


def choose_threshold(items: Sequence[Labelled], *, min_precision: float = 0.97) -> Scored:
    """On calibration items: the threshold (a midpoint between two observed scores) with the
    highest recall at precision >= `min_precision`; else the best F1. Ties: the higher threshold."""
    scores = sorted({i.score for i in items})
    candidates = [(a + b) / 2 for a, b in itertools.pairwise(scores)] or scores
    scored = [score_at(items, round(t, 4)) for t in candidates]
    good = [s for s in scored if s.precision >= min_precision]
    if good:
        return max(good, key=lambda s: (s.recall, s.threshold))

    def f1(s: Scored) -> float:
        return 2 * s.precision * s.recall / (s.precision + s.recall) if s.precision + s.recall else 0.0

    return max(scored, key=lambda s: (f1(s), s.threshold))
