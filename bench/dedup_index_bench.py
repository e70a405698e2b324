"""Dedup's load + search on a long history: the old whole-file index against the sharded one.

A lake is written with `--refs` kept images of history (as `images` and `dedup_decisions`
fragments, in `--months` months, with random 64-bit hashes), its dedup index is built (untimed:
the steady state, every earlier month already indexed), then a month of `--pending` new images
arrives (random hashes plus near copies of history, many with flipped leading bits), and
`run_dedup` decides them. Each measurement runs in its own process on its own copy of the lake:
wall time, the process's peak RSS, and the same process's RSS after imports only,
so the difference is what dedup itself held (`VmHWM`, `VmRSS`: `ru_maxrss` carries the parent's peak
across exec). A separate process first times `history.load` alone (the index as the history
left it): the part that can grow with history. `--old-ref` names the commit whose `dedup/` is the
old code (the whole-file index, `derived/dedup_index.parquet`): it is run from a copy of that
commit's `dedup/` package. Both must write the same decisions: the bench checks it.

    .venv/bin/python bench/dedup_index_bench.py --refs 70000,800000 --pending 70000
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from lookbench_live.schema.hashing import HASH_METHOD
from lookbench_live.schema.records import DedupDecision, ImageRecord, arrow_schema_of
from lookbench_live.warehouse.lake import Lake, atomic_write_bytes, key_digests, parquet_bytes

OLD_REF = "ad153b2"  # the last commit with the whole-file index
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
CHUNK = 100_000


def _hex(values: np.ndarray) -> list[str]:
    return [f"{v:016x}" for v in values.tolist()]


def _write_fragment(lake: Lake, table: str, arrow: pa.Table, keys: list[str]) -> None:
    """What `Lake.append` writes (fragment + key segment), without building a record per row."""
    first = arrow.column("sha256")[0].as_py()
    digest = hashlib.sha256(f"{table}/{first}/{len(arrow)}".encode())
    path = lake.path("tables", table, f"part-{digest.hexdigest()[:24]}.parquet")
    lake.fs.makedirs(lake.table_dir(table), exist_ok=True)
    atomic_write_bytes(lake.fs, path, parquet_bytes(arrow))
    lake._write_segment(table, path, key_digests(arrow.select(keys)))


def _images(
    prefix: str, phash: np.ndarray, mirror: np.ndarray, dhash: np.ndarray, seen: dt.datetime
) -> pa.Table:
    n = len(phash)
    shas = [hashlib.sha256(f"{prefix}-{i}".encode()).hexdigest() for i in range(n)]
    schema = arrow_schema_of(ImageRecord)
    columns: dict[str, Any] = {
        "source_url": [f"https://shop.example/{s}.jpg" for s in shas],
        "owner_kind": ["product"] * n,
        "owner_id": [f"{prefix}-{i // 2}" for i in range(n)],  # two photos per product
        "source": ["shop"] * n,
        "position": [i % 2 for i in range(n)],
        "status": ["ok"] * n,
        "sha256": shas,
        "width": [800] * n,
        "height": [1000 + (i % 7) for i in range(n)],
        "phash": _hex(phash),
        "phash_mirror": _hex(mirror),
        "dhash": _hex(dhash),
        "hash_method": [HASH_METHOD] * n,
        "fetched_at": [seen] * n,
        "first_seen_at": [seen + dt.timedelta(seconds=i % 86_400) for i in range(n)],
        "created_at": [seen] * n,
    }
    return pa.table(
        {f.name: pa.array(columns.get(f.name, [None] * n), f.type) for f in schema}, schema=schema
    )


def _kept(images: pa.Table, run_id: str) -> pa.Table:
    n = images.num_rows
    schema = arrow_schema_of(DedupDecision)
    columns: dict[str, Any] = {
        "sha256": images.column("sha256"),
        "hash_method": [HASH_METHOD] * n,
        "decision": ["kept"] * n,
        "run_id": [run_id] * n,
        "canonical_owner_kind": images.column("owner_kind"),
        "canonical_owner_id": images.column("owner_id"),
        "duplicate_owners": [[] for _ in range(n)],
        "created_at": [T0] * n,
    }
    return pa.table(
        {f.name: pa.array(columns.get(f.name, [None] * n), f.type) for f in schema}, schema=schema
    )


def _flip(rng: np.random.Generator, values: np.ndarray, bits: int) -> np.ndarray:
    """`values` with `bits` random bits flipped each, one of them among the leading 16 bits."""
    out = values.copy()
    for k in range(len(out)):
        positions = [int(rng.integers(48, 64))] + [int(p) for p in rng.choice(48, bits - 1, replace=False)]
        for p in positions:
            out[k] ^= np.uint64(1 << p)
    return out


def write_history(home: Path, refs: int, months: int, seed: int) -> np.ndarray:
    """`refs` kept images in `months` months; returns their pHashes (for planting copies)."""
    rng = np.random.default_rng(seed)
    lake = Lake(home)
    phash = rng.integers(0, 2**64, refs, dtype=np.uint64)
    mirror = rng.integers(0, 2**64, refs, dtype=np.uint64)
    dhash = rng.integers(0, 2**64, refs, dtype=np.uint64)
    bounds = np.linspace(0, refs, months + 1).astype(int)
    for month in range(months):
        seen = T0 + dt.timedelta(days=31 * month)
        for lo in range(bounds[month], bounds[month + 1], CHUNK):
            hi = min(lo + CHUNK, bounds[month + 1])
            images = _images(f"h{month}-{lo}", phash[lo:hi], mirror[lo:hi], dhash[lo:hi], seen)
            _write_fragment(lake, "images", images, list(ImageRecord.__key__))
            _write_fragment(lake, "dedup_decisions", _kept(images, f"m{month}"), ["sha256"])
    return phash


def write_pending(home: Path, history: np.ndarray, pending: int, seed: int, radius: int = 4) -> None:
    """A month of `pending` images: 90 % random, 10 % near copies of history (half at the radius,
    a leading bit among the flipped ones, so the copy's prefix differs)."""
    rng = np.random.default_rng(seed + 1)
    copies = pending // 10
    phash = rng.integers(0, 2**64, pending, dtype=np.uint64)
    picked = history[rng.integers(0, len(history), copies)]
    phash[:copies] = _flip(rng, picked, radius) if copies else phash[:copies]
    phash[copies : 2 * copies] = _flip(rng, picked, 2) if copies else phash[copies : 2 * copies]
    mirror = rng.integers(0, 2**64, pending, dtype=np.uint64)
    dhash = rng.integers(0, 2**64, pending, dtype=np.uint64)
    seen = T0 + dt.timedelta(days=400)
    lake = Lake(home)
    for lo in range(0, pending, CHUNK):
        hi = min(lo + CHUNK, pending)
        images = _images(f"new-{lo}", phash[lo:hi], mirror[lo:hi], dhash[lo:hi], seen)
        _write_fragment(lake, "images", images, list(ImageRecord.__key__))


# ---------------------------------------------------------------------- one measured process
CHILD = r"""
import importlib.util, json, sys, time
code, home, mode = sys.argv[1], sys.argv[2], sys.argv[3]


def status(field):
    # VmHWM: this process's peak resident set (ru_maxrss would carry the parent's across exec).
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024


import lookbench_live
if code != "-":
    # The old dedup package, from a copy of its commit's files, under its real name.
    spec = importlib.util.spec_from_file_location(
        "lookbench_live.dedup", code + "/__init__.py", submodule_search_locations=[code])
    module = importlib.util.module_from_spec(spec)
    sys.modules["lookbench_live.dedup"] = module
    spec.loader.exec_module(module)
from lookbench_live.config import DedupSettings
from lookbench_live.dedup import history, run_dedup
from lookbench_live.warehouse.lake import Lake
import faiss, numpy, pyarrow.parquet  # everything dedup imports, so the baseline holds them
base = status("VmRSS")
start = time.perf_counter()
if mode == "index":
    history.caught_up(Lake(home))
    print(json.dumps({"wall_s": time.perf_counter() - start}))
elif mode == "load":
    history.load(Lake(home))
    print(json.dumps({"load_s": time.perf_counter() - start, "load_peak_mb": status("VmHWM") - base}))
else:
    result = run_dedup(Lake(home), DedupSettings(), "new-month")
    wall = time.perf_counter() - start
    print(json.dumps({"wall_s": wall, "peak_rss_mb": status("VmHWM"), "base_rss_mb": base,
                      "pending": result.pending, "kept": result.kept, "references": result.references}))
"""


def _child(code: str, home: Path, mode: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, code, str(home), mode], check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _old_code(repo: Path, ref: str, into: Path) -> Path:
    target = into / "dedup_old"
    target.mkdir(parents=True, exist_ok=True)
    names = subprocess.run(
        ["git", "-C", str(repo), "ls-tree", "--name-only", ref, "dedup/"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    for name in names:
        data = subprocess.run(
            ["git", "-C", str(repo), "show", f"{ref}:{name}"], check=True, capture_output=True
        ).stdout
        (target / Path(name).name).write_bytes(data)
    return target


def _decisions(home: Path) -> dict[str, tuple[Any, ...]]:
    rows = Lake(home).read(
        "dedup_decisions", columns=["sha256", "decision", "reason", "matched_sha256", "distance", "run_id"]
    )
    return {
        r["sha256"]: (r["decision"], r["reason"], r["matched_sha256"], r["distance"])
        for r in rows.to_pylist()
        if r["run_id"] == "new-month"
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--refs", default="70000,800000", help="kept images of history, comma-separated")
    parser.add_argument("--months", default="1,11", help="months the history spans, one per --refs")
    parser.add_argument("--pending", type=int, default=70_000)
    parser.add_argument("--old-ref", default=OLD_REF)
    parser.add_argument("--codes", default="old,new")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    repo = Path(__file__).resolve().parents[1]
    work = args.workdir or Path(tempfile.mkdtemp(prefix="dedup-index-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    codes = {"old": str(_old_code(repo, args.old_ref, work)), "new": "-"}
    results = []
    for refs, months in zip(
        (int(r) for r in args.refs.split(",")), (int(m) for m in args.months.split(",")), strict=True
    ):
        base = work / f"history-{refs}"
        if not base.exists():
            t = time.perf_counter()
            history = write_history(base, refs, months, seed=refs)
            np.save(work / f"history-{refs}.npy", history)
            print(
                f"history of {refs:,} images in {months} months written in {time.perf_counter() - t:.1f} s",
                flush=True,
            )
        history = np.load(work / f"history-{refs}.npy")
        decided: dict[str, dict[str, tuple[Any, ...]]] = {}
        for code in args.codes.split(","):
            indexed = work / f"history-{refs}-{code}"
            if not indexed.exists():  # the steady state: history already indexed (built once)
                shutil.copytree(base, work / "tmp-indexed")
                built = _child(codes[code], work / "tmp-indexed", "index")["wall_s"]
                (work / "tmp-indexed" / "index_build_s").write_text(f"{built:.1f}")
                (work / "tmp-indexed").rename(indexed)
            home = work / f"run-{refs}-{code}"
            shutil.rmtree(home, ignore_errors=True)
            shutil.copytree(indexed, home)
            write_pending(home, history, args.pending, seed=refs)
            row = {
                "code": code,
                "refs": refs,
                "months": months,
                "pending": args.pending,
                "index_build_s": float((indexed / "index_build_s").read_text()),
                **_child(codes[code], home, "load"),  # the history's index alone, before the month
                **_child(codes[code], home, "month"),
            }
            print(json.dumps(row), flush=True)
            results.append(row)
            decided[code] = _decisions(home)
            shutil.rmtree(home)
        if len(decided) == 2:
            a, b = decided.values()
            same = a == b
            print(f"refs {refs:,}: decisions identical: {same} ({len(a):,} decisions)", flush=True)
            if not same:
                return 1
    print(f"load average: {os.getloadavg()}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
