"""One OpenAI-compatible chat endpoint (vLLM, or the judge's API) with the guarantees we need.

`ChatEndpoint.complete` sends one schema-constrained chat request and either returns the
answer with its usage, or raises `RequestFailed` with a machine-readable reason. What a
caller may rely on:

- Concurrency is bounded by a semaphore; every attempt has a deadline (`timeout`, enforced
  both by the HTTP client and as a total deadline, so a server that trickles bytes or
  hangs cannot hold a slot for the openai client's 10-minute default; L6).
- Transient failures (429, 408, 409, 5xx, timeouts, connection errors) are retried with
  exponential backoff and full jitter, honouring a 429's or 503's `Retry-After` (capped;
  both rules are `lookbench_live.retry`'s, as for the crawl and ingest); terminal ones
  (400, 404, 422, …) are not (O10, L7). 401/403 raise `EndpointRefused`: every other
  request would fail the same way, so the run should stop and say so.
- Requests and spend are capped per run: once either cap is reached, `complete` raises
  `BudgetExhausted` before sending anything more.
- The API key is read from the environment by the caller and handed to the openai client
  only; it is never logged or stored. With no key configured we send the placeholder
  "EMPTY" (vLLM's convention) rather than letting the openai client fall back to
  `OPENAI_API_KEY`, which would leak that key to a self-hosted server.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import openai

from lookbench_live.config import ChatEndpointSettings
from lookbench_live.retry import parse_retry_after, retry_delay

log = logging.getLogger(__name__)

NO_KEY = "EMPTY"


class RequestFailed(Exception):
    """A request that produced no usable answer; `reason` is machine-readable (`llm_http_400`, …)."""

    def __init__(self, reason: str, detail: str, *, transient: bool, attempts: int, latency_ms: float = 0.0):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail
        self.transient = transient
        self.attempts = attempts
        self.latency_ms = latency_ms


class AttemptFailed(Exception):
    """One HTTP attempt that produced no answer; `terminal` ones (400, 404, 422, …) are not retried."""

    def __init__(
        self, reason: str, detail: str, *, retry_after: float | None = None, terminal: bool = False
    ) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail
        self.retry_after = retry_after
        self.terminal = terminal


class BudgetExhausted(Exception):
    """The run's request or spend cap is reached; nothing more is sent."""


class EndpointRefused(Exception):
    """The endpoint refuses our credentials (401/403): a configuration problem, not an item's."""


class EndpointUnavailable(Exception):
    """The endpoint does not answer, or does not serve the configured model."""


@dataclass(slots=True)
class Reply:
    text: str
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    latency_ms: float
    attempts: int  # HTTP attempts, transient retries included


@dataclass(slots=True)
class Usage:
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """One schema-constrained chat request, sent as is on every attempt."""

    messages: Sequence[dict[str, Any]]
    schema_name: str
    schema: dict[str, Any]
    max_tokens: int
    request_id: str


class Completes:
    """`complete`, written once: `ChatEndpoint` and `EndpointPool` differ only in `_complete`."""

    async def complete(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        schema_name: str,
        schema: dict[str, Any],
        max_tokens: int,
        request_id: str,
    ) -> Reply:
        """One schema-constrained answer (temperature 0 where the model accepts it), or RequestFailed /
        BudgetExhausted / EndpointRefused (a pool whose endpoints are all down: EndpointUnavailable)."""
        return await self._complete(ChatRequest(messages, schema_name, schema, max_tokens, request_id))

    @classmethod
    def from_settings(
        cls,
        settings: ChatEndpointSettings,
        *,
        base_url: str | None,
        api_key: str | None,
        budgeted: bool = True,
    ) -> ChatEndpoint:
        """An endpoint at `base_url` with the retry, timeout and concurrency settings of
        annotation or the judge (one settings type, `config.ChatEndpointSettings`); `budgeted`
        False leaves the spend cap to a pool over several endpoints."""
        return cls(
            base_url=base_url,
            model=settings.model,
            api_key=api_key,
            timeout=settings.timeout,
            max_retries=settings.max_retries,
            concurrency=settings.concurrency,
            max_cost_usd=settings.max_cost_usd if budgeted else None,
            prompt_price_per_mtok=settings.prompt_price_per_mtok if budgeted else 0.0,
            completion_price_per_mtok=settings.completion_price_per_mtok if budgeted else 0.0,
            retry_base_delay=settings.retry_base_delay,
            retry_max_delay=settings.retry_max_delay,
            max_retry_after=settings.max_retry_after,
        )

    async def _complete(self, request: ChatRequest) -> Reply:
        raise NotImplementedError


