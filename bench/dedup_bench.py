"""Dedup speed: hashing against the plain imagehash call, and the 1M all-vs-all search.

    .venv/bin/python bench/dedup_bench.py --images 300 --search-n 1000000 --flat-n 100000

1. Decode + hash of 800x1000 JPEGs from disk: our `hash_bytes` (draft-mode decode, pHash,
   mirrored pHash, dHash) against `imagehash.phash(Image.open(p))`, in the same run, with the
   agreement of the two pHashes (share identical, largest distance).
2. All-vs-all range search of N random 64-bit hashes at radius 8: the `mih` engine (exact,
   multi-index prefilter) on N, and faiss `IndexBinaryFlat` on `--flat-n` (its cost grows with
   N^2, so it is extrapolated to N and labelled so). Peak RSS from getrusage.
"""

from __future__ import annotations

import argparse
import random
import resource
import tempfile
import time
from pathlib import Path

import imagehash
import numpy as np
from PIL import Image

from lookbench_live.dedup.index import range_pairs
from lookbench_live.schema.hashing import hamming, hash_bytes
from lookbench_live.testing.calibration import draw_garment, garment_specs, jpeg


def bench_hashing(n: int) -> None:
    specs = garment_specs(5, seed=1)
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i in range(n):
            spec = specs[i % len(specs)]
            photo = draw_garment(spec, (800, 1000)) if i < len(specs) else None
            if photo is None:
                data = (Path(tmp) / f"{i % len(specs)}.jpg").read_bytes()
                # distinct bytes per file so nothing is cached by content
                data = data + random.Random(i).randbytes(8)
            else:
                data = jpeg(photo, 90)
            path = Path(tmp) / f"{i}.jpg"
            path.write_bytes(data)
            paths.append(path)
        for p in paths[:5]:  # warm the page cache for both
            p.read_bytes()
        t = time.perf_counter()
        plain = [str(imagehash.phash(Image.open(p))) for p in paths]
        plain_s = time.perf_counter() - t
        t = time.perf_counter()
        ours = [hash_bytes(p.read_bytes()) for p in paths]
        ours_s = time.perf_counter() - t
    distances = [hamming(a, b.phash) for a, b in zip(plain, ours, strict=True)]
    print(f"hashing {n} 800x1000 JPEGs, one process:")
    print(
        f"  plain imagehash.phash(Image.open(p)): {n / plain_s:.0f} img/s ({plain_s / n * 1000:.2f} ms/img, pHash only)"
    )
    print(
        f"  hash_bytes (pHash + mirrored pHash + dHash): {n / ours_s:.0f} img/s ({ours_s / n * 1000:.2f} ms/img)"
    )
    print(
        f"  speed-up {plain_s / ours_s:.2f}x; identical pHash {sum(d == 0 for d in distances) / n:.1%}, "
        f"max distance {max(distances)}"
    )


def bench_search(n: int, flat_n: int, radius: int) -> None:
    rng = np.random.default_rng(0)
    hashes = rng.integers(0, 256, (n, 8), dtype=np.uint8)
    t = time.perf_counter()
    pairs = range_pairs(hashes, hashes, radius, engine="mih")
    mih_s = time.perf_counter() - t
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2
    off_diagonal = int((pairs.query != pairs.target).sum())
    print(f"all-vs-all {n:,} random 64-bit hashes, radius {radius}:")
    print(f"  mih (exact): {mih_s:.1f} s, {off_diagonal} pairs besides self, peak RSS {rss:.2f} GB")
    sub = hashes[:flat_n]
    t = time.perf_counter()
    flat = range_pairs(sub, sub, radius, engine="flat")
    flat_s = time.perf_counter() - t
    mih_sub = range_pairs(sub, sub, radius, engine="mih")
    same = np.array_equal(flat.query, mih_sub.query) and np.array_equal(flat.target, mih_sub.target)
    print(
        f"  IndexBinaryFlat (chunked) on {flat_n:,}: {flat_s:.1f} s -> about {flat_s * (n / flat_n) ** 2:.0f} s "
        f"extrapolated to {n:,} (N^2); same pairs as mih on that subset: {same}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=300)
    parser.add_argument("--search-n", type=int, default=1_000_000)
    parser.add_argument("--flat-n", type=int, default=100_000)
    parser.add_argument("--radius", type=int, default=8)
    args = parser.parse_args()
    bench_hashing(args.images)
    bench_search(args.search_n, args.flat_n, args.radius)


if __name__ == "__main__":
    main()
