"""The address guard: refuse URLs that lead to private, loopback, link-local or multicast hosts.

Nothing else in the stack does this (Scrapy, scrapy-playwright, img2dataset and vLLM have no
IP filter; reliability.md §2), so every fetch path goes through here:

- `check_url(url)` refuses non-http(s) schemes, then resolves the host the way the socket
  layer will (glibc's `getaddrinfo`, which turns `0177.0.0.1`, `0x7f.1` or `2130706433`
  into 127.0.0.1) and refuses the URL unless every resolved address is public. Checking
  only IP literals is bypassed by those spellings; checking `is_private` misses CGNAT
  (`100.64.0.0/10`), and Python 3.11's `is_global` still calls multicast public, so the
  test here is stricter than either.
- `GuardedAsyncTransport` / `GuardedTransport` wrap an httpx transport: each request,
  including every redirect hop a client sends, is checked and then sent to the address
  that was checked (the URL's host is replaced by that IP; the `Host` header and TLS SNI
  keep the name). A DNS-rebinding host cannot swap the address between check and connect.
- `redirect_target(response)` gives the next hop of a redirect, so callers follow
  redirects themselves with a bound (`MAX_REDIRECTS`, RFC 9309 and Nutch use 5).

`allow_private=True` (tests, the sample store) allows any address but still refuses
non-http(s) schemes.

`PrivateAllowance` is the one rule for which URLs a site allowed private addresses may
reach there: its own origin (scheme, host and port, as the browser proxy and Scrapy's
offsite check compare them) and the image hosts it declares. A host name alone is not
enough: another port of the same loopback host is another server (issue 24 §4).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

import httpx

from lookbench_live.network import limits

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
BlockReason = Literal["blocked_address", "blocked_scheme", "unresolvable"]

ALLOWED_SCHEMES = frozenset({"http", "https"})
MAX_REDIRECTS = limits.MAX_REDIRECTS
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
# Resolutions are reused briefly within one transport; the pin makes this safe (what we
# connect to is always what we checked), the TTL keeps a long run from using stale DNS.
RESOLUTION_TTL_S = limits.RESOLUTION_TTL_S


class BlockedURL(Exception):
    """A URL the guard refuses; `reason` is the machine-readable code to record."""

    def __init__(self, url: str, reason: BlockReason, detail: str):
        super().__init__(f"refused {url!r}: {detail}")
        self.url = url
        self.reason: BlockReason = reason
        self.detail = detail


def _getaddrinfo(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


# The resolver the guard uses; tests replace it to simulate hostnames and rebinding.
resolve: Callable[[str, int], list[str]] = _getaddrinfo


def is_public(address: IPAddress) -> bool:
    """True only for globally routable unicast addresses (IPv4 embedded in IPv6 included)."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or address.sixtofour or (address.teredo[1] if address.teredo else None)
        if embedded is not None and not is_public(embedded):
            return False
    return bool(
        address.is_global
        and not address.is_multicast
        and not address.is_unspecified
        and not address.is_reserved
        and not address.is_loopback
        and not address.is_link_local
        and not address.is_private
    )


def _split(url: str) -> tuple[str, str, int]:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise BlockedURL(url, "blocked_scheme", f"not a valid URL ({exc})") from exc
    scheme = parts.scheme.lower()
    if scheme not in ALLOWED_SCHEMES:
        raise BlockedURL(url, "blocked_scheme", f"scheme {scheme or '(none)'!r} is not http or https")
    host = parts.hostname
    if not host:
        raise BlockedURL(url, "blocked_scheme", "the URL has no host")
    return scheme, host, port or (443 if scheme == "https" else 80)


