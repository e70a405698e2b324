"""Same-run A/B of image ingestion: img2dataset, then our code of another commit, then ours.

    .venv/bin/python bench/ingest_ab.py --before-path DIR [--images 5000] [--rounds 3]

`DIR` holds an older checkout laid out as the `lookbench_live` package (for commit C:
`git archive C | tar -x -C src`, then `src/core` copied to `DIR/lookbench_live` and each other
package folder of pyproject's `package-dir` to `DIR/lookbench_live/<name>`). Each round runs
`ingest_bench.run_img2dataset`, then `ingest_bench.run_ours` in a fresh process with `DIR` first
on `PYTHONPATH` ("before"), then in a fresh process with this checkout ("after"), all on the
bench's one nginx and the same URLs; the ratios compare runs of one round.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import ingest_bench as bench


def one(port: int, images: int, workers: int) -> None:
    urls = [f"http://127.0.0.1:{port}/{i:06d}.jpg" for i in range(images)]
    with tempfile.TemporaryDirectory() as tmp:
        seconds, cpu, note = bench.measured(bench.run_ours, urls, workers, Path(tmp))
    print(json.dumps({"secs": seconds, "cpu": cpu, "note": note}))


def ours(port: int, images: int, workers: int, pythonpath: str | None) -> dict[str, float]:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    command = [
        sys.executable,
        __file__,
        "--one",
        str(port),
        "--images",
        str(images),
        "--workers",
        str(workers),
    ]
    done = subprocess.run(
        command, env=env, capture_output=True, text=True, cwd=tempfile.gettempdir(), check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before-path", help="the older checkout, laid out as the lookbench_live package")
    parser.add_argument("--images", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--i2d", default="/tmp/i2d-venv/bin/img2dataset")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # internal: one run on this port
    args = parser.parse_args()
    if args.one:
        one(args.one, args.images, args.workers)
        return
    if not args.before_path:
        parser.error("--before-path is required")
    n = args.images
    root = Path(tempfile.gettempdir()) / "lookbench-ingest-bench"
    bench.make_images(root / "www", n)
    ratios: dict[str, list[float]] = {"before": [], "after": []}
    with bench.Server(root) as server, tempfile.TemporaryDirectory() as tmp:
        urls = [f"http://127.0.0.1:{server.port}/{i:06d}.jpg" for i in range(n)]
        for r in range(args.rounds):
            load = os.getloadavg()[0]
            peer_s, peer_cpu, _ = bench.measured(bench.run_img2dataset, urls, args.i2d, Path(tmp))
            line = f"round {r + 1} (load {load:.1f}): img2dataset {n / peer_s:.0f} img/s, {peer_cpu / n * 1000:.2f} ms CPU/img"
            for name, path in (("before", args.before_path), ("after", None)):
                got = ours(server.port, n, args.workers, path)
                ratios[name].append(peer_s / got["secs"])
                line += (
                    f" | {name}: {n / got['secs']:.0f} img/s ({ratios[name][-1]:.2f}x),"
                    f" {got['cpu'] / n * 1000:.2f} ms CPU/img"
                )
            print(line, flush=True)
    print(
        f"median rate ratio vs img2dataset: before {statistics.median(ratios['before']):.2f}, "
        f"after {statistics.median(ratios['after']):.2f}"
    )


if __name__ == "__main__":
    main()
