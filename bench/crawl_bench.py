"""Pages/s: our schema.org crawl of the sample store (politeness off) against a plain Scrapy
crawl of the same static pages, in the same run.

    .venv/bin/python bench/crawl_bench.py [--pages 500] [--concurrency 32]

Both crawls fetch the same N product pages of the sample store (`/schema/p/<slug>?v=<i>`; the
store ignores the query, so each URL is a distinct request for a real product page). Ours runs
the full stack: address guard, robots gate (one robots.txt fetch), host pacer, the resume
journal, JSON-LD/microdata/OpenGraph extraction, and lake commits. The peer is a bare
`scrapy.Spider` that parses nothing, with Scrapy's defaults plus the same concurrency, no
AutoThrottle and no delay (the anchor in ../shared/anchors.md: 145–149 pages/s on
python's http.server). Reported: pages/s over Scrapy's own `elapsed_time_seconds` (spider open
to close) and over the whole subprocess wall time (startup included), and each crawl
process's CPU seconds (startup included).
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lookbench_live.config import CrawlSettings, SiteSettings
from lookbench_live.sample_store.server import SampleStore
from lookbench_live.scrapers.crawl import run_crawl, state_dir
from lookbench_live.warehouse.lake import Lake

PLAIN_SPIDER = r"""
import json, sys
import scrapy
from scrapy.crawler import CrawlerProcess

urls = json.load(open(sys.argv[1]))

class Plain(scrapy.Spider):
    name = "plain"
    start_urls = urls

    def parse(self, response):
        yield {"url": response.url, "size": len(response.body)}

process = CrawlerProcess(settings={
    "CONCURRENT_REQUESTS": int(sys.argv[2]), "CONCURRENT_REQUESTS_PER_DOMAIN": int(sys.argv[2]),
    "AUTOTHROTTLE_ENABLED": False, "DOWNLOAD_DELAY": 0, "ROBOTSTXT_OBEY": False,
    "TELNETCONSOLE_ENABLED": False, "REMOTE_CONTROL_ENABLED": False, "LOG_LEVEL": "INFO",
})
process.crawl(Plain)
process.start()
"""


def elapsed_from_log(text: str) -> tuple[float | None, int | None]:
    elapsed = re.search(r"'elapsed_time_seconds': ([0-9.]+)", text)
    count = re.search(r"'response_received_count': (\d+)", text)
    return (float(elapsed.group(1)) if elapsed else None, int(count.group(1)) if count else None)


def children_cpu() -> float:
    """User + system CPU seconds of every finished child process (the crawl subprocesses)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()

    with SampleStore() as store, tempfile.TemporaryDirectory() as tmp:
        slugs = [p.slug for p in store.products if p.shape == "schema_org"]
        paths = [f"/schema/p/{slugs[i % len(slugs)]}?v={i}" for i in range(args.pages)]
        urls = [store.base_url + p for p in paths]
        # Warm the store (pages are rendered on demand) so neither side pays for it.
        for url in urls[: len(slugs)]:
            __import__("httpx").get(url)

        # --- plain Scrapy
        url_file = Path(tmp) / "urls.json"
        url_file.write_text(json.dumps(urls))
        script = Path(tmp) / "plain.py"
        script.write_text(PLAIN_SPIDER)
        start, cpu0 = time.perf_counter(), children_cpu()
        plain = subprocess.run(
            [sys.executable, str(script), str(url_file), str(args.concurrency)],
            capture_output=True,
            text=True,
        )
        plain_wall, plain_cpu = time.perf_counter() - start, children_cpu() - cpu0
        plain_elapsed, plain_pages = elapsed_from_log(plain.stderr)

        # --- ours
        site = SiteSettings(
            name="bench",
            platform="schema_org",
            base_url=store.base_url + "/schema",
            start_paths=paths,
            concurrency=args.concurrency,
            download_delay=0,
            max_pages=args.pages * 2,
            allow_private_addresses=True,
            looks=False,
        )
        crawl = CrawlSettings(autothrottle=False, batch_size=500)
        lake = str(Path(tmp) / "lake")
        start, cpu0 = time.perf_counter(), children_cpu()
        result = run_crawl(site, crawl, lake, "bench", timeout_s=600)
        ours_wall, ours_cpu = time.perf_counter() - start, children_cpu() - cpu0
        log = (state_dir(Lake(lake), "bench", "bench") / "crawl.log").read_text()
        ours_elapsed, ours_pages = elapsed_from_log(log)
        products = Lake(lake).read("products").num_rows

    rows = [
        ("plain Scrapy (parse nothing)", plain_pages, plain_elapsed, plain_wall, plain_cpu),
        ("lookbench-live schema_org spider", ours_pages, ours_elapsed, ours_wall, ours_cpu),
    ]
    print(
        f"pages requested: {args.pages}, concurrency {args.concurrency}, products stored: {products}, result: {result}"
    )
    print(
        f"{'crawler':36} {'responses':>9} {'crawl s':>8} {'pages/s':>8} {'wall s':>7} {'pages/s (wall)':>14}"
        f" {'CPU s':>6}"
    )
    for name, pages, elapsed, wall, cpu in rows:
        rate = (pages or 0) / elapsed if elapsed else float("nan")
        print(
            f"{name:36} {pages!s:>9} {elapsed or float('nan'):8.2f} {rate:8.1f} {wall:7.2f} {(pages or 0) / wall:14.1f}"
            f" {cpu:6.2f}"
        )
    if plain_elapsed and ours_elapsed and plain_pages and ours_pages:
        ratio = (ours_pages / ours_elapsed) / (plain_pages / plain_elapsed)
        print(f"ratio ours / plain (crawl time): {ratio:.2f}")


if __name__ == "__main__":
    main()
