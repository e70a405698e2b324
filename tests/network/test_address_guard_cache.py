"""The crawl's address guard reuses a host's checked addresses briefly, never a refusal.

A crawl used to resolve and check every request's host in a thread; it now keeps each host's
checked addresses for `RESOLUTION_TTL_S` (the resolver pin's lifetime) and re-pins them, so
Twisted still connects only to a checked address.
"""

from __future__ import annotations

import asyncio

import pytest
from scrapy import Request

from lookbench_live.config import CrawlSettings, SiteSettings
from lookbench_live.network import netguard
from lookbench_live.network.netguard import NO_PRIVATE, PrivateAllowance
from lookbench_live.scrapers import resolver
from lookbench_live.scrapers.middlewares import AddressGuardMiddleware, RefusedRequest
from lookbench_live.scrapers.settings import crawl_settings


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_host_is_checked_once_per_ttl_and_stays_pinned(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = {"shop.test": ["93.184.216.34"]}
    lookups: list[str] = []

    def fake_resolve(host: str, port: int) -> list[str]:
        lookups.append(host)
        return answers[host]

    monkeypatch.setattr(netguard, "resolve", fake_resolve)
    clock = Clock()
    guard = AddressGuardMiddleware(NO_PRIVATE, {"shop.test"}, clock=clock)

    async def run() -> None:
        for i in range(5):
            await guard.process_request(Request(f"http://shop.test/p/{i}"))
        assert lookups == ["shop.test"]
        assert resolver.pinned("shop.test") == "93.184.216.34"
        # The name now answers a private address; within the TTL the checked public one is
        # still what Twisted connects to, after it the name is checked again and refused.
        answers["shop.test"] = ["10.0.0.7"]
        await guard.process_request(Request("http://shop.test/p/6"))
        assert resolver.pinned("shop.test") == "93.184.216.34"
        clock.now += netguard.RESOLUTION_TTL_S + 1
        with pytest.raises(RefusedRequest) as refused:
            await guard.process_request(Request("http://shop.test/p/7"))
        assert refused.value.reason == "blocked_address"
        assert lookups == ["shop.test", "shop.test"]
        # A refusal is never reused: the next request asks again.
        with pytest.raises(RefusedRequest):
            await guard.process_request(Request("http://shop.test/p/8"))
        assert lookups == ["shop.test", "shop.test", "shop.test"]

    asyncio.run(run())


def test_scheme_and_offsite_checks_run_on_every_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(netguard, "resolve", lambda host, port: ["93.184.216.34"])
    guard = AddressGuardMiddleware(NO_PRIVATE, {"shop.test"})

    async def run() -> None:
        await guard.process_request(Request("http://shop.test/a"))
        with pytest.raises(RefusedRequest) as offsite:
            await guard.process_request(Request("http://other.test/a"))
        assert offsite.value.reason == "offsite"
        # Same host, other scheme: cached per scheme, host and port, so https is checked anew.
        await guard.process_request(Request("https://shop.test/a"))
        assert len(guard.checked) == 2

    asyncio.run(run())


def test_the_crawl_allows_private_addresses_only_at_the_sites_own_origin(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 24 §4, the crawl's side: the rule of image and robots fetches (scheme, host, port)."""
    monkeypatch.setattr(netguard, "resolve", lambda host, port: ["127.0.0.1"])
    site = SiteSettings(
        name="loop", platform="shopify", base_url="http://127.0.0.1:8123/shop", allow_private_addresses=True
    )
    settings = crawl_settings(
        site, CrawlSettings(), lake_home="/tmp/unused", run_key="r", state_dir="/tmp/unused"
    )
    private = PrivateAllowance.of_urls(settings["LOOKBENCH_PRIVATE_ORIGINS"])
    assert private == PrivateAllowance.for_site(site.base_url)
    # Offsite off here so that only the address rule decides.
    guard = AddressGuardMiddleware(private, set())

    async def run() -> None:
        await guard.process_request(Request("http://127.0.0.1:8123/shop/products.json"))
        for url in ("https://127.0.0.1:8123/shop", "http://127.0.0.1:8124/admin", "http://127.0.0.1/"):
            with pytest.raises(RefusedRequest) as refused:
                await guard.process_request(Request(url))
            assert refused.value.reason == "blocked_address", url

    asyncio.run(run())
