"""Per-host pacing of image fetches: Crawl-delay, Retry-After, and parking a host that keeps failing.

- `set_delay(host, s, floor=f)`: at least `s` seconds between the starts of two requests to
  the host (the host's robots.txt Crawl-delay for our agent), and never less than the largest
  `floor` any caller gave for it (the owning sites' `download_delay`).
- `back_off(host, s)`: no request to the host before `s` seconds from now (a 429/503's
  Retry-After, either form); requests already waiting for the host wait longer.
- `failed(host, ...)` / `succeeded(host)`: after `park_after` failed attempts in a row (timeouts,
  connection errors, 429, 5xx) with no success between, the host is parked for the rest of
  the run: its remaining URLs end at once as `host_parked`, naming the last failure, instead
  of each spending its retries and deadline on a host that is down or refusing us.
A host is the URL's host name (lower case) with its port.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass


class HostParked(Exception):
    def __init__(self, host: str, detail: str):
        super().__init__(f"{host} is parked: {detail}")
        self.host = host
        self.detail = detail


@dataclass(slots=True)
class _Host:
    delay: float = 0.0
    floor: float = 0.0  # the largest site download_delay seen for this host
    next_at: float = 0.0  # monotonic time before which no request may start
    failures: int = 0
    parked: str | None = None


class HostPacer:
    def __init__(self, *, park_after: int, clock: Callable[[], float] = time.monotonic):
        self.park_after = park_after
        self.clock = clock
        self._hosts: dict[str, _Host] = {}

    def _host(self, host: str) -> _Host:
        state = self._hosts.get(host)
        if state is None:
            state = self._hosts[host] = _Host()
        return state

    def set_delay(self, host: str, seconds: float | None, *, floor: float = 0.0) -> None:
        state = self._host(host)
        # Sites sharing a CDN: the strictest site's delay holds for all of them.
        state.floor = max(state.floor, floor)
        state.delay = max(0.0, seconds or 0.0, state.floor)

    def back_off(self, host: str, seconds: float) -> None:
        state = self._host(host)
        state.next_at = max(state.next_at, self.clock() + max(0.0, seconds))

    def park(self, host: str, detail: str) -> None:
        self._host(host).parked = detail

    def parked(self, host: str) -> str | None:
        state = self._hosts.get(host)
        return state.parked if state is not None else None

    async def slot(self, host: str) -> None:
        """Wait until a request to `host` may start, and claim that start; raises `HostParked`."""
        state = self._host(host)
        while True:
            if state.parked is not None:
                raise HostParked(host, state.parked)
            now = self.clock()
            if state.next_at <= now:
                state.next_at = now + state.delay
                return
            # Re-checked after waking: a Retry-After or a parking may have come meanwhile.
            await asyncio.sleep(state.next_at - now)

    def succeeded(self, host: str) -> None:
        self._host(host).failures = 0

    def failed(self, host: str, reason: str, detail: str) -> None:
        state = self._host(host)
        state.failures += 1
        if state.parked is None and state.failures >= self.park_after:
            state.parked = f"{state.failures} failed attempts in a row, the last {reason}: {detail}"
