"""Our robots.txt policy, failing closed where Scrapy fails open (docs/reliability.md C1–C8).

`robots_policy(status, body, ...)` is the pure decision, the one robots policy of the
project: `RobotsGateMiddleware` (in `middlewares.py`) fetches robots.txt and applies it to
every request of the crawl, and `ingest.robots.RobotsCache` to every image fetch.

| robots.txt fetch                         | policy                                            |
|------------------------------------------|---------------------------------------------------|
| 200, and any other 2xx (RFC 9309 §2.3.1.1) | the rules (HTML, garbage, empty, unparsable: allow all) |
| 404, 410 (and other 4xx, incl. 401/403)  | allow all (RFC 9309 §2.3.1.3; Nutch/StormCrawler) |
| 429                                      | disallow for now, for Retry-After (or the TTL)    |
| 5xx, timeout, DNS or connection error    | disallow for the TTL, `robots_unreachable`        |
| more than 5 redirects                    | disallow for the TTL, `robots_unreachable`        |
| over the size cap                        | the rules in the first `max_bytes` (≥ 500 KiB)    |
| `Crawl-delay` above the maximum          | the host is skipped, `crawl_delay_too_long`       |
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

from protego import Protego

from lookbench_live.network import limits

MAX_ROBOTS_REDIRECTS = limits.MAX_REDIRECTS

Verdict = Literal["rules", "allow_all", "disallow_all"]


@dataclass(slots=True)
class RobotsPolicy:
    verdict: Verdict
    reason: str | None = None  # why everything is disallowed (a rejection reason)
    detail: str = ""
    parser: Protego | None = None
    crawl_delay: float | None = None
    expires_at: float | None = None  # monotonic time after which robots.txt is fetched again

    def allows(self, url: str, user_agent: str) -> bool:
        if self.verdict == "allow_all":
            return True
        if self.verdict == "disallow_all":
            return False
        assert self.parser is not None
        return bool(self.parser.can_fetch(url, user_agent))

    def expired(self, now: float | None = None) -> bool:
        return (
            self.expires_at is not None and (now if now is not None else time.monotonic()) >= self.expires_at
        )


def robots_policy(
    status: int | None,
    body: bytes = b"",
    *,
    user_agent: str,
    max_bytes: int = limits.ROBOTS_MAX_BYTES,
    max_crawl_delay: float = limits.MAX_CRAWL_DELAY_S,
    error_ttl: float = limits.ROBOTS_ERROR_TTL_S,
    retry_after: float | None = None,
    error: str | None = None,
    now: float | None = None,
) -> RobotsPolicy:
    """The policy for one host from how its robots.txt fetch ended (`status` None: a network error)."""
    now = time.monotonic() if now is None else now
    if status is None:
        return RobotsPolicy(
            "disallow_all", "robots_unreachable", error or "network error", expires_at=now + error_ttl
        )
    if status == 429:
        wait = retry_after if retry_after is not None else error_ttl
        return RobotsPolicy(
            "disallow_all", "robots_unreachable", "429 Too Many Requests", expires_at=now + wait
        )
    if status >= 500:
        return RobotsPolicy(
            "disallow_all", "robots_unreachable", f"HTTP {status}", expires_at=now + error_ttl
        )
    if 300 <= status < 400:
        return RobotsPolicy(
            "disallow_all", "robots_unreachable", "too many redirects", expires_at=now + error_ttl
        )
    if not 200 <= status < 300:
        return RobotsPolicy("allow_all", detail=f"HTTP {status}")
    text = body[:max_bytes].decode("utf-8", errors="ignore")
    if len(body) > max_bytes:
        # Keep whole lines only: a rule cut in half could allow more than it says.
        text = text.rsplit("\n", 1)[0]
    try:
        parser = Protego.parse(text)
    except Exception as exc:  # garbage with status 200 allows all (C5)
        return RobotsPolicy("allow_all", detail=f"unparsable: {exc}")
    delay = parser.crawl_delay(user_agent)
    if delay is not None and delay > max_crawl_delay:
        return RobotsPolicy(
            "disallow_all",
            "crawl_delay_too_long",
            f"Crawl-delay {delay:g} s is over the maximum {max_crawl_delay:g} s",
            crawl_delay=float(delay),
        )
    return RobotsPolicy("rules", parser=parser, crawl_delay=float(delay) if delay is not None else None)
