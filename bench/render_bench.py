"""Pages/s of a JavaScript (Playwright) crawl of the sample store's `/js/` site.

    .venv/bin/python bench/render_bench.py [--per-week 40] [--concurrency N] [--runs 2]

The embedded store's playwright site at `--per-week` products a week (its clock at
2026-12-01), politeness off, through the whole guarded path: the crawl subprocess, Debian's
chromium behind the checking browser proxy, the render deadline, extraction and lake commits.
Reported: responses over Scrapy's `elapsed_time_seconds`, the subprocess's wall time, and
`lookbench/pages_opened` / `pages_closed` (every page the crawl opened was closed).

There is no peer in this run: compare two trees with `PYTHONPATH=<an exported checkout laid
out as the lookbench_live package>` (the crawl subprocess inherits PYTHONPATH), as
docs/benchmarks.md does.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import tempfile
import time
from pathlib import Path

from lookbench_live.config import CrawlSettings
from lookbench_live.sample_store.server import SampleStore
from lookbench_live.sample_store.sites import sample_sites
from lookbench_live.scrapers.crawl import run_crawl, state_dir
from lookbench_live.warehouse.lake import Lake


def stat(log: str, name: str) -> str | None:
    found = re.search(rf"'{re.escape(name)}': ([0-9.]+)", log)
    return found.group(1) if found else None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--per-week", type=int, default=40)
    parser.add_argument("--concurrency", type=int, default=None, help="default: the sample site's")
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()

    clock = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    for run in range(1, args.runs + 1):
        with (
            SampleStore(products_per_week=args.per_week, clock=clock) as store,
            tempfile.TemporaryDirectory() as tmp,
        ):
            site = next(s for s in sample_sites(store.base_url, args.per_week) if s.platform == "playwright")
            update: dict[str, object] = {"download_delay": 0}
            if args.concurrency:
                update["concurrency"] = args.concurrency
            site = site.model_copy(update=update)
            lake = str(Path(tmp) / "lake")
            start = time.perf_counter()
            run_crawl(site, CrawlSettings(autothrottle=False), lake, "bench", timeout_s=1800)
            wall = time.perf_counter() - start
            log = (state_dir(Lake(lake), site.name, "bench") / "crawl.log").read_text()
            pages = int(stat(log, "response_received_count") or 0)
            elapsed = float(stat(log, "elapsed_time_seconds") or "nan")
            print(
                f"run {run}: {pages} responses in {elapsed:.1f} s crawl = {pages / elapsed:.2f} pages/s; "
                f"wall {wall:.1f} s; concurrency {site.concurrency}; pages opened/closed "
                f"{stat(log, 'lookbench/pages_opened')}/{stat(log, 'lookbench/pages_closed')}"
            )


if __name__ == "__main__":
    main()