class _Budget(Protocol):
    def _reserve(self) -> None: ...
    def _count(self, prompt_tokens: int, completion_tokens: int) -> None: ...


def _never(exc: AttemptFailed, attempts: int) -> bool:
    return False


def _nothing() -> None:
    return None


async def with_retries(
    send: Callable[[], Awaitable[Reply]],
    *,
    budget: _Budget,
    max_retries: int,
    backoff: Callable[[int, float | None], float],
    sleep: Callable[[float], Awaitable[Any]],
    request_id: str,
    fail_over: Callable[[AttemptFailed, int], bool] = _never,
    max_attempts: int | None = None,
    exhausted: Callable[[], None] = _nothing,
) -> Reply:
    """The one retry loop (one endpoint, or a pool): each attempt is reserved against the budget
    first; a terminal failure raises at once; a transient one is retried after `backoff(retries
    used, Retry-After)`, at most `max_retries` times, unless `fail_over` says to send it again at
    once without using a retry (a pool whose endpoint was just drained). `max_attempts` bounds
    attempts of any kind; `exhausted` may raise its own error before RequestFailed when giving up."""
    started = time.perf_counter()
    limit = max_attempts if max_attempts is not None else max_retries + 1
    attempts = retries_used = 0
    while True:
        budget._reserve()
        attempts += 1
        try:
            reply = await send()
        except AttemptFailed as exc:
            if exc.terminal:
                raise RequestFailed(
                    exc.reason, exc.detail, transient=False, attempts=attempts, latency_ms=_ms(started)
                ) from None
            if fail_over(exc, attempts):
                continue
            if retries_used >= max_retries or attempts >= limit:
                exhausted()
                raise RequestFailed(
                    exc.reason, exc.detail, transient=True, attempts=attempts, latency_ms=_ms(started)
                ) from None
            delay = backoff(retries_used, exc.retry_after)
            log.debug("retrying %s after %s in %.2f s (attempt %d)", request_id, exc.reason, delay, attempts)
            await sleep(delay)
            retries_used += 1
        else:
            budget._count(reply.prompt_tokens, reply.completion_tokens)
            reply.attempts, reply.latency_ms = attempts, _ms(started)
            return reply


