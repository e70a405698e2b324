"""The browser's only way out: a forwarding proxy on loopback that checks and pins every connection.

Playwright's route handler sees only the first URL of a redirect chain and never WebSocket
traffic, and Chromium resolves names by itself (reliability.md X1, X2, C17), so checking
URLs in the route handler alone lets a redirect, a `fetch`, an `<img>` or a rebinding name
reach loopback or the compose network. Chromium is therefore started with

- `--proxy-server=http://127.0.0.1:<port>` pointing here, with loopback *not* bypassed
  (`<-loopback>`; by default Chromium sends localhost direct),
- `--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1`, so it cannot resolve any
  name itself (through an HTTP proxy it never needs to),
- WebRTC limited to proxied UDP (none) and QUIC off, so nothing leaves beside the proxy.

The proxy (asyncio, on a thread of the crawl process) handles `CONNECT host:port` and
plain absolute-URI HTTP requests: it resolves the name once with `resolve` (tests replace
it), refuses unless every address is public (`netguard`: `not is_global` and more) —
except the site's own authorities when the site allows private addresses (the sample
store runs on loopback) — and connects to the address it checked. WebSocket upgrades are
refused. Each connection may carry at most `max_bytes` back to the browser and live at
most `deadline_s`. Every refusal goes to `REFUSALS`, which the crawl's item pipeline
turns into `Rejection` rows (`blocked_address`, `blocked_websocket`, `max_size`, …).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from lookbench_live.network import netguard

if TYPE_CHECKING:
    from lookbench_live.scrapers.items import CrawlItem
    from lookbench_live.scrapers.journal import CrawlJournal

log = logging.getLogger(__name__)

# The resolver the proxy uses (one lookup per connection, then pinned); tests replace it.
resolve: Callable[[str, int], list[str]] = netguard._getaddrinfo

MAX_HEAD_BYTES = 32 * 1024
HEAD_TIMEOUT_S = 10.0
CONNECT_TIMEOUT_S = 10.0
CHUNK = 64 * 1024


@dataclass(frozen=True, slots=True)
class Refusal:
    url: str
    reason: str
    detail: str

    def item(self) -> CrawlItem:
        """The crawl item (a `Rejection` row) this refusal becomes."""
        from lookbench_live.scrapers.items import rejection

        return rejection(self.url, self.reason, f"browser: {self.detail}")


class RefusalSink:
    """Refusals from the proxy thread and the route handler, drained by the item pipeline.

    With a `journal` (the crawl's, set by the playwright spider) each refusal is also logged
    there as it happens, so a crawl killed before the pipeline's next flush loses none: the
    rerun, or `run_crawl` after the kill, replays the journal into the lake."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: list[Refusal] = []
        self.journal: CrawlJournal | None = None

    def record(self, url: str, reason: str, detail: str) -> None:
        log.info("browser request refused (%s): %s %s", reason, url, detail)
        refusal = Refusal(url, reason, detail[:500])
        with self._lock:
            self._items.append(refusal)
        if self.journal is not None:
            self.journal.add_item(refusal.item())

    def drain(self) -> list[Refusal]:
        with self._lock:
            items, self._items = self._items, []
        return items


REFUSALS = RefusalSink()
# The proxy of this crawl process, once started (the page init callback asks it what is allowed).
ACTIVE: BrowserProxy | None = None


def authority(host: str, port: int) -> str:
    """`host:port` as `settings.allowed_hosts` spells it (lowercase, IPv6 without brackets)."""
    return f"{host.lower().strip('[]')}:{port}"


def _split_authority(text: str, default_port: int) -> tuple[str, int]:
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = int(rest[1:]) if rest.startswith(":") else default_port
        return host, port
    host, sep, port_text = text.rpartition(":")
    if not sep:
        return text, default_port
    return host, int(port_text)


class BrowserProxy:
    """A forwarding proxy on 127.0.0.1 that checks, pins and bounds every browser connection.

    `private_authorities`: the `host:port` pairs that may be private (the site's own hosts
    when `allow_private_addresses` is set); nothing else private is reached.
    """

    def __init__(
        self,
        *,
        private_authorities: set[str] | frozenset[str] = frozenset(),
        max_bytes: int = 10 * 1024 * 1024,
        deadline_s: float = 60.0,
        connect_timeout_s: float | None = None,
        sink: RefusalSink = REFUSALS,
    ):
        self.private_authorities = {a.lower() for a in private_authorities}
        self.max_bytes = max_bytes
        self.deadline_s = deadline_s
        self.connect_timeout_s = connect_timeout_s
        self.sink = sink
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> int:
        """Start serving on a free loopback port (its own thread and event loop); returns the port."""
        global ACTIVE
        ACTIVE = self
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                self._server = loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
                self.port = self._server.sockets[0].getsockname()[1]
            except BaseException as exc:  # reported to the caller of start()
                failure.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, name="browser-proxy", daemon=True)
        self._thread.start()
        ready.wait(10)
        if failure:
            raise failure[0]
        return self.port

    def stop(self) -> None:
        loop = self._loop
        if loop is None or self._server is None:
            return
        server = self._server

        async def shutdown() -> None:
            server.close()
            loop.stop()

        asyncio.run_coroutine_threadsafe(shutdown(), loop)
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> BrowserProxy:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ checks
    def check(self, url: str, host: str, port: int) -> list[netguard.IPAddress]:
        """The checked addresses of host:port (`BlockedURL` when refused); one lookup, never repeated."""
        allow_private = authority(host, port) in self.private_authorities
        return netguard._resolve_checked(url, host.strip("[]"), port, allow_private, resolve)

    # ------------------------------------------------------------------ serving
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT_S)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError):
            writer.close()
            return
        if len(head) > MAX_HEAD_BYTES:
            await self._reply(writer, 431, "Request Header Fields Too Large")
            return
        try:
            await self._serve(head, reader, writer)
        except Exception as exc:  # one bad connection never stops the proxy
            log.warning("browser proxy: %s: %s", type(exc).__name__, exc)
            writer.close()

    async def _serve(self, head: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        lines = head.decode("latin-1").split("\r\n")
        method, target, version = ([*lines[0].split(" "), "", ""])[:3]
        headers = [line for line in lines[1:] if line]
        lowered = {h.split(":", 1)[0].strip().lower(): h.split(":", 1)[-1].strip() for h in headers}
        if method.upper() == "CONNECT":
            try:
                host, port = _split_authority(target, 443)
            except ValueError:
                await self._reply(writer, 400, "Bad Request")
                return
            url = f"https://{target}/"
            prefix = b""
        else:
            url = target
            try:
                parts = urlsplit(target)
                netguard.check_scheme(target)
                host, port = parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)
            except (ValueError, netguard.BlockedURL) as exc:
                self.sink.record(target, "blocked_scheme", str(exc))
                await self._reply(writer, 403, "Forbidden")
                return
            if "websocket" in lowered.get("upgrade", "").lower():
                await self._refuse_websocket(url, host, port, writer)
                return
            path = parts.path or "/"
            if parts.query:
                path += "?" + parts.query
            keep = [
                h
                for h in headers
                if h.split(":", 1)[0].strip().lower()
                not in ("proxy-connection", "proxy-authorization", "connection", "keep-alive")
            ]
            # One request per upstream connection: what we connect to is what we checked for it.
            prefix = (
                "\r\n".join([f"{method} {path} {version}", *keep, "Connection: close"]) + "\r\n\r\n"
            ).encode("latin-1")
        if host.lower() == CHROMIUM_SERVICES_HOST:
            # Chromium's own service calls (chromium_args): refused, and not the site's business.
            log.debug("browser proxy: Chromium's own request refused: %s", url)
            await self._reply(writer, 403, "Forbidden")
            return
        try:
            addresses = await asyncio.to_thread(self.check, url, host, port)
        except netguard.BlockedURL as exc:
            self.sink.record(url, exc.reason, exc.detail)
            await self._reply(writer, 403, "Forbidden")
            return
        try:
            up_reader, up_writer = await asyncio.wait_for(
                asyncio.open_connection(str(addresses[0]), port), self.connect_timeout_s or CONNECT_TIMEOUT_S
            )
        except (OSError, TimeoutError) as exc:
            await self._reply(writer, 502, f"Bad Gateway ({type(exc).__name__})")
            return
        if method.upper() == "CONNECT":
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await writer.drain()
        else:
            up_writer.write(prefix)
        await self._relay(url, reader, writer, up_reader, up_writer)

    async def _refuse_websocket(self, url: str, host: str, port: int, writer: asyncio.StreamWriter) -> None:
        try:
            await asyncio.to_thread(self.check, url, host, port)
        except netguard.BlockedURL as exc:
            self.sink.record(url, exc.reason, exc.detail)
        else:
            self.sink.record(url, "blocked_websocket", "pages may not open WebSockets")
        await self._reply(writer, 403, "Forbidden")

    async def _relay(
        self,
        url: str,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        up_reader: asyncio.StreamReader,
        up_writer: asyncio.StreamWriter,
    ) -> None:
        received = 0
        capped = False

        async def pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter, downstream: bool) -> None:
            nonlocal received, capped
            while True:
                data = await source.read(CHUNK)
                if not data:
                    break
                if downstream:
                    received += len(data)
                    if received > self.max_bytes:
                        capped = True
                        break
                sink.write(data)
                await sink.drain()

        tasks = [
            asyncio.ensure_future(pump(reader, up_writer, False)),
            asyncio.ensure_future(pump(up_reader, writer, True)),
        ]
        try:
            # The response (downstream) decides when the exchange ends; the deadline bounds it.
            await asyncio.wait_for(asyncio.shield(tasks[1]), self.deadline_s)
        except TimeoutError:
            self.sink.record(url, "browser_timeout", f"connection open longer than {self.deadline_s:g} s")
        except (ConnectionError, OSError):
            pass
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(BaseException):
                    await task
            for w in (writer, up_writer):
                with contextlib.suppress(Exception):
                    w.close()
        if capped:
            self.sink.record(url, "max_size", f"more than {self.max_bytes} bytes for one browser connection")

    @staticmethod
    async def _reply(writer: asyncio.StreamWriter, status: int, text: str) -> None:
        with contextlib.suppress(Exception):
            writer.write(
                f"HTTP/1.1 {status} {text}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode()
            )
            await writer.drain()
        writer.close()


