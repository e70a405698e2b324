"""Peak memory of `export` (to a folder and to a .tar) against `release verify`, on one large release.

    .venv/bin/python bench/export_bench.py --mb 400 --work /tmp/export-bench --out /tmp/export-bench.json

Builds a committed release from the test lake (`tests/lakefill.py`) whose report is `--mb` MiB of
random bytes (added to the staging folder before the commit, as the refresh adds report.html,
so it is checksummed, listed and verified like any file), then runs each command in a fresh
child process and prints its peak RSS (`ru_maxrss` of the child) and wall time. Issue 24 §7
measured the old export at 1.0 GB (folder) and 1.9 GB (tar) for a 412 MB release, against 197 MB
for verify; a streaming export stays near verify whatever the size.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

VERSION = "v20261201"


class PlainTaxonomy:
    """The test lake's labels as they are (as tests/warehouse/test_release.py builds it)."""

    version = "bench"

    def published_columns(self, category, attributes, main_attribute):  # type: ignore[no-untyped-def]
        return main_attribute, ", ".join(v for k, v in sorted(attributes.items()) if v != main_attribute)


def make_release(home: Path, mb: int) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    import lakefill

    from lookbench_live.warehouse.lake import Lake
    from lookbench_live.warehouse.release import commit_release, stage_release

    lake = Lake(home)
    lakefill.fill(lake)
    staged = stage_release(lake, version=VERSION, taxonomy=PlainTaxonomy())
    with open(os.path.join(staged.path, "report.html"), "wb") as handle:
        for _ in range(mb):
            handle.write(os.urandom(1 << 20))
    commit_release(lake, staged)
    return sum(p.stat().st_size for p in (home / "releases" / VERSION).rglob("*") if p.is_file())


def measure(mode: str, home: str, target: str) -> None:
    """One command in this (fresh) process; prints its peak RSS."""
    from lookbench_live.flows.export import export_release
    from lookbench_live.warehouse.lake import Lake
    from lookbench_live.warehouse.release import verify_release

    lake = Lake(home)
    start = time.perf_counter()
    if mode == "verify":
        assert verify_release(lake, VERSION) == []
    else:
        export_release(lake, VERSION, target)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"mode": mode, "peak_rss_mb": round(peak, 1), "seconds": round(seconds, 2)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=400, help="size of the release's large file, MiB")
    parser.add_argument("--work", default="/tmp/export-bench")
    parser.add_argument("--out", default=None)
    parser.add_argument("--measure", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--target", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    work = Path(args.work)
    if args.measure == "make":
        print(json.dumps({"release_bytes": make_release(work / "lake", args.mb)}))
        return
    if args.measure:
        measure(args.measure, str(work / "lake"), args.target)
        return
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    # Every step in a child of this small process: ru_maxrss survives fork and exec, so a child
    # of a process that had built the release would report the builder's peak.
    made = subprocess.run(
        [sys.executable, __file__, "--work", str(work), "--mb", str(args.mb), "--measure", "make"],
        capture_output=True,
        text=True,
        check=True,
    )
    size = json.loads(made.stdout.strip().splitlines()[-1])["release_bytes"]
    rows = []
    for mode, target in (
        ("verify", ""),
        ("export-folder", work / "share"),
        ("export-tar", work / "snap.tar"),
    ):
        proc = subprocess.run(
            [sys.executable, __file__, "--work", str(work), "--measure", mode, "--target", str(target)],
            capture_output=True,
            text=True,
            check=True,
        )
        rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    report = {"release_bytes": size, "results": rows}
    print(json.dumps(report, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
