"""Crawls of the sample store: every platform shape, looks, incremental runs, resume after SIGKILL,
the sample store's own promises, and the `extract` / `sample-store` commands."""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import signal
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest
from PIL import Image

from lookbench_live.config import CrawlSettings
from lookbench_live.sample_store.catalog import DEFAULT_NOW
from lookbench_live.sample_store.server import SampleStore
from lookbench_live.sample_store.sites import sample_sites
from lookbench_live.scrapers.crawl import CrawlError, run_crawl
from lookbench_live.warehouse.lake import Lake

CRAWL = CrawlSettings(autothrottle=False)


def site(store: SampleStore, name: str, **changes):
    found = next(s for s in sample_sites(store.base_url) if s.name == name)
    return found.model_copy(update=changes)


class Lakes:
    """The per-site lakes of the module's crawls, read as one."""

    def __init__(self, lakes: dict[str, Lake]):
        self.lakes = lakes

    def read(self, table: str):
        import pyarrow as pa

        return pa.concat_tables([lake.read(table) for lake in self.lakes.values()])


@pytest.fixture(scope="module")
def crawled(tmp_path_factory):
    """Crawls of the four HTTP sites of one store, run side by side (one lake each: one writer per lake)."""
    from concurrent.futures import ThreadPoolExecutor

    names = ("sample-shopify", "sample-woo", "sample-schema", "sample-looks")
    homes = {name: str(tmp_path_factory.mktemp(name)) for name in names}
    with SampleStore() as store, ThreadPoolExecutor(len(names)) as pool:
        futures = {
            name: pool.submit(run_crawl, site(store, name), CRAWL, homes[name], "2026-01", timeout_s=180)
            for name in names
        }
        results = {name: future.result() for name, future in futures.items()}
        yield store, Lakes({name: Lake(home) for name, home in homes.items()}), results, list(store.hits)


@pytest.mark.slow
def test_every_platform_shape_yields_the_store_products(crawled):
    store, lake, results, _ = crawled
    truth = {(e["site"], e["product_id"]): e for e in store.catalog()}
    rows = lake.read("products").to_pylist()
    got = {(r["source"], r["product_id"]): r for r in rows}
    for key, entry in truth.items():
        if entry["platform"] == "playwright":
            continue
        row = got[key]
        assert row["url"] == entry["url"]
        assert (
            row["title"] == entry["title"] or entry["platform"] == "shopify"
        )  # one Shopify title is messy on purpose
        assert row["brand"] == entry["brand"]
        assert row["price"] == entry["price"], key
        assert row["images"][: len(entry["image_urls"])] == entry["image_urls"][: len(row["images"])]
        assert row["color"].lower() == entry["attributes"]["color"]
    # Every product the store lists at its clock (the core and the recent weekly drops).
    listed = Counter(e["site"] for e in truth.values())
    assert results["sample-shopify"].products_new == listed["sample-shopify"] > 14
    assert results["sample-woo"].products_new == listed["sample-woo"] > 12
    assert results["sample-schema"].products_new == listed["sample-schema"] + 1  # + the mislabelled page
    # The Shopify JSON states no currency; it is never invented.
    assert {r["currency"] for r in rows if r["source"] == "sample-shopify"} == {None}
    assert next(r for r in rows if r["product_id"] == "latin1")["title"] == "Crêpe Blouse — Écru"  # S10


@pytest.mark.slow
def test_broken_pages_end_as_recorded_reasons_and_robots_is_obeyed(crawled):
    _, _, results, hits = crawled
    assert results["sample-schema"].rejections_by_reason == {
        "robots_disallowed": 1,  # /schema/private/ is in the sitemap, disallowed by robots.txt
        "offsite": 1,  # a sitemap entry on another host
        "invalid_sitemap": 1,  # an empty sitemap
        "http_404": 1,
        "http_503": 1,  # after 3 attempts
        "no_product_data": 1,
        "invalid_jsonld": 3,  # one bad script beside a good one, on three pages
        "jsonld_too_deep": 1,
    }
    assert not any(h.startswith("/schema/private/") for h in hits)
    assert hits.count("/schema/p/flaky") == 3 and hits.count("/schema/p/gone") == 1
    assert (
        sum(1 for h in hits if h == "/schema/sitemap_index.xml") == 1
    )  # the index lists itself: visited once


