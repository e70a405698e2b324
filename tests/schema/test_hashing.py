"""The pinned hash path (`schema/hashing.py`): the pHash equals imagehash's, decode workers stay light."""

from __future__ import annotations

import io
import subprocess
import sys

import imagehash
import numpy as np
import pytest
from PIL import Image, ImageOps

from lookbench_live.schema.hashing import HASH_METHOD, PHASH_INPUT, hash_bytes, hash_image


def _images() -> list[Image.Image]:
    rng = np.random.default_rng(7)
    arrays = [np.full((32, 32), v, np.uint8) for v in (0, 1, 128, 255)]  # DCT ties everywhere
    arrays += [rng.integers(0, 256, (32, 32), dtype=np.uint8) for _ in range(300)]
    smooth = [rng.integers(0, 256, (4, 4), dtype=np.uint8) for _ in range(300)]
    arrays += [np.asarray(Image.fromarray(a).resize((32, 32), Image.Resampling.BILINEAR)) for a in smooth]
    halves = [rng.integers(0, 256, (32, 16), dtype=np.uint8) for _ in range(100)]
    arrays += [np.concatenate([h, h[:, ::-1]], axis=1) for h in halves]  # mirror-symmetric
    return [Image.fromarray(a, "L") for a in arrays]


def test_phash_and_mirror_equal_imagehash_on_the_32px_input() -> None:
    """`hash_image` computes only the 64 low DCT coefficients (matrix products, no scipy); the
    bits are imagehash.phash's of the same 32x32 grayscale input and of its mirror."""
    for image in _images():
        hashes = hash_image(image)
        assert hashes.phash == str(imagehash.phash(image))
        assert hashes.phash_mirror == str(imagehash.phash(ImageOps.mirror(image)))
        assert hashes.dhash == str(imagehash.dhash(image))
        assert hashes.method == HASH_METHOD


def test_a_photo_hashes_like_imagehash_on_its_draft_decode() -> None:
    rng = np.random.default_rng(3)
    base = rng.integers(0, 256, (10, 8, 3), dtype=np.uint8)
    photo = Image.fromarray(base).resize((800, 1000), Image.Resampling.BICUBIC)
    buffer = io.BytesIO()
    photo.save(buffer, "JPEG", quality=90)
    decoded = Image.open(io.BytesIO(buffer.getvalue()))
    decoded.draft("L", (64, 64))
    small = decoded.convert("L").resize((PHASH_INPUT, PHASH_INPUT), Image.Resampling.LANCZOS)
    assert decoded.size == (100, 125)  # 1/8 scale
    hashes = hash_bytes(buffer.getvalue())
    assert hashes.phash == str(imagehash.phash(small))
    assert hashes.phash_mirror == str(imagehash.phash(ImageOps.mirror(small)))


@pytest.mark.parametrize("size", [(1, 1), (3, 2000)])
def test_degenerate_sizes_hash(size: tuple[int, int]) -> None:
    image = Image.new("RGB", size, (200, 10, 10))
    assert len(hash_image(image).phash) == 16


def test_a_decode_worker_validates_and_hashes_without_importing_scipy() -> None:
    """Each decode worker is a fresh interpreter: what it imports is paid per worker and per
    replacement. Hashing in it must not pull scipy in (0.14 s of CPU a worker)."""
    code = (
        "import io, sys\n"
        "from PIL import Image\n"
        "from lookbench_live.config import IngestSettings\n"
        "from lookbench_live.ingest.workers import process_image\n"
        "from lookbench_live.ingest.validator import validate_image\n"
        "b = io.BytesIO(); Image.linear_gradient('L').convert('RGB').resize((300, 400)).save(b, 'JPEG')\n"
        "result = process_image(b.getvalue(), IngestSettings(), validate_image, None)\n"
        "assert type(result).__name__ == 'Processed', result\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'scipy'))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"
