"""Crawls across runs (issue 25): a host that was unreachable during one run is crawled again by
the rerun instead of being trusted as a finished shard."""

from __future__ import annotations

import datetime as dt
import json
import socket
from pathlib import Path

import pytest

from lookbench_live.config import SiteSettings, load_settings
from lookbench_live.flows import ledger, stages
from lookbench_live.flows.runtime import RunSpec
from lookbench_live.sample_store.server import SampleStore
from lookbench_live.sample_store.sites import sample_sites
from lookbench_live.warehouse.lake import Lake


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _config(tmp_path: Path, site: SiteSettings) -> Path:
    values = {
        **site.model_dump(exclude_defaults=True),
        "allow_private_addresses": True,
        "download_delay": 0.0,
    }
    lines = ["[crawl]", "autothrottle = false", "retry_times = 0", "", "[[crawl.sites]]"]
    lines += [f"{key} = {json.dumps(value)}" for key, value in values.items()]
    path = tmp_path / "lookbench.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.slow
def test_a_site_unreachable_during_one_run_is_crawled_again_by_the_rerun(tmp_path: Path) -> None:
    from prefect import flow

    today = dt.datetime.now(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    port = _free_port()
    # The site's address while nothing listens there (the store stopped, the host down).
    shop = next(s for s in sample_sites(f"http://127.0.0.1:{port}") if s.name == "sample-shopify")
    config = _config(tmp_path, shop.model_copy(update={"collections": []}))
    settings = load_settings(config)
    spec = RunSpec(
        flow="refresh", home=str(tmp_path / "lake"), config_path=str(config), as_of=today,
        version=f"v{today:%Y%m%d}", window_start=None, window_end=today + dt.timedelta(days=1),
    )  # fmt: skip

    @flow(name="crawl-unreachable-then-back")
    def crawl() -> list[stages.SiteOutcome]:
        return stages.crawl_all(spec, settings)

    with pytest.raises(stages.CrawlError, match="host unreachable, the rerun retries it"):
        crawl()
    lake = Lake(spec.home)
    assert not ledger.is_done(lake, spec.run_key, "crawl", "sample-shopify")  # no completion marker
    with SampleStore(port=port, clock=today):
        (outcome,) = crawl()
    assert outcome.status == "ok" and outcome.products > 0 and outcome.skipped is None, outcome
    assert ledger.is_done(lake, spec.run_key, "crawl", "sample-shopify")
    assert {r["source"] for r in lake.read("products").to_pylist()} == {"sample-shopify"}


# --------------------------------------------------------------------------- time limits


def test_the_time_limit_follows_the_sites_budgets_and_is_configurable() -> None:
    from lookbench_live.config import CrawlSettings
    from lookbench_live.scrapers.crawl import MIN_TIME_LIMIT_S, crawl_time_limit

    slow = SiteSettings(name="slow", platform="schema_org", base_url="https://slow.example", max_pages=300)
    # A robots.txt Crawl-delay of 10 s over 300 pages needs 3,000 s: never killed at a fixed 1,800 s.
    assert crawl_time_limit(slow, CrawlSettings(max_crawl_delay=10)) > 300 * 10
    long_budget = slow.model_copy(update={"max_duration": 7200.0})
    assert crawl_time_limit(long_budget, CrawlSettings(max_crawl_delay=0)) > 7200
    small = slow.model_copy(update={"max_pages": 5})
    assert crawl_time_limit(small, CrawlSettings(max_crawl_delay=1)) >= MIN_TIME_LIMIT_S
    assert crawl_time_limit(slow, CrawlSettings(time_limit=90)) == 90  # the setting wins


@pytest.mark.slow
def test_a_crawl_at_its_time_limit_stops_with_its_frontier_and_the_next_run_resumes(tmp_path: Path) -> None:
    from lookbench_live.config import CrawlSettings
    from lookbench_live.scrapers.crawl import read_frontier, run_crawl

    lake = Lake(str(tmp_path))
    clock = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    with SampleStore(clock=clock) as store:
        full = {p.product_id for p in store.products if p.shape == "schema_org"} | {"latin1"}
        schema = next(s for s in sample_sites(store.base_url) if s.name == "sample-schema")
        paced = schema.model_copy(update={"download_delay": 1.5, "concurrency": 1})
        # The limit, not a budget: no max_duration, a page budget far above what it can fetch in
        # time; it stops itself at half the limit (start-up and closing a paced crawl take the rest).
        limited = CrawlSettings(autothrottle=False, time_limit=100, max_crawl_delay=1.5)
        first = run_crawl(paced, limited, str(tmp_path), "m1", seen_at=clock)
        assert first.status == "over_budget" and first.finish_reason == "closespider_timeout", first
        left = [r["url"] for r in read_frontier(lake, "sample-schema")]
        assert left and len(left) == first.unreached
        start = len(store.hits)
        second = run_crawl(schema, CrawlSettings(autothrottle=False), str(tmp_path), "m2", seen_at=clock)
        fetched = {store.base_url + h for h in store.hits[start:]}
    assert second.status == "ok" and not read_frontier(lake, "sample-schema")
    assert {u for u in left if u.startswith(store.base_url + "/schema/p/")} <= fetched
    assert {r["product_id"] for r in lake.read("products").to_pylist()} == full


@pytest.mark.slow
def test_a_crawl_killed_at_its_limit_saves_its_frontier_for_the_next_run(tmp_path: Path) -> None:
    """A page that stalls past the clean stop keeps Scrapy from closing, so the hard limit kills
    the crawl: what its journal had not reached becomes the site's frontier all the same."""
    from ingest_server import Route, serve

    from lookbench_live.config import CrawlSettings
    from lookbench_live.scrapers.crawl import CrawlError, read_frontier, run_crawl

    pages = [f"/stall/{n}" for n in range(6)]
    with serve({"/robots.txt": Route(status=404)}, max_stall=60) as server:
        locs = "".join(f"<url><loc>{server.base}{p}</loc></url>" for p in pages)
        sitemap = f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{locs}</urlset>'
        server.routes["/sitemap.xml"] = Route(body=sitemap.encode())
        for path in pages:
            server.routes[path] = Route(behaviour="stall_before_headers")
        site = SiteSettings(
            name="stalls", platform="schema_org", base_url=server.base + "/", allow_private_addresses=True,
            concurrency=1, download_delay=0,
        )  # fmt: skip
        crawl = CrawlSettings(autothrottle=False, download_timeout=60, retry_times=0)
        lake = Lake(str(tmp_path))
        with pytest.raises(CrawlError, match="did not finish"):
            run_crawl(site, crawl, str(tmp_path), "k1", timeout_s=12)
    left = {r["url"] for r in read_frontier(lake, "stalls")}
    # Every page the sitemap named was pending, none finished: all of them wait for the next run.
    assert left == {server.base + p for p in pages}, left


# --------------------------------------------------------------------------- yield drops


@pytest.mark.slow
def test_a_site_that_answers_but_yields_nothing_after_earlier_months_is_flagged(tmp_path: Path) -> None:
    from ingest_server import Route, serve
    from prefect import flow

    today = dt.datetime.now(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)

    def crawl_once(site: SiteSettings, version: str, folder: Path) -> dict:
        folder.mkdir()
        config = _config(folder, site)
        spec = RunSpec(
            flow="refresh", home=str(tmp_path / "lake"), config_path=str(config), as_of=today,
            version=version, window_start=None, window_end=today + dt.timedelta(days=1),
        )  # fmt: skip

        @flow(name="crawl-yield")
        def crawl() -> list[stages.SiteOutcome]:
            return stages.crawl_all(spec, load_settings(config))

        (outcome,) = crawl()
        return outcome

    with SampleStore(clock=today) as store:
        schema = next(s for s in sample_sites(store.base_url) if s.name == "sample-schema")
        first = crawl_once(schema, "v20261101", tmp_path / "m1")
    assert first.status == "ok" and first.products >= 5 and first.flag is None, first
    # The next month the same site answers every page with 200 but no product on it.
    pages = [f"/page/{n}" for n in range(12)]
    routes = {p: Route(body=b"<html><body><p>Nothing to see</p></body></html>") for p in pages}
    with serve({"/robots.txt": Route(status=404), **routes}) as server:
        locs = "".join(f"<url><loc>{server.base}{p}</loc></url>" for p in pages)
        sitemap = f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{locs}</urlset>'
        server.routes["/sitemap.xml"] = Route(body=sitemap.encode())
        moved = schema.model_copy(update={"base_url": server.base + "/"})
        second = crawl_once(moved, "v20261201", tmp_path / "m2")
    pages_fetched = second.crawl["pages"]
    assert second.status != "failed" and second.products == 0 and pages_fetched > 0, second
    assert second.flag and second.flag.startswith(f"yield_drop: 0 products from {pages_fetched} pages"), (
        second
    )
    lake = Lake(str(tmp_path / "lake"))
    flagged = [r for r in lake.read("rejections").to_pylist() if r["reason"] == "yield_drop"]
    assert [(r["item"], r["stage"]) for r in flagged] == [("site:sample-schema", "crawl")]
