"""Images as the VLM receives them: resized to the pixel budget, JPEG, a base64 data URL.

Only `data:` URLs are ever built (never a remote URL the server would fetch, L9), and a
payload over `max_payload_bytes` is refused before it is sent (L10).

Qwen2.5-VL resizes every image to sides that are multiples of 28 within its pixel budget
(`smart_resize`) and answers boxes in the pixels of that resized image. We resize to exactly
those sides ourselves, so the server does not resize again, the boxes it returns are in the
frame of the image we sent, and `to_original` maps them back with one scale factor.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass

from PIL import Image, ImageOps

PATCH = 28  # Qwen2.5-VL: 14-pixel patches merged 2×2
MIN_PIXELS = 4 * PATCH * PATCH
MAX_ASPECT_RATIO = 200  # Qwen2-VL's processor refuses more
JPEG_QUALITIES = (90, 80, 70, 55)


class ImageRejected(ValueError):
    """The image cannot be sent; `reason` is machine-readable."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True, slots=True)
class PreparedImage:
    data_url: str
    width: int  # the original (or crop) size in pixels
    height: int
    sent_width: int  # what the model sees
    sent_height: int
    payload_bytes: int

    def to_original(self, box: Sequence[int]) -> tuple[int, int, int, int]:
        """A box in the sent image's pixels as pixels of the original image."""
        sx = self.width / self.sent_width
        sy = self.height / self.sent_height
        x0, y0, x1, y1 = box
        return (
            max(0, min(self.width, round(x0 * sx))),
            max(0, min(self.height, round(y0 * sy))),
            max(0, min(self.width, round(x1 * sx))),
            max(0, min(self.height, round(y1 * sy))),
        )

    def box_error(self, box: object) -> str | None:
        """Why a box answered for this image is not a crop, or None when it is one."""
        if not isinstance(box, list | tuple) or len(box) != 4 or not all(isinstance(v, int) for v in box):
            return f"bbox_2d must be 4 integers, got {box!r}"
        x0, y0, x1, y1 = box
        if not (0 <= x0 < x1 <= self.sent_width and 0 <= y0 < y1 <= self.sent_height):
            return f"bbox_2d {list(box)} is outside the {self.sent_width}x{self.sent_height} image"
        return None


def smart_resize(width: int, height: int, max_pixels: int, min_pixels: int = MIN_PIXELS) -> tuple[int, int]:
    """Qwen2.5-VL's resize rule: sides multiples of 28, area within [min_pixels, max_pixels]."""
    if max(width, height) / max(1, min(width, height)) > MAX_ASPECT_RATIO:
        raise ImageRejected("image_aspect_ratio", f"{width}x{height} exceeds {MAX_ASPECT_RATIO}:1")
    h_bar = max(PATCH, round(height / PATCH) * PATCH)
    w_bar = max(PATCH, round(width / PATCH) * PATCH)
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h_bar = max(PATCH, math.floor(height / beta / PATCH) * PATCH)
        w_bar = max(PATCH, math.floor(width / beta / PATCH) * PATCH)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / PATCH) * PATCH
        w_bar = math.ceil(width * beta / PATCH) * PATCH
    return w_bar, h_bar


def open_image(data: bytes) -> Image.Image:
    """Decode image bytes (EXIF orientation applied, RGB) or raise ImageRejected."""
    try:
        image = Image.open(io.BytesIO(data))
        image.load()
        image = ImageOps.exif_transpose(image)
        return image.convert("RGB")
    except (Image.DecompressionBombError, OSError, ValueError, SyntaxError) as exc:
        raise ImageRejected("image_unreadable", f"{type(exc).__name__}: {exc}") from exc


def crop(image: Image.Image, box: Sequence[int]) -> Image.Image:
    """The crop of `box` (x0, y0, x1, y1 pixels); a box outside the image is an error."""
    x0, y0, x1, y1 = (int(v) for v in box)
    if not (0 <= x0 < x1 <= image.width and 0 <= y0 < y1 <= image.height):
        raise ImageRejected(
            "bbox_outside_image", f"box {list(box)} is outside the {image.width}x{image.height} image"
        )
    return image.crop((x0, y0, x1, y1))


def prepare(image: Image.Image, *, max_pixels: int, max_payload_bytes: int) -> PreparedImage:
    """Resize to the model's frame and encode as a JPEG data URL no larger than the cap."""
    sent_w, sent_h = smart_resize(image.width, image.height, max_pixels)
    resized = (
        image if (sent_w, sent_h) == image.size else image.resize((sent_w, sent_h), Image.Resampling.BICUBIC)
    )
    for quality in JPEG_QUALITIES:
        buffer = io.BytesIO()
        resized.save(buffer, format="JPEG", quality=quality)
        encoded = base64.b64encode(buffer.getvalue()).decode("ascii")
        data_url = f"data:image/jpeg;base64,{encoded}"
        if len(data_url) <= max_payload_bytes:
            return PreparedImage(data_url, image.width, image.height, sent_w, sent_h, len(data_url))
    raise ImageRejected(
        "image_payload_too_large",
        f"{sent_w}x{sent_h} JPEG is {len(data_url)} bytes as base64 even at quality {JPEG_QUALITIES[-1]}; "
        f"the cap is {max_payload_bytes} (annotation.max_payload_bytes)",
    )
