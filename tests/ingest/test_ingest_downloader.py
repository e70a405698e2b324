"""The downloader's politeness rules: robots.txt per RFC 9309 (fail closed) and X-Robots-Tag."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from ingest_fixtures import jpeg
from ingest_server import Route, serve

from lookbench_live.config import IngestSettings
from lookbench_live.ingest.downloader import FetchFailed, ImageDownloader, agent_token, opted_out

SETTINGS = IngestSettings(allow_private_addresses=True, timeout=3, retries=0, robots_timeout=2)
IMAGE = jpeg(100, 100)


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["noai"], "noai"),
        (["noindex, NoImageAI"], "noimageai"),
        (["lookbench-live: noai"], "noai"),
        (["*: noimageai"], "noimageai"),
        (["otherbot: noai"], None),
        (["noindex", "otherbot: noai"], None),
        (["unavailable_after: 25 Jun 2030 15:00:00 PST"], None),
        (["noarchive, unavailable_after: 25 Jun 2030", "noai"], "noai"),
    ],
)
def test_x_robots_tag(values: list[str], expected: str | None) -> None:
    headers = httpx.Headers([("X-Robots-Tag", v) for v in values])
    assert opted_out(headers, agent_token(SETTINGS.user_agent)) == expected


def test_agent_token() -> None:
    assert agent_token("lookbench-live/0.1 (+https://x)") == "lookbench-live"


def fetch(routes: dict[str, Route], path: str = "/img.jpg") -> tuple[str, dict[str, int]]:
    """The outcome ("ok" or the reason) of fetching `path`, and the server's hit counts."""
    with serve(routes) as server:

        async def go() -> str:
            async with ImageDownloader(SETTINGS) as downloader:
                try:
                    await downloader.fetch(server.base + path)
                except FetchFailed as exc:
                    return exc.reason
                return "ok"

        return asyncio.run(go()), dict(server.hits)


@pytest.mark.parametrize(
    ("robots", "expected"),
    [
        (Route(status=429), "robots_unreachable"),  # C3
        (Route(status=500, body=b"<html>oops</html>"), "robots_unreachable"),  # C1
        (Route(behaviour="stall_before_headers"), "robots_unreachable"),  # C2
        (Route(status=403), "ok"),  # C4 policy: 401/403 allow, as Nutch and StormCrawler
        (Route(status=410), "ok"),  # C4
        (Route(body=b"<html><body>welcome</body></html>"), "ok"),  # C5: 200 with HTML is allow-all
        (Route(body=b"User-agent: lookbench-live\nDisallow: /img\n"), "robots_disallowed"),
        (Route(body=b"User-agent: otherbot\nDisallow: /\n"), "ok"),
    ],
)
def test_robots_policy(robots: Route, expected: str) -> None:
    outcome, hits = fetch({"/robots.txt": robots, "/img.jpg": Route(body=IMAGE)})
    assert outcome == expected
    assert hits.get("/img.jpg", 0) == (1 if expected == "ok" else 0)


def test_robots_redirects_are_bounded() -> None:
    # C6: 5 hops are followed, the 6th makes robots.txt unavailable (disallow).
    chain = {f"/r{i}": Route(status=301, headers={"Location": f"/r{i + 1}"}) for i in range(6)}
    disallow = Route(body=b"User-agent: *\nDisallow: /img\n")
    five = {"/robots.txt": Route(status=301, headers={"Location": "/r2"}), **chain, "/r6": disallow}
    six = {"/robots.txt": Route(status=301, headers={"Location": "/r1"}), **chain, "/r6": disallow}
    assert fetch({**five, "/img.jpg": Route(body=IMAGE)})[0] == "robots_disallowed"
    assert fetch({**six, "/img.jpg": Route(body=IMAGE)})[0] == "robots_unreachable"


def test_a_long_redirect_chain_is_too_many_redirects_and_only_a_loop_is_a_loop() -> None:
    # X20 trap: a 6-hop chain to distinct URLs was reported as `redirect_loop`.
    chain = {f"/c{i}": Route(status=302, headers={"Location": f"/c{i + 1}"}) for i in range(6)}
    outcome, hits = fetch({**chain, "/c6": Route(body=IMAGE)}, "/c0")
    assert outcome == "too_many_redirects"
    assert hits.get("/c6", 0) == 0 and hits["/c5"] == 1  # max_redirects (5) hops followed, no more
    # Five hops are within the limit.
    assert fetch({**chain, "/c6": Route(body=IMAGE)}, "/c1")[0] == "ok"
    loop = {
        "/a": Route(status=302, headers={"Location": "/b"}),
        "/b": Route(status=302, headers={"Location": "/a"}),
    }
    assert fetch(loop, "/a")[0] == "redirect_loop"


def test_robots_rules_past_500_kib_are_dropped() -> None:
    # C7: a 2 MB robots.txt; the rule inside the first 500 KiB applies, the one after does not.
    padding = b"# " + b"x" * 1000 + b"\n"
    body = b"User-agent: *\nDisallow: /early\n" + padding * 2000 + b"Disallow: /img\n"
    routes = {"/robots.txt": Route(body=body), "/img.jpg": Route(body=IMAGE), "/early": Route(body=IMAGE)}
    assert fetch(routes, "/img.jpg")[0] == "ok"
    assert fetch(routes, "/early")[0] == "robots_disallowed"