# --------------------------------------------------------------------------- Chromium


# Chromium's own Google services (sign-in's /ListAccounts, the component updater that fetches the
# on-device model manifest even with --disable-component-update) keep calling out whatever the
# switches say; Chromium has no switch that stops them in the Debian build we run. Their base
# URLs are switches, though: pointed at this reserved name (RFC 2606 `.invalid`), they end at the
# proxy, which refuses them without a rejection row, so the site's rows hold only the site's work.
CHROMIUM_SERVICES_HOST = "chromium-services.invalid"
_SERVICES = f"http://{CHROMIUM_SERVICES_HOST}"


def chromium_args(proxy_port: int, *, sandbox: bool) -> list[str]:
    """Chromium's switches: everything through the proxy, no resolver of its own, no direct UDP,
    no background traffic of its own.

    Playwright already passes --disable-background-networking, --disable-component-update,
    --disable-sync, --no-first-run, --disable-default-apps, --disable-extensions and
    --disable-features=OptimizationHints,MediaRouter,NetworkTimeServiceQuerying,PreconnectToSearch,…
    (its chromiumSwitches.ts); we repeat the first ones so they hold whatever Playwright's list
    becomes, and never pass --disable-features ourselves (the last one given wins in Chromium,
    which would drop Playwright's)."""
    args = [
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-default-apps",
        "--disable-domain-reliability",
        "--disable-client-side-phishing-detection",
        "--no-pings",
        "--disable-quic",
        f"--gaia-url={_SERVICES}/",
        f"--google-apis-url={_SERVICES}/",
        f"--lso-url={_SERVICES}/",
        f"--google-base-url={_SERVICES}/",
        f"--component-updater=url-source={_SERVICES}/service/update2/json",
        f"--proxy-server=http://127.0.0.1:{proxy_port}",
        # Chromium bypasses the proxy for loopback unless told not to.
        "--proxy-bypass-list=<-loopback>",
        "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
        "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
        "--webrtc-ip-handling-policy=disable_non_proxied_udp",
    ]
    if not sandbox:
        args.insert(0, "--no-sandbox")
    return args


