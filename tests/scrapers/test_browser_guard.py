"""The browser's only way out (X1, X2, X3, C17): the forwarding proxy, then a real Chromium crawl.

The internal server stands for loopback services, link-local metadata and the compose
network: nothing may reach it. The site server is on loopback too, allowed for its own
`host:port` only (as the sample store is).
"""

from __future__ import annotations

import http.server
import os
import socket
import threading
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from lookbench_live.config import CrawlSettings, SiteSettings
from lookbench_live.scrapers import browser_guard
from lookbench_live.scrapers.browser_guard import BrowserProxy, RefusalSink

CANARIES = {
    "VLLM_API_KEY": "canary-vllm-5f1e0c",
    "OPENAI_API_KEY": "canary-openai-9b2d77",
    "AWS_SECRET_ACCESS_KEY": "canary-aws-41aa03",
}


class Server:
    """A loopback HTTP server whose handler is a function of (path, headers) → (status, headers, body)."""

    def __init__(self, handle):
        hits: list[str] = []
        self.hits = hits

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                hits.append(self.path)
                status, headers, body = handle(self.path, self.headers)
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def internal():
    server = Server(lambda path, headers: (200, {"Content-Type": "text/plain"}, b"internal secret"))
    yield server
    server.close()


def _proxied(proxy: BrowserProxy) -> httpx.Client:
    return httpx.Client(proxy=f"http://127.0.0.1:{proxy.port}", timeout=10, trust_env=False)


def _raw_get(proxy_port: int, target: str) -> int:
    """The status of an absolute-URI request sent as Chromium sends it (httpx refuses these spellings)."""
    with socket.create_connection(("127.0.0.1", proxy_port), timeout=10) as conn:
        conn.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        return int(conn.recv(4096).split(b" ", 2)[1])


def test_proxy_refuses_loopback_and_records_blocked_address(internal):
    sink = RefusalSink()
    with BrowserProxy(sink=sink) as proxy, _proxied(proxy) as client:
        assert client.get(internal.url + "/direct").status_code == 403
        with pytest.raises(httpx.ProxyError):  # CONNECT (https and, in Chromium, ws) refused too
            client.get(f"https://127.0.0.1:{internal.port}/tunnel")
        for spelling in ("0177.0.0.1", "2130706433", "0x7f.1", "[::ffff:127.0.0.1]", "localhost"):
            assert _raw_get(proxy.port, f"http://{spelling}:{internal.port}/spelled") == 403
    assert internal.hits == []
    reasons = [r.reason for r in sink.drain()]
    assert reasons and set(reasons) == {"blocked_address"}


def test_proxy_allows_only_the_sites_own_private_authority(internal):
    site = Server(lambda path, headers: (200, {}, b"site page"))
    sink = RefusalSink()
    try:
        with (
            BrowserProxy(private_authorities={f"127.0.0.1:{site.port}"}, sink=sink) as proxy,
            _proxied(proxy) as client,
        ):
            assert client.get(site.url + "/page").text == "site page"
            assert client.get(internal.url + "/other-port").status_code == 403
    finally:
        site.close()
    assert site.hits == ["/page"] and internal.hits == []


def test_proxy_pins_the_address_it_checked(internal, monkeypatch):
    """A name that is public at the first lookup and loopback at the second: the proxy looks it up
    once per connection and connects to what it checked, so loopback is never reached."""
    answers = iter([["127.0.0.1"], ["127.0.0.1"]])
    lookups: list[str] = []

    def rebinding(host: str, port: int) -> list[str]:
        lookups.append(host)
        if len(lookups) == 1:
            return ["192.0.2.55"]  # "public" in this test: TEST-NET, unroutable here
        return next(answers)

    monkeypatch.setattr(browser_guard, "resolve", rebinding)
    monkeypatch.setattr(browser_guard.netguard, "is_public", lambda a: str(a) == "192.0.2.55")
    sink = RefusalSink()
    with BrowserProxy(sink=sink, connect_timeout_s=1) as proxy, _proxied(proxy) as client:
        first = client.get(f"http://rebind.test:{internal.port}/first")
        second = client.get(f"http://rebind.test:{internal.port}/second")
    assert first.status_code == 502 and second.status_code == 403
    assert lookups == ["rebind.test", "rebind.test"]  # one lookup per connection, none behind the check
    assert internal.hits == []
    assert [r.reason for r in sink.drain()] == ["blocked_address"]


