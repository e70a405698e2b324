"""Perceptual hashes computed from the one decode that ingestion does.

One decode and resize path is pinned and named (`HASH_METHOD`): JPEG draft mode
(DCT-domain downscaling) makes hashing several times faster but changes a few bits
against a full decode, so hashes made by different methods are never compared.
"""

from __future__ import annotations

from dataclasses import dataclass

import imagehash
from PIL import Image, ImageOps

# Bump the suffix when anything in `hash_image` changes.
HASH_METHOD = f"phash64+dhash64/draft-L-256/imagehash-{imagehash.__version__}/v1"
DRAFT_SIZE = (256, 256)


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
    mirror = ImageOps.mirror(gray)
    return ImageHashes(
        phash=str(imagehash.phash(gray)),
        phash_mirror=str(imagehash.phash(mirror)),
        dhash=str(imagehash.dhash(gray)),
        method=HASH_METHOD,
    )


def hamming(a: str, b: str) -> int:
    """Bits that differ between two 16-hex-digit hashes."""
    return (int(a, 16) ^ int(b, 16)).bit_count()
