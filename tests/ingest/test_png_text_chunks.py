"""I8: PNG text chunks are bounded by Pillow's MAX_TEXT_CHUNK (one inflated zTXt/iTXt) and
MAX_TEXT_MEMORY (all text of a file); the validator records them as decode errors."""

from __future__ import annotations

import io
import struct
import zlib

import pytest
from PIL import Image, PngImagePlugin

from lookbench_live.config import IngestSettings
from lookbench_live.ingest.validator import ImageRejected, validate_image


def png_with_chunks(chunks: list[tuple[bytes, bytes]]) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (300, 300), (1, 2, 3)).save(out, "PNG")
    data = out.getvalue()
    iend = data.rindex(b"IEND") - 4
    parts = [
        struct.pack(">I", len(b)) + k + b + struct.pack(">I", zlib.crc32(k + b) & 0xFFFFFFFF)
        for k, b in chunks
    ]
    return data[:iend] + b"".join(parts) + data[iend:]


def test_a_ztxt_bomb_is_stopped_at_max_text_chunk() -> None:
    bomb = b"Comment\x00\x00" + zlib.compress(b"A" * (4 * PngImagePlugin.MAX_TEXT_CHUNK), 9)
    with pytest.raises(ImageRejected) as info:
        validate_image(png_with_chunks([(b"zTXt", bomb)]), IngestSettings())
    assert info.value.reason == "decode_error" and "MAX_TEXT_CHUNK" in info.value.detail


def test_many_text_chunks_are_stopped_at_max_text_memory() -> None:
    per_chunk = 64 * 1024
    count = PngImagePlugin.MAX_TEXT_MEMORY // per_chunk + 2
    chunks = [(b"tEXt", b"k%d\x00" % i + b"v" * per_chunk) for i in range(count)]
    with pytest.raises(ImageRejected) as info:
        validate_image(png_with_chunks(chunks), IngestSettings())
    assert info.value.reason == "decode_error" and "MAX_TEXT_MEMORY" in info.value.detail


def test_the_limits_are_pillows_defaults() -> None:
    # Nothing in the pipeline loosens them (as nothing sets MAX_IMAGE_PIXELS to None).
    assert PngImagePlugin.MAX_TEXT_CHUNK == 1024 * 1024 and PngImagePlugin.MAX_TEXT_MEMORY == 64 * 1024 * 1024
