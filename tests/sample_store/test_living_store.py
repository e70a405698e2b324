"""The living sample store over time, and the crawls that follow it month after month:
new arrivals in every platform shape, removals, near-copy re-uploads, looks linking older
products; the since-cursor, first_seen_at, page budgets with a resumed frontier, a failing
site among others, and the refusal to date a real site's catalogue in the past."""

from __future__ import annotations

import datetime as dt
import json
import socket
from collections import Counter
from pathlib import Path

import httpx
import pytest

from lookbench_live.config import CrawlSettings, Settings, SiteSettings
from lookbench_live.flows import stages
from lookbench_live.flows.runtime import RunSpec
from lookbench_live.sample_store.catalog import EPOCH, drop_time
from lookbench_live.sample_store.server import SampleStore
from lookbench_live.sample_store.sites import sample_sites
from lookbench_live.schema.hashing import hamming, hash_bytes
from lookbench_live.scrapers.crawl import read_frontier, run_crawl
from lookbench_live.warehouse.lake import Lake

DEC = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
JAN = dt.datetime(2027, 1, 1, tzinfo=dt.UTC)
CRAWL = CrawlSettings(autothrottle=False)
RADIUS = Settings().dedup.radius
SHAPES = {"shopify", "woocommerce", "schema_org", "playwright"}


def site(store: SampleStore, name: str, **changes) -> SiteSettings:
    found = next(s for s in sample_sites(store.base_url) if s.name == name)
    return found.model_copy(update=changes)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# --------------------------------------------------------------------------- the store


def test_a_month_later_the_store_shows_new_arrivals_in_every_shape_and_drops_old_ones():
    with SampleStore(clock=DEC) as dec, SampleStore(clock=JAN) as jan:
        before = {p.product_id: p for p in dec.products}
        after = {p.product_id: p for p in jan.products}
        new = [p for p in after.values() if p.product_id not in before]
        assert new and all(DEC < p.published_at <= JAN for p in new)
        # Every weekly drop of the month brings every platform shape, with photos to fill a gallery.
        published = jan.published_between(DEC, JAN)
        assert {p.product_id for p in new} <= {p.product_id for p in published}
        weeks = {int((p.published_at - EPOCH) / dt.timedelta(weeks=1)) for p in published}
        assert len(weeks) >= 4
        for week in weeks:
            drop = [p for p in published if drop_time(week) <= p.published_at < drop_time(week + 1)]
            assert {p.shape for p in drop} == SHAPES, week
        assert all(p.photos >= 2 for p in new)
        base = jan.base_url
        # Shopify: products.json states published_at / updated_at.
        shopify = httpx.get(f"{base}/shopify/products.json?limit=250").json()["products"]
        stated = {str(p["id"]): p["published_at"] for p in shopify}
        for p in new:
            if p.shape == "shopify":
                assert dt.datetime.fromisoformat(stated[p.product_id].replace("Z", "+00:00")) > DEC
        # WooCommerce: the Store API items carry their dates.
        woo = httpx.get(f"{base}/woo/wp-json/wc/store/v1/products?per_page=100").json()
        dated = {str(p["id"]): p["date_created_gmt"] for p in woo}
        assert any(dated[p.product_id] > DEC.isoformat()[:19] for p in new if p.shape == "woocommerce")
        # schema.org: the sitemap's lastmod; JavaScript: the rendered listing's data.
        sitemap = httpx.get(f"{base}/schema/sitemap-products.xml").text
        for p in new:
            if p.shape == "schema_org":
                assert f"/schema/p/{p.slug}</loc><lastmod>{p.updated_at.isoformat()}" in sitemap
        listing = httpx.get(f"{base}/js/").text
        import base64

        encoded = listing.split("atob('")[1].split("'")[0]
        assert {f"/js/p/{p.slug}" for p in new if p.shape == "playwright"} <= set(
            json.loads(base64.b64decode(encoded))
        )
        # Removed products answer 404 (page and photos); others changed price, photos or stock.
        removed = [before[i] for i in before.keys() - after.keys()]
        assert removed
        gone = next(p for p in removed if p.shape == "shopify")
        assert httpx.get(f"{base}/shopify/products/{gone.slug}.json").status_code == 404
        assert httpx.get(f"{base}/img/p/{gone.product_id}/0.jpg").status_code == 404
        kept = [(before[i], after[i]) for i in before.keys() & after.keys()]
        assert any(a.price_cents != b.price_cents for a, b in kept)
        assert any(a.photo_round != b.photo_round for a, b in kept)
        assert any(a.in_stock and not b.in_stock for a, b in kept)
        for a, b in kept:  # a change moves updated_at, so an incremental crawl sees it again
            if (a.price_cents, a.photo_round, a.in_stock) != (b.price_cents, b.photo_round, b.in_stock):
                assert b.updated_at > DEC
        # The broken images and pages stay.
        assert set(dec.broken_images()) == {u.replace(base, dec.base_url) for u in jan.broken_images()}
        assert httpx.get(f"{base}/schema/p/flaky").status_code == 503


