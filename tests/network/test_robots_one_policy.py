"""One robots.txt policy for the crawl and for images (issue 24 §9).

The same table of robots.txt answers is run through both callers: the crawl's
`RobotsGateMiddleware` (a real Scrapy crawler; its engine's download answers with the row's
`scrapy.http.Response`) and the image side's `RobotsCache` (our HTTP client against a
loopback server). Both must reach the same verdict for the same URLs. Decisions:
any 2xx is parsed (RFC 9309 §2.3.1.1: a successful download), 429 disallows (for its
Retry-After), the size cap keeps the whole lines of the first 500 KiB, and an unparsable
file allows all.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from ingest_server import Route, serve
from scrapy.http import Response as ScrapyResponse
from scrapy.utils.test import get_crawler

from lookbench_live.ingest.http import HttpClient
from lookbench_live.ingest.robots import RobotsCache
from lookbench_live.scrapers.middlewares import RefusedRequest, RobotsGateMiddleware

AGENT = "lookbench-live"
RULES = b"User-agent: *\nDisallow: /private/\n"
BIG = RULES + (b"# " + b"x" * 1000 + b"\n") * 600 + b"Disallow: /late/\n"  # the last rule past 500 KiB

# name: (status, headers, body, {path: expected}); expected "ok" or the reason recorded.
TABLE: dict[str, tuple[int, dict[str, str], bytes, dict[str, str]]] = {
    "200 rules": (200, {}, RULES, {"/p/1.jpg": "ok", "/private/1.jpg": "robots_disallowed"}),
    "203 rules (2xx)": (203, {}, RULES, {"/p/1.jpg": "ok", "/private/1.jpg": "robots_disallowed"}),
    "204 empty": (204, {}, b"", {"/private/1.jpg": "ok"}),
    "404": (404, {}, b"not here", {"/private/1.jpg": "ok"}),
    "403": (403, {}, RULES, {"/private/1.jpg": "ok"}),
    "429": (429, {"Retry-After": "120"}, b"slow down", {"/p/1.jpg": "robots_unreachable"}),
    "503": (503, {}, b"<html>down</html>", {"/p/1.jpg": "robots_unreachable"}),
    "garbage": (200, {}, b"\x00\xff garbage {{{ <html>", {"/private/1.jpg": "ok"}),
    "over the cap": (200, {}, BIG, {"/private/1.jpg": "robots_disallowed", "/late/1.jpg": "ok"}),
    "crawl-delay too long": (
        200,
        {},
        b"User-agent: *\nCrawl-delay: 3600\n",
        {"/p/1.jpg": "crawl_delay_too_long"},
    ),
}


def crawl_verdicts(row: tuple[int, dict[str, str], bytes, dict[str, str]]) -> dict[str, str]:
    status, headers, body, expected = row
    crawler = get_crawler(settings_dict={"LOOKBENCH_ROBOTS_AGENT": AGENT})

    class Engine:
        async def download_async(self, request: Any) -> ScrapyResponse:
            return ScrapyResponse(request.url, status=status, headers=headers, body=body, request=request)

    crawler.engine = Engine()  # type: ignore[assignment]
    gate = RobotsGateMiddleware(crawler)

    async def go() -> dict[str, str]:
        from scrapy import Request

        seen = {}
        for path in expected:
            try:
                await gate.process_request(Request(f"http://shop.example{path}"))
                seen[path] = "ok"
            except RefusedRequest as exc:
                seen[path] = exc.reason
        return seen

    return asyncio.run(go())


def image_verdicts(row: tuple[int, dict[str, str], bytes, dict[str, str]]) -> dict[str, str]:
    status, headers, body, expected = row
    with serve({"/robots.txt": Route(status=status, headers=headers, body=body)}) as server:

        async def go() -> dict[str, str]:
            client = HttpClient(user_agent=f"{AGENT}/0.1")
            cache = RobotsCache(client, agent=AGENT, timeout=5, error_ttl=600)
            try:
                seen = {}
                for path in expected:
                    verdict = await cache.verdict(server.base + path, allow_private=True)
                    seen[path] = "ok" if verdict.allowed else str(verdict.reason)
                return seen
            finally:
                await client.aclose()

        return asyncio.run(go())


@pytest.mark.parametrize("name", list(TABLE))
def test_crawl_and_images_decide_robots_txt_alike(name: str) -> None:
    row = TABLE[name]
    expected = row[3]
    assert crawl_verdicts(row) == expected
    assert image_verdicts(row) == expected


def test_an_image_hosts_429_is_retried_after_its_retry_after_not_the_error_ttl() -> None:
    # The crawl's policy expires a 429 at its Retry-After (test_scrapers_politeness); images too.
    route = Route(status=200, body=RULES, fail_first=1, fail_status=429, fail_headers={"Retry-After": "1"})
    with serve({"/robots.txt": route}) as server:

        async def go() -> list[bool]:
            client = HttpClient(user_agent=f"{AGENT}/0.1")
            cache = RobotsCache(client, agent=AGENT, timeout=5, error_ttl=600)
            try:
                first = await cache.verdict(server.base + "/p/1.jpg", allow_private=True)
                await asyncio.sleep(1.2)
                second = await cache.verdict(server.base + "/p/1.jpg", allow_private=True)
                return [first.allowed, second.allowed]
            finally:
                await client.aclose()

        assert asyncio.run(go()) == [False, True]
        assert server.hits["/robots.txt"] == 2