class ChatEndpoint(Completes):
    """A bounded, retrying, budgeted client of one model on one OpenAI-compatible server."""

    def __init__(
        self,
        *,
        base_url: str | None,
        model: str,
        api_key: str | None,
        timeout: float,
        max_retries: int,
        concurrency: int,
        max_requests: int | None = None,
        max_cost_usd: float | None = None,
        prompt_price_per_mtok: float = 0.0,
        completion_price_per_mtok: float = 0.0,
        retry_base_delay: float = 0.5,
        retry_max_delay: float = 30.0,
        max_retry_after: float = 60.0,
    ) -> None:
        self.model = model
        self.timeout = timeout
        self.max_retries = max_retries
        self.max_requests = max_requests
        self.max_cost_usd = max_cost_usd
        self.prices = (prompt_price_per_mtok, completion_price_per_mtok)
        self.retry_base_delay = retry_base_delay
        self.retry_max_delay = retry_max_delay
        self.max_retry_after = max_retry_after
        self.usage = Usage()
        self.sleep = asyncio.sleep  # replaceable in tests, to observe backoff without waiting
        self._concurrency = concurrency
        self._semaphore: asyncio.Semaphore | None = None
        self.in_flight = 0
        self.base_url = base_url or ""
        # Our own retry loop replaces the client's (max_retries=0): it must honour the
        # run's caps, count every attempt, and never retry a 400.
        self._client = openai.AsyncOpenAI(
            base_url=base_url,
            api_key=api_key or NO_KEY,
            timeout=timeout,
            max_retries=0,
        )

    async def close(self) -> None:
        await self._client.close()

    async def check(self) -> None:
        """Fail fast (L8): the server answers `/models` and serves our model, or EndpointUnavailable."""
        where = str(self._client.base_url)
        try:
            async with asyncio.timeout(min(self.timeout, 15.0) + 1.0):
                page = await self._client.models.list(timeout=min(self.timeout, 15.0))
        except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
            raise EndpointRefused(
                f"{where} refused the credentials (HTTP {exc.status_code}); check api_key_env"
            ) from None
        except (openai.APIError, TimeoutError) as exc:
            raise EndpointUnavailable(
                f"{where} is not answering /models ({type(exc).__name__}): is the server up?"
            ) from None
        served = [m.id for m in page.data]
        if served and self.model not in served:
            raise EndpointUnavailable(f"{where} serves {served}, not the configured model {self.model!r}")

    def _reserve(self) -> None:
        if self.max_requests is not None and self.usage.requests >= self.max_requests:
            raise BudgetExhausted(f"request cap of {self.max_requests} per run reached")
        if self.max_cost_usd is not None and self.usage.cost_usd >= self.max_cost_usd:
            raise BudgetExhausted(f"spend cap of ${self.max_cost_usd:g} per run reached")
        self.usage.requests += 1

    def _count(self, prompt_tokens: int, completion_tokens: int) -> None:
        self.usage.prompt_tokens += prompt_tokens
        self.usage.completion_tokens += completion_tokens
        self.usage.cost_usd += (prompt_tokens * self.prices[0] + completion_tokens * self.prices[1]) / 1e6

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        return retry_delay(
            attempt,
            retry_after,
            base=self.retry_base_delay,
            cap=self.retry_max_delay,
            max_retry_after=self.max_retry_after,
        )

    async def _complete(self, request: ChatRequest) -> Reply:
        return await with_retries(
            lambda: self.attempt(request),
            budget=self,
            max_retries=self.max_retries,
            backoff=self._backoff,
            sleep=self.sleep,
            request_id=request.request_id,
        )

    async def attempt(self, request: ChatRequest) -> Reply:
        """One HTTP attempt, no retry, no budget: a Reply, AttemptFailed, or EndpointRefused.

        `in_flight` counts the requests waiting for or holding a slot here (the pool's load)."""
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self._concurrency)
        started = time.perf_counter()
        self.in_flight += 1
        try:
            async with self._semaphore:
                try:
                    async with asyncio.timeout(self.timeout + 1.0):
                        response = await self._client.chat.completions.create(
                            model=self.model,
                            messages=list(request.messages),  # type: ignore[arg-type]
                            response_format={
                                "type": "json_schema",
                                # strict: OpenAI then enforces the schema instead of treating it as a
                                # hint (and refuses one outside its subset, see schema/strict.py);
                                # vLLM accepts the flag and always constrains.
                                "json_schema": {
                                    "name": request.schema_name,
                                    "schema": request.schema,
                                    "strict": True,
                                },
                            },
                            **sampling_arguments(self.model, request.max_tokens),
                            extra_headers={"X-Request-Id": request.request_id},
                        )
                except (openai.APITimeoutError, TimeoutError):
                    raise AttemptFailed("llm_timeout", f"no answer within {self.timeout:g} s") from None
                except openai.APIConnectionError as exc:
                    raise AttemptFailed("llm_connection", type(exc.__cause__ or exc).__name__) from None
                except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
                    raise EndpointRefused(
                        f"{self._client.base_url} refused the credentials (HTTP {exc.status_code}); "
                        "check the api_key_env setting and the environment variable it names"
                    ) from None
                except openai.APIStatusError as exc:
                    code = exc.status_code
                    retry_after = (
                        parse_retry_after(exc.response.headers.get("retry-after"))
                        if code in (429, 503)
                        else None
                    )
                    raise AttemptFailed(
                        f"llm_http_{code}",
                        _error_text(exc),
                        retry_after=retry_after,
                        terminal=not (code >= 500 or code in (408, 409, 429)),
                    ) from None
        finally:
            self.in_flight -= 1
        usage = response.usage
        choice = response.choices[0] if response.choices else None
        return Reply(
            text=(choice.message.content or "") if choice else "",
            finish_reason=choice.finish_reason if choice else None,
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
            latency_ms=_ms(started),
            attempts=1,
        )


# OpenAI's reasoning models (o1, o3, o4-mini, the GPT-5 family) answer HTTP 400 to `max_tokens`
# ("Use 'max_completion_tokens' instead") and to any `temperature` but the default 1 (X4).
_REASONING_MODEL = re.compile(r"^(?:openai/)?(?:o1|o3|o4|gpt-5)(?:$|[-.:])", re.IGNORECASE)


def is_reasoning_model(model: str) -> bool:
    return bool(_REASONING_MODEL.match(model.strip()))


def sampling_arguments(model: str, max_tokens: int) -> dict[str, Any]:
    """The token cap and temperature the endpoint of `model` accepts.

    OpenAI reasoning models: `max_completion_tokens` and no temperature (their only allowed
    value is the default). Everything else (vLLM, older OpenAI models): `max_tokens` and
    temperature 0, which vLLM needs for reproducible answers."""
    if is_reasoning_model(model):
        return {"max_completion_tokens": max_tokens}
    return {"max_tokens": max_tokens, "temperature": 0}


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


def _error_text(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        message = body.get("message") or (body.get("error") or {}).get("message")
        if message:
            return str(message)[:500]
    return str(exc)[:500]