def test_proxy_refuses_websocket_upgrades_and_caps_bytes():
    big = Server(lambda path, headers: (200, {}, b"x" * 200_000))
    sink = RefusalSink()
    try:
        with (
            BrowserProxy(private_authorities={f"127.0.0.1:{big.port}"}, max_bytes=50_000, sink=sink) as proxy,
            _proxied(proxy) as client,
        ):
            upgrade = {"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13"}
            assert client.get(big.url + "/ws", headers=upgrade).status_code == 403
            with pytest.raises(httpx.HTTPError):
                client.get(big.url + "/big")
    finally:
        big.close()
    assert big.hits == ["/big"]
    assert [r.reason for r in sink.drain()] == ["blocked_websocket", "max_size"]


def test_chromium_goes_through_the_proxy_and_resolves_nothing_itself():
    args = browser_guard.chromium_args(4321, sandbox=False)
    assert "--proxy-server=http://127.0.0.1:4321" in args
    assert "--proxy-bypass-list=<-loopback>" in args  # Chromium bypasses loopback by default
    assert any(a.startswith("--host-resolver-rules=MAP * ~NOTFOUND") for a in args)
    assert "--no-sandbox" in args and "--no-sandbox" not in browser_guard.chromium_args(1, sandbox=True)
    assert os.geteuid() != 0 or browser_guard.sandbox_available() is False  # Chromium refuses root sandbox


# --------------------------------------------------------------------------- a real crawl

ATTACK = """<!doctype html><html><head><title>attack</title></head><body>
<h1>Nothing to buy</h1>
<img src="{I}/img-direct"><img src="/redir?to={I}/img-redirect"><img src="/redir?to={R}/img-rebind">
<iframe src="{I}/nav-direct"></iframe>
<iframe src="/redir?to={I}/nav-redirect"></iframe>
<iframe src="/redir?to={R}/nav-rebind"></iframe>
<script>
fetch("{I}/fetch-direct", {{mode: "no-cors"}}).catch(() => {{}});
fetch("/redir?to={I}/fetch-redirect").catch(() => {{}});
fetch("/redir?to={R}/fetch-rebind").catch(() => {{}});
try {{ new WebSocket("{WI}/ws-direct"); }} catch (e) {{}}
try {{ new WebSocket("{WR}/ws-rebind"); }} catch (e) {{}}
if (navigator.serviceWorker) navigator.serviceWorker.register("/sw.js").catch(() => {{}});
</script></body></html>"""

SITECUSTOMIZE = """
# Installed by tests/scrapers/test_browser_guard.py: the crawl subprocess's proxy resolves `rebind.test`
# to a public address at the first lookup and to loopback at every later one.
from lookbench_live.network import netguard
from lookbench_live.scrapers import browser_guard
_count = [0]
def _rebinding(host, port):
    if host == "rebind.test":
        _count[0] += 1
        return ["93.184.215.14"] if _count[0] == 1 else ["127.0.0.1"]
    return netguard._getaddrinfo(host, port)
browser_guard.resolve = _rebinding
browser_guard.CONNECT_TIMEOUT_S = 2.0
"""


def _descendants(root: int) -> list[int]:
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found, frontier = [], [root]
    while frontier:
        pid = frontier.pop()
        children = [p for p, parent in parents.items() if parent == pid]
        found += children
        frontier += children
    return found


