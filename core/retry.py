"""Retry-After and backoff: the one rule for every client that retries.

The crawl (robots gate and host pacing), ingest (image fetches and robots.txt) and the chat
endpoints of annotation and the judge all read `Retry-After` here and wait here between attempts.
It sits on the ground floor (`lookbench_live.retry`, importing nothing of the project) because
annotation may not import the crawler or ingest.

- `parse_retry_after`: RFC 9110 §10.2.3 gives delta-seconds (a non-negative integer) or an
  HTTP-date. A decimal ("1.5") is accepted too, in every caller alike: servers and proxies send
  one, and the OpenAI client honours it the same way. Anything else (a negative number, `inf`,
  words) is treated as absent, as RFC 9110 asks of an invalid field; a date in the past is 0.
- `full_jitter`: "full jitter" exponential backoff (the AWS Architecture Blog's "Exponential
  Backoff and Jitter"): a uniform draw from 0 to `min(cap, base * 2**attempt)`. Clients that fail
  together then spread their retries over the whole interval instead of returning in a crowd.
"""

from __future__ import annotations

import email.utils
import math
import random
import re
import time

# Delta-seconds, with an optional decimal part (see the module docstring); no sign, no exponent.
_DELTA = re.compile(r"[0-9]+(?:\.[0-9]+)?")


def parse_retry_after(value: bytes | str | None, now_epoch: float | None = None) -> float | None:
    """Seconds to wait from a `Retry-After` value (delta-seconds or an HTTP-date), or None when it
    is absent or not a valid value. `now_epoch` (Unix time) is the clock an HTTP-date is read
    against; None: `time.time()`."""
    if not value:
        return None
    text = (value.decode("latin-1") if isinstance(value, bytes) else value).strip()
    if _DELTA.fullmatch(text):
        seconds = float(text)
        return seconds if math.isfinite(seconds) else None
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    now_epoch = time.time() if now_epoch is None else now_epoch
    return max(0.0, when.timestamp() - now_epoch)


def full_jitter(
    attempt: int, *, base: float, cap: float | None = None, rng: random.Random | None = None
) -> float:
    """Seconds to wait before retry number `attempt` + 1 (`attempt` counts from 0): uniform in
    [0, min(cap, base * 2**attempt)]. `rng` makes a test's draws repeatable."""
    ceiling = base * 2 ** max(0, attempt)
    if cap is not None:
        ceiling = min(cap, ceiling)
    return (rng or random).uniform(0.0, max(0.0, ceiling))


def retry_delay(
    attempt: int,
    retry_after: float | None,
    *,
    base: float,
    cap: float | None = None,
    max_retry_after: float = math.inf,
    rng: random.Random | None = None,
) -> float:
    """The wait before the next attempt of a client that honours `Retry-After` up to
    `max_retry_after` (a longer one is waited only that long): the larger of the server's wait and
    the full-jitter backoff."""
    delay = full_jitter(attempt, base=base, cap=cap, rng=rng)
    if retry_after is not None:
        delay = max(delay, min(retry_after, max_retry_after))
    return delay
