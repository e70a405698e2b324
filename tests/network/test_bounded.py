"""Compressed bodies inflate under a bound (C16, S1–S3): robots.txt of image hosts, the `extract`
command's fetch, and sitemaps (XXE, billion laughs, gzip bomb) in a real crawl."""

from __future__ import annotations

import asyncio
import gzip
import http.server
import threading
import zlib
from pathlib import Path

import pytest

from lookbench_live.network.bounded import BodyTooLarge, decode_layers

ZEROS = 64 * 1024 * 1024  # inflates to 64 MiB from some 64 KiB


def _gz(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=9, mtime=0)


@pytest.fixture(scope="module")
def bomb() -> bytes:
    return _gz(b"\0" * ZEROS)


class Server:
    def __init__(self, routes: dict[str, tuple[dict[str, str], bytes]]):
        self.hits: list[str] = []
        hits = self.hits

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                hits.append(self.path)
                headers, body = routes.get(self.path, ({}, b""))
                self.send_response(200 if self.path in routes else 404)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_each_layer_inflates_under_the_cap(bomb: bytes):
    with pytest.raises(BodyTooLarge) as once:
        decode_layers(bomb, ["gzip"], 1_000_000)
    assert once.value.reason == "max_size"
    # Stacked gzip: the outer layer is small, the inner one is the bomb; each is bounded.
    with pytest.raises(BodyTooLarge, match="inflates past"):
        decode_layers(_gz(bomb), ["gzip", "gzip"], 1_000_000)
    assert decode_layers(zlib.compress(b"hello"), ["deflate"], 10) == b"hello"


def test_extract_fetch_refuses_a_gzip_bomb_and_stacked_encodings(bomb: bytes):
    from lookbench_live.scrapers.cli import _fetch

    routes = {
        "/bomb": ({"Content-Encoding": "gzip", "Content-Type": "text/html"}, bomb),
        "/stacked": ({"Content-Encoding": "gzip, gzip, gzip"}, _gz(_gz(_gz(b"<html></html>")))),
        "/br": ({"Content-Encoding": "br"}, b"\x00" * 10),
        "/fine": ({"Content-Encoding": "gzip", "Content-Type": "text/html"}, _gz(b"<html>ok</html>")),
    }
    with Server(routes) as server:
        with pytest.raises(RuntimeError, match="inflates past 33554432 bytes"):
            _fetch(server.url + "/bomb", allow_private=True)
        with pytest.raises(RuntimeError, match="3 stacked content encodings"):
            _fetch(server.url + "/stacked", allow_private=True)
        with pytest.raises(RuntimeError, match="'br' is not accepted"):
            _fetch(server.url + "/br", allow_private=True)
        assert _fetch(server.url + "/fine", allow_private=True)[0] == b"<html>ok</html>"


def test_image_host_robots_bomb_keeps_the_rules_before_the_cap():
    from lookbench_live.ingest.http import HttpClient
    from lookbench_live.ingest.robots import ROBOTS_MAX_BYTES, RobotsCache

    rules = b"User-agent: *\nDisallow: /private\n"
    routes = {"/robots.txt": ({"Content-Encoding": "gzip"}, _gz(rules + b"#" * (200 * ROBOTS_MAX_BYTES)))}

    async def verdicts(url: str) -> list[bool]:
        # The image downloader's own client (the one that fetches image hosts' robots.txt).
        client = HttpClient(user_agent="lookbench-live")
        try:
            cache = RobotsCache(client, agent="lookbench-live", timeout=10, error_ttl=60)
            return [
                (await cache.verdict(url + p, allow_private=True)).allowed
                for p in ("/private/x.jpg", "/ok.jpg")
            ]
        finally:
            await client.aclose()

    with Server(routes) as server:
        assert asyncio.run(verdicts(server.url)) == [False, True]
    stacked = {"/robots.txt": ({"Content-Encoding": "gzip, gzip, gzip"}, _gz(_gz(_gz(rules))))}
    with Server(stacked) as server:
        assert asyncio.run(verdicts(server.url)) == [False, False]  # undecodable: fail closed


XXE = b"""<?xml version="1.0"?>
<!DOCTYPE urlset [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
<url><loc>{base}/p/&xxe;</loc></url></urlset>"""

LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol">
<!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
<!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
<!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
<!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
<!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
<!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
<!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">]>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>{base}/p/&lol9;</loc></url></urlset>"""


@pytest.mark.slow
def test_hostile_sitemaps_are_not_expanded_and_bombs_are_skipped(tmp_path: Path, bomb: bytes):
    from lookbench_live.config import CrawlSettings, SiteSettings
    from lookbench_live.scrapers.crawl import run_crawl
    from lookbench_live.warehouse.lake import Lake

    routes: dict[str, tuple[dict[str, str], bytes]] = {}
    with Server(routes) as server:
        base = server.url
        routes["/robots.txt"] = (
            {},
            f"User-agent: *\nSitemap: {base}/xxe.xml\nSitemap: {base}/laughs.xml\nSitemap: {base}/bomb.xml.gz\n".encode(),
        )
        routes["/xxe.xml"] = ({"Content-Type": "application/xml"}, XXE.replace(b"{base}", base.encode()))
        routes["/laughs.xml"] = (
            {"Content-Type": "application/xml"},
            LAUGHS.replace(b"{base}", base.encode()),
        )
        routes["/bomb.xml.gz"] = ({"Content-Type": "application/x-gzip"}, bomb)
        site = SiteSettings(
            name="hostile-sitemaps", platform="schema_org", base_url=base + "/", allow_private_addresses=True,
            download_delay=0,
        )  # fmt: skip
        crawl = CrawlSettings(autothrottle=False, download_maxsize=4 * 1024 * 1024, retry_times=0)
        run_crawl(site, crawl, str(tmp_path / "lake"), "s", timeout_s=180)
        hits = list(server.hits)
    rows = Lake(str(tmp_path / "lake")).read("rejections").to_pylist()
    bomb_rows = [r for r in rows if r["item"].endswith("/bomb.xml.gz")]
    assert [r["reason"] for r in bomb_rows] == ["invalid_sitemap"]  # S3: skipped with a reason
    assert {"/xxe.xml", "/laughs.xml", "/bomb.xml.gz"} <= set(hits)
    # S1: the entity is never resolved: nothing of /etc/passwd in any URL, row or log.
    passwd = Path("/etc/passwd").read_text().splitlines()[0]
    assert not any("root" in h or "passwd" in h for h in hits)
    for file in tmp_path.rglob("*"):
        if file.is_file():
            assert passwd.encode() not in file.read_bytes(), file
    # S2: no expansion: no URL carries the laughs.
    assert not any("lollol" in h for h in hits)
    assert not any("lollol" in (r["item"] + (r["detail"] or "")) for r in rows)
