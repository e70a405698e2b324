"""Downloader middlewares: the address guard, the robots gate, and host pacing.

Order (priority): `AddressGuardMiddleware` (50) refuses private addresses, other schemes and
offsite hosts before anything connects; `RobotsGateMiddleware` (100) applies our fail-closed
robots policy; `HostPacingMiddleware` (600, after Scrapy's retry at 550 on the way back)
spaces requests by `Crawl-delay` and holds a host back for its `Retry-After`.

A refused request raises `RefusedRequest` (an `IgnoreRequest`) carrying a machine-readable
reason; the spider's errback turns it into a `Rejection` row. Redirect targets come back
through `process_request`, so every hop is checked.
"""

from __future__ import annotations

import asyncio
import functools
import time
from typing import Any
from urllib.parse import urljoin, urlsplit

from scrapy import Request, signals
from scrapy.exceptions import IgnoreRequest, StopDownload
from scrapy.http import Response

from lookbench_live.network import limits
from lookbench_live.network.netguard import PrivateAllowance
from lookbench_live.network.robots import (
    MAX_ROBOTS_REDIRECTS,
    RobotsPolicy,
    robots_policy,
)
from lookbench_live.retry import parse_retry_after

ROBOTS_META = "lookbench_robots"


class RefusedRequest(IgnoreRequest):
    """A request we refuse on purpose; `reason` becomes the rejection's reason."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


@functools.lru_cache(maxsize=1024)  # each request asks up to four times (guard, gate, pacer twice)
def _host(url: str) -> str:
    parts = urlsplit(url)
    return (parts.hostname or "").lower() + (f":{parts.port}" if parts.port else "")


class AddressGuardMiddleware:
    """Every request URL through `netguard.check_url`, and only the site's own hosts.

    A host's checked addresses are reused for `netguard.RESOLUTION_TTL_S` (the resolver's pin
    lives as long), so a crawl resolves each host about once a minute instead of once per
    request in a thread; a cache hit re-pins the same checked addresses, so Twisted still
    connects only to what was checked. Scheme checks run on every request."""

    def __init__(self, private: PrivateAllowance, allowed_hosts: set[str], clock: Any = time.monotonic):
        # Private addresses only for the site's own origins (scheme, host and port): the rule
        # image and robots fetches use.
        self.private = private
        self.allowed_hosts = allowed_hosts
        self.clock = clock
        # (scheme, host, port) -> (expiry, checked addresses); refusals are never cached.
        self.checked: dict[tuple[str, str, int | None], tuple[float, list[Any]]] = {}

    @classmethod
    def from_crawler(cls, crawler: Any) -> AddressGuardMiddleware:
        settings = crawler.settings
        hosts = {h.lower() for h in settings.getlist("LOOKBENCH_ALLOWED_HOSTS")}
        return cls(PrivateAllowance.of_urls(settings.getlist("LOOKBENCH_PRIVATE_ORIGINS")), hosts)

    async def process_request(self, request: Request, spider: Any = None) -> None:
        from lookbench_live.network.netguard import RESOLUTION_TTL_S, BlockedURL, check_scheme, check_url
        from lookbench_live.scrapers.resolver import pin

        if self.allowed_hosts and _host(request.url) not in self.allowed_hosts:
            raise RefusedRequest("offsite", f"{_host(request.url)} is not a host of this site")
        try:
            check_scheme(request.url)
            parts = urlsplit(request.url)
            key = (parts.scheme.lower(), (parts.hostname or "").lower(), parts.port)
            hit = self.checked.get(key)
            if hit is not None and hit[0] > self.clock():
                addresses = hit[1]
            else:
                # getaddrinfo blocks: resolve off the reactor thread.
                allow = self.private.allows(request.url)
                addresses = await asyncio.to_thread(check_url, request.url, allow_private=allow)
                self.checked[key] = (self.clock() + RESOLUTION_TTL_S, addresses)
        except BlockedURL as exc:
            raise RefusedRequest(exc.reason, exc.detail) from exc
        # Twisted connects to this checked address, not to a second lookup (resolver.py).
        pin(parts.hostname or "", addresses)


class RobotsGateMiddleware:
    """robots.txt obeyed, failing closed (see `network/robots.py`); Crawl-delay handed to the pacer."""

    def __init__(self, crawler: Any):
        settings = crawler.settings
        self.crawler = crawler
        self.enabled = settings.getbool("LOOKBENCH_OBEY_ROBOTS", True)
        self.user_agent = settings.get("LOOKBENCH_ROBOTS_AGENT", limits.BOT_NAME)
        self.max_bytes = settings.getint("LOOKBENCH_ROBOTS_MAX_BYTES", limits.ROBOTS_MAX_BYTES)
        self.max_crawl_delay = settings.getfloat("LOOKBENCH_MAX_CRAWL_DELAY", limits.MAX_CRAWL_DELAY_S)
        self.error_ttl = settings.getfloat("LOOKBENCH_ROBOTS_ERROR_TTL", limits.ROBOTS_ERROR_TTL_S)
        timeout = settings.getfloat("DOWNLOAD_TIMEOUT", limits.DOWNLOAD_TIMEOUT_S)
        self.timeout = min(timeout, limits.DOWNLOAD_TIMEOUT_S)
        self.policies: dict[str, RobotsPolicy] = {}
        self.fetching: dict[str, asyncio.Future[RobotsPolicy]] = {}
        self.received: dict[int, int] = {}
        crawler.signals.connect(self._bytes_received, signal=signals.bytes_received)

    @classmethod
    def from_crawler(cls, crawler: Any) -> RobotsGateMiddleware:
        return cls(crawler)

    def _bytes_received(self, data: bytes, request: Request, spider: Any = None) -> None:
        if not request.meta.get(ROBOTS_META):
            return
        total = self.received.get(id(request), 0) + len(data)
        self.received[id(request)] = total
        if total > self.max_bytes:
            # Stop reading but keep what arrived (C7): the rules in the first max_bytes apply.
            raise StopDownload(fail=False)

    async def process_request(self, request: Request, spider: Any = None) -> None:
        if not self.enabled or request.meta.get(ROBOTS_META):
            return
        if urlsplit(request.url).path == "/robots.txt":
            return
        policy = await self.policy_for(request.url)
        if policy.crawl_delay:
            pacer: HostPacingMiddleware | None = getattr(self.crawler, "lookbench_pacer", None)
            if pacer is not None:
                pacer.set_delay(_host(request.url), policy.crawl_delay)
        if policy.verdict == "disallow_all":
            assert policy.reason
            raise RefusedRequest(policy.reason, policy.detail)
        if not policy.allows(request.url, self.user_agent):
            raise RefusedRequest("robots_disallowed", "forbidden by robots.txt")

    async def policy_for(self, url: str) -> RobotsPolicy:
        host = _host(url)
        policy = self.policies.get(host)
        if policy is not None and not policy.expired():
            return policy
        if host in self.fetching:
            return await asyncio.shield(self.fetching[host])
        future: asyncio.Future[RobotsPolicy] = asyncio.get_running_loop().create_future()
        self.fetching[host] = future
        try:
            policy = await self._fetch(url)
        except Exception as exc:  # never fail open
            policy = robots_policy(
                None, user_agent=self.user_agent, error=repr(exc), error_ttl=self.error_ttl
            )
        self.policies[host] = policy
        del self.fetching[host]
        future.set_result(policy)
        self.crawler.stats.inc_value(f"lookbench/robots/{policy.verdict}")
        return policy

    async def _fetch(self, url: str) -> RobotsPolicy:
        parts = urlsplit(url)
        target = f"{parts.scheme}://{parts.netloc}/robots.txt"
        for _ in range(MAX_ROBOTS_REDIRECTS + 1):
            request = Request(
                target,
                meta={ROBOTS_META: True, "dont_redirect": True, "dont_retry": True, "handle_httpstatus_all": True,
                      "download_timeout": self.timeout},
                priority=1000,
                dont_filter=True,
            )  # fmt: skip
            try:
                response: Response = await self.crawler.engine.download_async(request)
            except RefusedRequest as exc:
                return robots_policy(
                    None,
                    user_agent=self.user_agent,
                    error=f"{exc.reason}: {exc.detail}",
                    error_ttl=self.error_ttl,
                )
            except Exception as exc:
                return robots_policy(
                    None,
                    user_agent=self.user_agent,
                    error=f"{type(exc).__name__}: {exc}",
                    error_ttl=self.error_ttl,
                )
            finally:
                self.received.pop(id(request), None)
            if response.status in (301, 302, 303, 307, 308) and response.headers.get(b"Location"):
                # Follow by hand, bounded; each hop passes the address guard again.
                target = urljoin(target, response.headers[b"Location"].decode("latin-1"))
                continue
            return robots_policy(
                response.status,
                response.body,
                user_agent=self.user_agent,
                max_bytes=self.max_bytes,
                max_crawl_delay=self.max_crawl_delay,
                error_ttl=self.error_ttl,
                retry_after=parse_retry_after(response.headers.get(b"Retry-After")),
            )
        return robots_policy(301, user_agent=self.user_agent, error_ttl=self.error_ttl)


class HostPacingMiddleware:
    """At most one request per `Crawl-delay` to a host, and none before its `Retry-After` ends.

    Scrapy acts on neither (scrapy/scrapy#3849, `optimize.rst`). Each request reserves the
    host's next slot, so concurrent requests are spaced, not released together. A
    `Retry-After` over `max_retry_after` gives the request up with reason `retry_after_too_long`.

    A host whose last `max_host_failures` attempts all failed (5xx, 429, a network error; any
    other answer resets the count) is parked for the rest of the run, as Nutch's
    `fetcher.max.exceptions.per.queue` does: every later request to it, retries included, is
    refused unsent with reason `host_parked` (C10), also one that was waiting here for its
    slot. What had already passed into the downloader's queue (at most `CONCURRENT_REQUESTS`)
    is still sent: a retry of one of the first failures may be among it.
    """

    def __init__(self, max_retry_after: float, clock: Any = time.monotonic, max_host_failures: int = 10):
        self.max_retry_after = max_retry_after
        self.clock = clock
        self.max_host_failures = max_host_failures
        self.delays: dict[str, float] = {}
        self.next_slot: dict[str, float] = {}
        self.blocked_until: dict[str, float] = {}
        self.failures: dict[str, int] = {}
        self.parked: dict[str, str] = {}

    @classmethod
    def from_crawler(cls, crawler: Any) -> HostPacingMiddleware:
        pacer = cls(
            crawler.settings.getfloat("LOOKBENCH_MAX_RETRY_AFTER", 300.0),
            max_host_failures=crawler.settings.getint("LOOKBENCH_MAX_HOST_FAILURES", 10),
        )
        crawler.lookbench_pacer = pacer
        return pacer

    def _outcome(self, host: str, failure: str | None) -> None:
        if failure is None:
            self.failures[host] = 0
            return
        self.failures[host] = self.failures.get(host, 0) + 1
        if self.failures[host] >= self.max_host_failures and host not in self.parked:
            self.parked[host] = f"{self.failures[host]} consecutive failed attempts, the last: {failure}"

    def set_delay(self, host: str, delay: float) -> None:
        self.delays[host] = max(self.delays.get(host, 0.0), delay)

    def reserve(self, host: str) -> float:
        """Seconds the caller must wait before sending to `host`; reserves that slot."""
        now = self.clock()
        start = max(now, self.next_slot.get(host, now), self.blocked_until.get(host, now))
        self.next_slot[host] = start + self.delays.get(host, 0.0)
        return start - now

    def hold(self, host: str, seconds: float) -> None:
        self.blocked_until[host] = max(self.blocked_until.get(host, 0.0), self.clock() + seconds)

    async def process_request(self, request: Request, spider: Any = None) -> None:
        if request.meta.get(ROBOTS_META):
            return
        host = _host(request.url)
        if host in self.parked:
            raise RefusedRequest("host_parked", self.parked[host])
        wait = self.reserve(host)
        if wait > 0:
            await asyncio.sleep(wait)
            # Parked while this request waited for its slot: it has not reached the downloader
            # yet, so it is refused like any later one. Only what already sits in the
            # downloader's queue (past every middleware) still goes out after the parking.
            if host in self.parked:
                raise RefusedRequest("host_parked", self.parked[host])

    def process_exception(self, request: Request, exception: BaseException, spider: Any = None) -> None:
        if not isinstance(exception, IgnoreRequest) and not request.meta.get(ROBOTS_META):
            self._outcome(_host(request.url), type(exception).__name__)

    def process_response(self, request: Request, response: Response, spider: Any = None) -> Response:
        if not request.meta.get(ROBOTS_META):
            failed = response.status >= 500 or response.status == 429
            self._outcome(_host(request.url), f"HTTP {response.status}" if failed else None)
        if response.status in (429, 503):
            retry_after = parse_retry_after(response.headers.get(b"Retry-After"))
            if retry_after is not None:
                if retry_after > self.max_retry_after:
                    raise RefusedRequest(
                        "retry_after_too_long", f"HTTP {response.status} with Retry-After {retry_after:g} s"
                    )
                self.hold(_host(request.url), retry_after)
        return response