@pytest.mark.slow
def test_looks_carry_photo_product_links_and_hotspot_boxes(crawled):
    store, lake, results, _ = crawled
    assert results["sample-looks"].looks_new == len(store.looks) >= 4
    looks = {r["look_id"]: r for r in lake.read("looks").to_pylist() if r["source"] == "sample-looks"}
    for truth in store.looks_truth():
        look = looks[truth["look_id"]]
        assert look["photo_url"] == truth["photo_url"]
        assert look["product_refs"] == truth["product_urls"]
        boxes = json.loads(look["boxes_json"])
        assert [b["bbox"] for b in boxes] == truth["boxes"]
    assert not [r for r in lake.read("looks").to_pylist() if r["source"] == "sample-schema"]  # looks=False


@pytest.mark.slow
def test_rerun_unchanged_adds_nothing_and_changed_products_keep_first_seen(tmp_path):
    with SampleStore() as store:
        first = run_crawl(site(store, "sample-shopify"), CRAWL, str(tmp_path), "m1", timeout_s=120)
        hits = len(store.hits)
        again = run_crawl(site(store, "sample-shopify"), CRAWL, str(tmp_path), "m1", timeout_s=120)
        assert again == first and len(store.hits) == hits  # a finished run key is not crawled again
        port = store.port
    lake = Lake(str(tmp_path))
    before = {r["product_id"]: r["first_seen_at"] for r in lake.read("products").to_pylist()}
    with SampleStore(port=port, revision=1) as store:  # same host: only the prices differ
        changed = run_crawl(site(store, "sample-shopify"), CRAWL, str(tmp_path), "m3", timeout_s=120)
        expected = sum(1 for p in store.products if p.shape == "shopify" and int(p.product_id) % 5 == 0)
    # Unchanged products (same content hash) are not new work; changed ones are changes.
    assert changed.products_new == 0 and changed.products_changed == expected > 0
    rows = lake.read("products").to_pylist()
    assert len(rows) == sum(1 for p in store.products if p.shape == "shopify") + expected
    for row in rows:
        assert row["first_seen_at"] == before[row["product_id"]]


@pytest.mark.slow
def test_since_window_keeps_only_recent_products(tmp_path):
    since = DEFAULT_NOW - dt.timedelta(days=20)
    with SampleStore() as store:
        result = run_crawl(
            site(store, "sample-shopify"), CRAWL, str(tmp_path), "w", since=since, timeout_s=120
        )
        expected = {
            p.product_id
            for p in store.products
            if p.shape == "shopify" and max(p.published_at, p.updated_at) >= since
        }
    rows = Lake(str(tmp_path)).read("products").to_pylist()
    shopify = sum(1 for p in store.products if p.shape == "shopify")
    assert {r["product_id"] for r in rows} == expected and 0 < result.products_new < shopify


def _crawl_pid(state_dir: str) -> int | None:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if "lookbench_live.scrapers.crawl" in cmdline and state_dir in cmdline:
                return int(entry)
    return None


@pytest.mark.slow
def test_sigkill_mid_crawl_then_rerun_ends_with_same_products_and_no_duplicates(crawled, tmp_path):
    store, lakes, results, _ = crawled  # the clean crawl of the same store is the reference
    clean_lake = lakes.lakes["sample-schema"]
    killed_lake = tmp_path / "killed"
    store.latency = 0.15  # slow enough to be killed mid-way
    try:
        slow = site(store, "sample-schema", concurrency=2)
        state = killed_lake / "crawl-state" / "sample-schema" / "k"
        errors: list[BaseException] = []

        def crawl() -> None:
            try:
                run_crawl(slow, CRAWL, str(killed_lake), "k", timeout_s=120)
            except BaseException as exc:
                errors.append(exc)

        thread = threading.Thread(target=crawl)
        thread.start()
        journal = state / "journal.jsonl"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if journal.exists() and journal.read_text().count('"t":"done"') >= 8:
                break
            time.sleep(0.05)
        pid = _crawl_pid(str(state))
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        thread.join(30)
        assert errors and isinstance(errors[0], CrawlError)
        entries = [json.loads(line) for line in journal.read_text().splitlines() if line.endswith("}")]
        urls = {e["fp"]: e["request"]["url"] for e in entries if e["t"] == "pending"}
        finished = {urls[e["fp"]] for e in entries if e["t"] == "done" and e["fp"] in urls}
        hits_before = len(store.hits)
        store.latency = 0.0
        resumed = run_crawl(slow, CRAWL, str(killed_lake), "k", timeout_s=120)
        refetched = store.hits[hits_before:]
    finally:
        store.latency = 0.0
    clean = results["sample-schema"]
    assert resumed.resumed
    key = ("product_id", "content_hash")
    killed_rows = Lake(str(killed_lake)).read("products").to_pylist()
    clean_rows = [r for r in clean_lake.read("products").to_pylist() if r["source"] == "sample-schema"]
    assert {tuple(r[k] for k in key) for r in killed_rows} == {tuple(r[k] for k in key) for r in clean_rows}
    assert len(killed_rows) == len(clean_rows)  # no duplicates
    assert (resumed.products_new, resumed.rejections_by_reason) == (
        clean.products_new,
        clean.rejections_by_reason,
    )
    # Pages finished before the kill are not fetched again.
    assert len(finished) >= 7
    refetched_urls = {
        store.base_url + h for h in refetched if h != "/robots.txt"
    }  # robots: fresh per process
    assert not (finished & refetched_urls), finished & refetched_urls
    rejections = Lake(str(killed_lake)).read("rejections").to_pylist()
    assert Counter(r["reason"] for r in rejections) == Counter(clean.rejections_by_reason)