def _environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    return dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@pytest.mark.slow
@pytest.mark.browser
def test_a_hostile_page_reaches_nothing_internal(tmp_path, internal, monkeypatch):
    from lookbench_live.scrapers.crawl import run_crawl
    from lookbench_live.warehouse.lake import Lake

    inner = f"http://127.0.0.1:{internal.port}"
    rebind = f"http://rebind.test:{internal.port}"
    page = ATTACK.format(
        I=inner, R=rebind, WI=inner.replace("http", "ws"), WR=rebind.replace("http", "ws")
    ).encode()
    seen_env: dict[str, dict[str, str]] = {}

    def handle(path: str, headers):
        parts = urlsplit(path)
        if parts.path == "/redir":
            return 302, {"Location": parse_qs(parts.query)["to"][0]}, b""
        if parts.path == "/attack":
            # While the page renders: the environment of the crawl and of every process under it.
            for pid in os.listdir("/proc"):
                command = _cmdline(int(pid)) if pid.isdigit() else ""
                if "lookbench_live.scrapers.crawl" in command and str(tmp_path) in command:
                    seen_env["crawl"] = _environ(int(pid))
                    for child in _descendants(int(pid)):
                        seen_env[_cmdline(child)[:80] + f" [{child}]"] = _environ(child)
            return 200, {"Content-Type": "text/html"}, page
        if parts.path == "/sw.js":
            return 200, {"Content-Type": "text/javascript"}, b"self.addEventListener('fetch', () => {});"
        return 404, {}, b""

    site_server = Server(handle)
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(SITECUSTOMIZE)
    monkeypatch.setenv("PYTHONPATH", str(hook))
    for key, value in CANARIES.items():
        monkeypatch.setenv(key, value)
    lake_home = tmp_path / "lake"
    site = SiteSettings(
        name="hostile",
        platform="playwright",
        base_url=site_server.url + "/",
        start_paths=["/attack", f"/redir?to={inner}/nav-top"],
        allow_private_addresses=True,
        download_delay=0,
    )
    try:
        run_crawl(
            site, CrawlSettings(autothrottle=False, download_timeout=20), str(lake_home), "x", timeout_s=240
        )
    finally:
        site_server.close()
    site_hits = list(site_server.hits)

    assert internal.hits == []
    rows = Lake(str(lake_home)).read("rejections").to_pylist()
    blocked = [r["item"] for r in rows if r["reason"] == "blocked_address"]
    # Each vector that Chromium sends is refused with `blocked_address`: direct requests at the
    # page route, redirect hops at the proxy (the route sees only the first URL), top-level
    # navigation by redirect included.
    for needle in (
        "/nav-direct", "/nav-redirect", "/nav-top", "/fetch-direct", "/fetch-redirect", "/img-direct", "/ws-direct",
    ):  # fmt: skip
        assert any(item.endswith(needle) for item in blocked), (needle, rows)
    # The rebinding name: the proxy looks it up once per connection and connects to what it
    # checked. The first lookup ("public", unroutable here) fails to connect or is a WebSocket
    # refused as such; every later one is loopback and refused: at most one vector escapes the
    # `blocked_address` row, none reaches the internal server.
    rebinds = {"/nav-rebind", "/fetch-rebind", "/ws-rebind"}
    assert len({n for n in rebinds if any(i.endswith(n) and "rebind.test" in i for i in blocked)}) >= 2, rows
    assert any(r["item"].endswith("/ws-rebind") for r in rows), rows  # refused either way
    # Images are never fetched (abort_request: not needed to read product data), so an <img>
    # behind a redirect never reaches the redirect: the site never saw those requests.
    assert not [h for h in site_hits if "/img-" in h], site_hits
    # X3: no secret in the crawl's environment, Chromium's, the lake or the crawl's log.
    assert "crawl" in seen_env and len(seen_env) > 2, list(seen_env)
    for name, env in seen_env.items():
        assert not set(env.values()) & set(CANARIES.values()), name
        assert "AWS_SECRET_ACCESS_KEY" not in env, name
    for file in tmp_path.rglob("*"):
        if file.is_file() and file.parent != hook:
            data = file.read_bytes()
            assert not any(v.encode() in data for v in CANARIES.values()), file


