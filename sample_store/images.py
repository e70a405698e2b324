"""Garment photos drawn with PIL, deterministically, at first use (never committed as binaries).

A product photo shows one garment of the product's category, colour, pattern, sleeve length
and neckline; its views differ (front on white, front smaller on a tinted background, a
close-up crop, the back on grey), so they are not copies of one another. A look photo shows a
figure wearing 2–3 products, and returns the pixel box of each garment (the hotspots).
"""

from __future__ import annotations

import hashlib
import io
import random
import struct
import zlib

from PIL import Image, ImageDraw, ImageFilter, ImageOps

from lookbench_live.sample_store.catalog import CATEGORIES, COLORS, ProductSpec

PHOTO_SIZE = (320, 400)
LOOK_SIZE = (480, 640)
BACKGROUNDS = [(250, 250, 250), (226, 232, 240), (240, 232, 220), (205, 205, 208)]


def _pattern_fill(
    size: tuple[int, int], color: tuple[int, int, int], pattern: str, scale: int = 1
) -> Image.Image:
    tile = Image.new("RGB", size, color)
    draw = ImageDraw.Draw(tile)
    contrast = (255, 255, 255) if sum(color) < 450 else (30, 30, 40)
    w, h = size
    step = 18 * scale
    if pattern == "stripe":
        for y in range(0, h, step):
            draw.rectangle([0, y, w, y + step // 3], fill=contrast)
    elif pattern == "check":
        for x in range(0, w, step):
            draw.rectangle([x, 0, x + step // 4, h], fill=contrast)
        for y in range(0, h, step):
            draw.rectangle([0, y, w, y + step // 4], fill=contrast)
    elif pattern == "polka dot":
        for y in range(step // 2, h, step):
            for x in range((y // step % 2) * step // 2, w, step):
                r = max(2, step // 6)
                draw.ellipse([x - r, y - r, x + r, y + r], fill=contrast)
    return tile


def garment_mask(product: ProductSpec, box: tuple[int, int, int, int], back: bool = False) -> Image.Image:
    """An L mask of the garment's silhouette inside `box` (x0, y0, x1, y1) of a canvas box-sized."""
    x0, y0, x1, y1 = box
    w, h = x1 - x0, y1 - y0
    mask = Image.new("L", (w, h), 0)
    draw = ImageDraw.Draw(mask)
    kind, _, _ = CATEGORIES[product.category]
    cx = w // 2
    if kind in ("top", "outer", "dress"):
        shoulder = int(w * 0.30)
        waist = int(w * 0.24)
        hem_w = int(w * (0.40 if kind == "dress" else 0.27 if kind == "top" else 0.30))
        top_y = int(h * 0.06)
        hem_y = h - 2
        draw.polygon(
            [(cx - shoulder, top_y), (cx + shoulder, top_y), (cx + waist, int(h * 0.45)),
             (cx + hem_w, hem_y), (cx - hem_w, hem_y), (cx - waist, int(h * 0.45))],
            fill=255,
        )  # fmt: skip
        sleeve = product.sleeve_length or "sleeveless"
        if sleeve != "sleeveless":
            length = (
                int(h * (0.28 if sleeve == "short sleeve" else 0.62))
                if kind != "dress"
                else int(h * (0.16 if sleeve == "short sleeve" else 0.4))
            )
            arm_w = max(8, int(w * 0.10))
            for side in (-1, 1):
                sx = cx + side * shoulder
                draw.polygon(
                    [(sx, top_y), (sx + side * arm_w * 1.6, top_y + 4), (sx + side * arm_w * 2.0, top_y + length),
                     (sx + side * arm_w * 0.6, top_y + length), (sx, top_y + arm_w * 2)],
                    fill=255,
                )  # fmt: skip
        neckline = "collar" if product.category == "shirt" else product.neckline
        if not back and neckline:
            neck_w = int(w * 0.09)
            if neckline == "v-neck":
                draw.polygon(
                    [(cx - neck_w, top_y), (cx + neck_w, top_y), (cx, top_y + int(h * 0.16))], fill=0
                )
            elif neckline == "crew neck":
                draw.ellipse([cx - neck_w, top_y - neck_w, cx + neck_w, top_y + neck_w], fill=0)
            elif neckline == "collar":
                draw.polygon(
                    [(cx - neck_w, top_y), (cx, top_y + int(h * 0.08)), (cx + neck_w, top_y)], fill=0
                )
                draw.polygon(
                    [
                        (cx - neck_w - 10, top_y - 2),
                        (cx - 2, top_y + int(h * 0.1)),
                        (cx - neck_w - 14, top_y + 14),
                    ],
                    fill=140,
                )
                draw.polygon(
                    [
                        (cx + neck_w + 10, top_y - 2),
                        (cx + 2, top_y + int(h * 0.1)),
                        (cx + neck_w + 14, top_y + 14),
                    ],
                    fill=140,
                )
    elif kind == "skirt":
        draw.polygon(
            [
                (cx - int(w * 0.2), 2),
                (cx + int(w * 0.2), 2),
                (cx + int(w * 0.38), h - 2),
                (cx - int(w * 0.38), h - 2),
            ],
            fill=255,
        )
    else:  # trousers, shorts
        leg = h - 2 if kind == "trousers" else int(h * 0.5)
        draw.polygon([(cx - int(w * 0.25), 2), (cx + int(w * 0.25), 2), (cx + int(w * 0.28), leg), (cx + 4, leg), (cx, int(h * 0.3)),
                      (cx - 4, leg), (cx - int(w * 0.28), leg)], fill=255)  # fmt: skip
    return mask


def paint_garment(
    canvas: Image.Image, product: ProductSpec, box: tuple[int, int, int, int], back: bool = False
) -> None:
    mask = garment_mask(product, box, back=back)
    fill = _pattern_fill(mask.size, COLORS[product.color], product.pattern)
    # A soft shade makes the garment look less flat and keeps views from being identical.
    shade = Image.linear_gradient("L").resize(mask.size).point(lambda v: 255 - v // 5)
    fill = Image.composite(fill, Image.new("RGB", mask.size, (0, 0, 0)), shade)
    canvas.paste(fill, box[:2], mask.point(lambda v: 255 if v else 0))
    if product.category == "shirt" and not back:
        collar = mask.point(lambda v: 255 if v == 140 else 0)
        canvas.paste(Image.new("RGB", mask.size, (250, 250, 250)), box[:2], collar)


def product_rng(product: ProductSpec, photo_round: int | None = None) -> random.Random:
    """A generator seeded by the product, so each product's photos are its own but reproducible;
    replaced photos (`photo_round` > 0) are new pictures of the same garment."""
    rounds = product.photo_round if photo_round is None else photo_round
    key = product.product_id if not rounds else f"{product.product_id}:r{rounds}"
    return random.Random(int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big"))


def _styling(canvas: Image.Image, rng: random.Random) -> None:
    """Props and backdrop marks that differ per product, as real studio shots do."""
    draw = ImageDraw.Draw(canvas)
    w, h = canvas.size
    # A two-tone backdrop split at a product-specific line (floor and wall, a seamless paper edge).
    split = rng.randint(h // 4, 3 * h // 4)
    slope = rng.randint(-h // 3, h // 3)
    floor = tuple(max(0, c - rng.randint(25, 70)) for c in canvas.getpixel((0, 0)))
    draw.polygon([(0, split), (w, split + slope), (w, h), (0, h)], fill=floor)
    for _ in range(rng.randint(3, 6)):
        x, y = rng.randint(0, w), rng.randint(0, h)
        r = rng.randint(20, 90)
        tone = tuple(rng.randint(90, 235) for _ in range(3))
        if rng.random() < 0.5:
            draw.ellipse([x - r, y - r, x + r, y + r], fill=tone)
        else:
            draw.rectangle([x - r, y - r // 2, x + r, y + r // 2], fill=tone)


def product_photo(product: ProductSpec, view: int, photo_round: int | None = None) -> bytes:
    """JPEG bytes of photo `view` (0-based) of a product (of its current photos, or `photo_round`)."""
    w, h = PHOTO_SIZE
    rng = product_rng(product, photo_round)
    # Per-product framing: where and how large the garment sits, and the props behind it.
    # Without it, two solid garments of one shape differ only in colour, which perceptual
    # hashes (grayscale, low frequency) rightly treat as near-duplicates.
    dx, dy = rng.randint(-55, 55), rng.randint(-30, 30)
    shrink = rng.randint(0, 40)
    tilt = rng.uniform(-7, 7)
    background = BACKGROUNDS[(view + rng.randrange(len(BACKGROUNDS))) % len(BACKGROUNDS)]
    if view == 0:
        box = (30, 30, w - 30, h - 20)
    elif view == 1:
        box = (60, 60, w - 50, h - 40)
    elif view == 2:  # close-up: the garment drawn larger, cropped by the frame
        box = (-60, -20, w + 60, h + 160)
    else:
        box = (40, 40, w - 40, h - 30)
    box = (box[0] + dx + shrink, box[1] + dy + shrink, box[2] + dx - shrink, box[3] + dy - shrink // 2)
    big = Image.new("RGB", (w + 240, h + 240), background)
    _styling(big, random.Random(rng.random() + view))
    shifted = (box[0] + 120, box[1] + 120, box[2] + 120, box[3] + 120)
    paint_garment(big, product, shifted, back=view == 3)
    canvas = big.crop((120, 120, 120 + w, 120 + h))
    canvas = canvas.rotate(
        tilt + (4 if view == 1 else 0), resample=Image.Resampling.BICUBIC, fillcolor=background
    )
    if view == 1:
        pass
    if view == 3:
        canvas = canvas.filter(ImageFilter.GaussianBlur(0.8))
    out = io.BytesIO()
    canvas.save(out, "JPEG", quality=88)
    return out.getvalue()


def near_copy(data: bytes, transform: str) -> bytes:
    """An older photo re-uploaded: re-encoded, resized, mirrored or cropped by a pixel a side.

    Each stays within the dedup radius of the original (docs/dedup.md: JPEG 50, resize 50%
    and mirror copies at <= 4 bits; crops of 3% already miss half the time, so under 1%)."""
    image = Image.open(io.BytesIO(data)).convert("RGB")
    quality = 88
    if transform == "reencode":
        quality = 50
    elif transform == "resize":
        image = image.resize((image.width // 2, image.height // 2), Image.Resampling.LANCZOS)
    elif transform == "mirror":
        image = ImageOps.mirror(image)
    elif transform == "crop":
        dx, dy = max(1, image.width // 320), max(1, image.height // 320)
        image = image.crop((dx, dy, image.width - dx, image.height - dy))
    else:
        raise ValueError(f"unknown near-copy transform {transform!r}")
    out = io.BytesIO()
    image.save(out, "JPEG", quality=quality)
    return out.getvalue()


def look_photo(
    products: list[ProductSpec], variation: str | None = None
) -> tuple[bytes, list[tuple[int, int, int, int]]]:
    """JPEG bytes of a figure wearing the products, and each product's pixel box, in order.

    With `variation` (a look id), the scene is the look's own: backdrop tone and props, and
    each garment's box stretched a little. Without it, every look of a kind of garment is
    drawn in the same place on the same plain backdrop, so crops of two solid skirts of one
    shape are near copies to a perceptual hash (grayscale, low frequency): fine for the five
    core looks, not for a new month of looks that must not repeat earlier releases."""
    w, h = LOOK_SIZE
    rng = random.Random(f"look:{variation}") if variation else None
    backdrop = (236, 230, 222) if rng is None else tuple(rng.randint(150, 245) for _ in range(3))
    canvas = Image.new("RGB", (w, h), backdrop)
    if rng is not None:
        _styling(canvas, rng)
        for _ in range(rng.randint(4, 8)):  # more props where garments sit: crops include them
            x, y, r = rng.randint(0, w), rng.randint(120, 600), rng.randint(15, 60)
            tone = tuple(rng.randint(40, 250) for _ in range(3))
            ImageDraw.Draw(canvas).rectangle([x - r, y - r // 2, x + r, y + r], fill=tone)
    draw = ImageDraw.Draw(canvas)
    skin = (224, 184, 150)
    draw.ellipse([w // 2 - 36, 30, w // 2 + 36, 110], fill=skin)  # head
    draw.rectangle([w // 2 - 12, 105, w // 2 + 12, 135], fill=skin)  # neck
    draw.rectangle([w // 2 - 60, 560, w // 2 - 20, 620], fill=skin)  # legs
    draw.rectangle([w // 2 + 20, 560, w // 2 + 60, 620], fill=skin)
    boxes: list[tuple[int, int, int, int]] = []
    order = sorted(range(len(products)), key=lambda i: CATEGORIES[products[i].category][0] == "outer")
    placed: dict[int, tuple[int, int, int, int]] = {}
    for i in order:
        kind = CATEGORIES[products[i].category][0]
        if kind == "dress":
            box = (w // 2 - 130, 125, w // 2 + 130, 520)
        elif kind == "top":
            box = (w // 2 - 120, 125, w // 2 + 120, 345)
        elif kind == "outer":
            box = (w // 2 - 150, 120, w // 2 + 150, 400)
        else:
            box = (w // 2 - 110, 330, w // 2 + 110, 600 if kind != "shorts" else 560)
        if rng is not None:  # the look's own cut: wider or narrower, longer or shorter
            half = int((box[2] - box[0]) * rng.uniform(0.78, 1.1)) // 2
            bottom = box[1] + int((box[3] - box[1]) * rng.uniform(0.85, 1.05))
            box = (w // 2 - half, box[1], w // 2 + half, min(h - 1, bottom))
        paint_garment(canvas, products[i], box)
        placed[i] = box
    boxes = [placed[i] for i in range(len(products))]
    out = io.BytesIO()
    canvas.save(out, "JPEG", quality=88)
    return out.getvalue(), boxes


# --------------------------------------------------------------------------- broken images


def truncated_jpeg(product: ProductSpec) -> bytes:
    data = product_photo(product, 0)
    return data[: len(data) // 2]


def extreme_aspect_jpeg() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (4000, 10), (200, 30, 40)).save(out, "JPEG", quality=80)
    return out.getvalue()


def png_bomb_header(width: int = 100_000, height: int = 100_000) -> bytes:
    """A tiny PNG whose header claims `width`×`height` pixels (Pillow refuses it at open)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data))
            + kind
            + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\x00" * 16))
        + chunk(b"IEND", b"")
    )
