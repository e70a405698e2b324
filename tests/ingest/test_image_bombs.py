"""I3: GIF, ICO and BMP bombs end as recorded reasons before any pixel is decoded; an animation
with 10,000 frames costs only its first frame, inside the decode workers' time and memory caps.

The files are written byte by byte (as an attacker would), after Pillow's own bomb tests
(`Tests/test_decompression_bomb.py`: `test_exception_gif`, `_ico`, `_bmp`, `_gif_extents`).
"""

from __future__ import annotations

import asyncio
import struct
import zlib

import pytest
from PIL import ImageFile

from lookbench_live.config import IngestSettings
from lookbench_live.ingest.validator import ImageRejected, validate_image
from lookbench_live.ingest.workers import DecodePool, Processed, Refused

WIDE = IngestSettings(allowed_formats=["JPEG", "PNG", "WEBP", "GIF", "BMP", "ICO"])
DEFAULT = IngestSettings()

BLACK_PIXEL = b"\x02\x02\x44\x01\x00"  # LZW, minimum code size 2: clear, index 0, end
WHITE_PIXEL = b"\x02\x02\x4c\x01\x00"  # clear, index 1, end


def gif(
    screen: tuple[int, int] = (128, 128), frames: list[tuple[int, int, int, int, bytes]] | None = None
) -> bytes:
    """A GIF89a with a two-colour palette; each frame is (left, top, width, height, LZW data)."""
    out = b"GIF89a" + struct.pack("<HHBBB", *screen, 0x80, 0, 0) + b"\x00\x00\x00\xff\xff\xff"
    for left, top, width, height, lzw in frames or [(0, 0, 1, 1, BLACK_PIXEL)]:
        out += b"\x21\xf9\x04\x00\x01\x00\x00\x00"  # graphic control: 1/100 s per frame
        out += b"\x2c" + struct.pack("<HHHHB", left, top, width, height, 0) + lzw
    return out + b"\x3b"


def bmp(width: int, height: int) -> bytes:
    info = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 24, 0, 0, 2835, 2835, 0, 0)
    return b"BM" + struct.pack("<IHHI", 14 + 40 + 16, 0, 0, 54) + info + b"\x00" * 16


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_header(width: int, height: int) -> bytes:
    """The signature and IHDR of a 1-bit greyscale PNG: all a header check may read."""
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0))


def png(width: int, height: int) -> bytes:
    """A complete 1-bit greyscale PNG of zeros: ~10 KB that decodes to width x height pixels."""
    raw = (b"\x00" + b"\x00" * ((width + 7) // 8)) * height
    return png_header(width, height) + _chunk(b"IDAT", zlib.compress(raw, 9)) + _chunk(b"IEND", b"")


def ico(inner: bytes) -> bytes:
    """One icon whose directory says 256 x 256 (0 means 256), holding `inner`."""
    return struct.pack("<HHH", 0, 1, 1) + struct.pack("<BBBBHHII", 0, 0, 0, 0, 1, 32, len(inner), 22) + inner


BOMBS = {
    "gif_canvas": (gif(screen=(65535, 65535)), "decompression_bomb"),
    "gif_frame_extents": (gif(frames=[(0, 0, 60000, 60000, BLACK_PIXEL)]), "decompression_bomb"),
    "bmp_huge": (bmp(100_000, 100_000), "decompression_bomb"),
    "bmp_over_pillow_warning": (bmp(10_000, 9_000), "decompression_bomb"),
    "bmp_over_cap": (bmp(8_000, 6_000), "too_many_pixels"),
    "ico_huge_png": (ico(png_header(100_000, 100_000)), "decompression_bomb"),
    # Under Pillow's error limit (only a warning there), 81 MP decoded inside `Image.open`.
    "ico_hiding_a_large_png": (ico(png(9_000, 9_000)), "too_many_pixels"),
}


@pytest.fixture
def no_decoding(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any pixel decode fails the test: the refusal must come from the headers alone."""

    def refuse(self: ImageFile.ImageFile) -> None:
        raise AssertionError(f"{self.format} {self.size} was decoded")

    monkeypatch.setattr(ImageFile.ImageFile, "load", refuse)


@pytest.mark.parametrize("name", sorted(BOMBS))
def test_bombs_are_refused_from_their_headers(name: str, no_decoding: None) -> None:
    data, reason = BOMBS[name]
    with pytest.raises(ImageRejected) as caught:
        validate_image(data, WIDE)
    assert caught.value.reason == reason, caught.value.detail


@pytest.mark.parametrize("name", ["bmp_huge", "ico_hiding_a_large_png"])
def test_bmp_and_ico_are_not_parsed_unless_allowed(name: str, no_decoding: None) -> None:
    with pytest.raises(ImageRejected) as caught:
        validate_image(BOMBS[name][0], DEFAULT)
    assert caught.value.reason == "format_not_allowed"


def _run(settings: IngestSettings, batch: list[bytes]) -> list[Processed | Refused]:
    async def run() -> list[Processed | Refused]:
        pool = DecodePool(settings, settings.workers, validate=validate_image)
        try:
            return list(await asyncio.gather(*(pool.process(d) for d in batch)))
        finally:
            await pool.aclose()

    return asyncio.run(run())


def test_ten_thousand_frames_cost_only_the_first_inside_the_workers_caps() -> None:
    """A 10,000-frame GIF whose later frames paint white over the first: the stored hashes are
    those of the first frame alone, decoded in a worker under a 10 s and 256 MB cap; the
    bombs beside it in the batch each end with their reason."""
    later = [(i % 128, (i // 128) % 128, 1, 1, WHITE_PIXEL) for i in range(9_999)]
    animation = gif(frames=[(0, 0, 1, 1, BLACK_PIXEL), *later])
    single = gif(frames=[(0, 0, 1, 1, BLACK_PIXEL)])
    settings = WIDE.model_copy(
        update={"min_side": 64, "workers": 1, "decode_timeout": 10.0, "decode_memory_mb": 256}
    )
    bombs = [BOMBS[name] for name in sorted(BOMBS)]
    results = _run(settings, [animation, single, *(data for data, _ in bombs)])
    many, one = results[:2]
    assert isinstance(many, Processed) and isinstance(one, Processed), results[:2]
    assert (many.valid.format, many.valid.width, many.valid.height) == ("GIF", 128, 128)
    assert many.valid.hashes == one.valid.hashes  # no later frame reached the pixels
    assert [r.reason for r in results[2:]] == [reason for _, reason in bombs]  # type: ignore[union-attr]
