"""The weight-free baseline: HSV colour histogram + HOG, numpy only, deterministic.

Every release gets a score offline with it, and models get a floor to beat. The
descriptor of an image depends only on its decoded pixels (Pillow's fixed-filter
resize to 64×64 RGB), so it is the same on every run and machine.

- colour: a joint HSV histogram, 8 hue × 3 saturation × 3 value bins, of the 64×64
  image, square-rooted (Hellinger) and L2-normalised;
- shape: HOG on the grey image, 8×8-pixel cells, 9 unsigned orientation bins weighted
  by gradient magnitude, each 2×2-cell block L2-normalised (clipped at 0.2, renormalised,
  as Dalal–Triggs' L2-Hys);
- the two parts are weighted equally and the whole is L2-normalised.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import numpy as np
from PIL import Image

BASELINE_NAME = "baseline:hsv-hog-v1"
SIZE = 64
CELL = 8
ORIENTATIONS = 9
HSV_BINS = (8, 3, 3)


def _l2(x: np.ndarray, axis: int = -1) -> np.ndarray:
    norm = np.linalg.norm(x, axis=axis, keepdims=True)
    return np.divide(x, norm, out=np.zeros_like(x), where=norm > 0)


def hsv_histogram(rgb: Image.Image) -> np.ndarray:
    hsv = np.asarray(rgb.convert("HSV"), dtype=np.int32)
    h = hsv[..., 0] * HSV_BINS[0] // 256
    s = hsv[..., 1] * HSV_BINS[1] // 256
    v = hsv[..., 2] * HSV_BINS[2] // 256
    flat = (h * HSV_BINS[1] + s) * HSV_BINS[2] + v
    hist = np.bincount(flat.ravel(), minlength=int(np.prod(HSV_BINS))).astype(np.float64)
    return _l2(np.sqrt(hist / hist.sum()))


def hog(gray: np.ndarray) -> np.ndarray:
    g = gray.astype(np.float64)
    gx = np.zeros_like(g)
    gy = np.zeros_like(g)
    gx[:, 1:-1] = g[:, 2:] - g[:, :-2]
    gy[1:-1, :] = g[2:, :] - g[:-2, :]
    magnitude = np.hypot(gx, gy)
    angle = np.rad2deg(np.arctan2(gy, gx)) % 180.0
    bins = np.minimum((angle / (180.0 / ORIENTATIONS)).astype(np.int64), ORIENTATIONS - 1)
    cells = SIZE // CELL
    cell_y = np.arange(SIZE)[:, None] // CELL
    cell_x = np.arange(SIZE)[None, :] // CELL
    index = (cell_y * cells + cell_x) * ORIENTATIONS + bins
    hist = np.bincount(index.ravel(), weights=magnitude.ravel(), minlength=cells * cells * ORIENTATIONS)
    hist = hist.reshape(cells, cells, ORIENTATIONS)
    blocks = np.stack(
        [hist[y : y + 2, x : x + 2].ravel() for y in range(cells - 1) for x in range(cells - 1)]
    )  # [(cells-1)^2, 36]
    blocks = np.minimum(_l2(blocks), 0.2)
    return _l2(_l2(blocks).ravel())


def describe(image: Image.Image) -> np.ndarray:
    """The baseline descriptor of one image (float32, L2-normalised)."""
    rgb = image.convert("RGB").resize((SIZE, SIZE), Image.Resampling.BILINEAR)
    colour = hsv_histogram(rgb)
    shape = hog(np.asarray(rgb.convert("L")))
    return _l2(np.concatenate([colour, shape])).astype(np.float32)


class BaselineEmbedder:
    """`ImageEmbedder` for the baseline: bytes in, one L2-normalised row per image out."""

    name = BASELINE_NAME

    def embed(self, images: Sequence[bytes]) -> np.ndarray:
        rows = []
        for data in images:
            with Image.open(io.BytesIO(data)) as image:
                if image.format == "JPEG":
                    # A reduced DCT decode is enough for a 64 px descriptor and much faster.
                    image.draft("RGB", (SIZE * 2, SIZE * 2))
                rows.append(describe(image))
        dim = int(np.prod(HSV_BINS)) + (SIZE // CELL - 1) ** 2 * 4 * ORIENTATIONS
        return np.stack(rows) if rows else np.zeros((0, dim), np.float32)
