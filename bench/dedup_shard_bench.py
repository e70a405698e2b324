"""The dedup search in hash-prefix shards against the flat search, same hashes, same run.

    OMP_NUM_THREADS=1 .venv/bin/python bench/dedup_shard_bench.py --queries 70000 --radius 4 --shards 2 8

A month's search: `--queries` new hashes against themselves plus as many earlier ones (the
references), at `--radius`. The flat engine (faiss `IndexBinaryFlat`) runs on all of it; the
sharded search (dedup/shards.py) runs each shard here one after the other and reports the CPU
time of the slowest shard (the wall time with one worker per shard), their sum, and the rows
each shard receives. Both must return the same pairs (checked). Random hashes are the best case
for the part join: real pHashes cluster (plain backgrounds), which makes buckets larger.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from lookbench_live.dedup.index import merge_pairs, range_pairs
from lookbench_live.dedup.shards import _unique, shard_inputs, shard_pairs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=70_000)
    parser.add_argument("--radius", type=int, default=4)
    parser.add_argument("--shards", type=int, nargs="+", default=[2, 8])
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    queries = rng.integers(0, 256, (args.queries, 8), dtype=np.uint8)
    targets = np.concatenate([queries, rng.integers(0, 256, (args.queries, 8), dtype=np.uint8)])

    started = time.process_time()
    flat = range_pairs(queries, targets, args.radius, engine="flat")
    flat_cpu = time.process_time() - started
    print(
        f"flat: {flat_cpu:.2f} s CPU, {len(flat)} pairs ({len(queries)} x {len(targets)}, radius {args.radius})"
    )
    for count in args.shards:
        started = time.process_time()
        inputs = shard_inputs(queries, targets, args.radius, count)
        plan_cpu = time.process_time() - started
        per_shard, found = [], []
        for shard in inputs:
            started = time.process_time()
            found.append(shard_pairs(*shard))
            per_shard.append(time.process_time() - started)
        merged = _unique(merge_pairs(found))
        same = np.array_equal(merged.query, flat.query) and np.array_equal(merged.target, flat.target)
        sent = max(len(shard[0]) + len(shard[1]) for shard in inputs)
        print(
            f"{count} shards: planning {plan_cpu:.2f} s, slowest shard {max(per_shard):.2f} s, "
            f"sum {sum(per_shard):.2f} s CPU; at most {sent} of {len(queries) + len(targets)} rows "
            f"sent to a shard; same pairs as flat: {same}"
        )
        if not same:
            raise SystemExit("the sharded search differs from the flat search")


if __name__ == "__main__":
    main()