def _resolve_checked(
    url: str,
    host: str,
    port: int,
    allow_private: bool,
    resolver: Callable[[str, int], list[str]] | None = None,
) -> list[IPAddress]:
    try:
        literal: IPAddress | None = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if literal is not None:
        raw = [str(literal)]
    else:
        try:
            raw = (resolver or resolve)(host, port)
        except (OSError, UnicodeError) as exc:
            raise BlockedURL(url, "unresolvable", f"host {host!r} does not resolve ({exc})") from exc
    addresses: list[IPAddress] = []
    for text in raw:
        # getaddrinfo may append a zone ("fe80::1%eth0"); the zone never makes an address public.
        address = ipaddress.ip_address(text.split("%", 1)[0])
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise BlockedURL(url, "unresolvable", f"host {host!r} has no address")
    if not allow_private:
        bad = [a for a in addresses if not is_public(a)]
        if bad:
            raise BlockedURL(
                url,
                "blocked_address",
                f"host {host!r} resolves to non-public address {bad[0]} (set allow_private_addresses "
                "only for test servers)",
            )
    return addresses


def check_scheme(url: str) -> None:
    """Refuse (`BlockedURL`, reason `blocked_scheme`) a URL that is not http(s) with a host; no DNS."""
    _split(url)


def check_url(
    url: str, *, allow_private: bool = False, resolver: Callable[[str, int], list[str]] | None = None
) -> list[IPAddress]:
    """The resolved addresses of `url`'s host, all public; raises `BlockedURL` otherwise.

    Non-http(s) schemes are refused even with `allow_private`. Connect only to an address
    from the returned list (the transports below do), never resolve the name again.
    """
    _, host, port = _split(url)
    return _resolve_checked(url, host, port, allow_private, resolver)


def redirect_target(response: httpx.Response) -> str | None:
    """The absolute URL a redirect response points to, or None when it is not a redirect.

    The caller counts hops and sends the next request through a guarded transport, which
    re-checks the new host.
    """
    if response.status_code not in REDIRECT_STATUSES:
        return None
    location = response.headers.get("location")
    if not location:
        return None
    try:
        return str(response.request.url.join(location.strip()))
    except httpx.InvalidURL:
        # An unparseable Location is refused like a bad scheme rather than followed.
        raise BlockedURL(location, "blocked_scheme", "the redirect Location is not a valid URL") from None


Origin = tuple[str, str, int]  # (scheme, host, port), lower case, default port spelled out


def origin_of(url: str) -> Origin | None:
    """The (scheme, host, port) of an http(s) URL, or None when it has none."""
    try:
        return _split(url)
    except BlockedURL:
        return None


@dataclass(frozen=True, slots=True)
class PrivateAllowance:
    """The origins a caller may reach at private addresses; empty: none.

    Compared by scheme, host and port, so `http://127.0.0.1:S` does not cover
    `http://127.0.0.1:OTHER`. Redirect hops are judged by the same rule, hop by hop.
    """

    origins: frozenset[Origin] = frozenset()

    @classmethod
    def for_site(cls, base_url: str, image_hosts: Iterable[str] = ()) -> PrivateAllowance:
        """The site's own origin and its declared image hosts.

        An image host is `host`, `host:port` or `scheme://host[:port]`; what it leaves out
        is the site's (a bare name is served like the site, same scheme and port); a full
        origin without a port has its scheme's default port.
        """
        own = origin_of(base_url)
        if own is None:
            return cls()
        scheme, _, port = own
        origins = {own}
        for entry in image_hosts:
            entry = entry.strip().lower()
            if not entry:
                continue
            if "://" in entry:
                # A full origin: its own scheme, and that scheme's default port if none.
                parsed = origin_of(entry)
                if parsed is not None:
                    origins.add(parsed)
                continue
            explicit = origin_of(f"{scheme}://{entry}")
            if explicit is not None:
                given_port = urlsplit(f"{scheme}://{entry}").port
                origins.add((scheme, explicit[1], given_port if given_port is not None else port))
        return cls(frozenset(origins))

    def allows(self, url: str) -> bool:
        """True when `url`'s origin is one of ours (it may then resolve to a private address)."""
        origin = origin_of(url)
        return origin is not None and origin in self.origins

    def __or__(self, other: PrivateAllowance) -> PrivateAllowance:
        return PrivateAllowance(self.origins | other.origins)

    def as_urls(self) -> list[str]:
        """The origins as `scheme://host:port` strings (Scrapy settings carry only plain data)."""
        return sorted(f"{s}://{f'[{h}]' if ':' in h else h}:{p}" for s, h, p in self.origins)

    @classmethod
    def of_urls(cls, urls: Iterable[str]) -> PrivateAllowance:
        """The allowance `as_urls` wrote."""
        return cls(frozenset(o for o in map(origin_of, urls) if o is not None))

    def __bool__(self) -> bool:
        return bool(self.origins)


