"""Perceptual hashes computed from the one decode that ingestion does.

One decode and resize path is pinned and named (`HASH_METHOD`): JPEG draft mode
(DCT-domain downscaling) makes hashing several times faster but changes a few bits
against a full decode, so hashes made by different methods are never compared.
"""

from __future__ import annotations

import functools
import io
from dataclasses import dataclass

import imagehash
import numpy as np
from PIL import Image, ImageOps

# Bump the suffix when anything in `hash_image` changes.
HASH_METHOD = f"phash64+dhash64/draft-L-64/small-32/imagehash-{imagehash.__version__}/v3"
# JPEG draft decodes at 1/2, 1/4 or 1/8 scale, the smallest still at least this size: an
# 800x1000 photo decodes at 100x125, enough for a 32x32 pHash and the 64x64 input of
# `fine_phash`. At 1/8 the decoder skips the inverse DCT's AC terms and the Lanczos resizes
# shrink 4 times less: 0.5 ms an image less than at 1/4 on the bench's photos (docs/dedup.md
# re-measures the radius curve at this scale).
DRAFT_SIZE = (64, 64)
PHASH_INPUT = 32  # imagehash.phash's own resize target (hash_size 8 x highfreq_factor 4)
PHASH_SIZE = 8


@functools.cache
def _dct_rows(points: int, keep: int) -> np.ndarray:
    """The first `keep` rows of the unnormalised DCT-II matrix on `points` points: the transform
    `scipy.fftpack.dct(x, axis=0)` applies (type 2, no norm), as a matrix."""
    k = np.arange(keep)[:, None]
    n = np.arange(points)[None, :]
    return 2.0 * np.cos(np.pi * k * (2 * n + 1) / (2 * points))


def _phash(pixels: np.ndarray) -> str:
    """`imagehash.phash` of a 32x32 grayscale array: the 8x8 lowest DCT frequencies against their
    median. Only those 64 coefficients are computed (two small matrix products instead of two
    full FFT-based DCTs), and a decode worker never imports scipy (0.14 s of its start)."""
    rows = _dct_rows(PHASH_INPUT, PHASH_SIZE)
    low = rows @ pixels @ rows.T
    # A coefficient that is zero in exact arithmetic (flat areas, ramps, symmetric images) comes
    # out of the FFT as 0.0 but out of the matrix products as rounding noise (~1e-12) whose sign
    # would set bits: snap those to zero, as the FFT has them.
    low[np.abs(low) < 1e-6] = 0.0
    return str(imagehash.ImageHash(low > np.median(low)))


@dataclass(frozen=True, slots=True)
class ImageHashes:
    phash: str  # 16 lowercase hex digits (64 bits)
    phash_mirror: str  # pHash of the horizontal mirror, so mirrored copies match
    dhash: str  # tie-breaker
    method: str


def prepare(image: Image.Image) -> Image.Image:
    """Ask the decoder for a reduced grayscale decode; call before the first `load()`.

    Works on JPEG (draft mode); other formats decode fully. Read `image.size` first if
    the original size is needed: draft mode changes it.
    """
    if image.format == "JPEG":
        image.draft("L", DRAFT_SIZE)
    return image


def hash_image(image: Image.Image) -> ImageHashes:
    """Hashes of an opened (ideally `prepare`d) image; decodes it if not yet loaded."""
    gray = image.convert("L")
    # Resize once: phash of the 32x32 image equals phash of `gray` (imagehash resizes to 32x32
    # with the same filter and skips a same-size resize), and mirroring 32x32 pixels instead of
    # the whole decode is the cheap way to the mirrored hash (`_phash` equals `imagehash.phash`
    # on them: tests/schema/test_hashing.py). dHash's 9x8 comes from the same 32x32 (a second Lanczos
    # pass over the whole decode cost as much as the first).
    small = gray.resize((PHASH_INPUT, PHASH_INPUT), Image.Resampling.LANCZOS)
    pixels = np.asarray(small, dtype=np.float64)
    return ImageHashes(
        phash=_phash(pixels),
        phash_mirror=_phash(pixels[:, ::-1]),  # the columns reversed: ImageOps.mirror's pixels
        dhash=str(imagehash.dhash(small)),
        method=HASH_METHOD,
    )


def hash_bytes(data: bytes) -> ImageHashes:
    """Hashes of encoded image bytes, through the same pinned decode path as ingestion.

    Raises what Pillow raises for bytes it cannot decode (`OSError`, `ValueError`,
    `Image.DecompressionBombError`); callers record those as rejections.
    """
    with Image.open(io.BytesIO(data)) as image:
        return hash_image(prepare(image))


def fine_phash(data: bytes) -> tuple[str, str]:
    """256-bit pHash of encoded bytes and of their mirror (64 hex digits each), same decode path.

    Not stored: dedup computes it on demand to tell a product's copies (a few bits apart)
    from its distinct near-identical views (front and back), which 64 bits cannot separate.
    """
    with Image.open(io.BytesIO(data)) as image:
        gray = prepare(image).convert("L")
    return (
        str(imagehash.phash(gray, hash_size=16, highfreq_factor=4)),
        str(imagehash.phash(ImageOps.mirror(gray), hash_size=16, highfreq_factor=4)),
    )


def hamming(a: str, b: str) -> int:
    """Bits that differ between two hashes of equal hex length."""
    return (int(a, 16) ^ int(b, 16)).bit_count()
