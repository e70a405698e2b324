"""Image bytes for the ingestion tests: good images and the bad inputs of docs/reliability.md I1–I10."""

from __future__ import annotations

import io
import struct
import zlib

from PIL import Image


def jpeg(
    width: int = 200, height: int = 240, color: tuple[int, int, int] = (180, 40, 40), **save: object
) -> bytes:
    image = Image.new("RGB", (width, height), color)
    # A gradient band so hashes are not all zero.
    for x in range(0, width, 4):
        for y in range(height // 3, height // 2):
            image.putpixel((x, y), (x % 256, y % 256, 90))
    out = io.BytesIO()
    image.save(out, "JPEG", quality=85, **save)
    return out.getvalue()


def encoded(fmt: str, width: int = 120, height: int = 120, **save: object) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (20, 120, 200)).save(out, fmt, **save)
    return out.getvalue()


def _chunk(kind: bytes, data: bytes) -> bytes:
    return (
        struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    )


def png_claiming(width: int, height: int) -> bytes:
    """A tiny PNG whose header claims `width`×`height` (the decompression bomb of I1/I2)."""
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(b"\x00"))
        + _chunk(b"IEND", b"")
    )


def animated_gif(frames: int = 50, side: int = 96) -> bytes:
    images = [Image.new("P", (side, side), i % 256) for i in range(frames)]
    out = io.BytesIO()
    images[0].save(out, "GIF", save_all=True, append_images=images[1:], duration=10, loop=0)
    return out.getvalue()


def jpeg_with_gps() -> bytes:
    image = Image.new("RGB", (160, 160), (10, 200, 10))
    exif = Image.Exif()
    exif[0x010E] = "<script>alert(1)</script>"  # ImageDescription
    gps = {1: "N", 2: (48.0, 51.0, 29.0), 3: "E", 4: (2.0, 17.0, 40.0)}
    exif[0x8825] = gps
    out = io.BytesIO()
    image.save(out, "JPEG", exif=exif)
    return out.getvalue()


# The transform that, applied to the displayed picture, gives the raw pixels a camera stores.
TO_RAW = {
    1: None,
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_90,  # the camera was turned clockwise: raw is the view turned back
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_270,
}
HTML = b"<!doctype html><html><body>404 - not found</body></html>"
SVG = b'<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg" width="100" height="100"></svg>'
EPS = b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 100 100\nshowpage\n"
