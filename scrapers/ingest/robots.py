"""robots.txt for image hosts, fetched once per host and failing closed (RFC 9309 §2.3.1).

Policy, explicit and tested:
- 200: parsed with Protego (at most `ROBOTS_MAX_BYTES`, content-decoded with the same bound;
  rules past the cap are dropped); its Crawl-delay for our agent paces the host's image
  fetches, and a Crawl-delay over `max_crawl_delay` disallows the host (`crawl_delay_too_long`),
  as the crawl does;
- 4xx other than 429 (401 and 403 included, as Nutch and StormCrawler default): allow all;
- 429, 5xx, timeouts, connection errors, refused addresses, more than 5 redirects:
  disallow all (`robots_unreachable`) for `robots_error_ttl` seconds, then try again.
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
from protego import Protego

from lookbench_live.scrapers.ingest.http import BadEncoding, HttpClient, ProtocolFailure, read_body
from lookbench_live.scrapers.netguard import MAX_REDIRECTS, NO_PRIVATE, BlockedURL, PrivateAllowance

# True: every address (settings.allow_private_addresses); an allowance: only its origins.
Allowance = PrivateAllowance | bool

ROBOTS_MAX_BYTES = 500 * 1024
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
    parser: Protego | None  # None: allow all (or disallow all, see `error`)
    error: str | None = None
    reason: str = "robots_unreachable"
    crawl_delay: float | None = None


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
        max_crawl_delay: float = 30.0,
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
        if entry.error is not None:
            return RobotsVerdict(False, entry.reason, entry.error)
        if entry.parser is not None and not entry.parser.can_fetch(url, self.agent):
            return RobotsVerdict(
                False, "robots_disallowed", f"{origin}/robots.txt disallows it for {self.agent}"
            )
        return RobotsVerdict(True, crawl_delay=entry.crawl_delay)

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
        return _Entry(expires=time.monotonic() + self.error_ttl, parser=None, error=detail, reason=reason)

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
                if status == 200:
                    # RFC 9309 §2.5: parse at least 500 KiB, stop at our cap.
                    body = await read_body(response, ROBOTS_MAX_BYTES, truncate=True)
                    parser = Protego.parse(body.decode("utf-8", errors="replace"))
                    delay = parser.crawl_delay(self.agent)
                    if delay is not None and delay > self.max_crawl_delay:
                        return _Entry(
                            expires=time.monotonic() + SUCCESS_TTL_S,
                            parser=None,
                            error=f"Crawl-delay {delay:g} s is over the maximum {self.max_crawl_delay:g} s",
                            reason="crawl_delay_too_long",
                        )
                    return _Entry(
                        expires=time.monotonic() + SUCCESS_TTL_S,
                        parser=parser,
                        crawl_delay=float(delay) if delay is not None else None,
                    )
                if 400 <= status < 500 and status != 429:
                    return _Entry(expires=time.monotonic() + SUCCESS_TTL_S, parser=None)
                return self._failed(f"{url} answered HTTP {status}")
        return self._failed(f"{origin}/robots.txt redirected more than {MAX_REDIRECTS} times")