@pytest.mark.slow
@pytest.mark.browser
def test_javascript_pages_are_rendered_with_chromium(tmp_path):
    with SampleStore() as store:
        js = site(store, "sample-js")
        # Without rendering, the pages hold no product data at all.
        from lookbench_live.scrapers.extract import extract_document

        raw = httpx.get(
            f"{store.base_url}/js/p/{next(p for p in store.products if p.shape == 'playwright').slug}"
        ).text
        assert extract_document(raw, store.base_url).products == []
        result = run_crawl(js, CRAWL, str(tmp_path), "j", timeout_s=180)
        expected = {p.product_id for p in store.products if p.shape == "playwright"}
    assert result.products_new == len(expected) >= 6
    assert {r["product_id"] for r in Lake(str(tmp_path)).read("products").to_pylist()} == expected


def test_missing_chromium_is_a_clear_error(monkeypatch):
    import shutil

    from lookbench_live.scrapers import settings

    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match="apt-get install -y chromium"):
        settings.chromium_path()


# --------------------------------------------------------------------------- the store


def test_sample_store_is_deterministic_and_sized_for_a_fast_job():
    with SampleStore() as a, SampleStore() as b:
        truth = a.catalog()
        assert 40 <= len(truth) <= 90  # the core and eight weeks of drops: a fast job
        assert 4 <= len(a.looks) <= 10 and all(2 <= len(lk.products) <= 3 for lk in a.looks)
        assert Counter(e["platform"] for e in truth).keys() == {
            "shopify",
            "woocommerce",
            "schema_org",
            "playwright",
        }
        product = truth[3]
        photos = [httpx.get(u).content for u in product["image_urls"]]
        assert photos == [httpx.get(u.replace(a.base_url, b.base_url)).content for u in product["image_urls"]]
        assert 2 <= len(photos) <= 4 and len(set(photos)) == len(photos)  # views differ
        for data in photos:
            assert Image.open(io.BytesIO(data)).size == (320, 400)
        for entry in truth:  # the title names colour and material: the metadata prior can use it
            assert (
                entry["attributes"]["color"] in entry["title"].lower()
                or entry["attributes"]["color"] == "gray"
            )
            assert entry["attributes"]["material"] in entry["title"].lower()
        robots = httpx.get(a.base_url + "/robots.txt").text
        assert "Disallow: /schema/private/" in robots and "Sitemap:" in robots


def test_sample_store_attribute_values_are_taxonomy_values(taxonomy):
    with SampleStore() as store:
        for entry in store.catalog():
            category = taxonomy.normalize_category(entry["category"])
            assert category in taxonomy.category_names()
            for group, value in entry["attributes"].items():
                assert group in taxonomy.groups_for(category)
                assert value in taxonomy.values(group), (group, value)


def test_sample_store_serves_the_broken_images():
    with SampleStore() as store:
        base = store.base_url
        assert set(store.broken_images()) == {base + p for p in {
            "/img/broken/truncated.jpg", "/img/broken/empty.jpg", "/img/broken/page.jpg", "/img/broken/bomb.png",
            "/img/broken/noai.jpg", "/img/broken/wide.jpg", "/img/broken/loop.jpg", "/img/broken/slow.jpg"}}  # fmt: skip
        truncated = httpx.get(base + "/img/broken/truncated.jpg").content
        with pytest.raises(OSError):
            Image.open(io.BytesIO(truncated)).load()
        assert httpx.get(base + "/img/broken/empty.jpg").content == b""
        page = httpx.get(base + "/img/broken/page.jpg")
        assert page.headers["content-type"] == "image/jpeg" and page.content.startswith(b"<!DOCTYPE html>")
        bomb = httpx.get(base + "/img/broken/bomb.png").content
        assert len(bomb) < 100
        with pytest.raises(Image.DecompressionBombError):
            Image.open(io.BytesIO(bomb))
        assert httpx.get(base + "/img/broken/noai.jpg").headers["x-robots-tag"] == "noai"
        assert Image.open(io.BytesIO(httpx.get(base + "/img/broken/wide.jpg").content)).size == (4000, 10)
        with pytest.raises(httpx.TooManyRedirects):
            httpx.get(base + "/img/broken/loop.jpg", follow_redirects=True)
        linked = {u for e in store.catalog() for u in e["broken_image_urls"]}
        assert base + "/img/broken/slow.jpg" not in linked and len(linked) == 7