def test_free_port_helper_is_loopback_only():
    # The proxy binds loopback only; nothing outside the machine can use it as an open relay.
    with BrowserProxy() as proxy:
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=5):
            pass
        assert proxy._server is not None
        assert {s.getsockname()[0] for s in proxy._server.sockets} == {"127.0.0.1"}


def test_crawl_subprocess_environment_is_an_allowlist(tmp_path):
    from lookbench_live.scrapers.crawl import crawl_env

    environ = {"PATH": "/usr/bin", "HOME": "/home/w", **CANARIES, "AWS_ACCESS_KEY_ID": "id", "OTHER": "x"}
    local = crawl_env(str(tmp_path), environ)
    assert local == {"PATH": "/usr/bin", "HOME": "/home/w"}
    remote = crawl_env("s3://bucket/lake", environ)
    # An object-store lake needs its credentials in the crawl (the pipeline writes there); never the API keys.
    assert remote["AWS_SECRET_ACCESS_KEY"] == CANARIES["AWS_SECRET_ACCESS_KEY"]
    assert "VLLM_API_KEY" not in remote and "OPENAI_API_KEY" not in remote and "OTHER" not in remote
    assert not set(browser_guard.BROWSER_ENV_KEYS) & {
        "AWS_SECRET_ACCESS_KEY",
        "OPENAI_API_KEY",
        "VLLM_API_KEY",
    }


LOOPS = {
    # A JavaScript redirect loop: every render navigates again, forever.
    "/js-loop": b"<html><body><script>const n = Number(new URLSearchParams(location.search).get('n') || 0);"
    b"location.replace('/js-loop?n=' + (n + 1));</script></body></html>",
    # A meta-refresh loop between two pages.
    "/meta-a": b'<html><head><meta http-equiv="refresh" content="0;url=/meta-b"></head><body>a</body></html>',
    "/meta-b": b'<html><head><meta http-equiv="refresh" content="0;url=/meta-a"></head><body>b</body></html>',
    # A renderer stuck in JavaScript: the page never loads and never yields.
    "/busy": b"<html><body><script>while (true) {}</script></body></html>",
}


def _loop_site(server: Server, *paths: str) -> SiteSettings:
    return SiteSettings(
        name="loops", platform="playwright", base_url=server.url + "/", allow_private_addresses=True,
        start_paths=list(paths), download_delay=0,
    )  # fmt: skip


def _loop_server() -> Server:
    def handle(path: str, headers):
        body = LOOPS.get(urlsplit(path).path)
        return (200, {"Content-Type": "text/html"}, body) if body else (404, {}, b"")

    return Server(handle)


def _crawl_stats(tmp_path: Path) -> dict[str, int]:
    """The integer stats of the crawl, as Scrapy dumps them at the end of the crawl log."""
    import re

    log = next(tmp_path.rglob("crawl.log")).read_text()
    return {key: int(value) for key, value in re.findall(r"'([\w/]+)': (\d+)[,}]", log)}


