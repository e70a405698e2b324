"""Fetch image bytes politely and within hard limits.

`ImageDownloader.fetch(url)` returns the body of the final response or raises `FetchFailed`
with a reason code. Guarantees:
- every hop goes through the address guard (`netguard`): checked, pinned, ≤ `max_redirects`
  hops, a hop back to an already visited URL is a `redirect_loop`;
- one TOTAL deadline (`timeout`) covers connect, every hop, headers and body of an attempt,
  so a slow-drip server cannot hold a request open (httpx only times out per read);
- at most `max_bytes` are read: a larger `Content-Length` is refused before reading, a
  longer body is cut while streaming, and a gzip/deflate body is inflated with a bound
  (never more than `max_bytes` + 1 bytes); other or stacked encodings are refused (we ask
  for `identity`);
- robots.txt is obeyed for every hop (fail closed), and `X-Robots-Tag: noai`/`noimageai`
  for our agent or all agents is an opt-out;
- timeouts, 429, 5xx and connection errors are retried `retries` times with backoff
  (honouring a short `Retry-After`); other 4xx are final at once.
"""

from __future__ import annotations

import asyncio
import random
import zlib
from dataclasses import dataclass

import httpx

from lookbench_live.config import IngestSettings
from lookbench_live.scrapers.ingest.robots import RobotsCache
from lookbench_live.scrapers.netguard import (
    BlockedURL,
    GuardedAsyncTransport,
    check_scheme,
    check_url,
    redirect_target,
)

OPT_OUT_DIRECTIVES = frozenset({"noai", "noimageai"})
MAX_RETRY_AFTER_S = 30.0


class FetchFailed(Exception):
    """A fetch that ended without an image body; `reason` is recorded, `transient` decides retries."""

    def __init__(
        self, reason: str, detail: str, *, transient: bool = False, retry_after: float | None = None
    ):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail
        self.transient = transient
        self.retry_after = retry_after


@dataclass(frozen=True, slots=True)
class Fetched:
    url: str  # the final URL after redirects
    data: bytes
    attempts: int


def agent_token(user_agent: str) -> str:
    """The product token of a user agent string ("lookbench-live/0.1 (+…)" → "lookbench-live")."""
    return user_agent.split("/", 1)[0].split()[0].lower()


def opted_out(headers: httpx.Headers, token: str) -> str | None:
    """The X-Robots-Tag directive that forbids AI use for `token` (or every agent), if any."""
    for value in headers.get_list("x-robots-tag"):
        # "otherbot: noai" binds otherbot only; "noai, noimageai" binds every agent. A colon
        # after a comma belongs to a directive's value (unavailable_after: …), not to a scope.
        scope, sep, rest = value.partition(":")
        if sep and "," not in scope and " " not in scope.strip():
            if scope.strip().lower() not in ("*", token):
                continue
            value = rest
        for directive in value.split(","):
            name = directive.strip().lower()
            if name in OPT_OUT_DIRECTIVES:
                return name
    return None


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after", "").strip()
    return min(float(value), MAX_RETRY_AFTER_S) if value.isdigit() else None


# httpcore scans every pooled connection (a syscall each) whenever a request is assigned,
# so one pool of 32 connections cost ~2.3 ms of CPU per request on loopback against ~0.9 ms
# for pools of 8 (docs/benchmarks.md, image ingestion). Concurrency is spread over lanes.
CONNECTIONS_PER_LANE = 8


