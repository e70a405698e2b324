"""Fetch image bytes politely and within hard limits.

`ImageDownloader.fetch(url)` returns the body of the final response or raises `FetchFailed`
with a reason code. Guarantees:
- every hop goes through the address guard (`netguard.check_url`, via `http.HttpClient`):
  checked, pinned, ≤ `max_redirects` hops (a longer chain is `too_many_redirects`), a hop
  back to an already visited URL is a `redirect_loop`. Private addresses are refused unless the settings allow them all (test
  servers, the sample store) or the hop's origin (scheme, host and port) is one the caller's
  `netguard.PrivateAllowance` names (a site configured with `allow_private_addresses`: its
  own origin and its `image_hosts`, see `site_private_hosts`); another port of an allowed
  host is refused (`blocked_address`), directly or by redirect, before any request to it;
- one TOTAL deadline (`timeout`) covers connect, every hop, headers and body of an attempt,
  so a slow-drip server cannot hold a request open;
- at most `max_bytes` are read: a larger `Content-Length` is refused before reading, a
  longer body is cut while streaming, and a gzip/deflate body is inflated with a bound
  (never more than `max_bytes` + 1 bytes); other or stacked encodings are refused (we ask
  for `identity`);
- robots.txt is obeyed for every hop (fail closed), and `X-Robots-Tag: noai`/`noimageai`
  for our agent or all agents is an opt-out;
- an image answered with `tdm-reservation: 1` (the W3C TDM Reservation Protocol: text and
  data mining rights reserved) is not stored (`opt_out_tdm`);
- at most `per_host_concurrency` requests are in flight to one host (name and port) at once,
  so 32 workers never all land on one CDN;
- hosts are paced (`pacing.HostPacer`): the larger of the robots.txt Crawl-delay and the
  owning site's `download_delay` (`site_download_delays`) between requests, a
  429/503's Retry-After (seconds or HTTP date) before the next request to that host, and a
  host failing `host_park_after` attempts in a row is parked (`host_parked`);
- timeouts, 429, 5xx and connection errors are retried `retries` times with full-jitter
  backoff from `retry_backoff` (`lookbench_live.retry`, as every client retries) (or the Retry-After, when the server gives one up to `max_retry_after`; a longer one
  ends the URL and parks the host); other 4xx are final at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from lookbench_live.config import DEFAULT_CONTACT_URL, IngestSettings, SiteSettings, agent_string
from lookbench_live.ingest.http import (
    BadEncoding,
    BodyTooLarge,
    HttpClient,
    ProtocolFailure,
    ProxiedResponse,
    Response,
    read_body,
)
from lookbench_live.ingest.pacing import HostPacer, HostParked
from lookbench_live.ingest.robots import RobotsCache
from lookbench_live.network.netguard import (
    NO_PRIVATE,
    BlockedURL,
    PrivateAllowance,
    check_scheme,
    check_url,
)
from lookbench_live.network.optout import OPT_OUT_DIRECTIVES, tdm_header_optout
from lookbench_live.retry import full_jitter, parse_retry_after


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


def opted_out(headers: Any, token: str) -> str | None:
    """The X-Robots-Tag directive that forbids AI use for `token` (or every agent), if any.

    `headers` is anything with `get_list(name)` (`httpx.Headers`, `http.Headers`).
    """
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


def site_private_hosts(sites: Iterable[SiteSettings]) -> dict[str, PrivateAllowance]:
    """Per site name, the origins its images may be fetched from at private addresses.

    Only sites configured with `allow_private_addresses` get any: their own `base_url`
    origin and the `image_hosts` they list (`PrivateAllowance.for_site`).
    """
    return {
        site.name: PrivateAllowance.for_site(site.base_url, site.image_hosts)
        for site in sites
        if site.allow_private_addresses
    }


def site_download_delays(sites: Iterable[SiteSettings]) -> dict[str, float]:
    """Per site name, its `download_delay`: the least time between image requests to a host it uses."""
    return {site.name: site.download_delay for site in sites if site.download_delay > 0}


def _host_key(url: str) -> str:
    parts = urlsplit(url)
    return (parts.netloc or "").lower()


class ImageDownloader:
    """One HTTP client with the guard, the robots cache, the pacer and the limits.

    Use as an async context manager; `fetch` may be called by many tasks at once.
    """

    def __init__(self, settings: IngestSettings, *, contact: str = DEFAULT_CONTACT_URL):
        self.settings = settings
        # `contact`: crawl.contact_url, so site owners see the same address as for the crawl.
        user_agent = agent_string(settings.user_agent, contact)
        self.client = HttpClient(user_agent=user_agent, accept="image/*")
        self.token = agent_token(user_agent)
        self.pacer = HostPacer(park_after=settings.host_park_after)
        self._in_flight: dict[str, asyncio.Semaphore] = {}
        self.sleep = asyncio.sleep  # replaceable in tests, to observe backoff without waiting
        self.robots = (
            RobotsCache(
                self.client,
                agent=self.token,
                timeout=settings.robots_timeout,
                error_ttl=settings.robots_error_ttl,
                max_crawl_delay=settings.max_crawl_delay,
            )
            if settings.obey_robots
            else None
        )

    async def __aenter__(self) -> ImageDownloader:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.client.aclose()

    async def fetch(
        self,
        url: str,
        lane: int = 0,
        private_hosts: PrivateAllowance = NO_PRIVATE,
        min_delay: float = 0.0,
    ) -> Fetched:
        """The image body at `url`, or `FetchFailed` once retries (for transient failures) are spent.

        `private_hosts`: the origins this URL's owner may reach at private addresses;
        `min_delay`: seconds between requests to the URL's host at least (the owning site's
        `download_delay`); `lane` is accepted for callers of the former pooled client and ignored.
        """
        try:
            check_scheme(url)
            httpx.URL(url)
        except BlockedURL as exc:
            raise FetchFailed(exc.reason, exc.detail) from None
        except httpx.InvalidURL as exc:
            # httpx refuses spellings such as 0177.0.0.1 that the resolver accepts: let the
            # guard name a private target as such before calling the URL merely invalid.
            try:
                await asyncio.to_thread(check_url, url, allow_private=self._allowed(url, private_hosts))
            except BlockedURL as blocked:
                raise FetchFailed(blocked.reason, blocked.detail) from None
            raise FetchFailed("invalid_url", f"{url!r}: {exc}") from None
        host = _host_key(url)
        attempts = self.settings.retries + 1
        for attempt in range(1, attempts + 1):
            in_flight = self._in_flight.setdefault(
                host, asyncio.Semaphore(self.settings.per_host_concurrency)
            )
            # Held from the host's pacing slot to the end of the attempt, released for backoff.
            async with in_flight:
                await self._pace(url, host, private_hosts, min_delay)  # its refusals end the URL
                try:
                    async with asyncio.timeout(self.settings.timeout):
                        final_url, data = await self._fetch_once(url, private_hosts)
                    failure = None
                except TimeoutError:
                    failure = FetchFailed(
                        "timeout", f"no complete response within {self.settings.timeout}s", transient=True
                    )
                except FetchFailed as exc:
                    failure = exc
            if failure is None:
                self.pacer.succeeded(host)
                return Fetched(url=final_url, data=data, attempts=attempt)
            if failure.transient:
                self.pacer.failed(host, failure.reason, failure.detail)
            if failure.retry_after is not None:
                if failure.retry_after > self.settings.max_retry_after:
                    self.pacer.park(
                        host,
                        f"Retry-After {failure.retry_after:.0f} s is over max_retry_after "
                        f"{self.settings.max_retry_after:g} s ({failure.reason})",
                    )
                    failure.detail = f"{failure.detail}; Retry-After {failure.retry_after:.0f} s is too long"
                    raise failure
                self.pacer.back_off(host, failure.retry_after)
            if not failure.transient or attempt == attempts:
                if attempt > 1:
                    failure.detail = f"{failure.detail} (after {attempt} attempts)"
                raise failure
            if failure.retry_after is None:
                await self.sleep(full_jitter(attempt - 1, base=self.settings.retry_backoff))
        raise AssertionError("unreachable")

    def _allowed(self, url: str, private_hosts: PrivateAllowance) -> bool:
        return self.settings.allow_private_addresses or private_hosts.allows(url)

    def _robots_allowance(self, private_hosts: PrivateAllowance) -> PrivateAllowance | bool:
        return True if self.settings.allow_private_addresses else private_hosts

    async def _pace(self, url: str, host: str, private_hosts: PrivateAllowance, min_delay: float) -> None:
        """Robots verdict (for its Crawl-delay) and the host's slot, outside the attempt's deadline."""
        crawl_delay = None
        if self.robots is not None:
            verdict = await self.robots.verdict(url, allow_private=self._robots_allowance(private_hosts))
            if not verdict.allowed:
                raise FetchFailed(verdict.reason or "robots_disallowed", verdict.detail or url)
            crawl_delay = verdict.crawl_delay
        self.pacer.set_delay(host, crawl_delay, floor=min_delay)
        try:
            await self.pacer.slot(host)
        except HostParked as exc:
            raise FetchFailed("host_parked", exc.detail) from None

    async def _fetch_once(self, url: str, private_hosts: PrivateAllowance) -> tuple[str, bytes]:
        visited = {url}
        current = url
        for hop in range(self.settings.max_redirects + 1):
            if hop > 0:
                # The first hop was checked and paced before the deadline started.
                if self.robots is not None:
                    verdict = await self.robots.verdict(
                        current, allow_private=self._robots_allowance(private_hosts)
                    )
                    if not verdict.allowed:
                        raise FetchFailed(verdict.reason or "robots_disallowed", verdict.detail or current)
                parked = self.pacer.parked(_host_key(current))
                if parked is not None:
                    raise FetchFailed("host_parked", parked)
            try:
                async with self.client.get(
                    current, allow_private=self._allowed(current, private_hosts)
                ) as response:
                    try:
                        target = response.redirect_target()
                    except httpx.InvalidURL:
                        raise FetchFailed(
                            "blocked_scheme", f"the redirect Location of {current} is not a valid URL"
                        ) from None
                    if target is not None:
                        if target in visited:
                            raise FetchFailed("redirect_loop", f"{current} redirects back to {target}")
                        try:
                            check_scheme(target)
                        except BlockedURL as exc:
                            raise FetchFailed(exc.reason, exc.detail) from None
                        visited.add(target)
                        current = target
                        continue
                    return current, await self._body(current, response)
            except BlockedURL as exc:
                # Unresolvable names may be a passing DNS failure; refused addresses never change.
                raise FetchFailed(exc.reason, exc.detail, transient=exc.reason == "unresolvable") from None
            except httpx.InvalidURL as exc:
                raise FetchFailed("invalid_url", f"{current!r}: {exc}") from None
            except (ProtocolFailure, OSError) as exc:
                raise FetchFailed(
                    "connection_error", f"{type(exc).__name__}: {exc} on {current}", transient=True
                ) from None
        # A chain longer than the limit is not a loop (a loop is a hop back to a visited URL).
        raise FetchFailed(
            "too_many_redirects", f"more than {self.settings.max_redirects} redirects from {url}"
        )

    async def _body(self, url: str, response: Response | ProxiedResponse) -> bytes:
        status = response.status
        if status != 200:
            transient = status == 429 or status >= 500
            retry_after = None
            if status in (429, 503):
                retry_after = parse_retry_after(response.headers.get("retry-after") or None)
            raise FetchFailed(
                f"http_{status}",
                f"{url} answered HTTP {status}",
                transient=transient,
                retry_after=retry_after,
            )
        directive = opted_out(response.headers, self.token)
        if directive is not None:
            raise FetchFailed("opt_out_noai", f"disallowed by X-Robots-Tag: {directive}")
        reserved = tdm_header_optout(response.headers.items())  # the pages' rule, one home
        if reserved is not None:
            raise FetchFailed(reserved.reason, f"{url}: {reserved.detail}")
        try:
            return await read_body(response, self.settings.max_bytes)
        except BodyTooLarge as exc:
            raise FetchFailed("too_large", str(exc)) from None
        except BadEncoding as exc:
            raise FetchFailed("bad_content_encoding", str(exc)) from None
