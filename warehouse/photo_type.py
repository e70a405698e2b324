"""Is a photo a studio or flat-lay shot? A weight-free, deterministic measure of its background.

A RealStudioFlat query must be a product photo on a plain or flat background, not a scene
(issue 22 §4). A studio or flat-lay photo's frame border is backdrop: one tone, or a soft
gradient, shadow or a seamless paper edge, so almost every border pixel is locally flat. A scene
(a street, a room, foliage, a crowd, a textured wall) puts texture and clutter at the border.

`flat_border_share(data)` is the share of the border ring's pixels whose local grey-level
gradient is small, measured on the upright image reduced to `SIDE` pixels on its longer side
after a 3x3 mean (Pillow's fixed box filters: the same bytes give the same score on every machine). A photo
passes at `flat_border_share >= threshold`; the threshold is chosen on a labelled calibration
set and scored on a held-out one (`lookbench_live.testing.evidence_calibration`,
`bench/evidence_thresholds.py`, docs/release.md "Label rules").
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageFilter

PHOTO_TYPE_METHOD = "flat-border-v1"
SIDE = 160  # the longer side the measure works at
RING = 0.06  # the border ring's width, as a share of the shorter side
FLAT = 6.0  # a pixel is flat when |dx| + |dy| of its grey level (0..255) is at most this


def flat_border_share(data: bytes) -> float:
    """The share (0..1) of locally flat pixels in the border ring of the (upright) image `data`."""
    with Image.open(io.BytesIO(data)) as img:
        img.draft("L", (SIDE * 2, SIDE * 2))  # JPEG: decode at a reduced size, deterministically
        grey = img.convert("L")
    scale = SIDE / max(grey.size)
    if scale < 1:
        size = (max(8, round(grey.width * scale)), max(8, round(grey.height * scale)))
        grey = grey.resize(size, Image.Resampling.BOX)
    # A 3x3 mean first: sensor noise and JPEG ringing on a backdrop are not texture.
    pixels = np.asarray(grey.filter(ImageFilter.BoxBlur(1)), dtype=np.float32)
    h, w = pixels.shape
    gradient = np.zeros_like(pixels)
    gradient[:, :-1] += np.abs(np.diff(pixels, axis=1))
    gradient[:-1, :] += np.abs(np.diff(pixels, axis=0))
    ring = max(2, round(RING * min(w, h)))
    mask = np.zeros((h, w), dtype=bool)
    mask[:ring, :] = mask[-ring:, :] = True
    mask[:, :ring] = mask[:, -ring:] = True
    # The last row and column have a one-sided gradient: leave them out rather than count them flat.
    mask[-1, :] = mask[:, -1] = False
    return float(np.mean(gradient[mask] <= FLAT))


@dataclass(frozen=True, slots=True)
class PhotoTypeRule:
    """Which photos may be a RealStudioFlat query: `flat_border_share >= threshold`."""

    threshold: float

    @property
    def method(self) -> str:
        return PHOTO_TYPE_METHOD

    def score(self, data: bytes) -> float:
        return round(flat_border_share(data), 4)

    def passes(self, score: float) -> bool:
        return score >= self.threshold