class ImageDownloader:
    """Async clients with the guard, the robots cache and the limits; use as an async context manager.

    `fetch(url, lane)` may be called by `concurrency` tasks at once; give each task its own
    `lane` number (any int; lanes share clients of `CONNECTIONS_PER_LANE` connections).
    """

    def __init__(self, settings: IngestSettings):
        self.settings = settings
        lanes = -(-settings.concurrency // CONNECTIONS_PER_LANE)
        per_lane = min(settings.concurrency, CONNECTIONS_PER_LANE)
        self.clients = [
            httpx.AsyncClient(
                transport=GuardedAsyncTransport(
                    allow_private=settings.allow_private_addresses,
                    limits=httpx.Limits(max_connections=per_lane, max_keepalive_connections=per_lane),
                ),
                headers={
                    "User-Agent": settings.user_agent,
                    "Accept-Encoding": "identity",
                    "Accept": "image/*",
                },
                # Per-read limits as a backstop; the real bound is the total deadline in `fetch`.
                timeout=httpx.Timeout(settings.timeout),
                follow_redirects=False,
            )
            for _ in range(lanes)
        ]
        self.token = agent_token(settings.user_agent)
        self.robots = (
            RobotsCache(
                self.clients[0],
                agent=self.token,
                timeout=settings.robots_timeout,
                error_ttl=settings.robots_error_ttl,
            )
            if settings.obey_robots
            else None
        )

    async def __aenter__(self) -> ImageDownloader:
        return self

    async def __aexit__(self, *exc: object) -> None:
        for client in self.clients:
            await client.aclose()

    async def fetch(self, url: str, lane: int = 0) -> Fetched:
        """The image body at `url`, or `FetchFailed` once retries (for transient failures) are spent."""
        try:
            check_scheme(url)
            httpx.URL(url)
        except BlockedURL as exc:
            raise FetchFailed(exc.reason, exc.detail) from None
        except httpx.InvalidURL as exc:
            # httpx refuses spellings such as 0177.0.0.1 that the resolver accepts: let the
            # guard name a private target as such before calling the URL merely invalid.
            try:
                await asyncio.to_thread(check_url, url, allow_private=self.settings.allow_private_addresses)
            except BlockedURL as blocked:
                raise FetchFailed(blocked.reason, blocked.detail) from None
            raise FetchFailed("invalid_url", f"{url!r}: {exc}") from None
        attempts = self.settings.retries + 1
        for attempt in range(1, attempts + 1):
            try:
                async with asyncio.timeout(self.settings.timeout):
                    final_url, data = await self._fetch_once(url, self.clients[lane % len(self.clients)])
                return Fetched(url=final_url, data=data, attempts=attempt)
            except TimeoutError:
                failure = FetchFailed(
                    "timeout", f"no complete response within {self.settings.timeout}s", transient=True
                )
            except FetchFailed as exc:
                failure = exc
            if not failure.transient or attempt == attempts:
                if attempt > 1:
                    failure.detail = f"{failure.detail} (after {attempt} attempts)"
                raise failure
            backoff = self.settings.retry_backoff * 2 ** (attempt - 1) * (0.5 + random.random())
            await asyncio.sleep(failure.retry_after if failure.retry_after is not None else backoff)
        raise AssertionError("unreachable")

    async def _fetch_once(self, url: str, client: httpx.AsyncClient) -> tuple[str, bytes]:
        visited = {url}
        current = url
        for _ in range(self.settings.max_redirects + 1):
            if self.robots is not None:
                verdict = await self.robots.verdict(current)
                if not verdict.allowed:
                    raise FetchFailed(verdict.reason or "robots_disallowed", verdict.detail or current)
            try:
                async with client.stream("GET", current) as response:
                    target = redirect_target(response)
                    if target is not None:
                        if target in visited:
                            raise FetchFailed("redirect_loop", f"{current} redirects back to {target}")
                        visited.add(target)
                        current = target
                        continue
                    return current, await self._body(current, response)
            except BlockedURL as exc:
                # Unresolvable names may be a passing DNS failure; refused addresses never change.
                raise FetchFailed(exc.reason, exc.detail, transient=exc.reason == "unresolvable") from None
            except httpx.TimeoutException as exc:
                raise FetchFailed("timeout", f"{type(exc).__name__} on {current}", transient=True) from None
            except httpx.TransportError as exc:
                raise FetchFailed(
                    "connection_error", f"{type(exc).__name__}: {exc} on {current}", transient=True
                ) from None
        raise FetchFailed("redirect_loop", f"more than {self.settings.max_redirects} redirects from {url}")

    async def _body(self, url: str, response: httpx.Response) -> bytes:
        status = response.status_code
        if status != 200:
            transient = status == 429 or status >= 500
            reason = f"http_{status}"
            raise FetchFailed(
                reason,
                f"{url} answered HTTP {status}",
                transient=transient,
                retry_after=_retry_after(response),
            )
        directive = opted_out(response.headers, self.token)
        if directive is not None:
            raise FetchFailed("opt_out_noai", f"disallowed by X-Robots-Tag: {directive}")
        cap = self.settings.max_bytes
        length = response.headers.get("content-length", "")
        if length.isdigit() and int(length) > cap:
            raise FetchFailed("too_large", f"Content-Length {length} exceeds max_bytes {cap}")
        encodings = [
            e.strip().lower()
            for e in response.headers.get("content-encoding", "").split(",")
            if e.strip() and e.strip().lower() != "identity"
        ]
        inflater = None
        if encodings:
            if len(encodings) > 1 or encodings[0] not in ("gzip", "x-gzip", "deflate"):
                raise FetchFailed("bad_content_encoding", f"Content-Encoding {encodings} is not accepted")
            # 32 + MAX_WBITS: accept a gzip or zlib header.
            inflater = zlib.decompressobj(32 + zlib.MAX_WBITS)
        body = bytearray()
        received = 0
        async for chunk in response.aiter_raw():
            received += len(chunk)
            if received > cap:
                raise FetchFailed("too_large", f"body exceeds max_bytes {cap}")
            if inflater is None:
                body += chunk
                continue
            data = chunk
            while data:
                try:
                    # Never inflate more than one byte past the cap.
                    body += inflater.decompress(data, cap + 1 - len(body))
                except zlib.error as exc:
                    raise FetchFailed("bad_content_encoding", f"corrupt {encodings[0]} body: {exc}") from None
                if len(body) > cap:
                    raise FetchFailed("too_large", f"decoded body exceeds max_bytes {cap}")
                data = inflater.unconsumed_tail
        return bytes(body)