@pytest.mark.slow
@pytest.mark.browser
def test_refresh_and_javascript_loops_end_recorded_with_no_page_left_open(tmp_path):
    """S11: a JavaScript redirect loop, a meta-refresh loop and a renderer stuck in `while (true)`
    each end at the render deadline (or as the render error Chromium reports), are recorded once
    with their reason and never retried; the crawl finishes on its own, far inside the hard
    timeout, and every page it opened is closed (Playwright's page `close` events)."""
    import time

    from lookbench_live.scrapers.crawl import run_crawl
    from lookbench_live.warehouse.lake import Lake

    server = _loop_server()
    site = _loop_site(server, "/js-loop", "/meta-a", "/busy")
    crawl = CrawlSettings(autothrottle=False, download_timeout=8)  # render deadline 2 x 8 + 5 = 21 s
    try:
        started = time.monotonic()
        # A CrawlError here is the hard timeout killing a crawl that hung: the failure this test is for.
        result = run_crawl(site, crawl, str(tmp_path), "l", timeout_s=120)
        elapsed = time.monotonic() - started
        hits_at_end = len(server.hits)
        time.sleep(1.0)
        hits_after = len(server.hits)
    finally:
        server.close()
    print(f"S11 crawl finished in {elapsed:.1f} s; hits {dict((p, server.hits.count(p)) for p in LOOPS)}")
    # Nothing still renders once the crawl returned: no page (or its loop) outlived it.
    assert hits_after == hits_at_end
    rows = Lake(str(tmp_path)).read("rejections").to_pylist()
    reasons = {urlsplit(r["item"]).path: r["reason"] for r in rows if r["item"].startswith(server.url)}
    assert reasons["/js-loop"] == "render_timeout", rows
    assert reasons["/busy"] == "render_timeout", rows
    # The meta refresh navigates while Chromium reads the page: one of the two render failures.
    assert reasons.get("/meta-a", reasons.get("/meta-b")) in ("render_error", "render_timeout"), rows
    assert result.rejections_by_reason["render_timeout"] >= 2
    # Recorded once, never retried: each start page was requested exactly once by the crawl.
    # (the meta loop comes back to /meta-a by itself, so only its bound is asserted).
    assert server.hits.count("/js-loop") == 1 and server.hits.count("/busy") == 1
    # Bounded: the loops ran only until their render deadline.
    assert server.hits.count("/meta-a") + server.hits.count("/meta-b") < 2000
    assert sum(h.startswith("/js-loop") for h in server.hits) < 2000
    stats = _crawl_stats(tmp_path)
    assert stats["lookbench/pages_opened"] == stats["lookbench/pages_closed"] == 3, stats
    assert "lookbench/contexts_not_closed" not in stats
    assert stats["playwright/page_count"] == 3  # one page per start page: no retry opened another


def _hanging_server() -> tuple[Server, threading.Event]:
    """`/hang` holds its response until the test releases it (at most 300 s); every other path is a
    404. The crawl hangs in the network, not in a renderer: a `while (true)` page can share its
    renderer process with the site's other pages (Chromium keeps same-site tabs in one process) and
    then stops them from ever failing, so what is recorded before the kill would depend on order."""
    release = threading.Event()

    def handle(path: str, headers):
        if urlsplit(path).path == "/hang":
            release.wait(300)
            return (200, {"Content-Type": "text/html"}, b"<html><body>late</body></html>")
        return (404, {"Content-Type": "text/html"}, b"<html><body>gone</body></html>")

    return Server(handle), release


@pytest.mark.slow
@pytest.mark.browser
def test_a_crawl_killed_at_its_hard_timeout_keeps_what_it_had_recorded(tmp_path):
    """What a crawl decided before the hard timeout killed it (a page's failure) is journaled as it
    happens and written to the lake after the kill; the rerun adds no duplicate."""
    from lookbench_live.scrapers.crawl import CrawlError, run_crawl
    from lookbench_live.warehouse.lake import Lake

    server, release = _hanging_server()
    # The held page's deadlines (proxy 120 s, render 2 x 120 + 5 s) are past the hard timeout: the
    # kill comes first. The kill at 50 s leaves a loaded machine's browser start (CI: 20 s and more)
    # time to record the 404.
    site = _loop_site(server, "/gone", "/hang")
    crawl = CrawlSettings(autothrottle=False, download_timeout=120)
    try:
        with pytest.raises(CrawlError, match="did not finish"):
            run_crawl(site, crawl, str(tmp_path), "k", timeout_s=50)
    finally:
        release.set()
        server.close()
    assert server.hits.count("/hang") == 1  # the kill came while the page was still held
    lake = Lake(str(tmp_path))
    rows = [r for r in lake.read("rejections").to_pylist() if r["item"].startswith(server.url)]
    assert [(urlsplit(r["item"]).path, r["reason"]) for r in rows] == [("/gone", "http_404")], rows
    assert all(r["run_id"] == "k" for r in rows)
    # Salvaging again (as a rerun's pipeline does first) writes nothing twice.
    from lookbench_live.scrapers.crawl import salvage_journal, state_dir

    before = lake.read("rejections").num_rows
    salvage_journal(str(tmp_path), "loops", "k", state_dir(lake, "loops", "k"), crawl.batch_size, None)
    assert Lake(str(tmp_path)).read("rejections").num_rows == before