def sandbox_available() -> bool:
    """Whether Chromium can run its sandbox here: not as root (Chromium refuses to), and the
    kernel lets an unprivileged process create a user namespace (Debian's chromium ships no
    setuid helper). The worker image runs as an unprivileged user for this (docs/deployment.md)."""
    if os.geteuid() == 0:
        return False
    unshare = shutil.which("unshare")
    if unshare is None:
        return False
    try:
        done = subprocess.run([unshare, "--user", "true"], capture_output=True, timeout=10, env={})
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


# Environment variables Chromium may see (Playwright passes `env` to the browser process).
BROWSER_ENV_KEYS = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "XDG_RUNTIME_DIR", "FONTCONFIG_PATH")


def browser_env() -> dict[str, str]:
    return {key: os.environ[key] for key in BROWSER_ENV_KEYS if key in os.environ}


async def init_page(page: object, request: object) -> None:
    """scrapy-playwright's `playwright_page_init_callback`: refuse every WebSocket of the page.

    Playwright's `route` never sees WebSockets; `route_web_socket` does. The proxy refuses
    upgrades too, so this is the first of two doors."""

    async def refuse(ws: object) -> None:
        url = ws.url  # type: ignore[attr-defined]
        try:
            parts = urlsplit(url)
            host, port = parts.hostname or "", parts.port or (443 if parts.scheme == "wss" else 80)
            if ACTIVE is not None:
                await asyncio.to_thread(ACTIVE.check, url, host, port)
            else:
                await asyncio.to_thread(netguard._resolve_checked, url, host, port, False, resolve)
        except (netguard.BlockedURL, ValueError) as exc:
            reason = exc.reason if isinstance(exc, netguard.BlockedURL) else "blocked_scheme"
            REFUSALS.record(url, reason, str(exc))
        else:
            REFUSALS.record(url, "blocked_websocket", "pages may not open WebSockets")
        await ws.close(code=1008, reason="refused")  # type: ignore[attr-defined]

    await page.route_web_socket("**", refuse)  # type: ignore[attr-defined]
