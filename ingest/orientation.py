"""Store the picture as a browser shows it: apply the EXIF Orientation before the EXIF is dropped.

`metadata.strip_metadata` drops APP1 (EXIF) and PNG/WebP EXIF chunks (reliability I10). A phone
photo that displays portrait carries landscape pixels and an Orientation tag; without the tag the
stored file would display (and be hashed, annotated and cropped) sideways. So the orientation is
applied first, and every later width, height, hash and box is in the upright frame.

- JPEG: `jpegtran -perfect` rotates or flips the DCT blocks losslessly. When the size is not a
  whole number of MCU blocks `-perfect` refuses; we then decode, transpose with Pillow and
  re-encode once (every pixel kept, one generation of JPEG loss) rather than `-trim` the edges.
  Without `jpegtran` on PATH the same Pillow fallback is used. The method is recorded.
- PNG and WebP (eXIf / EXIF chunks): decoded, transposed and re-encoded by Pillow; PNG and
  lossless WebP are lossless, lossy WebP loses one generation.
- Other formats and Orientation 1 (or none): unchanged.
"""

from __future__ import annotations

import io
import shutil
import subprocess
from dataclasses import dataclass

from PIL import Image, ImageOps

ORIENTATION_TAG = 0x0112
JPEGTRAN_TIMEOUT_S = 30.0
# The jpegtran transform that makes each EXIF orientation upright (TIFF/EXIF 2.3, tag 274).
JPEGTRAN_OPS: dict[int, tuple[str, ...]] = {
    2: ("-flip", "horizontal"),
    3: ("-rotate", "180"),
    4: ("-flip", "vertical"),
    5: ("-transpose",),
    6: ("-rotate", "90"),
    7: ("-transverse",),
    8: ("-rotate", "270"),
}
ORIENTED_FORMATS = {"JPEG", "PNG", "WEBP"}


@dataclass(frozen=True, slots=True)
class Oriented:
    """The upright bytes, the orientation found, and how it was applied (None when unchanged)."""

    data: bytes
    orientation: int
    method: str | None  # "jpegtran" | "pillow" | None

    def note(self) -> str | None:
        """What the image row records about it (`images.detail` of a stored image)."""
        if self.method is None:
            return None
        return f"exif_orientation {self.orientation} applied by {self.method}"


def exif_orientation(data: bytes) -> int:
    """The EXIF Orientation (1–8) the bytes declare; 1 when absent or out of range."""
    with Image.open(io.BytesIO(data)) as image:
        value = image.getexif().get(ORIENTATION_TAG, 1)
    return value if isinstance(value, int) and 1 <= value <= 8 else 1


def upright(data: bytes, image_format: str) -> Oriented:
    """`data` with its EXIF orientation applied to the pixels (the tag is removed later with the EXIF)."""
    fmt = image_format.upper()
    if fmt not in ORIENTED_FORMATS:
        return Oriented(data, 1, None)
    orientation = exif_orientation(data)
    if orientation == 1:
        return Oriented(data, 1, None)
    if fmt == "JPEG":
        rotated = _jpegtran(data, orientation)
        if rotated is not None:
            return Oriented(rotated, orientation, "jpegtran")
    return Oriented(_pillow(data, fmt), orientation, "pillow")


def _jpegtran(data: bytes, orientation: int) -> bytes | None:
    """The lossless transform, or None when jpegtran is missing or refuses (`-perfect`)."""
    binary = shutil.which("jpegtran")
    if binary is None:
        return None
    # -copy icc keeps the colour profile; the EXIF is not copied, so no stale Orientation survives.
    command = [binary, "-perfect", "-copy", "icc", *JPEGTRAN_OPS[orientation]]
    try:
        done = subprocess.run(
            command, input=data, capture_output=True, timeout=JPEGTRAN_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0 or done.stdout[:2] != b"\xff\xd8":
        return None
    return done.stdout


def _pillow(data: bytes, fmt: str) -> bytes:
    with Image.open(io.BytesIO(data)) as image:
        icc = image.info.get("icc_profile")
        turned = ImageOps.exif_transpose(image)  # a new image, without the EXIF
    out = io.BytesIO()
    options: dict[str, object] = {"icc_profile": icc} if icc else {}
    if fmt == "JPEG":
        # 4:4:4 and quality 95: the one re-encode loses as little as a JPEG can.
        options.update(quality=95, subsampling=0)
        if turned.mode not in ("RGB", "L", "CMYK"):
            turned = turned.convert("RGB")
    elif fmt == "WEBP":
        options.update(lossless=True) if _webp_is_lossless(data) else options.update(quality=95)
    turned.save(out, fmt, **options)
    return out.getvalue()


def _webp_is_lossless(data: bytes) -> bool:
    """Whether the WebP's image chunk is VP8L (lossless) rather than VP8 (lossy)."""
    pos = 12
    while pos + 8 <= len(data):
        kind = data[pos : pos + 4]
        if kind in (b"VP8L", b"VP8 "):
            return kind == b"VP8L"
        size = int.from_bytes(data[pos + 4 : pos + 8], "little")
        pos += 8 + size + (size & 1)
    return False