NO_PRIVATE = PrivateAllowance()


class _Pinner:
    """Shared logic of the two transports: check, cache briefly, rewrite the request to the IP."""

    def __init__(self, allow_private: bool):
        self.allow_private = allow_private
        self._cache: dict[tuple[str, int], tuple[float, list[IPAddress]]] = {}

    def cached(self, host: str, port: int) -> list[IPAddress] | None:
        hit = self._cache.get((host, port))
        if hit is not None and hit[0] > time.monotonic():
            return hit[1]
        return None

    def remember(self, host: str, port: int, addresses: list[IPAddress]) -> None:
        self._cache[(host, port)] = (time.monotonic() + RESOLUTION_TTL_S, addresses)

    @staticmethod
    def is_literal(host: str) -> bool:
        try:
            ipaddress.ip_address(host)
        except ValueError:
            return False
        return True

    @staticmethod
    def pinned(request: httpx.Request, address: IPAddress) -> httpx.Request:
        extensions = dict(request.extensions)
        if request.url.scheme == "https":
            # Certificates are verified against the name, not the IP we connect to.
            extensions.setdefault("sni_hostname", request.url.host)
        return httpx.Request(
            request.method,
            request.url.copy_with(host=str(address)),
            headers=request.headers,  # keeps Host: the original name
            stream=request.stream,
            extensions=extensions,
        )


class GuardedAsyncTransport(httpx.AsyncBaseTransport):
    """An httpx async transport that checks every request's URL and connects to the checked address.

    Raises `BlockedURL` (before any connection) for refused URLs. HTTPS connections are
    pooled per host name so a TLS session verified for one name never carries another.
    """

    def __init__(self, *, allow_private: bool = False, **transport_options: object):
        self._pinner = _Pinner(allow_private)
        self._options = transport_options
        self._transports: dict[str, httpx.AsyncHTTPTransport] = {}

    def _inner(self, request: httpx.Request) -> httpx.AsyncHTTPTransport:
        key = request.url.host if request.url.scheme == "https" else ""
        if key not in self._transports:
            self._transports[key] = httpx.AsyncHTTPTransport(**self._options)  # type: ignore[arg-type]
        return self._transports[key]

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = str(request.url)
        _, host, port = _split(url)
        addresses = self._pinner.cached(host, port)
        if addresses is None:
            if self._pinner.is_literal(host):
                addresses = _resolve_checked(url, host, port, self._pinner.allow_private)
            else:
                # getaddrinfo blocks; keep the event loop free while it runs.
                addresses = await asyncio.to_thread(
                    _resolve_checked, url, host, port, self._pinner.allow_private
                )
            self._pinner.remember(host, port, addresses)
        return await self._inner(request).handle_async_request(self._pinner.pinned(request, addresses[0]))

    async def aclose(self) -> None:
        for transport in self._transports.values():
            await transport.aclose()


class GuardedTransport(httpx.BaseTransport):
    """The synchronous twin of `GuardedAsyncTransport`."""

    def __init__(self, *, allow_private: bool = False, **transport_options: object):
        self._pinner = _Pinner(allow_private)
        self._options = transport_options
        self._transports: dict[str, httpx.HTTPTransport] = {}

    def _inner(self, request: httpx.Request) -> httpx.HTTPTransport:
        key = request.url.host if request.url.scheme == "https" else ""
        if key not in self._transports:
            self._transports[key] = httpx.HTTPTransport(**self._options)  # type: ignore[arg-type]
        return self._transports[key]

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url = str(request.url)
        _, host, port = _split(url)
        addresses = self._pinner.cached(host, port)
        if addresses is None:
            addresses = _resolve_checked(url, host, port, self._pinner.allow_private)
            self._pinner.remember(host, port, addresses)
        return self._inner(request).handle_request(self._pinner.pinned(request, addresses[0]))

    def close(self) -> None:
        for transport in self._transports.values():
            transport.close()
