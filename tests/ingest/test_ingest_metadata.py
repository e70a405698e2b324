"""I10: metadata (EXIF GPS, XMP, comments, text chunks) never reaches the lake; pixels are unchanged."""

from __future__ import annotations

import io

import numpy as np
import pytest
from ingest_server import Route, serve
from PIL import Image, PngImagePlugin
from test_ingest_images import T0

from lookbench_live.config import IngestSettings
from lookbench_live.ingest import ImageRequest, ingest_images
from lookbench_live.ingest.metadata import MetadataError, strip_metadata
from lookbench_live.warehouse.lake import Lake

SECRET = b"<script>alert(1)</script> 48.8584N 2.2945E"


def photo() -> Image.Image:
    rng = np.random.default_rng(0)
    return Image.fromarray(rng.integers(0, 255, (120, 90, 3), dtype=np.uint8))


def jpeg_with_gps() -> bytes:
    exif = Image.Exif()
    exif[0x010E] = SECRET.decode()  # ImageDescription
    exif.get_ifd(0x8825).update({1: "N", 2: (48.0, 51.0, 30.0), 3: "E", 4: (2.0, 17.0, 40.0)})  # GPS IFD
    out = io.BytesIO()
    photo().save(out, "JPEG", quality=90, exif=exif.tobytes(), comment=SECRET)
    return out.getvalue()


def png_with_text() -> bytes:
    info = PngImagePlugin.PngInfo()
    info.add_text("Comment", SECRET.decode())
    info.add_itxt("XML:com.adobe.xmp", SECRET.decode())
    out = io.BytesIO()
    photo().save(out, "PNG", pnginfo=info)
    return out.getvalue()


def webp_with_exif() -> bytes:
    exif = Image.Exif()
    exif[0x010E] = SECRET.decode()
    out = io.BytesIO()
    photo().save(out, "WEBP", lossless=True, exif=exif.tobytes())
    return out.getvalue()


@pytest.mark.parametrize(
    "make,fmt", [(jpeg_with_gps, "JPEG"), (png_with_text, "PNG"), (webp_with_exif, "WEBP")]
)
def test_metadata_is_stripped_and_pixels_kept(make, fmt: str) -> None:
    original = make()
    assert SECRET in original or b"GPS" in original or len(Image.open(io.BytesIO(original)).getexif()) > 0
    clean = strip_metadata(original, fmt)
    assert SECRET not in clean
    image = Image.open(io.BytesIO(clean))
    assert len(image.getexif()) == 0 and not image.info.get("comment") and "Comment" not in image.info
    assert np.array_equal(
        np.asarray(image.convert("RGB")), np.asarray(Image.open(io.BytesIO(original)).convert("RGB"))
    )


def test_a_clean_file_is_unchanged_and_a_broken_container_is_an_error() -> None:
    out = io.BytesIO()
    photo().save(out, "JPEG", quality=90)
    assert strip_metadata(out.getvalue(), "JPEG") == out.getvalue()
    with pytest.raises(MetadataError):
        strip_metadata(b"\xff\xd8\xff\xe1\xff\xff" + b"\0" * 10, "JPEG")


def test_ingestion_stores_the_stripped_bytes(tmp_path) -> None:
    lake = Lake(tmp_path / "lake")
    data = jpeg_with_gps()
    routes = {
        "/robots.txt": Route(body=b"User-agent: *\nAllow: /\n", headers={"Content-Type": "text/plain"}),
        "/gps.jpg": Route(body=data, headers={"Content-Type": "image/jpeg"}),
    }
    settings = IngestSettings(allow_private_addresses=True, workers=0, min_side=32)
    with serve(routes) as server:
        request = ImageRequest(server.base + "/gps.jpg", "product", "shop:p1", "shop", 0, T0)
        result = ingest_images(lake, settings, [request], run_id="r")
    assert result.ok == 1
    (row,) = lake.read("images").to_pylist()
    stored = lake.get_image(row["sha256"])
    assert SECRET not in stored and row["byte_size"] == len(stored) < len(data)
    assert len(Image.open(io.BytesIO(stored)).getexif()) == 0
