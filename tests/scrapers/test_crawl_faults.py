"""C12–C15 on the crawl (Scrapy) path: a silent server, headers then a stall, a slow drip, an endless
chunked body, a reset mid-body and a refused connection each end as one recorded reason, in
bounded time, with nothing stored for them."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from ingest_server import Route, serve

from lookbench_live.config import CrawlSettings, SiteSettings
from lookbench_live.scrapers.crawl import run_crawl
from lookbench_live.warehouse.lake import Lake

FAULTS = {
    "/silent": Route(behaviour="stall_before_headers"),  # C13: accepts, never sends a byte
    "/stalled": Route(behaviour="stall_after_headers"),  # C13: headers, then nothing
    "/drip": Route(behaviour="slow_drip"),  # C14: a byte now and then, forever
    "/endless": Route(behaviour="endless_chunked"),  # C15: no length, never ends
    "/huge": Route(body=b"", headers={"Content-Length": "5000000000"}),  # C15
    "/reset": Route(behaviour="reset"),  # C12: connection lost mid-body
}


@pytest.mark.slow
def test_misbehaving_servers_end_as_recorded_reasons(tmp_path: Path) -> None:
    with serve({"/robots.txt": Route(status=404), **FAULTS}, max_stall=30) as server:
        site = SiteSettings(
            name="faults", platform="schema_org", base_url=server.base + "/", allow_private_addresses=True,
            start_paths=list(FAULTS), download_delay=0,
        )  # fmt: skip
        # 20 MB, above the stalled route's declared 10 MB: it stalls instead of being refused by its length.
        crawl = CrawlSettings(
            autothrottle=False, download_timeout=3, download_maxsize=20_000_000, retry_times=0
        )
        result = run_crawl(site, crawl, str(tmp_path), "f", timeout_s=120)
        hits = dict(server.hits)
    reasons = {
        r["item"].rsplit("/", 1)[1]: r["reason"]
        for r in Lake(str(tmp_path)).read("rejections").to_pylist()
        if r["item"].startswith(server.base)
    }
    assert reasons == {
        "silent": "timeout",
        "stalled": "timeout",
        "drip": "timeout",  # the whole-request deadline, whatever the per-read activity
        "endless": "max_size",
        "huge": "max_size",
        "reset": "data_loss",
        "sitemap.xml": "http_404",  # no robots.txt, so /sitemap.xml was tried; there is none either
    }, reasons
    assert all(hits[path] == 1 for path in FAULTS), hits  # retry_times=0: one attempt each
    assert result.products_new == 0


@pytest.mark.slow
def test_a_refused_connection_is_recorded(tmp_path: Path) -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    site = SiteSettings(
        name="refused", platform="schema_org", base_url=f"http://127.0.0.1:{port}/", allow_private_addresses=True,
        start_paths=["/p"], download_delay=0,
    )  # fmt: skip
    crawl = CrawlSettings(autothrottle=False, download_timeout=3, retry_times=0, obey_robots=False)
    run_crawl(site, crawl, str(tmp_path), "r", timeout_s=120)
    reasons = {r["item"]: r["reason"] for r in Lake(str(tmp_path)).read("rejections").to_pylist()}
    assert reasons.get(f"http://127.0.0.1:{port}/p") == "connection_refused", reasons


@pytest.mark.slow
def test_a_sitemap_over_the_entry_cap_is_cut_and_the_overflow_recorded(tmp_path: Path) -> None:
    """S5: entries past `max_sitemap_urls` are not followed; the overflow is one recorded row."""
    locs = "".join(f"<url><loc>https://elsewhere.example/p/{i}</loc></url>" for i in range(60))
    sitemap = (
        f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{locs}</urlset>'
    )
    # No robots.txt (404): allow all, and the sitemap is looked for at /sitemap.xml.
    with serve({"/robots.txt": Route(status=404), "/sitemap.xml": Route(body=sitemap.encode())}) as server:
        site = SiteSettings(
            name="capped", platform="schema_org", base_url=server.base + "/", allow_private_addresses=True,
            download_delay=0,
        )  # fmt: skip
        crawl = CrawlSettings(autothrottle=False, download_timeout=5, retry_times=0, max_sitemap_urls=50)
        result = run_crawl(site, crawl, str(tmp_path), "c", timeout_s=120)
    rows = Lake(str(tmp_path)).read("rejections").to_pylist()
    overflow = [r for r in rows if r["reason"] == "sitemap_overflow"]
    assert len(overflow) == 1 and overflow[0]["detail"].startswith("10 entries over the cap of 50")
    assert result.rejections_by_reason.get("offsite") == 50  # only the first 50 were followed (and refused)


@pytest.mark.slow
def test_no_credentials_are_carried_and_an_offsite_redirect_is_refused(tmp_path: Path) -> None:
    """C18: cookies a site sets are never sent back (COOKIES_ENABLED is off), no request carries
    Authorization, and a redirect to another host is refused and recorded as `offsite` before it
    is sent."""
    import http.server
    import threading

    seen: list[tuple[str, str | None, str | None]] = []
    other_hits: list[str] = []

    def start(handle) -> http.server.ThreadingHTTPServer:
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                status, headers = handle(self)
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server

    other = start(lambda h: (other_hits.append(h.path), (200, {}))[1])
    other_url = f"http://localhost:{other.server_address[1]}/stolen"

    def site_handler(h) -> tuple[int, dict[str, str]]:
        seen.append((h.path, h.headers.get("Cookie"), h.headers.get("Authorization")))
        if h.path == "/set":
            return 302, {"Set-Cookie": "session=secret-cookie; Path=/", "Location": "/next"}
        if h.path == "/next":
            return 302, {"Location": other_url}
        return 404, {}

    site_server = start(site_handler)
    base = f"http://127.0.0.1:{site_server.server_address[1]}"
    try:
        site = SiteSettings(
            name="creds", platform="schema_org", base_url=base + "/", allow_private_addresses=True,
            start_paths=["/set"], download_delay=0,
        )  # fmt: skip
        run_crawl(
            site, CrawlSettings(autothrottle=False, download_timeout=5, retry_times=0), str(tmp_path), "c"
        )
    finally:
        site_server.shutdown()
        other.shutdown()
    assert ("/next", None, None) in seen and all(cookie is None and auth is None for _, cookie, auth in seen)
    assert other_hits == []
    reasons = {r["item"]: r["reason"] for r in Lake(str(tmp_path)).read("rejections").to_pylist()}
    assert reasons.get(other_url) == "offsite", reasons
