"""robots.txt for image hosts, fetched once per host and failing closed (RFC 9309 §2.3.1).

The decision is the crawl's (`network.robots.robots_policy`, one policy for both): any 2xx
is parsed (at most `ROBOTS_MAX_BYTES`, whole lines only; garbage or an unparsable file
allows all); its Crawl-delay for our agent paces the host's image fetches, and one over
`max_crawl_delay` disallows the host (`crawl_delay_too_long`); 4xx other than 429 allows
all; 429 disallows for its Retry-After (or `robots_error_ttl`); 5xx, timeouts, connection
errors, refused addresses and more than 5 redirects disallow (`robots_unreachable`, or
the guard's reason) for `robots_error_ttl` seconds, then it is tried again.
Redirects are followed (≤ `MAX_REDIRECTS`, each hop through the address guard) but the
rules apply to the original host. A private address is reached only for a hop whose origin
(scheme, host and port) the caller's `netguard.PrivateAllowance` names.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

from lookbench_live.ingest.http import BadEncoding, HttpClient, ProtocolFailure, read_body
from lookbench_live.network.limits import MAX_CRAWL_DELAY_S, ROBOTS_MAX_BYTES
from lookbench_live.network.netguard import MAX_REDIRECTS, NO_PRIVATE, BlockedURL, PrivateAllowance
from lookbench_live.network.robots import RobotsPolicy, robots_policy
from lookbench_live.retry import parse_retry_after

# True: every address (settings.allow_private_addresses); an allowance: only its origins.
Allowance = PrivateAllowance | bool

SUCCESS_TTL_S = 24 * 3600.0


@dataclass(frozen=True, slots=True)
class RobotsVerdict:
    """Whether a URL may be fetched; when not, the reason code to record."""

    allowed: bool
    reason: str | None = None
    detail: str | None = None
    crawl_delay: float | None = None  # seconds between requests to this host, from robots.txt


@dataclass(slots=True)
class _Entry:
    expires: float
    policy: RobotsPolicy


class RobotsCache:
    """Per-origin robots.txt rules; concurrent callers share one fetch per origin.

    `verdict(url, allow_private=allowance)` may fetch robots.txt (and follow its redirects)
    at a private address only for the origins `allowance` names (True: any); verdicts under
    different allowances are cached apart, so one caller's allowance never decides another's.
    """

    def __init__(
        self,
        client: HttpClient,
        *,
        agent: str,
        timeout: float,
        error_ttl: float,
        max_crawl_delay: float = MAX_CRAWL_DELAY_S,
    ):
        self.client = client
        self.agent = agent  # the product token matched against User-agent lines
        self.timeout = timeout
        self.error_ttl = error_ttl
        self.max_crawl_delay = max_crawl_delay
        self._entries: dict[tuple[str, Allowance], _Entry] = {}
        self._loading: dict[tuple[str, Allowance], asyncio.Task[_Entry]] = {}

    async def verdict(self, url: str, *, allow_private: Allowance = NO_PRIVATE) -> RobotsVerdict:
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}"
        if isinstance(allow_private, PrivateAllowance) and not allow_private.allows(origin):
            # The allowance does not reach this origin: share the entry of "no allowance".
            allow_private = NO_PRIVATE
        key = (origin, allow_private)
        entry = self._entries.get(key)
        if entry is None or entry.expires < time.monotonic():
            task = self._loading.get(key)
            if task is None:
                task = asyncio.ensure_future(self._load(origin, allow_private))
                self._loading[key] = task
            # shield: a caller that times out must not cancel the fetch others wait for.
            entry = await asyncio.shield(task)
            self._entries[key] = entry
            self._loading.pop(key, None)
        policy = entry.policy
        if policy.verdict == "disallow_all":
            return RobotsVerdict(False, policy.reason or "robots_unreachable", policy.detail)
        if not policy.allows(url, self.agent):
            return RobotsVerdict(
                False, "robots_disallowed", f"{origin}/robots.txt disallows it for {self.agent}"
            )
        return RobotsVerdict(True, crawl_delay=policy.crawl_delay)

    async def _load(self, origin: str, allow_private: Allowance) -> _Entry:
        try:
            async with asyncio.timeout(self.timeout):
                return await self._fetch(origin, allow_private)
        except TimeoutError:
            return self._failed(f"{origin}/robots.txt timed out after {self.timeout}s")
        except BlockedURL as exc:
            # The host itself is refused: record that, not a robots problem.
            return self._failed(f"{origin}/robots.txt: {exc.detail}", reason=exc.reason)
        except (ProtocolFailure, BadEncoding, OSError, httpx.InvalidURL) as exc:
            return self._failed(f"{origin}/robots.txt: {type(exc).__name__}: {exc}")

    def _failed(self, detail: str, reason: str = "robots_unreachable") -> _Entry:
        policy = robots_policy(None, user_agent=self.agent, error=detail, error_ttl=self.error_ttl)
        policy.reason = reason  # a refused address keeps the guard's reason
        return self._entry(policy)

    @staticmethod
    def _entry(policy: RobotsPolicy) -> _Entry:
        # Rules (and a too-long Crawl-delay) hold for a day; failures until the policy's expiry.
        expires = policy.expires_at if policy.expires_at is not None else time.monotonic() + SUCCESS_TTL_S
        return _Entry(expires=expires, policy=policy)

    async def _fetch(self, origin: str, allow_private: Allowance) -> _Entry:
        url = f"{origin}/robots.txt"
        for _ in range(MAX_REDIRECTS + 1):
            # Each hop is judged by the allowance's origins (scheme, host and port).
            private_ok = (
                allow_private.allows(url) if isinstance(allow_private, PrivateAllowance) else allow_private
            )
            async with self.client.get(url, allow_private=private_ok) as response:
                target = response.redirect_target()
                if target is not None:
                    url = target
                    continue
                status = response.status
                body = b""
                if 200 <= status < 300:
                    # RFC 9309 §2.5: parse at least 500 KiB; one byte more tells the policy
                    # the file went on, so it keeps whole lines only.
                    body = await read_body(response, ROBOTS_MAX_BYTES + 1, truncate=True)
                policy = robots_policy(
                    status,
                    body,
                    user_agent=self.agent,
                    max_bytes=ROBOTS_MAX_BYTES,
                    max_crawl_delay=self.max_crawl_delay,
                    error_ttl=self.error_ttl,
                    retry_after=parse_retry_after(response.headers.get("retry-after") or None),
                )
                policy.detail = f"{url}: {policy.detail}"  # which file, for the recorded detail
                return self._entry(policy)
        return self._failed(f"{origin}/robots.txt redirected more than {MAX_REDIRECTS} times")
