"""Validate image bytes by decoding them once, and hash them in the same pass.

Nothing here trusts `Content-Type` or the URL's extension. The order matters:

1. `Image.open(..., formats=allowed)` reads only the header; formats outside the allowlist
   (EPS, TIFF, PSD, PDF, FITS, SVG …) never reach a parser. Bytes that no allowed parser
   accepts are classified by their magic number (`format_not_allowed`) or not
   (`not_an_image`), without opening them with any other plugin.
2. The size from the header is checked against the pixel cap, the minimum side and the
   aspect ratio BEFORE any pixel is decoded (decompression bombs, I1–I3, I9).
3. `schema.hashing.prepare` + `hash_image` decode the first frame only (animations are not
   walked) with `LOAD_TRUNCATED_IMAGES` left False, so a truncated file fails (I4). This
   decode is the validation.

Pillow's own bomb check stays on (`MAX_IMAGE_PIXELS` is never set to None here); the pixel
cap from the settings is at most that value, so an image that would only make Pillow warn
is rejected by the cap before decoding. No metadata (EXIF, XMP, PNG text) is read into any
record.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass

from PIL import Image, UnidentifiedImageError

from lookbench_live.config import IngestSettings
from lookbench_live.schema.hashing import ImageHashes, hash_image, prepare
from lookbench_live.schema.imagedata import decoder_ran_out

# Magic numbers of formats we refuse to parse, to tell "an image we do not accept" from "not an image".
_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\xff\xd8\xff", "JPEG"),
    (b"\x89PNG\r\n\x1a\n", "PNG"),
    (b"GIF87a", "GIF"),
    (b"GIF89a", "GIF"),
    (b"II*\x00", "TIFF"),
    (b"MM\x00*", "TIFF"),
    (b"%!PS", "EPS"),
    (b"\xc5\xd0\xd3\xc6", "EPS"),
    (b"%PDF", "PDF"),
    (b"8BPS", "PSD"),
    (b"SIMPLE  =", "FITS"),
    (b"\x00\x00\x00\x0cjP  ", "JPEG2000"),
    (b"\xffO\xffQ", "JPEG2000"),
    (b"BM", "BMP"),
    (b"\x00\x00\x01\x00", "ICO"),
    (b"icns", "ICNS"),
    (b"DDS ", "DDS"),
    (b"qoif", "QOI"),
)


@dataclass(frozen=True, slots=True)
class ValidImage:
    """What the one decode established: the original size and format, and the hashes."""

    width: int
    height: int
    format: str
    hashes: ImageHashes


class ImageRejected(Exception):
    """The bytes are not an acceptable image; `reason` is the code recorded in `images`."""

    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def sniff_format(data: bytes) -> str | None:
    """The image format a magic number names, or None (HTML, SVG, text and garbage give None)."""
    head = data[:32]
    for magic, name in _MAGIC:
        if head.startswith(magic):
            return name
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "WEBP"
    if head[4:8] == b"ftyp" and head[8:12] in (b"avif", b"avis", b"heic", b"heix", b"mif1"):
        return "AVIF" if head[8:12] in (b"avif", b"avis") else "HEIF"
    return None


def _ico_embedded_sizes(data: bytes) -> list[tuple[int, int]]:
    """The sizes the images inside an ICO declare in their own headers (PNG IHDR or BMP DIB)."""
    sizes: list[tuple[int, int]] = []
    (count,) = struct.unpack_from("<H", data, 4) if len(data) >= 6 else (0,)
    for index in range(count):
        entry = 6 + 16 * index
        if entry + 16 > len(data):
            break
        offset = struct.unpack_from("<I", data, entry + 12)[0]
        head = data[offset : offset + 24]
        if head.startswith(b"\x89PNG\r\n\x1a\n") and len(head) >= 24:
            sizes.append(struct.unpack(">II", head[16:24]))
        elif len(head) >= 12:
            dib_width, dib_height = struct.unpack("<ii", head[4:12])
            sizes.append((abs(dib_width), abs(dib_height) // 2))  # a DIB in an ICO: colour + mask rows
    return sizes


def _check_pixels(width: int, height: int, settings: IngestSettings) -> None:
    pixels = width * height
    if Image.MAX_IMAGE_PIXELS and pixels > Image.MAX_IMAGE_PIXELS:
        raise ImageRejected(
            "decompression_bomb", f"{width}x{height} exceeds Pillow's {Image.MAX_IMAGE_PIXELS} pixels"
        )
    if pixels > settings.max_pixels:
        raise ImageRejected("too_many_pixels", f"{width}x{height} exceeds max_pixels {settings.max_pixels}")


def validate_image(data: bytes, settings: IngestSettings) -> ValidImage:
    """Decode `data` once under the limits of `settings`; raises `ImageRejected` with a reason code.

    Reasons: `empty_body`, `not_an_image`, `format_not_allowed`, `decompression_bomb`,
    `too_many_pixels`, `too_small`, `aspect_ratio`, `truncated`, `decode_error`.
    """
    if not data:
        raise ImageRejected("empty_body", "the response body is empty")
    allowed = [f.upper() for f in settings.allowed_formats]
    if "ICO" in allowed and sniff_format(data) == "ICO":
        # Pillow decodes an ICO's embedded image inside `Image.open`, at the size that image's
        # own header declares (the directory says at most 256): check it before opening (I3).
        for inner_width, inner_height in _ico_embedded_sizes(data):
            _check_pixels(inner_width, inner_height, settings)
    try:
        image = Image.open(io.BytesIO(data), formats=allowed)
    except Image.DecompressionBombError as exc:
        raise ImageRejected("decompression_bomb", str(exc)) from None
    except UnidentifiedImageError:
        sniffed = sniff_format(data)
        if sniffed is not None and sniffed not in allowed:
            raise ImageRejected("format_not_allowed", f"{sniffed} is not in {allowed}") from None
        if sniffed is not None:
            raise ImageRejected("decode_error", f"{sniffed} header could not be read") from None
        raise ImageRejected(
            "not_an_image", f"no allowed image format recognises the bytes {data[:16]!r}"
        ) from None
    except (OSError, ValueError, SyntaxError, EOFError) as exc:
        # Pillow raises these for corrupt headers and for oversized text chunks (I8).
        raise ImageRejected("decode_error", f"{type(exc).__name__}: {exc}") from None
    with image:
        width, height = image.size
        fmt = image.format or "unknown"
        _check_pixels(width, height, settings)
        if min(width, height) < settings.min_side:
            raise ImageRejected("too_small", f"{width}x{height} is under min_side {settings.min_side}")
        if max(width, height) / min(width, height) > settings.max_aspect_ratio:
            raise ImageRejected(
                "aspect_ratio", f"{width}x{height} exceeds max_aspect_ratio {settings.max_aspect_ratio}"
            )
        try:
            hashes = hash_image(prepare(image))
        except Image.DecompressionBombError as exc:
            raise ImageRejected("decompression_bomb", str(exc)) from None
        except OSError as exc:
            if decoder_ran_out(data, allowed):
                raise ImageRejected("truncated", str(exc)) from None
            raise ImageRejected("decode_error", f"{type(exc).__name__}: {exc}") from None
        except (ValueError, SyntaxError, EOFError) as exc:
            raise ImageRejected("decode_error", f"{type(exc).__name__}: {exc}") from None
        # MemoryError propagates: the decode worker records it as `decoder_crash` and is replaced.
    return ValidImage(width=width, height=height, format=fmt, hashes=hashes)
