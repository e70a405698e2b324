"""robots.txt for image hosts, fetched once per host and failing closed (RFC 9309 §2.3.1).

Policy, explicit and tested:
- 200: parsed with Protego (at most `ROBOTS_MAX_BYTES`; rules past the cap are dropped);
- 4xx other than 429 (401 and 403 included, as Nutch and StormCrawler default): allow all;
- 429, 5xx, timeouts, connection errors, refused addresses, more than 5 redirects:
  disallow all (`robots_unreachable`) for `robots_error_ttl` seconds, then try again.
Redirects are followed (≤ `MAX_REDIRECTS`) but the rules apply to the original host.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx
from protego import Protego

from lookbench_live.scrapers.bounded import ACCEPT_ENCODING, BodyTooLarge, aread_bounded
from lookbench_live.scrapers.netguard import MAX_REDIRECTS, BlockedURL, redirect_target

ROBOTS_MAX_BYTES = 500 * 1024
SUCCESS_TTL_S = 24 * 3600.0


@dataclass(frozen=True, slots=True)
class RobotsVerdict:
    """Whether a URL may be fetched; when not, the reason code to record."""

    allowed: bool
    reason: str | None = None
    detail: str | None = None


@dataclass(slots=True)
class _Entry:
    expires: float
    parser: Protego | None  # None: allow all (or disallow all, see `error`)
    error: str | None = None
    reason: str = "robots_unreachable"


class RobotsCache:
    """Per-origin robots.txt rules for one client; concurrent callers share one fetch per origin."""

    def __init__(self, client: httpx.AsyncClient, *, agent: str, timeout: float, error_ttl: float):
        self.client = client
        self.agent = agent  # the product token matched against User-agent lines
        self.timeout = timeout
        self.error_ttl = error_ttl
        self._entries: dict[str, _Entry] = {}
        self._loading: dict[str, asyncio.Task[_Entry]] = {}

    async def verdict(self, url: str) -> RobotsVerdict:
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}"
        entry = self._entries.get(origin)
        if entry is None or entry.expires < time.monotonic():
            task = self._loading.get(origin)
            if task is None:
                task = asyncio.ensure_future(self._load(origin))
                self._loading[origin] = task
            # shield: a caller that times out must not cancel the fetch others wait for.
            entry = await asyncio.shield(task)
            self._entries[origin] = entry
            self._loading.pop(origin, None)
        if entry.error is not None:
            return RobotsVerdict(False, entry.reason, entry.error)
        if entry.parser is not None and not entry.parser.can_fetch(url, self.agent):
            return RobotsVerdict(
                False, "robots_disallowed", f"{origin}/robots.txt disallows it for {self.agent}"
            )
        return RobotsVerdict(True)

    async def _load(self, origin: str) -> _Entry:
        try:
            async with asyncio.timeout(self.timeout):
                return await self._fetch(origin)
        except TimeoutError:
            return self._failed(f"{origin}/robots.txt timed out after {self.timeout}s")
        except BlockedURL as exc:
            # The host itself is refused: record that, not a robots problem.
            return self._failed(f"{origin}/robots.txt: {exc.detail}", reason=exc.reason)
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            return self._failed(f"{origin}/robots.txt: {type(exc).__name__}: {exc}")

    def _failed(self, detail: str, reason: str = "robots_unreachable") -> _Entry:
        return _Entry(expires=time.monotonic() + self.error_ttl, parser=None, error=detail, reason=reason)

    async def _fetch(self, origin: str) -> _Entry:
        url = f"{origin}/robots.txt"
        for _ in range(MAX_REDIRECTS + 1):
            async with self.client.stream(
                "GET", url, headers={"Accept-Encoding": ACCEPT_ENCODING}
            ) as response:
                target = redirect_target(response)
                if target is not None:
                    url = target
                    continue
                status = response.status_code
                if status == 200:
                    try:
                        # RFC 9309 §2.5: parse at least 500 KiB, stop at our cap — after inflating too.
                        body = await aread_bounded(response, ROBOTS_MAX_BYTES, truncate=True)
                    except BodyTooLarge as exc:
                        return self._failed(f"{url}: {exc.detail}")
                    text = body.decode("utf-8", errors="replace")
                    return _Entry(expires=time.monotonic() + SUCCESS_TTL_S, parser=Protego.parse(text))
                if 400 <= status < 500 and status != 429:
                    return _Entry(expires=time.monotonic() + SUCCESS_TTL_S, parser=None)
                return self._failed(f"{url} answered HTTP {status}")
        return self._failed(f"{origin}/robots.txt redirected more than {MAX_REDIRECTS} times")
