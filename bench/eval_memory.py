"""Peak memory of one release evaluation, the way the flow's `evaluate` step calls it.

    python bench/eval_memory.py --home /tmp/scale-bench/w700/home-700x --version v20261201 \
        --out /tmp/eval-memory.json

Reads the release and the model's embedding cache (it only writes the cache when images are
missing from it); prints peak RSS (VmHWM, the kernel's high-water mark of this process image),
wall time and the overall scores, so runs before and after a change can be compared.

Without a kept 700× lake, `--synthetic DIR` first writes (once) a release of the 700× month's shape
into the lake at DIR: 26,361 queries, corpora 57,149 / 39,783 / 47,589 / 35,587 (gallery + a
noise gallery of 35,000), 101,469 images, and a baseline-model cache of random 1,836-d float32
embeddings (0.75 GB), so evaluation reads the cache and embeds nothing, as after the flow's
sharded embedding or a finished earlier run:

    python bench/eval_memory.py --synthetic /tmp/evalmem/synth700 --out /tmp/evalmem/synth.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa

from lookbench_live.evaluation.baseline import BASELINE_NAME
from lookbench_live.evaluation.evaluate import run_evaluation
from lookbench_live.evaluation.vectors import Vectors, cache_path, save_cache
from lookbench_live.schema.release import RELEASE_SCHEMA, SUBSETS
from lookbench_live.warehouse.lake import Lake, atomic_write_bytes, parquet_bytes

SYNTH_VERSION = "v20261201"
# The kept 700× release (docs/benchmarks.md): queries and gallery per subset, noise shared.
SYNTH_QUERIES = (9_100, 6_200, 6_400, 4_661)
SYNTH_GALLERY = (22_149, 4_783, 12_589, 587)
SYNTH_NOISE = 35_000
SYNTH_DIM = 1836  # the baseline model's width (evaluation/baseline.py)
CATEGORIES = 24
GROUPS = ("colour", "pattern", "material", "sleeve", "neckline", "length")


def _synthetic_rows(subset: str, split: str, n: int, start: int, rng: np.random.Generator) -> pa.Table:
    """`n` release rows with labels drawn at random; image bytes are a placeholder (never decoded:
    the cache holds every embedding). Items repeat so that queries have gallery matches."""
    ids = np.arange(start, start + n)
    cat = rng.integers(0, CATEGORIES, n)
    main = rng.integers(0, 4, n)
    item = rng.integers(0, max(1, n // 3), n) if split == "gallery" else rng.integers(0, max(1, n // 2), n)
    values = rng.integers(0, 5, (n, len(GROUPS)))
    shas = [hashlib.sha256(b"synthetic-%d" % i).hexdigest() for i in ids]
    when = dt.datetime(2026, 11, 15, tzinfo=dt.UTC)
    rows = {
        "image": [{"bytes": b"x", "path": None}] * n,
        "raw_image": [{"bytes": b"x", "path": None}] * n,
        "category": [f"cat{c}" if subset != "noise" else "noise data" for c in cat],
        "main_attribute": [f"m{m}" for m in main],
        "other_attributes": [""] * n,
        "bbox": [None] * n,
        "item_ID": [f"{subset}-{i}" for i in item],
        "task": ["synthetic"] * n,
        "difficulty": ["easy"] * n,
        "sha256": shas,
        "raw_sha256": shas,
        "first_seen_at": [when] * n,
        "published_at": [when] * n,
        "source": ["synthetic"] * n,
        "source_url": [f"https://synthetic.example/{i}" for i in ids],
        "taxonomy_version": ["synthetic"] * n,
        "annotation_model": ["synthetic"] * n,
        "attributes": [
            [{"key": g, "value": f"v{v}"} for g, v in zip(GROUPS, row, strict=True)] for row in values
        ],
        "provenance": ["{}"] * n,
    }
    return pa.Table.from_pydict({k: rows.get(k, [None] * n) for k in RELEASE_SCHEMA.names}, RELEASE_SCHEMA)


def write_synthetic(home: str) -> Lake:
    """The 700×-shaped release and its baseline cache at `home` (skipped when already there)."""
    lake = Lake(home)
    if lake.fs.exists(cache_path(lake, SYNTH_VERSION, BASELINE_NAME)):
        return lake
    rng = np.random.default_rng(700)
    base = lake.path("releases", SYNTH_VERSION)
    files: dict[str, dict] = {}
    shas: list[str] = []
    start = 0
    parts = [(s, sp, n) for s, q, g in zip(SUBSETS, SYNTH_QUERIES, SYNTH_GALLERY, strict=True)
             for sp, n in (("query", q), ("gallery", g))] + [("noise", "gallery", SYNTH_NOISE)]  # fmt: skip
    for subset, split, n in parts:
        table = _synthetic_rows(subset, split, n, start, rng)
        start += n
        shas += table.column("sha256").to_pylist()
        data = parquet_bytes(table)
        atomic_write_bytes(lake.fs, f"{base}/{subset}/{split}.parquet", data)
        files[f"{subset}/{split}.parquet"] = {
            "sha256": hashlib.sha256(data).hexdigest(), "size": len(data), "rows": table.num_rows,
        }  # fmt: skip
    body = {"version": SYNTH_VERSION, "files": files, "rows": {k: v["rows"] for k, v in files.items()}}
    atomic_write_bytes(lake.fs, f"{base}/manifest.json", json.dumps(body).encode())
    atomic_write_bytes(
        lake.fs, lake.path("releases", "LATEST"), json.dumps({"version": SYNTH_VERSION}).encode()
    )
    matrix = rng.standard_normal((len(shas), SYNTH_DIM), dtype=np.float32)
    save_cache(lake, SYNTH_VERSION, BASELINE_NAME, Vectors(shas, matrix))
    return lake


def hwm_mb() -> float:
    """This process image's peak RSS (VmHWM). Unlike `ru_maxrss`, which an exec'd child inherits
    from its parent (the synthetic writer's peak), it starts afresh at exec."""
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", default=None)
    parser.add_argument(
        "--synthetic", default=None, help="write (once) and evaluate a 700×-shaped release here"
    )
    parser.add_argument("--version", default="latest")
    parser.add_argument("--model", default=None)
    parser.add_argument("--chunk-size", type=int, default=65536)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    if args.synthetic:
        write_synthetic(args.synthetic)
        # Measured in a fresh process: the writer's own peak must not count as evaluation's.
        argv = list(sys.argv[1:])
        i = argv.index("--synthetic")
        argv[i : i + 2] = ["--home", args.synthetic, "--version", SYNTH_VERSION]
        raise SystemExit(subprocess.call([sys.executable, __file__, *argv]))
    if not args.home:
        parser.error("--home or --synthetic is required")
    lake = Lake(args.home)
    base_rss = hwm_mb()
    start = time.perf_counter()
    run = run_evaluation(lake, args.version, model=args.model, chunk_size=args.chunk_size)
    result = run.result()
    seconds = time.perf_counter() - start
    peak = hwm_mb()
    report = {
        "release": result["release"],
        "model": result["model"],
        "corpus": result["subsets"] and {k: v["corpus"] for k, v in result["subsets"].items()},
        "queries": result["overall"]["queries"],
        "peak_rss_mb": round(peak, 1),
        "rss_before_evaluation_mb": round(base_rss, 1),
        "seconds": round(seconds, 1),
        "result": result,
    }
    text = json.dumps(report, indent=1, sort_keys=True)
    if args.out:
        with open(args.out, "w") as handle:
            handle.write(text)
    print(json.dumps({k: v for k, v in report.items() if k != "result"}, indent=1))


if __name__ == "__main__":
    main()
