"""Politeness and safety of crawls: robots.txt failing closed, Crawl-delay, Retry-After,
retries only on transient errors, the address guard (docs/reliability.md C1–C11, C17)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from scrapy import Request

from lookbench_live.config import CrawlSettings, SiteSettings
from lookbench_live.network.robots import robots_policy
from lookbench_live.retry import parse_retry_after
from lookbench_live.scrapers.crawl import run_crawl
from lookbench_live.scrapers.middlewares import HostPacingMiddleware, RefusedRequest
from lookbench_live.warehouse.lake import Lake

UA = "lookbench-live"


# --------------------------------------------------------------------------- the policy


@pytest.mark.parametrize("status", [500, 502, 503, 599])
def test_robots_5xx_disallows_everything(status):
    policy = robots_policy(status, b"<html>Service Unavailable</html>", user_agent=UA, now=0)
    assert not policy.allows("https://s.example/products.json", UA)
    assert policy.reason == "robots_unreachable"
    assert policy.expires_at == 600  # retried later, not cached for the whole run


def test_robots_network_error_disallows():
    policy = robots_policy(None, user_agent=UA, error="DNSLookupError", now=0)
    assert not policy.allows("https://s.example/", UA) and policy.reason == "robots_unreachable"


def test_robots_429_disallows_for_retry_after():
    policy = robots_policy(429, b"", user_agent=UA, retry_after=120, now=10)
    assert not policy.allows("https://s.example/", UA)
    assert policy.expires_at == 130


@pytest.mark.parametrize("status", [401, 403, 404, 410])
def test_robots_4xx_allows_everything(status):
    assert robots_policy(status, b"User-agent: *\nDisallow: /", user_agent=UA).allows(
        "https://s.example/x", UA
    )


@pytest.mark.parametrize("body", [b"", b"<html><body>Welcome!</body></html>", b"\x00\xff garbage {{{"])
def test_robots_200_garbage_allows_everything(body):
    assert robots_policy(200, body, user_agent=UA).allows("https://s.example/private/x", UA)


def test_robots_rules_and_too_many_redirects():
    policy = robots_policy(200, b"User-agent: *\nDisallow: /private/\n", user_agent=UA)
    assert policy.allows("https://s.example/p/1", UA)
    assert not policy.allows("https://s.example/private/1", UA)
    assert robots_policy(301, user_agent=UA).verdict == "disallow_all"


def test_robots_over_size_cap_keeps_rules_parsed_so_far():
    head = b"User-agent: *\nDisallow: /private/\n"
    filler = b"# " + b"x" * 1000 + b"\n"
    body = head + filler * 5000 + b"Disallow: /late/\n"  # about 5 MB
    policy = robots_policy(200, body, user_agent=UA, max_bytes=500 * 1024)
    assert not policy.allows("https://s.example/private/a", UA)
    assert policy.allows("https://s.example/late/a", UA)  # past the cap: not read


def test_crawl_delay_over_maximum_skips_host_and_within_is_kept():
    assert robots_policy(200, b"User-agent: *\nCrawl-delay: 10\n", user_agent=UA).crawl_delay == 10
    skipped = robots_policy(200, b"User-agent: *\nCrawl-delay: 3600\n", user_agent=UA, max_crawl_delay=30)
    assert skipped.reason == "crawl_delay_too_long" and not skipped.allows("https://s.example/", UA)


def test_retry_after_seconds_and_http_date():
    assert parse_retry_after(b"120") == 120
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now_epoch=1445412470) == 10
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None


def test_pacer_spaces_requests_by_crawl_delay_and_holds_for_retry_after():
    clock = {"t": 100.0}
    pacer = HostPacingMiddleware(max_retry_after=300, clock=lambda: clock["t"])
    pacer.set_delay("h", 10)
    waits = [pacer.reserve("h") for _ in range(3)]
    assert waits == [0, 10, 20]  # concurrent requests are spaced, not released together
    assert pacer.reserve("other") == 0
    pacer.hold("other", 120)
    assert pacer.reserve("other") == 120


def test_a_request_waiting_for_its_slot_when_the_host_is_parked_is_not_sent():
    pacer = HostPacingMiddleware(max_retry_after=300, max_host_failures=2)
    pacer.set_delay("127.0.0.1", 0.2)
    request = Request("http://127.0.0.1/a")

    async def scenario() -> None:
        await pacer.process_request(request)  # takes the first slot, sent at once
        waiting = asyncio.ensure_future(pacer.process_request(request))  # waits 0.2 s for its slot
        await asyncio.sleep(0)
        pacer._outcome("127.0.0.1", "HTTP 503")
        pacer._outcome("127.0.0.1", "HTTP 503")  # parked while the second one waits
        with pytest.raises(RefusedRequest) as refused:
            await waiting
        assert refused.value.reason == "host_parked"

    asyncio.run(scenario())


# --------------------------------------------------------------------------- crawls


class Scripted:
    """A loopback server answering from a table of path -> (status, headers, body)."""

    def __init__(self, routes: dict[str, tuple[int, dict[str, str], bytes]]):
        self.routes = routes
        self.hits: list[tuple[float, str]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                server.hits.append((time.monotonic(), self.path))
                status, headers, body = server.routes.get(self.path, (404, {}, b"not found"))
                if callable(body):
                    status, headers, body = body()
                self.send_response(status)
                for key, value in {"Content-Length": str(len(body)), **headers}.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def paths(self) -> list[str]:
        return [p for _, p in self.hits]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def products_json(*ids: int) -> bytes:
    products = [
        {"id": i, "title": f"Tee {i}", "handle": f"tee-{i}", "vendor": "V", "variants": [{"id": i, "price": "10.00", "available": True}],
         "images": [{"src": f"/img/{i}.jpg", "position": 1}]}
        for i in ids
    ]  # fmt: skip
    return json.dumps({"products": products}).encode()


@pytest.fixture
def scripted() -> Iterator[Any]:
    servers: list[Scripted] = []

    def make(routes: dict[str, tuple[int, dict[str, str], bytes]]) -> Scripted:
        servers.append(Scripted(routes))
        return servers[-1]

    yield make
    for server in servers:
        server.close()


def shop(base: str, **kw: Any) -> SiteSettings:
    return SiteSettings(
        name="t", platform="shopify", base_url=base, allow_private_addresses=True, download_delay=0, **kw
    )


FAST = CrawlSettings(autothrottle=False, retry_times=2, download_timeout=10)
JSON = {"Content-Type": "application/json"}


@pytest.mark.slow
def test_robots_503_fetches_no_product_url_and_records_reason(scripted, tmp_path):
    server = scripted(
        {
            "/robots.txt": (503, {}, b"<html>down</html>"),
            "/products.json?limit=250&page=1": (200, JSON, products_json(1)),
        }
    )
    result = run_crawl(shop(server.base), FAST, str(tmp_path), "r", timeout_s=120)
    assert not any(p.startswith("/products.json") for p in server.paths())
    assert result.products_new == 0
    assert result.rejections_by_reason == {"robots_unreachable": 1}
    rows = Lake(str(tmp_path)).read("rejections").to_pylist()
    assert rows[0]["item"].endswith("/products.json?limit=250&page=1") and rows[0]["stage"] == "crawl"


@pytest.mark.slow
def test_404_is_not_retried_503_is_retried_then_recorded_and_429_retry_after_is_honoured(scripted, tmp_path):
    state = {"n": 0}

    def limited() -> tuple[int, dict[str, str], bytes]:
        state["n"] += 1
        if state["n"] == 1:
            return 429, {"Retry-After": "2"}, b"slow down"
        return 200, JSON, products_json(1, 2)

    server = scripted({
        "/robots.txt": (404, {}, b""),
        "/products.json?limit=250&page=1": (200, JSON, limited),  # type: ignore[dict-item]
        "/products.json?limit=250&page=2": (200, JSON, products_json()),
        "/collections/gone/products.json?limit=250&page=1": (404, {}, b""),
        "/collections/down/products.json?limit=250&page=1": (503, {}, b""),
    })  # fmt: skip
    result = run_crawl(
        shop(server.base, collections=["gone", "down"]), FAST, str(tmp_path), "r", timeout_s=120
    )
    paths = server.paths()
    assert paths.count("/collections/gone/products.json?limit=250&page=1") == 1  # C11: not retried
    assert paths.count("/collections/down/products.json?limit=250&page=1") == 3  # C10: 3 attempts in all
    assert result.products_new == 2
    assert result.rejections_by_reason == {"http_404": 1, "http_503": 1}
    times = [t for t, p in server.hits if p == "/products.json?limit=250&page=1"]
    assert len(times) == 2 and times[1] - times[0] >= 2.0  # C9: nothing before Retry-After


@pytest.mark.slow
def test_a_host_that_keeps_failing_is_parked_and_the_rest_recorded_unsent(scripted, tmp_path):
    """C10, second half: after `max_host_failures` consecutive failed attempts the host is parked;
    its remaining requests are recorded `host_parked` without reaching it, each URL once."""
    from lookbench_live.warehouse.lake import Lake

    collections = [f"c{i}" for i in range(24)]
    # Every answer fails (the catalogue listing too): no success resets the count, so the host is
    # parked at exactly its 4th failed attempt, whatever order the attempts complete in.
    routes = {"/robots.txt": (404, {}, b""), "/products.json?limit=250&page=1": (503, {}, b"")}
    for name in collections:
        routes[f"/collections/{name}/products.json?limit=250&page=1"] = (503, {}, b"")
    server = scripted(routes)
    crawl = FAST.model_copy(update={"max_host_failures": 4})
    site = shop(server.base, collections=collections)
    result = run_crawl(site, crawl, str(tmp_path), "r", timeout_s=120)
    sent = [p for p in server.paths() if p.endswith("products.json?limit=250&page=1")]
    # Unparked: 25 listings x 3 attempts = 75 requests. Parked after 4 failures in a row; then
    # only what had already passed the middleware into the downloader's queue (at most
    # CONCURRENT_REQUESTS, 16) is still sent.
    assert len(sent) <= 4 + 16, sent
    # A retry reaches the host only if it entered the downloader before the parking, so only a
    # retry of one of the 3 failures before it; the 4th failure's retry and every later one are
    # refused (the pacer counts a response before Scrapy's retry middleware sees it).
    assert len(sent) - len(set(sent)) <= 4 - 1, sent
    assert set(result.rejections_by_reason) <= {"http_503", "host_parked"}
    # A request never sent, or sent before the parking with its retry after it, is recorded parked.
    assert result.rejections_by_reason["host_parked"] >= 25 - len(set(sent))
    rows = Lake(str(tmp_path)).read("rejections").to_pylist()
    recorded = sorted(
        r["item"].split("/collections/")[1].split("/")[0] for r in rows if "/collections/" in r["item"]
    )
    assert recorded == sorted(collections)  # every collection recorded exactly once
    parked = [r for r in rows if r["reason"] == "host_parked"]
    assert parked and all("4 consecutive failed attempts" in r["detail"] for r in parked)


@pytest.mark.slow
def test_private_address_is_refused_without_allow_private(scripted, tmp_path):
    server = scripted(
        {"/robots.txt": (200, {}, b""), "/products.json?limit=250&page=1": (200, JSON, products_json(1))}
    )
    site = SiteSettings(name="t", platform="shopify", base_url=server.base, allow_private_addresses=False)
    result = run_crawl(site, FAST, str(tmp_path), "r", timeout_s=120)
    assert server.paths() == []  # refused before connecting, robots.txt included
    assert result.rejections_by_reason == {"blocked_address": 1}


@pytest.mark.slow
def test_crawl_delay_too_long_skips_host(scripted, tmp_path):
    server = scripted({"/robots.txt": (200, {}, b"User-agent: *\nCrawl-delay: 3600\n"),
                       "/products.json?limit=250&page=1": (200, JSON, products_json(1))})  # fmt: skip
    result = run_crawl(shop(server.base), FAST, str(tmp_path), "r", timeout_s=120)
    assert server.paths() == ["/robots.txt"]
    assert result.rejections_by_reason == {"crawl_delay_too_long": 1}
