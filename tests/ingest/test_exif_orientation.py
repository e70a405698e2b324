"""Issue 22 §2: stored images are upright, as a browser shows them, with no Orientation left.

Each photo's stored pixels have a red block in the top-left corner as the page displays it:
the raw pixels are the displayed picture with the inverse of the orientation applied, and the
EXIF Orientation tag says how to undo it, exactly as a phone camera writes them.
"""

from __future__ import annotations

import io
import shutil

import numpy as np
import pytest
from ingest_fixtures import TO_RAW
from ingest_server import Route, serve
from PIL import Image, ImageOps
from test_ingest_images import T0

from lookbench_live.config import IngestSettings
from lookbench_live.ingest import ImageRequest, ingest_images
from lookbench_live.ingest.orientation import ORIENTATION_TAG, upright
from lookbench_live.ingest.validator import validate_image
from lookbench_live.ingest.workers import process_image
from lookbench_live.warehouse.lake import Lake

SETTINGS = IngestSettings(allow_private_addresses=True, workers=0, min_side=32)


def displayed(width: int, height: int) -> Image.Image:
    """A portrait picture: red top-left block, blue bottom-right block, grey elsewhere."""
    pixels = np.full((height, width, 3), 128, dtype=np.uint8)
    pixels[: height // 4, : width // 4] = (255, 0, 0)
    pixels[-height // 4 :, -width // 4 :] = (0, 0, 255)
    return Image.fromarray(pixels)


def photo(orientation: int, fmt: str = "JPEG", size: tuple[int, int] = (64, 96)) -> bytes:
    view = displayed(*size)
    transform = TO_RAW[orientation]
    raw = view if transform is None else view.transpose(transform)
    exif = Image.Exif()
    exif[ORIENTATION_TAG] = orientation
    exif[0x010F] = "PhoneMaker"  # Make: other EXIF that must still be dropped
    out = io.BytesIO()
    options: dict[str, object] = {"exif": exif.tobytes()}
    if fmt == "JPEG":
        options.update(quality=95, subsampling=0)
    elif fmt == "WEBP":
        options.update(lossless=True)
    raw.save(out, fmt, **options)
    return out.getvalue()


def assert_upright(stored: bytes, original: bytes, size: tuple[int, int], tolerance: float) -> None:
    image = Image.open(io.BytesIO(stored))
    assert ORIENTATION_TAG not in image.getexif() and len(image.getexif()) == 0
    assert image.size == size
    got = np.asarray(image.convert("RGB"), dtype=np.int16)
    browser = np.asarray(
        ImageOps.exif_transpose(Image.open(io.BytesIO(original))).convert("RGB"), dtype=np.int16
    )
    assert np.abs(got - browser).mean() <= tolerance
    width, height = size
    assert tuple(got[2, 2]) == pytest.approx((255, 0, 0), abs=12)  # the red corner is top-left
    assert tuple(got[height - 3, width - 3]) == pytest.approx((0, 0, 255), abs=12)


@pytest.mark.parametrize("orientation", range(1, 9))
def test_each_orientation_is_stored_upright_without_its_tag(orientation: int) -> None:
    original = photo(orientation)
    result = process_image(original, SETTINGS, validate_image, None)
    assert result.data is not None  # type: ignore[union-attr]
    assert_upright(result.data, original, (64, 96), tolerance=1.0)  # type: ignore[union-attr]
    # The row's size and hashes are those of the upright picture.
    assert (result.valid.width, result.valid.height) == (64, 96)  # type: ignore[union-attr]
    assert result.valid.hashes == validate_image(result.data, SETTINGS).hashes  # type: ignore[union-attr]
    expected = None if orientation == 1 else f"exif_orientation {orientation} applied by jpegtran"
    assert result.note == expected  # type: ignore[union-attr]


@pytest.mark.skipif(shutil.which("jpegtran") is None, reason="needs jpegtran (scripts/install-system.sh)")
@pytest.mark.parametrize("orientation", [1, 3, 6, 8])
def test_the_jpeg_transform_is_lossless(orientation: int) -> None:
    """jpegtran moves DCT blocks: decoding the stored file equals transposing the decoded original."""
    original = photo(orientation)
    stored = upright(original, "JPEG").data
    turned = ImageOps.exif_transpose(Image.open(io.BytesIO(original)))
    assert np.array_equal(np.asarray(Image.open(io.BytesIO(stored))), np.asarray(turned))


@pytest.mark.parametrize("orientation", [2, 3, 6, 8])
def test_a_size_jpegtran_cannot_turn_perfectly_is_re_encoded_whole(orientation: int) -> None:
    """61×93 is not a whole number of 8×8 blocks: `-perfect` refuses, Pillow keeps every pixel."""
    original = photo(orientation, size=(61, 93))
    oriented = upright(original, "JPEG")
    assert oriented.method == "pillow"
    assert_upright(oriented.data, original, (61, 93), tolerance=3.0)


@pytest.mark.parametrize("fmt", ["PNG", "WEBP"])
@pytest.mark.parametrize("orientation", [3, 6, 7])
def test_png_and_webp_exif_orientation_is_applied_losslessly(fmt: str, orientation: int) -> None:
    original = photo(orientation, fmt)
    result = process_image(original, SETTINGS, validate_image, None)
    assert result.note == f"exif_orientation {orientation} applied by pillow"  # type: ignore[union-attr]
    assert_upright(result.data, original, (64, 96), tolerance=0.0)  # type: ignore[union-attr,arg-type]


@pytest.mark.parametrize(
    "workers", [0, 1]
)  # in process, and in a bounded decode worker's minimal environment
def test_ingestion_records_the_upright_size_and_how_it_was_turned(tmp_path, workers: int) -> None:
    lake = Lake(tmp_path / "lake")
    data = photo(6)
    assert Image.open(io.BytesIO(data)).size == (96, 64)  # stored landscape, displayed portrait
    routes = {
        "/robots.txt": Route(body=b"User-agent: *\nAllow: /\n", headers={"Content-Type": "text/plain"}),
        "/phone.jpg": Route(body=data, headers={"Content-Type": "image/jpeg"}),
    }
    with serve(routes) as server:
        request = ImageRequest(server.base + "/phone.jpg", "product", "shop:p1", "shop", 0, T0)
        settings = SETTINGS.model_copy(update={"workers": workers})
        result = ingest_images(lake, settings, [request], run_id="r")
    assert result.ok == 1
    (row,) = lake.read("images").to_pylist()
    assert (row["width"], row["height"]) == (64, 96)
    assert row["detail"] == "exif_orientation 6 applied by jpegtran"
    assert_upright(lake.get_image(row["sha256"]), data, (64, 96), tolerance=1.0)
