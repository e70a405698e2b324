"""Retry-After and backoff have one home (`lookbench_live.retry`): every caller reads a header alike
and waits with full jitter. One table, run through each caller's own code path (issue 26 §2)."""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from collections.abc import Callable
from typing import Any

import httpx
import openai
import pytest
from scrapy import Request
from scrapy.http import Response as ScrapyResponse
from scrapy.utils.test import get_crawler

from lookbench_live.annotation.endpoint import AttemptFailed, ChatEndpoint, ChatRequest
from lookbench_live.config import IngestSettings
from lookbench_live.ingest.downloader import FetchFailed, ImageDownloader
from lookbench_live.ingest.http import Headers
from lookbench_live.ingest.robots import RobotsCache
from lookbench_live.retry import parse_retry_after
from lookbench_live.scrapers.middlewares import HostPacingMiddleware, RobotsGateMiddleware

ERROR_TTL = 600.0  # robots.txt answered 429 without a usable Retry-After: disallowed this long


class In:
    """An HTTP-date `seconds` ahead of the moment the header is read (not of collection)."""

    def __init__(self, seconds: float):
        self.seconds = seconds

    def __str__(self) -> str:
        return email.utils.formatdate(time.time() + self.seconds, usegmt=True)


# header value -> seconds to wait (None: not a valid Retry-After, the caller's own default applies)
RETRY_AFTER: dict[str, tuple[str | In, float | None]] = {
    "integer": ("120", 120.0),
    "zero": ("0", 0.0),
    "padded": (" 7 ", 7.0),
    "decimal, accepted by every caller": ("1.5", 1.5),
    "HTTP-date ahead": (In(40), 40.0),
    "HTTP-date past": ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0),
    "negative": ("-5", None),
    "infinite": ("inf", None),
    "exponent": ("1e3", None),
    "words": ("soon", None),
    "empty": ("", None),
}


# ------------------------------------------------------------------ each caller, one 429 each
def crawl_pacing(value: str) -> float | None:
    """The crawl's host pacer: how long the host is held after a 429 with this header."""
    pacer = HostPacingMiddleware(max_retry_after=300, clock=lambda: 1000.0)
    request = Request("http://shop.example/p/1")
    pacer.process_response(request, ScrapyResponse(request.url, status=429, headers={"Retry-After": value}))
    return pacer.reserve("shop.example") or None  # 0: not held (a zero wait holds for 0 s too)


def crawl_robots(value: str) -> float | None:
    """The crawl's robots gate: how long a robots.txt answered 429 keeps the host disallowed."""
    crawler = get_crawler(settings_dict={"LOOKBENCH_ROBOTS_ERROR_TTL": ERROR_TTL})

    class Engine:
        async def download_async(self, request: Any) -> ScrapyResponse:
            return ScrapyResponse(request.url, status=429, headers={"Retry-After": value}, request=request)

    crawler.engine = Engine()  # type: ignore[assignment]
    policy = asyncio.run(RobotsGateMiddleware(crawler)._fetch("http://shop.example/p/1"))
    assert policy.expires_at is not None
    return policy.expires_at - time.monotonic()


class _Answer:
    def __init__(self, status: int, headers: dict[str, str]):
        self.status = status
        self.headers = Headers([(k.lower(), v) for k, v in headers.items()])

    def redirect_target(self) -> None:
        return None


class _Client:
    """What `RobotsCache` uses of `HttpClient`: `get` as an async context manager."""

    def __init__(self, answer: _Answer):
        self.answer = answer

    def get(self, url: str, *, allow_private: bool) -> Any:
        answer = self.answer

        class Context:
            async def __aenter__(self) -> _Answer:
                return answer

            async def __aexit__(self, *exc: object) -> None:
                return None

        return Context()


def ingest_robots(value: str) -> float | None:
    """Ingest's robots cache: how long a robots.txt answered 429 keeps the image host disallowed."""
    cache = RobotsCache(
        _Client(_Answer(429, {"Retry-After": value})),  # type: ignore[arg-type]
        agent="lookbench-live",
        timeout=5,
        error_ttl=ERROR_TTL,
    )
    entry = asyncio.run(cache._fetch("http://img.example", True))
    return entry.expires - time.monotonic()


def ingest_image(value: str) -> float | None:
    """Ingest's image fetch: the Retry-After its 429 failure carries to the host pacer."""

    async def go() -> float | None:
        downloader = ImageDownloader(IngestSettings(obey_robots=False))
        try:
            await downloader._body("http://img.example/1.jpg", _Answer(429, {"Retry-After": value}))  # type: ignore[arg-type]
        except FetchFailed as exc:
            return exc.retry_after
        finally:
            await downloader.client.aclose()
        raise AssertionError("a 429 is a failure")

    return asyncio.run(go())


def _endpoint(**overrides: Any) -> ChatEndpoint:
    values: dict[str, Any] = dict(
        base_url="http://127.0.0.1:9/v1", model="m", api_key=None, timeout=1, max_retries=3, concurrency=1
    )
    return ChatEndpoint(**{**values, **overrides})


