"""A small HTTP/1.1 client for image and robots.txt fetches: asyncio streams, keep-alive per checked address.

Why not httpx here: on loopback httpx/httpcore spent about 1.8 ms of CPU per request (pool
scans that call `getpeername` on every pooled connection, anyio wrappers, h11), more than
decoding and hashing the image; this client spends a fraction of that (docs/benchmarks.md,
image ingestion). It does only what image fetches need: GET, no cookies, no proxies, no
HTTP/2, redirects returned to the caller (who re-checks every hop).

Proxies: when the environment's `HTTPS_PROXY`/`HTTP_PROXY` applies to a URL (`NO_PROXY`
respected, `urllib.request.getproxies`/`proxy_bypass`, the rules httpx and requests use),
that request goes through httpx with the proxy instead (`_ProxiedExchange`): the same
headers, the same caller-side caps and decoding (`read_body`), and the address guard's
check of the URL before anything is sent. The proxy resolves the name itself, so the
pin (connect to the checked address) cannot apply there.

The address guard is kept whole: every request's host is resolved and checked by
`netguard.check_url` (public addresses only, unless the caller allows private ones for that
host), and the connection goes to the checked address, never to a second resolution of the
name. Pooled connections are keyed by that address (and by the name for TLS), so a pooled
socket is only reused for the address it was checked for. Deadlines are the caller's
(`asyncio.timeout` around a whole attempt); cancellation closes the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
import urllib.request
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import httpx

from lookbench_live.network.limits import RESOLUTION_TTL_S
from lookbench_live.network.netguard import IPAddress, check_url

MAX_HEAD_BYTES = 64 * 1024  # status line + headers; a longer head is a protocol error
READ_CHUNK = 256 * 1024
MAX_IDLE_PER_ADDRESS = 64


class ProtocolFailure(Exception):
    """The connection broke or the server spoke something that is not HTTP/1.x."""


class Headers:
    """Response headers: case-insensitive, multi-valued (the subset of `httpx.Headers` callers use)."""

    __slots__ = ("_items",)

    def __init__(self, items: list[tuple[str, str]]):
        self._items = items  # names lower-cased

    def get(self, name: str, default: str = "") -> str:
        values = self.get_list(name)
        return ", ".join(values) if values else default

    def get_list(self, name: str) -> list[str]:
        key = name.lower()
        return [v for k, v in self._items if k == key]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and any(k == name.lower() for k, _ in self._items)

    def items(self) -> list[tuple[str, str]]:
        """Every (lower-case name, value) pair, in order (for `optout.tdm_header_optout`)."""
        return list(self._items)


@dataclass(slots=True)
class _Connection:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    reused: bool = False

    def usable(self) -> bool:
        return not self.writer.is_closing() and not self.reader.at_eof()

    def close(self) -> None:
        self.writer.close()


@dataclass(slots=True)
class Response:
    """One response; read the body with `aiter_raw()` (exactly once) inside `HttpClient.get`."""

    url: str
    status: int
    headers: Headers
    _connection: _Connection
    _length: int | None  # Content-Length, or None
    _chunked: bool
    _keep_alive: bool
    _done: bool = False
    _consumed: bool = field(default=False)

    def redirect_target(self) -> str | None:
        """The absolute URL of a redirect's Location, None if this is not a redirect."""
        return redirect_target(self.status, self.headers.get("location"), self.url)

    async def aiter_raw(self) -> AsyncIterator[bytes]:
        """The body as sent (no content decoding), in chunks; the caller enforces its own cap."""
        self._consumed = True
        reader = self._connection.reader
        try:
            if self.status in (204, 304) or 100 <= self.status < 200:
                pass
            elif self._chunked:
                while True:
                    line = await reader.readuntil(b"\r\n")
                    size_text = line.split(b";", 1)[0].strip()
                    try:
                        size = int(size_text, 16)
                    except ValueError:
                        raise ProtocolFailure(f"bad chunk size {size_text[:20]!r}") from None
                    if size == 0:
                        while (await reader.readuntil(b"\r\n")) != b"\r\n":
                            pass  # trailers
                        break
                    while size:
                        data = await reader.read(min(size, READ_CHUNK))
                        if not data:
                            raise ProtocolFailure("connection closed inside a chunk")
                        size -= len(data)
                        yield data
                    if await reader.readexactly(2) != b"\r\n":
                        raise ProtocolFailure("chunk not followed by CRLF")
            elif self._length is not None:
                remaining = self._length
                while remaining:
                    data = await reader.read(min(remaining, READ_CHUNK))
                    if not data:
                        raise ProtocolFailure(f"connection closed with {remaining} bytes of the body unread")
                    remaining -= len(data)
                    yield data
            else:
                self._keep_alive = False  # the body ends when the server closes
                while data := await reader.read(READ_CHUNK):
                    yield data
            self._done = True
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError) as exc:
            raise ProtocolFailure(f"{type(exc).__name__}: {exc}") from None