def test_new_looks_link_new_and_older_products_as_product_urls():
    with SampleStore(clock=DEC) as dec, SampleStore(clock=JAN) as jan:
        old_looks = {lk.look_id for lk in dec.looks}
        truth = [t for t in jan.looks_truth() if t["look_id"] not in old_looks]
        assert len(truth) >= 4
        by_url = {e["url"]: e for e in jan.catalog()}
        older = 0
        for look in truth:
            assert DEC < dt.datetime.fromisoformat(look["published_at"]) <= JAN
            page = httpx.get(look["url"]).text
            for url in look["product_urls"]:
                assert url.removeprefix(jan.base_url) in page  # hotspots link product pages
                entry = by_url[url]  # listed at the clock, with photos
                assert len(entry["image_urls"]) >= 2
                older += dt.datetime.fromisoformat(entry["published_at"]) < DEC
            assert any(dt.datetime.fromisoformat(by_url[u]["published_at"]) > DEC
                       for u in look["product_urls"])  # fmt: skip
        assert older >= len(truth) // 2  # most looks also wear something from an earlier month


def test_reuploaded_photos_are_near_copies_of_an_earlier_months_photo():
    transforms = Counter()
    for month in range(12, 17):
        clock = dt.datetime(2026 + (month - 1) // 12, (month - 1) % 12 + 1, 1, tzinfo=dt.UTC)
        with SampleStore(clock=clock) as store:
            listed = {p.product_id: p for p in store.products}
            for copy in store.near_copies():
                product = listed[copy["product_id"]]
                original = store.spec_of(copy["original_product_id"])
                assert original is not None and original.published_at < product.published_at - dt.timedelta(
                    days=28
                )
                # ... and one a monthly crawl saw: listed for weeks, so an earlier release holds it
                assert (
                    original.removed_at is None
                    or original.removed_at - original.published_at >= dt.timedelta(weeks=8)
                )
                served = httpx.get(copy["url"]).content
                a, b = hash_bytes(served), hash_bytes(store.original_photo(copy["original_product_id"], 0))
                distance = min(hamming(a.phash, b.phash), hamming(a.phash_mirror, b.phash))
                assert distance <= RADIUS, (copy, distance)
                assert served != store.original_photo(copy["original_product_id"], 0)
                transforms[copy["transform"]] += 1
    assert set(transforms) == {"reencode", "resize", "mirror", "crop"}


def test_the_store_is_a_function_of_its_clock_and_size():
    with SampleStore(clock=JAN) as a, SampleStore(clock=JAN) as b:
        assert json.dumps(a.catalog()).replace(a.base_url, "") == json.dumps(b.catalog()).replace(
            b.base_url, ""
        )
        assert json.dumps(a.looks_truth()).replace(a.base_url, "") == json.dumps(b.looks_truth()).replace(
            b.base_url, ""
        )
        path = "/shopify/products.json?limit=250"
        assert httpx.get(a.base_url + path).text.replace(a.base_url, "") == httpx.get(
            b.base_url + path
        ).text.replace(b.base_url, "")
        photo = a.catalog()[-1]["image_urls"][0]
        assert httpx.get(photo).content == httpx.get(photo.replace(a.base_url, b.base_url)).content
        # Moving the clock of a running store is the same as a store built at that clock.
        a.set_clock(DEC)
        with SampleStore(clock=DEC) as c:
            assert [e["product_id"] for e in a.catalog()] == [e["product_id"] for e in c.catalog()]
    big = SampleStore(clock=JAN, products_per_week=40)
    small = SampleStore(clock=JAN)
    new_big = [p for p in big.products if p.published_at > DEC]
    new_small = [p for p in small.products if p.published_at > DEC]
    assert len(new_big) >= 9 * len(new_small) and len(big.looks) > len(small.looks)
    big.close()
    small.close()


# --------------------------------------------------------------------------- crawls over months


@pytest.mark.slow
def test_month_two_crawl_skips_old_items_and_keeps_first_seen(tmp_path):
    """The real crawl subprocess, the same store a month later, the flow's since-cursor."""
    lake = Lake(str(tmp_path))
    with SampleStore(clock=DEC) as store:
        schema = site(store, "sample-schema")
        first = run_crawl(schema, CRAWL, str(tmp_path), "m1", seen_at=DEC, timeout_s=180)
        december = {p.product_id: p for p in store.products if p.shape == "schema_org"}
        store.set_clock(JAN)  # the same store (same host and port), a month later
        start = len(store.hits)
        since = stages.crawl_since(DEC + dt.timedelta(days=1))  # the window starts where v20261201 ended
        second = run_crawl(schema, CRAWL, str(tmp_path), "m2", since=since, seen_at=JAN, timeout_s=180)
        hits = store.hits[start:]
        january = {p.product_id: p for p in store.products if p.shape == "schema_org"}
    assert first.products_new == len(december) + 1  # + the mislabelled-charset page
    arrived = {i for i in january if i not in december}
    updated = {i for i, p in january.items() if i in december and p.updated_at >= since}
    untouched = [p for i, p in january.items() if i in december and p.updated_at < since]
    assert arrived and updated and untouched
    # Old, unchanged pages are skipped by their sitemap lastmod: not even fetched.
    fetched = {h for h in hits if h.startswith("/schema/p/")}
    assert not {f"/schema/p/{p.slug}" for p in untouched} & fetched
    assert {f"/schema/p/{january[i].slug}" for i in arrived | updated} <= fetched
    assert second.products_new == len(arrived)
    rows = lake.read("products").to_pylist()
    seen = {}
    for row in rows:
        seen.setdefault(row["product_id"], set()).add(row["first_seen_at"])
    for product_id in december.keys() & january.keys():
        assert seen[product_id] == {DEC}  # known products keep the month they were first seen
    for product_id in arrived:
        assert seen[product_id] == {JAN}
    keys = [(r["product_id"], r["content_hash"]) for r in rows]
    assert len(keys) == len(set(keys))


@pytest.mark.slow
def test_page_budget_stops_cleanly_and_the_next_run_resumes_from_the_frontier(tmp_path):
    lake = Lake(str(tmp_path))
    with SampleStore(clock=DEC) as store:
        full = {p.product_id for p in store.products if p.shape == "schema_org"} | {"latin1"}
        small = site(store, "sample-schema", max_pages=14)
        first = run_crawl(small, CRAWL, str(tmp_path), "b1", seen_at=DEC, timeout_s=180)
        assert first.status == "over_budget" and first.unreached > 0
        frontier = read_frontier(lake, "sample-schema")
        assert len(frontier) == first.unreached
        got = {r["product_id"] for r in lake.read("products").to_pylist()}
        assert got < full
        # Later runs (the next months: nothing old is new work) start from what was left.
        runs = 0
        since = DEC
        while read_frontier(lake, "sample-schema") and runs < 6:
            runs += 1
            left = [r["url"] for r in read_frontier(lake, "sample-schema")]
            start = len(store.hits)
            result = run_crawl(small, CRAWL, str(tmp_path), f"b{runs + 1}", since=since, timeout_s=180)
            fetched = {store.base_url + h for h in store.hits[start:]}
            now_left = {r["url"] for r in read_frontier(lake, "sample-schema")}
            # The frontier goes first, within the budget: those requests are no longer left.
            assert not set(left[:14]) & now_left
            assert {u for u in left[:14] if u.startswith(store.base_url + "/schema/p/schema-")} <= fetched
            assert result.unreached == len(now_left)
    assert not read_frontier(lake, "sample-schema") and result.status == "ok"
    rows = lake.read("products").to_pylist()
    assert {r["product_id"] for r in rows} == full
    assert len(rows) == len({(r["product_id"], r["content_hash"]) for r in rows})  # no duplicates


def _config(tmp_path: Path, sites: list[SiteSettings]) -> Path:
    lines = ["[crawl]", "autothrottle = false", "retry_times = 0", ""]
    for s in sites:
        lines.append("[[crawl.sites]]")
        values = {
            **s.model_dump(exclude_defaults=True),
            "allow_private_addresses": True,
            "download_delay": 0.0,
        }
        lines += [f"{key} = {json.dumps(value)}" for key, value in values.items()] + [""]
    path = tmp_path / "lookbench.toml"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def _spec(tmp_path: Path, config: Path, as_of: dt.datetime) -> RunSpec:
    return RunSpec(
        flow="refresh",
        home=str(tmp_path / "lake"),
        config_path=str(config),
        as_of=as_of,
        version=f"v{as_of:%Y%m%d}",
        window_start=None,
        window_end=as_of + dt.timedelta(days=1),
    )


@pytest.mark.slow
def test_a_failing_site_is_recorded_and_the_other_sites_products_arrive(tmp_path, monkeypatch):
    from prefect import flow

    from lookbench_live.config import load_settings

    for key, value in {
        "HF_HUB_OFFLINE": "1",
        "DO_NOT_TRACK": "1",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    }.items():
        monkeypatch.setenv(key, value)
    today = dt.datetime.now(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    dead_url = f"http://127.0.0.1:{free_port()}/woo"  # nothing listens there
    with SampleStore(clock=today) as store:
        shop = site(store, "sample-shopify").model_copy(update={"collections": []})
        dead = SiteSettings(name="dead-woo", platform="woocommerce", base_url=dead_url)
        config = _config(tmp_path, [shop, dead])
        settings = load_settings(config)
        spec = _spec(tmp_path, config, today)

        @flow(name="crawl-all-test")
        def crawl() -> list[stages.SiteOutcome]:
            return stages.crawl_all(spec, settings)

        outcomes = {o.site: o for o in crawl()}
        (tmp_path / "alone").mkdir()
        alone = _config(tmp_path / "alone", [dead])
        only_dead = load_settings(alone)

        @flow(name="crawl-all-dead")
        def crawl_dead() -> list[stages.SiteOutcome]:
            return stages.crawl_all(_spec(tmp_path / "alone", alone, today), only_dead)

        with pytest.raises(
            stages.CrawlError,
            match=r"^no site yielded anything: dead-woo: no page fetched \(robots_unreachable",
        ):
            crawl_dead()
    assert outcomes["sample-shopify"].status == "ok" and outcomes["sample-shopify"].products > 0
    assert outcomes["dead-woo"].status == "failed" and "robots_unreachable" in outcomes["dead-woo"].reason
    lake = Lake(spec.home)
    assert {r["source"] for r in lake.read("products").to_pylist()} == {"sample-shopify"}
    recorded = [r for r in lake.read("rejections").to_pylist() if r["item"] == "site:dead-woo"]
    assert [(r["stage"], r["reason"]) for r in recorded] == [("crawl", "site_failed")]


def test_crawling_a_real_site_as_of_a_past_day_is_refused():
    now = dt.datetime(2026, 11, 30, 22, 0, tzinfo=dt.UTC)
    real = Settings.model_validate(
        {"crawl": {"sites": [{"name": "shop", "platform": "shopify", "base_url": "https://shop.example"}]}}
    )
    with pytest.raises(stages.AsOfError, match=r"refusing to crawl shop as of 2026-09-01"):
        stages.check_as_of(real, dt.datetime(2026, 9, 1, tzinfo=dt.UTC), now)
    stages.check_as_of(real, dt.datetime(2026, 11, 30, tzinfo=dt.UTC), now)  # today is fine
    # The living store is the exception: its clock is the as-of.
    stages.check_as_of(Settings(), dt.datetime(2026, 9, 1, tzinfo=dt.UTC), now)


# --------------------------------------------------------------------------- a large store (benchmarks)


def test_a_large_store_gets_a_page_budget_that_covers_its_listing():
    store = SampleStore(clock=DEC, products_per_week=400)
    try:
        default = {s.name: s.max_pages for s in sample_sites(store.base_url)}
        large = {s.name: s.max_pages for s in sample_sites(store.base_url, 400)}
        assert set(default.values()) == {SiteSettings.model_fields["max_pages"].default}
        per_shape = Counter(p.shape for p in store.products)
        # A schema.org or JS product is one page request each: the budget must reach all of them.
        assert large["sample-schema"] > per_shape["schema_org"]
        assert large["sample-js"] > per_shape["playwright"]
    finally:
        store.close()


def test_store_serves_pages_by_slug_and_redraws_evicted_images_identically(monkeypatch):
    import lookbench_live.sample_store.server as sample_store

    monkeypatch.setattr(sample_store, "IMAGE_CACHE", 3)
    with SampleStore(clock=DEC, products_per_week=8) as store:
        products = [p for p in store.products if p.shape == "schema_org" and not p.broken_images][:5]
        with httpx.Client(base_url=store.base_url, timeout=30) as client:
            for p in products:  # the page found by slug is the product's own
                page = client.get(f"/schema/p/{p.slug}")
                assert page.status_code == 200 and p.title in page.text
            first = client.get(f"/img/p/{products[0].product_id}/0.jpg").content
            for p in products[1:]:
                assert client.get(f"/img/p/{p.product_id}/0.jpg").status_code == 200
            assert len(store._images) <= 3  # bounded: the first photo was evicted
            assert client.get(f"/img/p/{products[0].product_id}/0.jpg").content == first