def chat_endpoint(value: str) -> float | None:
    """Annotation's and the judge's endpoint: the Retry-After its 429 attempt failure carries."""
    endpoint = _endpoint()
    request = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")

    async def refuse(**_: Any) -> Any:
        response = httpx.Response(429, headers={"Retry-After": value}, request=request)
        raise openai.RateLimitError("slow down", response=response, body=None)

    endpoint._client.chat.completions.create = refuse  # type: ignore[method-assign]
    chat = ChatRequest(messages=(), schema={}, schema_name="s", max_tokens=16, request_id="r")

    async def go() -> float | None:
        try:
            await endpoint.attempt(chat)
        except AttemptFailed as exc:
            return exc.retry_after
        raise AssertionError("a 429 is a failure")

    return asyncio.run(go())


# caller -> (how it reads one 429, its wait when the header is not valid)
CALLERS: dict[str, tuple[Callable[[str], float | None], float | None]] = {
    "crawl pacing": (crawl_pacing, None),
    "crawl robots.txt": (crawl_robots, ERROR_TTL),
    "ingest robots.txt": (ingest_robots, ERROR_TTL),
    "ingest image": (ingest_image, None),
    "annotation and judge endpoint": (chat_endpoint, None),
}


@pytest.mark.parametrize("row", list(RETRY_AFTER))
def test_every_caller_reads_retry_after_alike(row: str) -> None:
    header, seconds = RETRY_AFTER[row]
    parsed = parse_retry_after(str(header))
    assert parsed == pytest.approx(seconds, abs=2) if seconds is not None else parsed is None
    for name, (caller, default) in CALLERS.items():
        expected = seconds if seconds is not None else default
        if name == "crawl pacing" and expected == 0:
            expected = None  # a hold of 0 s and no hold look alike from outside
        observed = caller(str(header))
        if expected is None:
            assert observed is None, (name, observed)
        else:
            assert observed == pytest.approx(expected, abs=2), (name, observed)


# ------------------------------------------------------------------ backoff: full jitter
def chat_delays(base: float, cap: float, attempts: int, draws: int) -> list[list[float]]:
    endpoint = _endpoint(retry_base_delay=base, retry_max_delay=cap)
    return [[endpoint._backoff(a, None) for _ in range(draws)] for a in range(attempts)]


def ingest_delays(base: float, cap: float, attempts: int, draws: int) -> list[list[float]]:
    """The sleeps between an image's attempts, over `draws` images that fail every attempt."""
    settings = IngestSettings(
        obey_robots=False, allow_private_addresses=True, retries=attempts, retry_backoff=base,
        host_park_after=10**6,
    )  # fmt: skip
    by_attempt: list[list[float]] = [[] for _ in range(attempts)]

    async def go() -> None:
        downloader = ImageDownloader(settings)
        slept: list[float] = []

        async def sleep(seconds: float) -> None:
            slept.append(seconds)

        async def fail(url: str, private_hosts: Any) -> tuple[str, bytes]:
            raise FetchFailed("http_503", "down", transient=True)

        downloader.sleep = sleep  # type: ignore[method-assign]
        downloader._fetch_once = fail  # type: ignore[method-assign]
        try:
            for i in range(draws):
                slept.clear()
                with pytest.raises(FetchFailed):
                    await downloader.fetch(f"http://img.example/{i}.jpg")
                for a, seconds in enumerate(slept):
                    by_attempt[a].append(seconds)
        finally:
            await downloader.client.aclose()

    asyncio.run(go())
    return by_attempt


# base, cap (ingest has no cap: its rows' caps are above every ceiling)
BACKOFF = {"base 0.5": (0.5, 1000.0), "base 0.1": (0.1, 1000.0)}
BACKOFF_CALLERS = {"annotation and judge endpoint": chat_delays, "ingest image": ingest_delays}


@pytest.mark.parametrize("row", list(BACKOFF))
def test_every_caller_backs_off_with_full_jitter(row: str) -> None:
    base, cap = BACKOFF[row]
    random.seed(7)  # the draws are random.uniform's: seeded, the test is repeatable
    for name, delays in BACKOFF_CALLERS.items():
        for attempt, draws in enumerate(delays(base, cap, 3, 200)):
            ceiling = min(cap, base * 2**attempt)
            assert len(draws) == 200, name
            assert all(0 <= d <= ceiling for d in draws), (name, attempt)
            # Full jitter spreads over the whole interval, down to 0 (not half of it and up).
            assert min(draws) < ceiling * 0.1 and max(draws) > ceiling * 0.9, (name, attempt)


def test_the_chat_endpoint_waits_the_longer_of_retry_after_and_backoff_up_to_its_cap() -> None:
    endpoint = _endpoint(retry_base_delay=0.01, retry_max_delay=0.01, max_retry_after=60)
    assert endpoint._backoff(0, 7) == 7
    assert endpoint._backoff(0, 3600) == 60
