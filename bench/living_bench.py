"""Refresh cost over time (issue 11 §6): wall time and peak RSS of each monthly refresh of one
lake on the living sample store, month 1 to month N, at the same weekly arrival rate.

    .venv/bin/python bench/living_bench.py [--months 12] [--first 2026-02-01]
        [--products-per-week 4] [--home DIR] [--port 48931]

Each month runs `lookbench-live refresh --home H --as-of <1st of the month>` in its own process
(the store's clock is the as-of, so each month brings that month's arrivals). Peak RSS is the
largest resident set of any process of the refresh's tree (wait4's ru_maxrss, which covers
reaped descendants: crawl subprocesses, decode workers). The goal: month N within 1.3× of
month 1 (cost grows with the month's new items, not with the lake's history). Month 1 crawls
the whole store (its core and the listed drops), later months one month of arrivals.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def month_starts(first: dt.date, count: int) -> list[dt.date]:
    out = []
    year, month = first.year, first.month
    for _ in range(count):
        out.append(dt.date(year, month, 1))
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    return out


def run_month(cli: str, home: str, config: str, as_of: dt.date, port: int) -> dict:
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "DO_NOT_TRACK": "1",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    }
    command = [
        cli,
        "refresh",
        "--home",
        home,
        "--config",
        config,
        "--as-of",
        as_of.isoformat(),
        "--port",
        str(port),
    ]
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        out.seek(0)
        tail = out.read().decode(errors="replace")[-600:]
    code = os.waitstatus_to_exitcode(status)
    return {
        "as_of": as_of.isoformat(),
        "exit": code,
        "wall_s": round(wall, 1),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),  # Linux: KiB
        "tail": tail if code else "",
    }


def release_queries(home: str, version: str) -> dict[str, int]:
    """Query rows per subset (and noise rows) of the month's release, from its manifest."""
    from lookbench_live.warehouse.lake import Lake
    from lookbench_live.warehouse.release import read_manifest

    rows = read_manifest(Lake(home), version).get("rows", {})
    out = {k.split("/")[0]: v for k, v in rows.items() if k.endswith("/query.parquet")}
    out["noise"] = rows.get("noise/gallery.parquet", 0)
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--months", type=int, default=12)
    parser.add_argument("--first", default="2026-02-01")
    parser.add_argument("--products-per-week", type=int, default=4)
    parser.add_argument("--home", default=None)
    parser.add_argument("--port", type=int, default=48931)
    args = parser.parse_args()
    cli = str(Path(sys.executable).parent / "lookbench-live")
    home = args.home or tempfile.mkdtemp(prefix="living-bench-")
    config = Path(home).with_suffix(".toml")
    config.write_text(f"[crawl]\nsample_products_per_week = {args.products_per_week}\n", encoding="utf-8")
    results = []
    for as_of in month_starts(dt.date.fromisoformat(args.first), args.months):
        result = run_month(cli, home, str(config), as_of, args.port)
        if result["exit"] == 0:
            result["queries"] = release_queries(home, "v" + as_of.strftime("%Y%m%d"))
        results.append(result)
        print(json.dumps(result), flush=True)
        if result["exit"] != 0:
            print(f"month {as_of} failed; stopping", file=sys.stderr)
            break
    ok = [r for r in results if r["exit"] == 0]
    if len(ok) >= 2:
        first, last = ok[0], ok[-1]
        print(
            f"month 1 ({first['as_of']}): {first['wall_s']} s, {first['peak_rss_mb']} MB; "
            f"month {len(ok)} ({last['as_of']}): {last['wall_s']} s, {last['peak_rss_mb']} MB; "
            f"ratio wall {last['wall_s'] / first['wall_s']:.2f}x, rss {last['peak_rss_mb'] / first['peak_rss_mb']:.2f}x"
        )
    return 0 if len(ok) == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