class HttpClient:
    """Keep-alive HTTP/1.1 GETs through the address guard; close with `aclose()`."""

    def __init__(self, *, user_agent: str, accept: str = "*/*", ssl_context: ssl.SSLContext | None = None):
        self.user_agent = user_agent
        self.accept = accept
        self._idle: dict[tuple[str, str, int, str], list[_Connection]] = {}
        self._resolved: dict[tuple[str, int, bool], tuple[float, list[IPAddress]]] = {}
        # Default: the certifi bundle, as httpx (the client this replaces) verified with.
        self._ssl: ssl.SSLContext | None = ssl_context
        self._proxy_clients: dict[str, httpx.AsyncClient] = {}

    async def addresses(self, url: str, host: str, port: int, allow_private: bool) -> list[IPAddress]:
        """The checked addresses of `host` (raises `netguard.BlockedURL`), cached briefly."""
        key = (host, port, allow_private)
        hit = self._resolved.get(key)
        now = time.monotonic()
        if hit is not None and hit[0] > now:
            return hit[1]
        if _is_literal(host):
            addresses = check_url(url, allow_private=allow_private)
        else:
            # getaddrinfo blocks; keep the event loop free while it runs.
            addresses = await asyncio.to_thread(check_url, url, allow_private=allow_private)
        self._resolved[key] = (now + RESOLUTION_TTL_S, addresses)
        return addresses

    def get(self, url: str, *, allow_private: bool = False) -> _Exchange | _ProxiedExchange:
        """`async with client.get(url) as response:` one GET of `url` (redirects are not followed)."""
        proxy = proxy_for(url)
        if proxy is not None:
            return _ProxiedExchange(self, url, allow_private, proxy)
        return _Exchange(self, url, allow_private)

    def _proxied(self, proxy: str) -> httpx.AsyncClient:
        client = self._proxy_clients.get(proxy)
        if client is None:
            client = self._proxy_clients[proxy] = httpx.AsyncClient(
                proxy=proxy,
                trust_env=False,  # the proxy is chosen here, per URL
                follow_redirects=False,
                timeout=None,  # the caller's deadline covers the attempt
                verify=self._ssl if self._ssl is not None else True,
            )
        return client

    async def _connect(
        self, scheme: str, host: str, port: int, address: str, *, fresh: bool = False
    ) -> _Connection:
        pool = None if fresh else self._idle.get((scheme, host, port, address))
        while pool:
            connection = pool.pop()
            if connection.usable():
                connection.reused = True
                return connection
            connection.close()
        if scheme == "https":
            if self._ssl is None:
                import certifi

                self._ssl = ssl.create_default_context(cafile=certifi.where())
            reader, writer = await asyncio.open_connection(
                address, port, ssl=self._ssl, server_hostname=host, limit=MAX_HEAD_BYTES
            )
        else:
            reader, writer = await asyncio.open_connection(address, port, limit=MAX_HEAD_BYTES)
        return _Connection(reader, writer)

    def _release(self, key: tuple[str, str, int, str], connection: _Connection) -> None:
        pool = self._idle.setdefault(key, [])
        if len(pool) < MAX_IDLE_PER_ADDRESS and connection.usable():
            pool.append(connection)
        else:
            connection.close()

    async def aclose(self) -> None:
        for pool in self._idle.values():
            for connection in pool:
                connection.close()
        self._idle.clear()
        for client in self._proxy_clients.values():
            await client.aclose()
        self._proxy_clients.clear()


