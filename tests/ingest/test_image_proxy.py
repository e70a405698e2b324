"""Image and robots fetches honour the proxy environment (issue 24 §9).

With `HTTP_PROXY` set, a fetch goes through the proxy (a loopback server that answers
absolute-form requests, as a forward proxy receives them); a host in `NO_PROXY` is fetched
directly; and the address guard still refuses a private target before the proxy is asked.
"""

from __future__ import annotations

import asyncio

import pytest
from ingest_fixtures import jpeg
from ingest_server import Route, serve

from lookbench_live.config import IngestSettings
from lookbench_live.ingest.downloader import FetchFailed, ImageDownloader
from lookbench_live.network import netguard
from lookbench_live.network.netguard import PrivateAllowance

IMAGE = jpeg(120, 120)
SETTINGS = IngestSettings(timeout=5, retries=0, min_side=32, robots_timeout=2.0, workers=0)
PUBLIC = "93.184.215.14"  # what images.example resolves to here; never connected to


@pytest.fixture
def public_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(netguard, "resolve", lambda host, port: [PUBLIC])
    for name in (
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
        "http_proxy",
        "https_proxy",
        "no_proxy",
        "ALL_PROXY",
        "all_proxy",
    ):
        monkeypatch.delenv(name, raising=False)


def fetch(url: str, allowance: PrivateAllowance = netguard.NO_PRIVATE) -> str:
    async def go() -> str:
        async with ImageDownloader(SETTINGS) as downloader:
            try:
                fetched = await downloader.fetch(url, private_hosts=allowance)
            except FetchFailed as exc:
                return exc.reason
            return "ok" if fetched.data == IMAGE else "other bytes"

    return asyncio.run(go())


def test_a_proxy_from_the_environment_carries_image_and_robots_requests(public_name, monkeypatch) -> None:
    routes = {
        "http://images.example/a.jpg": Route(body=IMAGE),
        "http://images.example/robots.txt": Route(body=b"User-agent: *\nDisallow: /private/\n"),
    }
    with serve(routes) as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.base)
        assert fetch("http://images.example/a.jpg") == "ok"
        assert (
            fetch("http://images.example/private/b.jpg") == "robots_disallowed"
        )  # its robots.txt, via the proxy
        hits = dict(proxy.hits)
    # One robots.txt per downloader (each fetch above has its own), the image once; the
    # disallowed image never reached the proxy.
    assert hits == {"http://images.example/robots.txt": 2, "http://images.example/a.jpg": 1}


def test_no_proxy_hosts_are_fetched_directly_and_the_guard_still_refuses(public_name, monkeypatch) -> None:
    with serve({}) as proxy, serve({"/a.jpg": Route(body=IMAGE)}) as origin:
        monkeypatch.setenv("HTTP_PROXY", proxy.base)
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        allowed = PrivateAllowance.for_site(origin.base)
        assert fetch(f"{origin.base}/a.jpg", allowed) == "ok"  # directly, NO_PROXY
        monkeypatch.setenv("NO_PROXY", "")
        assert fetch(f"{origin.base}/a.jpg") == "blocked_address"  # private, not allowed: never sent
        proxied = sum(proxy.hits.values())
    assert origin.hits["/a.jpg"] == 1
    assert proxied == 0