def test_proxy_ends_a_slow_drip_connection_at_its_deadline():
    """C13/C14 for the browser: a server that sends headers then one byte now and then is cut at the
    connection's deadline, whatever its per-read activity, and the cut is recorded."""
    stop = threading.Event()

    def drip(conn: socket.socket) -> None:
        with conn:
            conn.recv(4096)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n")
            while not stop.wait(0.2):
                try:
                    conn.sendall(b"x")
                except OSError:
                    return

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    threading.Thread(target=lambda: drip(listener.accept()[0]), daemon=True).start()
    sink = RefusalSink()
    try:
        with (
            BrowserProxy(private_authorities={f"127.0.0.1:{port}"}, deadline_s=1.5, sink=sink) as proxy,
            pytest.raises(httpx.HTTPError),
            _proxied(proxy) as client,
        ):
            client.get(f"http://127.0.0.1:{port}/slow")
    finally:
        stop.set()
        listener.close()
    assert [r.reason for r in sink.drain()] == ["browser_timeout"]


def test_chromiums_own_services_end_at_the_proxy_without_a_row():
    """Sign-in and the component updater are pointed at the reserved services name; the proxy
    refuses it without recording anything (they are Chromium's requests, not the site's)."""
    args = browser_guard.chromium_args(4321, sandbox=True)
    services = f"http://{browser_guard.CHROMIUM_SERVICES_HOST}"
    assert f"--gaia-url={services}/" in args
    assert f"--component-updater=url-source={services}/service/update2/json" in args
    # Playwright's own --disable-features list must survive: the last one given wins in Chromium.
    assert not any(a.startswith(("--disable-features", "--enable-features")) for a in args)
    sink = RefusalSink()
    with BrowserProxy(sink=sink) as proxy:
        assert _raw_get(proxy.port, f"{services}/ListAccounts?gpsia=1") == 403
        assert _raw_get(proxy.port, "http://update.googleapis.com/service/update2/json") == 403
    assert [(r.url, r.reason) for r in sink.drain()] == [
        ("http://update.googleapis.com/service/update2/json", "unresolvable")  # anything else is a row
    ]


@pytest.mark.slow
@pytest.mark.browser
def test_a_browser_crawl_records_only_the_sites_own_hosts_and_starts_one_chromium(tmp_path):
    """Chromium's background requests (update.googleapis.com, accounts.google.com/ListAccounts)
    once became `unresolvable` rows under the site's name, from two Chromiums (one per scheme
    handler). After a crawl every rejection row names the site's own host, and one browser ran."""
    from lookbench_live.scrapers.crawl import run_crawl
    from lookbench_live.warehouse.lake import Lake

    page = b"<html><body><h1>calm</h1><a href='/gone'>gone</a></body></html>"
    server = Server(
        lambda path, headers: (200, {"Content-Type": "text/html"}, page) if path == "/p" else (404, {}, b"")
    )
    site = SiteSettings(
        name="calm", platform="playwright", base_url=server.url + "/", start_paths=["/p", "/gone"],
        allow_private_addresses=True, download_delay=0,
    )  # fmt: skip
    try:
        run_crawl(site, CrawlSettings(autothrottle=False, download_timeout=20), str(tmp_path / "lake"), "x",
                  timeout_s=240)  # fmt: skip
    finally:
        server.close()
    rows = Lake(str(tmp_path / "lake")).read("rejections").to_pylist()
    assert rows, "the 404 page is a row: rows are recorded at all"
    assert {urlsplit(r["item"]).netloc for r in rows} == {f"127.0.0.1:{server.port}"}, rows
    assert _crawl_stats(tmp_path)["playwright/browser_count"] == 1