def redirect_target(status: int, location: str, url: str) -> str | None:
    """The absolute URL a redirect response points at, None if it is not one (both transports)."""
    if status not in (301, 302, 303, 307, 308) or not location.strip():
        return None
    return str(httpx.URL(url).join(location.strip()))  # raises httpx.InvalidURL for junk


def proxy_for(url: str) -> str | None:
    """The proxy the environment names for `url` (`HTTPS_PROXY`/`HTTP_PROXY`), None when none
    applies or `NO_PROXY` bypasses its host."""
    parts = httpx.URL(url)
    proxy = urllib.request.getproxies().get(parts.scheme)
    if not proxy:
        return None
    if urllib.request.proxy_bypass(parts.host if parts.port is None else f"{parts.host}:{parts.port}"):
        return None
    return proxy


class ProxiedResponse:
    """A response fetched through a proxy, with the interface of `Response`."""

    def __init__(self, url: str, response: httpx.Response):
        self.url = url
        self.status = response.status_code
        self.headers = Headers(
            [(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in response.headers.raw]
        )
        self._response = response

    def redirect_target(self) -> str | None:
        return redirect_target(self.status, self.headers.get("location"), self.url)

    async def aiter_raw(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response.aiter_raw():
                yield chunk
        except httpx.TransportError as exc:
            raise ProtocolFailure(f"{type(exc).__name__}: {exc}") from None


class _ProxiedExchange:
    """One GET through a proxy (httpx): the URL is checked by the guard before anything is sent."""

    def __init__(self, client: HttpClient, url: str, allow_private: bool, proxy: str):
        self.client = client
        self.url = url
        self.allow_private = allow_private
        self.proxy = proxy
        self._response: httpx.Response | None = None

    async def __aenter__(self) -> ProxiedResponse:
        parsed = httpx.URL(self.url)
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        await self.client.addresses(self.url, parsed.host, port, self.allow_private)  # BlockedURL
        request = self.client._proxied(self.proxy).build_request(
            "GET",
            self.url,
            headers={
                "User-Agent": self.client.user_agent,
                "Accept": self.client.accept,
                "Accept-Encoding": "identity",
            },
        )
        try:
            self._response = await self.client._proxied(self.proxy).send(request, stream=True)
        except httpx.TransportError as exc:
            raise ProtocolFailure(f"via proxy: {type(exc).__name__}: {exc}") from None
        return ProxiedResponse(self.url, self._response)

    async def __aexit__(self, exc_type: object, exc: object, tb: object) -> None:
        if self._response is not None:
            await self._response.aclose()


def _is_literal(host: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


class _Exchange:
    """The async context of one request: connection out of the pool, back in only when the body was read."""

    def __init__(self, client: HttpClient, url: str, allow_private: bool):
        self.client = client
        self.url = url
        self.allow_private = allow_private
        self.response: Response | None = None
        self.key: tuple[str, str, int, str] | None = None

    async def __aenter__(self) -> Response:
        parsed = httpx.URL(self.url)  # raises httpx.InvalidURL, as before
        scheme = parsed.scheme
        host = parsed.host
        port = parsed.port or (443 if scheme == "https" else 80)
        addresses = await self.client.addresses(self.url, host, port, self.allow_private)
        address = str(addresses[0])
        self.key = (scheme, host, port, address)
        target = parsed.raw_path.decode("ascii")
        head = (
            f"GET {target} HTTP/1.1\r\nHost: {parsed.netloc.decode('ascii')}\r\n"
            f"User-Agent: {self.client.user_agent}\r\nAccept: {self.client.accept}\r\n"
            "Accept-Encoding: identity\r\nConnection: keep-alive\r\n\r\n"
        ).encode("latin-1")
        for attempt in range(2):
            connection = await self.client._connect(scheme, host, port, address, fresh=attempt > 0)
            try:
                connection.writer.write(head)
                status, headers, version = await _read_head(connection.reader)
            except (ConnectionError, asyncio.IncompleteReadError, ProtocolFailure, OSError) as exc:
                connection.close()
                # A kept-alive socket the server closed meanwhile: one fresh try, as browsers do.
                if connection.reused and isinstance(exc, asyncio.IncompleteReadError) and not exc.partial:
                    continue
                if connection.reused and isinstance(exc, ConnectionError):
                    continue
                if isinstance(exc, ProtocolFailure):
                    raise
                raise ProtocolFailure(f"{type(exc).__name__}: {exc}") from None
            except BaseException:
                connection.close()
                raise
            break
        else:  # pragma: no cover - the second pass uses a fresh socket, which never `continue`s
            raise ProtocolFailure("no connection")
        transfer = headers.get("transfer-encoding").lower()
        chunked = transfer.rsplit(",", 1)[-1].strip() == "chunked" if transfer else False
        length: int | None = None
        if not chunked:
            text = headers.get("content-length").strip()
            if text:
                if not text.isdigit():
                    connection.close()
                    raise ProtocolFailure(f"bad Content-Length {text[:40]!r}")
                length = int(text)
        connection_header = headers.get("connection").lower()
        keep_alive = (
            "close" not in connection_header if version == "HTTP/1.1" else "keep-alive" in connection_header
        )
        self.response = Response(self.url, status, headers, connection, length, chunked, keep_alive)
        return self.response

    async def __aexit__(self, exc_type: object, exc: object, tb: object) -> None:
        response = self.response
        if response is None:
            return
        connection = response._connection
        small = response._length is not None and response._length <= 64 * 1024
        if exc_type is None and response._keep_alive and not response._consumed and small:
            # A redirect body nobody reads: drain a small one to keep the socket.
            with contextlib.suppress(ProtocolFailure):
                async for _ in response.aiter_raw():
                    pass
        if exc_type is None and response._done and response._keep_alive and self.key is not None:
            self.client._release(self.key, connection)
        else:
            connection.close()


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, Headers, str]:
    while True:
        try:
            raw = await reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError:
            raise ProtocolFailure(f"response head longer than {MAX_HEAD_BYTES} bytes") from None
        lines = raw.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            raise ProtocolFailure(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
        status = int(parts[1])
        if 100 <= status < 200 and status != 101:
            continue  # 100 Continue and other interim answers precede the real one
        items = []
        for line in lines[1:]:
            if not line:
                continue
            name, sep, value = line.partition(":")
            if not sep:
                raise ProtocolFailure(f"malformed header line {line[:80]!r}")
            items.append((name.strip().lower(), value.strip()))
        return status, Headers(items), parts[0]


class BodyTooLarge(Exception):
    """The body (after content decoding) exceeds the cap."""


class BadEncoding(Exception):
    """A Content-Encoding we did not ask for and cannot bound, or a corrupt compressed body."""


async def read_body(response: Response | ProxiedResponse, cap: int, *, truncate: bool = False) -> bytes:
    """The body, content-decoded, never more than `cap` bytes held: over it raises `BodyTooLarge`
    (or, with `truncate`, returns the first `cap` bytes).

    We ask for `identity`; a gzip/deflate body is inflated with the same bound (never more
    than `cap` + 1 bytes), other or stacked encodings raise `BadEncoding`.
    """
    from lookbench_live.network import bounded

    length = response.headers.get("content-length").strip()
    if not truncate and length.isdigit() and int(length) > cap:
        raise BodyTooLarge(f"Content-Length {length} exceeds max_bytes {cap}")
    encodings = [
        e.strip().lower()
        for e in response.headers.get("content-encoding").split(",")
        if e.strip() and e.strip().lower() != "identity"
    ]
    inflater = None
    if encodings:
        if len(encodings) > 1 or encodings[0] not in ("gzip", "x-gzip", "deflate"):
            raise BadEncoding(f"Content-Encoding {encodings} is not accepted")
        # The crawl's decoder (one rule): gzip, zlib-wrapped or raw deflate, bounded output.
        inflater = bounded.BoundedDecoder(encodings[0])
    body = bytearray()
    received = 0
    async for chunk in response.aiter_raw():
        received += len(chunk)
        if inflater is None:
            body += chunk
        else:
            try:
                body += inflater.feed(chunk, cap - len(body))  # never past cap + 1
            except bounded.BodyTooLarge as exc:
                raise BadEncoding(exc.detail) from None
        if len(body) > cap or received > cap:
            if truncate:
                return bytes(body[:cap])
            if inflater is not None and len(body) > cap:
                raise BodyTooLarge(f"decoded body exceeds max_bytes {cap}")
            raise BodyTooLarge(f"body exceeds max_bytes {cap}")
    return bytes(body)