# --------------------------------------------------------------------------- commands


def test_extract_command_prints_json_lines(cli, tmp_path):
    page = tmp_path / "page.html"
    page.write_text(
        '<html lang="de"><head><script type="application/ld+json">/*<![CDATA[*/{"@type": "Product", "name": "Rock",'
        ' "sku": "R1", "image": ["../i/r.jpg", null], "offers": {"price": "26,00 €", "priceCurrency": "EUR",'
        ' "availability": "InStock"}}/*]]>*/</script></head></html>',
        encoding="utf-8",
    )
    out = subprocess.run(
        [cli, "extract", str(page), "--url", "https://shop.example.de/p/rock"],
        capture_output=True,
        text=True,
        check=True,
    )
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert len(lines) == 1
    item = lines[0]
    assert (item["price"], item["price_max"], item["compare_at_price"]) == ("26.00", "26.00", None)
    assert item["images"] == ["https://shop.example.de/i/r.jpg"]
    assert {"product_id", "url", "title", "brand", "currency", "availability", "category_path", "color", "material",
            "description", "images", "variants", "published_at", "updated_at", "raw"} <= item.keys()  # fmt: skip


def test_extract_command_fetches_url_through_the_guard(cli):
    with SampleStore() as store:
        url = store.base_url + "/woo/wp-json/wc/store/v1/products?per_page=3"
        ok = subprocess.run([cli, "extract", url, "--allow-private"], capture_output=True, text=True)
        refused = subprocess.run([cli, "extract", url], capture_output=True, text=True)
    assert ok.returncode == 0 and len(ok.stdout.splitlines()) == 3
    assert refused.returncode == 1 and "non-public address" in refused.stderr


def test_sample_store_command_serves(cli):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen([cli, "sample-store", "--port", str(port)], stdout=subprocess.PIPE, text=True)
    try:
        assert f"127.0.0.1:{port}" in process.stdout.readline()
        response = httpx.get(f"http://127.0.0.1:{port}/shopify/products.json?limit=2", timeout=10)
        assert len(response.json()["products"]) == 2
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(10)


def test_journalled_requests_are_what_scrapy_would_serialise(tmp_path):
    """The resume journal names callbacks without Scrapy's per-request `inspect` scan; what it
    writes must be exactly `Request.to_dict(spider=...)`, and read back to the same callback."""
    import scrapy
    from scrapy.http import FormRequest

    from lookbench_live.config import SiteSettings
    from lookbench_live.scrapers.spiders.base import request_from_json, request_to_json
    from lookbench_live.scrapers.spiders.schema_org import SchemaOrgSpider

    site = SiteSettings(name="s", platform="schema_org", base_url="https://shop.example")
    spider = SchemaOrgSpider(site=site.model_dump(), state_dir=str(tmp_path))
    requests = [
        spider.request("https://shop.example/p/1", spider.parse_page, meta={"page": 2}, priority=3),
        scrapy.Request("https://shop.example/plain"),
        FormRequest("https://shop.example/f", formdata={"q": "1"}, callback=spider.parse_robots),
    ]
    for request in requests:
        data = request_to_json(request, spider)
        expected = request.to_dict(spider=spider)
        assert {k: data[k] for k in ("url", "callback", "errback", "priority", "dont_filter")} == {
            k: expected[k] for k in ("url", "callback", "errback", "priority", "dont_filter")
        }
        assert data.get("_class") == expected.get("_class")
        again = request_from_json(json.loads(json.dumps(data)), spider)
        assert type(again) is type(request) and again.url == request.url
        assert again.callback == request.callback and again.meta.get("page") == request.meta.get("page")
    with pytest.raises(ValueError):  # a callable that is not the spider's: Scrapy's own error
        request_to_json(scrapy.Request("https://shop.example/x", callback=lambda r: None), spider)
