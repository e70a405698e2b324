"""Peak memory of one release evaluation, the way the flow's `evaluate` step calls it.

    python bench/eval_memory.py --home /tmp/scale-bench/w700/home-700x --version v20261201 \
        --out /tmp/eval-memory.json

Reads the release and the model's embedding cache (it only writes the cache when images are
missing from it); prints peak RSS (`ru_maxrss`, the kernel's high-water mark of this process),
wall time and the overall scores, so runs before and after a change can be compared.
"""

from __future__ import annotations

import argparse
import json
import resource
import time

from lookbench_live.evaluation.evaluate import run_evaluation
from lookbench_live.warehouse.lake import Lake


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", required=True)
    parser.add_argument("--version", default="latest")
    parser.add_argument("--model", default=None)
    parser.add_argument("--chunk-size", type=int, default=65536)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    lake = Lake(args.home)
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    start = time.perf_counter()
    run = run_evaluation(lake, args.version, model=args.model, chunk_size=args.chunk_size)
    result = run.result()
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
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
