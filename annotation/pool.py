"""One client over several vLLM endpoints serving the same model: balanced by load, dead ones drained.

`EndpointPool` has `ChatEndpoint`'s interface (`model`, `usage`, `check`, `complete`, `close`),
so the annotator does not know how many servers answer it. What a caller may rely on:

- Each request goes to the live endpoint with the fewest requests in flight (queued or
  running there), so a slow or smaller server gets less work; a retry goes to another live
  endpoint than the one that just failed it, when there is one.
- An endpoint that refuses connections, or answers `drain_after` 5xx/timeouts in a row, is
  marked down for `cooloff` seconds. The request that hit it is sent again at once to another
  live endpoint, without using one of the item's retries: an item's answer is whichever
  attempt first succeeds, and the caller writes one row per item, so a dying server loses
  nothing and duplicates nothing. After the cool-off the endpoint gets requests again.
- When every endpoint is down, the next attempt probes the one that went down first (with the
  usual backoff); an item whose retries run out while all are down raises
  `EndpointUnavailable` naming each endpoint and why, which stops the run.
- Budgets (requests, spend) are the pool's, across endpoints.
- With one endpoint the pool is that endpoint: behaviour is exactly `ChatEndpoint`'s.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from lookbench_live.annotation.endpoint import (
    AttemptFailed,
    ChatEndpoint,
    ChatRequest,
    Completes,
    EndpointUnavailable,
    Reply,
    Usage,
    with_retries,
)
from lookbench_live.config import AnnotationSettings, secret

log = logging.getLogger(__name__)


class _Member:
    """An endpoint and its health, as the pool sees it."""

    def __init__(self, endpoint: ChatEndpoint) -> None:
        self.endpoint = endpoint
        self.down_until = 0.0  # time.monotonic() before which no request is sent here
        self.errors_in_a_row = 0
        self.why = ""  # the last failure, for the all-down message

    def up(self, now: float) -> bool:
        return now >= self.down_until


class _Budget:
    """The pool's request and spend caps: `ChatEndpoint`'s accounting, without a client."""

    _reserve = ChatEndpoint._reserve
    _count = ChatEndpoint._count

    def __init__(self, usage: Usage) -> None:
        self.usage = usage
        self.max_requests: int | None = None
        self.max_cost_usd: float | None = None
        self.prices = (0.0, 0.0)


class EndpointPool(Completes):
    """Least-in-flight balancing with draining over `ChatEndpoint`s of one model."""

    def __init__(
        self,
        endpoints: Sequence[ChatEndpoint],
        *,
        max_requests: int | None = None,
        max_cost_usd: float | None = None,
        prompt_price_per_mtok: float = 0.0,
        completion_price_per_mtok: float = 0.0,
        cooloff: float = 30.0,
        drain_after: int = 3,
    ) -> None:
        if not endpoints:
            raise ValueError("an endpoint pool needs at least one endpoint")
        self.members = [_Member(e) for e in endpoints]
        first = endpoints[0]
        self.model = first.model
        self.max_retries = first.max_retries
        self.cooloff = cooloff
        self.drain_after = drain_after
        caps = dict(
            max_requests=max_requests,
            max_cost_usd=max_cost_usd,
            prices=(prompt_price_per_mtok, completion_price_per_mtok),
        )
        # The run's caps bind the pool: with one endpoint, that endpoint's own accounting (its
        # behaviour unchanged); with several, the pool's, over their attempts.
        self._budget: ChatEndpoint | _Budget = first if len(endpoints) == 1 else _Budget(Usage())
        for name, value in caps.items():
            setattr(self._budget, name, value)
        self.sleep = first.sleep

    @property
    def usage(self) -> Usage:
        return self._budget.usage

    @property
    def base_urls(self) -> list[str]:
        return [m.endpoint.base_url for m in self.members]

    async def close(self) -> None:
        for member in self.members:
            await member.endpoint.close()

    async def check(self) -> None:
        """Every endpoint answers `/models` with our model, or is marked down with a warning; all
        down raises EndpointUnavailable naming each. A refused key (EndpointRefused) always raises."""
        if len(self.members) == 1:
            await self.members[0].endpoint.check()
            return
        failures: list[str] = []
        for member in self.members:
            try:
                await member.endpoint.check()
            except EndpointUnavailable as exc:
                member.why = str(exc)
                member.down_until = time.monotonic() + self.cooloff
                failures.append(str(exc))
                log.warning("annotation endpoint down at start, drained for %g s: %s", self.cooloff, exc)
        if len(failures) == len(self.members):
            raise EndpointUnavailable(
                f"all {len(self.members)} annotation endpoints are down: " + "; ".join(failures)
            )

    def _pick(self, avoid: _Member | None = None) -> tuple[_Member, bool]:
        """The live member with the fewest requests in flight (first listed on ties), other than
        `avoid` (the one that just failed this request) when another is live; with none live, the
        one that went down first, to probe (second value True)."""
        now = time.monotonic()
        live = [m for m in self.members if m.up(now)]
        if len(live) > 1 and avoid in live:
            live.remove(avoid)
        if live:
            return min(live, key=lambda m: m.endpoint.in_flight), False
        return min(self.members, key=lambda m: m.down_until), True

    def _failed(self, member: _Member, exc: AttemptFailed) -> bool:
        """Record a failure; True when it drains the endpoint (marks it down)."""
        member.why = f"{member.endpoint.base_url} ({exc.reason}: {exc.detail})"
        # A 429 is the server pacing us, not failing: it is retried with its Retry-After, never drained.
        server_side = exc.reason == "llm_timeout" or exc.reason.startswith("llm_http_5")
        if server_side:
            member.errors_in_a_row += 1
        if exc.reason == "llm_connection" or (server_side and member.errors_in_a_row >= self.drain_after):
            if member.up(time.monotonic()):
                log.warning("annotation endpoint drained for %g s: %s", self.cooloff, member.why)
            member.down_until = time.monotonic() + self.cooloff
            return True
        return False

    async def _complete(self, request: ChatRequest) -> Reply:
        """As `ChatEndpoint`'s, over the pool; also EndpointUnavailable when all are down."""
        if len(self.members) == 1:
            return await self.members[0].endpoint._complete(request)
        # Failovers do not use retries, but each one drains an endpoint for `cooloff` seconds, so
        # this bound is reached only if endpoints flap faster than that; it keeps the loop finite.
        max_attempts = self.max_retries + 1 + 2 * len(self.members)
        member: _Member | None = None
        probing = False

        async def send() -> Reply:
            nonlocal member, probing
            member, probing = self._pick(avoid=member)
            reply = await member.endpoint.attempt(request)
            member.errors_in_a_row = 0
            member.down_until = 0.0
            return reply

        def fail_over(exc: AttemptFailed, attempts: int) -> bool:
            assert member is not None
            drained = self._failed(member, exc)
            # its in-flight work moves to a live endpoint at once
            return drained and not probing and attempts < max_attempts and self._any_up()

        def exhausted() -> None:
            if not self._any_up():
                raise EndpointUnavailable(
                    f"all {len(self.members)} annotation endpoints are down: "
                    + "; ".join(m.why or m.endpoint.base_url for m in self.members)
                )

        def backoff(retries_used: int, retry_after: float | None) -> float:
            assert member is not None
            return member.endpoint._backoff(retries_used, retry_after)

        return await with_retries(
            send,
            budget=self._budget,
            max_retries=self.max_retries,
            backoff=backoff,
            sleep=self.sleep,
            request_id=request.request_id,
            fail_over=fail_over,
            max_attempts=max_attempts,
            exhausted=exhausted,
        )

    def _any_up(self) -> bool:
        now = time.monotonic()
        return any(m.up(now) for m in self.members)


def pool_for(settings: AnnotationSettings) -> EndpointPool:
    """The pool over every configured VLM endpoint, with the run's caps (`annotation.*`)."""
    api_key = secret(settings.api_key_env)
    # `concurrency` is per endpoint: each server gets as many requests at once as one did.
    return EndpointPool(
        [
            # The pool holds the run's spend cap; each endpoint only its own retries.
            ChatEndpoint.from_settings(settings, base_url=url, api_key=api_key, budgeted=False)
            for url in settings.endpoints
        ],
        max_requests=settings.max_requests_per_run,
        max_cost_usd=settings.max_cost_usd,
        prompt_price_per_mtok=settings.prompt_price_per_mtok,
        completion_price_per_mtok=settings.completion_price_per_mtok,
        cooloff=settings.endpoint_cooloff,
        drain_after=settings.endpoint_drain_after,
    )
