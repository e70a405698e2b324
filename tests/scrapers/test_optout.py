"""Page-level opt-outs: robots meta noai/noimageai and TDMRep (header, meta, well-known file)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from lookbench_live.network.optout import (
    may_name_meta,
    meta_robots_optout,
    meta_tags,
    page_optout,
    parse_tdmrep,
    tdm_header_optout,
    tdm_meta_optout,
    tdmrep_optout,
    tdmrep_url,
)

PAGE = """<!doctype html><html lang="fr"><head>
<meta charset="utf-8"><title>Robe en lin</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
{meta}
<script type="application/ld+json">{{"@type": "Product", "name": "Robe"}}</script>
</head><body><meta name="robots" content="noai"><h1>Robe</h1></body></html>"""


def test_robots_meta_noai_and_noimageai_for_every_robot_or_our_token():
    assert meta_robots_optout(PAGE.format(meta='<meta name="robots" content="noai, noimageai">'))
    assert meta_robots_optout(PAGE.format(meta='<META NAME="Robots" CONTENT="index,follow,NoImageAI">'))
    got = meta_robots_optout(PAGE.format(meta='<meta name="lookbench-live" content="noai">').encode())
    assert got and got.reason == "opt_out_noai" and "lookbench-live" in got.detail
    # Addressed to another robot, or not an AI directive: no opt-out. A tag in <body> is not read.
    assert meta_robots_optout(PAGE.format(meta='<meta name="googlebot" content="noai">')) is None
    assert meta_robots_optout(PAGE.format(meta='<meta name="robots" content="noindex, nofollow">')) is None
    assert meta_robots_optout(PAGE.format(meta="")) is None
    # Words that merely contain the directive do not count.
    assert meta_robots_optout(PAGE.format(meta='<meta name="robots" content="noairport">')) is None


def test_tdm_reservation_header_and_meta():
    got = tdm_header_optout(
        {"Content-Type": "text/html", "TDM-Reservation": "1", "tdm-policy": "https://x/p.json"}
    )
    assert got and got.reason == "opt_out_tdm" and got.policy == "https://x/p.json"
    assert tdm_header_optout(httpx.Headers({"tdm-reservation": "0"}).items()) is None
    assert tdm_header_optout({}) is None
    meta = '<meta name="tdm-reservation" content="1"><meta name="tdm-policy" content="https://x/policy.json">'
    got = tdm_meta_optout(PAGE.format(meta=meta))
    assert got and got.policy == "https://x/policy.json"
    assert tdm_meta_optout(PAGE.format(meta='<meta name="tdm-reservation" content="0">')) is None


def test_tdmrep_well_known_rules_first_match_wins():
    text = """[
      {"location": "/press/*", "tdm-reservation": 0},
      {"location": "/products/*", "tdm-reservation": 1, "tdm-policy": "https://shop.example/tdm-policy.json"},
      {"location": "/lookbook$", "tdm-reservation": 1},
      {"location": 42}
    ]"""
    rules, fault = parse_tdmrep(text)
    assert len(rules) == 3 and fault == "tdmrep.json: 1 malformed rules skipped"
    got = tdmrep_optout(rules, "https://shop.example/products/red-dress?variant=2")
    assert got and got.reason == "opt_out_tdm" and got.policy == "https://shop.example/tdm-policy.json"
    assert tdmrep_optout(rules, "https://shop.example/press/launch") is None
    assert tdmrep_optout(rules, "https://shop.example/lookbook") is not None
    assert tdmrep_optout(rules, "https://shop.example/lookbook/2026") is None  # "$" anchors the end
    assert tdmrep_optout(rules, "https://shop.example/") is None
    assert (
        tdmrep_url("https://shop.example:8443/products/x?y=1")
        == "https://shop.example:8443/.well-known/tdmrep.json"
    )
    assert parse_tdmrep("<html>not found</html>")[0] == []
    assert parse_tdmrep('{"location": "/"}')[1] == "tdmrep.json must be a JSON array of rules"


def test_page_optout_combines_every_signal():
    rules, _ = parse_tdmrep('[{"location": "/p/*", "tdm-reservation": 1}]')
    clean = PAGE.format(meta="")
    assert page_optout("https://s.example/c/x", html=clean, tdmrep_rules=rules) is None
    assert page_optout("https://s.example/p/x", html=clean, tdmrep_rules=rules).reason == "opt_out_tdm"
    noai = PAGE.format(meta='<meta name="robots" content="noai">')
    assert page_optout("https://s.example/c/x", html=noai).reason == "opt_out_noai"
    assert page_optout("https://s.example/c/x", headers={"tdm-reservation": "1"}).reason == "opt_out_tdm"
    # A page that never closes <head> is scanned within the bound, not forever.
    huge = "<html><head>" + "<meta name=x content=y>" * 100_000
    assert page_optout("https://s.example/c/x", html=huge) is None


def test_the_head_is_skipped_only_when_no_meta_can_name_an_opt_out():
    names = ("robots", "lookbench-live", "tdm-reservation")
    # Any case, character references, a Unicode letter that lowercases to ASCII: read and honoured.
    for meta in (
        '<meta name="ROBOTS" content="noai">',
        '<meta name="&#114;obots" content="noai">',
        '<meta name="r&#x6F;bots" content="NOAI">',
        '<meta name="tdm&#45;reservation" content="1">',
        '<meta name="loo\u212abench-live" content="noimageai">',
    ):
        page = f"<html><head><title>x</title>{meta}</head><body></body></html>"
        assert may_name_meta(page, names), meta
        assert page_optout("https://s.example/x", html=page) is not None, meta
        assert page_optout("https://s.example/x", html=page.encode()) is not None, meta
    assert not may_name_meta("<html><head><meta name='description' content='Robe'></head></html>", names)
    # Whenever the test says "no", the head scan finds none of the names: every corpus page.
    pages = sorted((Path(__file__).parents[1] / "corpus" / "payloads").glob("*"))
    skipped = 0
    for path in pages:
        text = path.read_text(encoding="utf-8", errors="replace")
        if not may_name_meta(text, names):
            skipped += 1
            assert not {name for name, _ in meta_tags(text)} & set(names), path.name
    assert len(pages) >= 40 and skipped > 0


def _product_page(name: str, head: str = "") -> bytes:
    ld = json.dumps(
        {"@context": "https://schema.org", "@type": "Product", "name": name, "sku": name,
         "image": f"/img/{name}.jpg", "offers": {"@type": "Offer", "price": "10", "priceCurrency": "EUR"}}
    )  # fmt: skip
    return f'<html><head>{head}<script type="application/ld+json">{ld}</script></head><body></body></html>'.encode()


@pytest.mark.slow
def test_the_crawler_takes_nothing_from_pages_that_opt_out(tmp_path: Path) -> None:
    """13 §4: robots meta noai/noimageai and a TDMRep reservation (header or meta) are honoured by the
    real crawl: the page is recorded with its reason and yields no product; other pages still do."""
    from ingest_server import Route, serve

    from lookbench_live.config import CrawlSettings, SiteSettings
    from lookbench_live.scrapers.crawl import run_crawl
    from lookbench_live.warehouse.lake import Lake

    html = {"Content-Type": "text/html; charset=utf-8"}
    routes = {
        "/robots.txt": Route(status=404),
        "/p/free": Route(body=_product_page("free"), headers=html),
        "/p/noai": Route(
            body=_product_page("noai", '<meta name="robots" content="noai, noimageai">'), headers=html
        ),
        "/p/tdm-header": Route(body=_product_page("tdmh"), headers={**html, "tdm-reservation": "1"}),
        "/p/tdm-meta": Route(
            body=_product_page("tdmm", '<meta name="tdm-reservation" content="1">'), headers=html
        ),
    }
    with serve(routes) as server:
        site = SiteSettings(
            name="optout", platform="schema_org", base_url=server.base + "/", allow_private_addresses=True,
            start_paths=["/p/free", "/p/noai", "/p/tdm-header", "/p/tdm-meta"], download_delay=0,
        )  # fmt: skip
        result = run_crawl(
            site, CrawlSettings(autothrottle=False, retry_times=0), str(tmp_path), "o", timeout_s=120
        )
    lake = Lake(str(tmp_path))
    reasons = {r["item"].rsplit("/", 1)[1]: r["reason"] for r in lake.read("rejections").to_pylist()}
    assert reasons.get("noai") == "opt_out_noai", reasons
    assert reasons.get("tdm-header") == "opt_out_tdm" and reasons.get("tdm-meta") == "opt_out_tdm", reasons
    names = {p["title"] for p in lake.read("products").to_pylist()}
    assert names == {"free"} and result.products_new == 1


@pytest.mark.slow
def test_the_crawl_reads_tdmrep_once_and_records_reserved_products(tmp_path: Path) -> None:
    """13 §4: the origin's /.well-known/tdmrep.json, fetched once per crawl through the downloader
    chain, reserves pages by path: a reserved product page gives nothing (schema.org), and a
    product an API listing names under a reserved path is recorded, not kept (Shopify)."""
    from ingest_server import Route, serve

    from lookbench_live.config import CrawlSettings, SiteSettings
    from lookbench_live.scrapers.crawl import run_crawl
    from lookbench_live.warehouse.lake import Lake

    html = {"Content-Type": "text/html; charset=utf-8"}
    rules = json.dumps(
        [
            {"location": "/p/reserved*", "tdm-reservation": 1, "tdm-policy": "https://x.example/policy.json"},
            {"location": "/products/secret-*", "tdm-reservation": 1},
            {"location": "/", "tdm-reservation": 0},
        ]
    ).encode()
    listing = json.dumps(
        {
            "products": [
                {"id": n, "title": handle, "handle": handle, "vendor": "V",
                 "variants": [{"id": n, "price": "10.00", "available": True}],
                 "images": [{"src": f"/img/{handle}.jpg", "position": 1}]}
                for n, handle in ((1, "open-tee"), (2, "secret-tee"))
            ]
        }
    ).encode()  # fmt: skip
    routes = {
        "/robots.txt": Route(status=404),
        "/.well-known/tdmrep.json": Route(body=rules, headers={"Content-Type": "application/json"}),
        "/p/free": Route(body=_product_page("free"), headers=html),
        "/p/reserved-1": Route(body=_product_page("reserved"), headers=html),
        "/products.json": Route(body=listing, headers={"Content-Type": "application/json"}),
    }
    crawl = CrawlSettings(autothrottle=False, retry_times=0)
    with serve(routes) as server:
        pages = SiteSettings(
            name="tdm-pages", platform="schema_org", base_url=server.base + "/", allow_private_addresses=True,
            start_paths=["/p/free", "/p/reserved-1"], download_delay=0,
        )  # fmt: skip
        run_crawl(pages, crawl, str(tmp_path), "a", timeout_s=120)
        assert server.hits["/.well-known/tdmrep.json"] == 1  # once per host, not per page
        api = SiteSettings(
            name="tdm-api", platform="shopify", base_url=server.base, allow_private_addresses=True,
            download_delay=0, max_pages=1,
        )  # fmt: skip
        run_crawl(api, crawl, str(tmp_path), "b", timeout_s=120)
    lake = Lake(str(tmp_path))
    reasons = {
        r["item"].rsplit("/", 1)[1]: (r["reason"], r["detail"]) for r in lake.read("rejections").to_pylist()
    }
    assert reasons["reserved-1"][0] == "opt_out_tdm" and "/p/reserved*" in reasons["reserved-1"][1], reasons
    assert reasons["secret-tee"][0] == "opt_out_tdm", reasons
    titles = {p["title"] for p in lake.read("products").to_pylist()}
    assert titles == {"free", "open-tee"}


@pytest.mark.slow
def test_an_oversized_tdmrep_file_is_recorded_and_reserves_nothing(tmp_path: Path) -> None:
    """The well-known file is read within TDMREP_MAX_BYTES; a bigger one is recorded, not parsed."""
    from ingest_server import Route, serve

    from lookbench_live.config import CrawlSettings, SiteSettings
    from lookbench_live.scrapers.crawl import run_crawl
    from lookbench_live.scrapers.spiders.base import TDMREP_MAX_BYTES
    from lookbench_live.warehouse.lake import Lake

    rule = {"location": "/p/*", "tdm-reservation": 1}
    huge = json.dumps([rule] * (TDMREP_MAX_BYTES // 30)).encode()
    assert len(huge) > TDMREP_MAX_BYTES
    routes = {
        "/robots.txt": Route(status=404),
        "/.well-known/tdmrep.json": Route(body=huge, headers={"Content-Type": "application/json"}),
        "/p/free": Route(body=_product_page("free"), headers={"Content-Type": "text/html"}),
    }
    with serve(routes) as server:
        site = SiteSettings(
            name="tdm-big", platform="schema_org", base_url=server.base + "/", allow_private_addresses=True,
            start_paths=["/p/free"], download_delay=0,
        )  # fmt: skip
        run_crawl(site, CrawlSettings(autothrottle=False, retry_times=0), str(tmp_path), "c", timeout_s=120)
    lake = Lake(str(tmp_path))
    rows = lake.read("rejections").to_pylist()
    assert [r["reason"] for r in rows if r["item"].endswith("/.well-known/tdmrep.json")] == [
        "tdmrep_unavailable"
    ]
    assert {p["title"] for p in lake.read("products").to_pylist()} == {"free"}
