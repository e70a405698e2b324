"""Validation by decoding (docs/reliability.md I1–I10): every bad image gets its reason, good ones their facts."""

from __future__ import annotations

import io

import pytest
from ingest_fixtures import EPS, HTML, SVG, animated_gif, encoded, jpeg, png_claiming
from PIL import Image

from lookbench_live.config import IngestSettings
from lookbench_live.ingest.validator import ImageRejected, sniff_format, validate_image
from lookbench_live.schema.hashing import HASH_METHOD, hash_image, prepare

SETTINGS = IngestSettings(min_side=32)


def reason_of(data: bytes, settings: IngestSettings = SETTINGS) -> str:
    with pytest.raises(ImageRejected) as info:
        validate_image(data, settings)
    return info.value.reason


def test_good_jpeg_reports_original_size_and_the_dedup_hashes() -> None:
    data = jpeg(640, 800)
    valid = validate_image(data, SETTINGS)
    assert (valid.width, valid.height, valid.format) == (640, 800, "JPEG")
    # Same hashes as the dedup stage computes on its own from the same bytes.
    assert valid.hashes == hash_image(prepare(Image.open(io.BytesIO(data))))
    assert valid.hashes.method == HASH_METHOD


@pytest.mark.parametrize("fmt", ["PNG", "WEBP", "GIF"])
def test_other_allowed_formats(fmt: str) -> None:
    assert validate_image(encoded(fmt), SETTINGS).format == fmt


def test_bomb_header_is_refused_before_decoding() -> None:
    assert reason_of(png_claiming(100_000, 100_000)) == "decompression_bomb"  # I1: Pillow's error
    assert reason_of(png_claiming(10_000, 10_000)) == "decompression_bomb"  # I2: only a warning in Pillow
    assert reason_of(png_claiming(7_000, 7_000)) == "too_many_pixels"  # our 40 MP cap


def test_truncated_and_empty() -> None:
    data = jpeg(400, 400)
    assert reason_of(data[: len(data) // 2]) == "truncated"
    assert reason_of(b"") == "empty_body"


@pytest.mark.parametrize("body", [HTML, SVG, b"\x00\x01garbage"])
def test_not_images(body: bytes) -> None:
    assert reason_of(body) == "not_an_image"


@pytest.mark.parametrize(
    ("body", "fmt"),
    [(EPS, "EPS"), (encoded("TIFF"), "TIFF"), (encoded("BMP"), "BMP"), (encoded("ICO"), "ICO")],
)
def test_formats_outside_the_allowlist_are_named_not_parsed(body: bytes, fmt: str) -> None:
    assert sniff_format(body) == fmt
    assert reason_of(body) == "format_not_allowed"


def test_allowlist_comes_from_settings() -> None:
    assert (
        reason_of(encoded("PNG"), IngestSettings(allowed_formats=["JPEG"], min_side=32))
        == "format_not_allowed"
    )


def test_extreme_shapes() -> None:
    assert reason_of(encoded("PNG", 2000, 40)) == "aspect_ratio"
    assert reason_of(encoded("PNG", 40, 2000)) == "aspect_ratio"
    assert reason_of(encoded("PNG", 20, 20)) == "too_small"
    assert reason_of(encoded("PNG", 2000, 1)) == "too_small"


def test_animation_decodes_first_frame_only() -> None:
    valid = validate_image(animated_gif(frames=60), SETTINGS)
    assert (valid.format, valid.width) == ("GIF", 96)
