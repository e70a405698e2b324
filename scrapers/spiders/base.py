"""What every lookbench-live spider shares: its site config, the resume journal, the time
window, and turning extractions and failures into items.

A spider subclass knows one platform: it defines `first_requests()` and callbacks decorated
with `@journaled`, and yields requests and `CrawlItem`s only (Scrapy's idiom).
"""

from __future__ import annotations

import base64
import datetime as dt
import functools
import json
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from typing import Any
from urllib.parse import urlsplit

import scrapy
from scrapy.exceptions import (
    CannotResolveHostError,
    DownloadCancelledError,
    DownloadConnectionRefusedError,
    DownloadFailedError,
    DownloadTimeoutError,
    IgnoreRequest,
    ResponseDataLossError,
)
from scrapy.http import Response
from scrapy.utils.request import request_from_dict
from twisted.internet.defer import CancelledError
from twisted.internet.error import ConnectionRefusedError as TxConnectionRefusedError
from twisted.internet.error import DNSLookupError, TCPTimedOutError
from twisted.internet.error import TimeoutError as TxTimeoutError
from twisted.python.failure import Failure

from lookbench_live.config import SiteSettings
from lookbench_live.network.optout import TdmRule, page_optout, parse_tdmrep, tdmrep_optout, tdmrep_url
from lookbench_live.schema.moments import parse_moment
from lookbench_live.scrapers.extract.model import Extraction, NormalizedProduct
from lookbench_live.scrapers.items import CrawlItem, rejection
from lookbench_live.scrapers.journal import CrawlJournal
from lookbench_live.scrapers.middlewares import RefusedRequest

Callback = Callable[..., Iterable[Any] | None]
# The window start a request was discovered under (ISO or None), kept with it in the journal
# and the frontier: work an earlier run left is judged by that run's window, not this one's.
SINCE_META = "lookbench_since"
# The origin's /.well-known/tdmrep.json: read once per host per crawl process, bounded.
TDMREP_MAX_BYTES = 256 * 1024
TDMREP_TIMEOUT = 20.0


def journaled(method: Callback) -> Callback:
    """Wrap a callback so its page is logged done only after its requests and items are logged."""

    @functools.wraps(method)
    def wrapper(self: SiteSpider, response: Response, **kwargs: Any) -> Iterator[Any]:
        self.window_since = self._since_of(response.request)
        try:
            outputs = list(method(self, response, **kwargs) or [])
        except Exception as exc:  # a parser bug on one page never ends the crawl
            self.logger.exception("callback failed on %s", response.url)
            outputs = [
                rejection(response.url, "parse_error", f"{type(exc).__name__}: {exc}", stage="extract")
            ]
        yield from self.log_outputs(response.request, outputs, page=True)

    return wrapper


class SiteSpider(scrapy.Spider):
    """Base of the platform spiders. Arguments come from `crawl.py` as JSON-safe values."""

    platform = ""

    def __init__(
        self,
        site: dict[str, Any],
        state_dir: str,
        since: str | None = None,
        frontier: list[dict[str, Any]] | None = None,
        **kwargs: Any,
    ):
        self.site = SiteSettings.model_validate(site)
        super().__init__(name=self.site.name, **kwargs)
        # The window start: items whose stated dates are all before it are not new work.
        self.since = parse_moment(since)
        # Requests an earlier run of this site did not reach (its budget ran out): done first.
        self.frontier = list(frontier or [])
        self.journal = CrawlJournal(state_dir)
        self.base = self.site.base_url.rstrip("/")
        self.scheduled = 0
        self._since_text = self.since.isoformat() if self.since else None
        self.window_since = self.since
        self.tdmrep: dict[str, list[TdmRule]] = {}  # host -> its TDMRep rules (none: empty)

    # ------------------------------------------------------------------ start / resume
    async def start(self) -> AsyncIterator[Any]:
        # The site's TDMRep rules first: every page and product of this process is checked
        # against them (a rerun reads them again; they may have changed).
        for note in await self.load_tdmrep(self.base):
            yield note
        if self.journal.started:
            # A rerun of a killed crawl: continue from what was pending, fetch nothing done.
            for data in list(self.journal.unfinished()):
                yield request_from_json(data, self)
            return
        # What an earlier run left comes first, within this run's page budget; the rest of it
        # stays deferred (the frontier only shrinks by what is fetched).
        carried = [request_from_json(data, self) for data in self.frontier]
        requests = carried[: self.site.max_pages]
        self.scheduled = len(requests)
        for request in carried[self.site.max_pages :]:
            self.journal.add_deferred(self._fingerprint(request), request_to_json(request, self))
        fresh = list(self.first_requests())
        for request in fresh:
            request.meta.setdefault(SINCE_META, self._since_text)
        requests += fresh
        with self.journal.together():
            for request in requests:
                self._log_pending(request)
            self.journal.mark_started()
        for request in requests:
            yield request

    def first_requests(self) -> Iterable[scrapy.Request]:
        raise NotImplementedError

    def closed(self, reason: str) -> None:
        self.journal.close()

    def request(self, url: str, callback: Callback, **kwargs: Any) -> scrapy.Request:
        kwargs.setdefault("errback", self.on_error)
        return scrapy.Request(url, callback=callback, **kwargs)

    def under_base(self, url: str) -> bool:
        """True when `url` is on the site's host and under its base path."""
        base, other = urlsplit(self.base), urlsplit(url)
        return other.netloc == base.netloc and other.path.startswith(base.path or "/")

    # ------------------------------------------------------------------ journal
    def _fingerprint(self, request: scrapy.Request) -> str:
        return self.crawler.request_fingerprinter.fingerprint(request).hex()

    def _log_pending(self, request: scrapy.Request) -> None:
        self.journal.add_pending(self._fingerprint(request), request_to_json(request, self))

    def log_outputs(self, request: scrapy.Request, outputs: list[Any], *, page: bool) -> Iterator[Any]:
        with self.journal.together():
            keep = self._journal_outputs(request, outputs, page=page)
        yield from keep

    def _journal_outputs(self, request: scrapy.Request, outputs: list[Any], *, page: bool) -> list[Any]:
        keep: list[Any] = []
        for output in outputs:
            if isinstance(output, scrapy.Request):
                output.meta.setdefault(SINCE_META, request.meta.get(SINCE_META, self._since_text))
                fingerprint = self._fingerprint(output)
                if fingerprint in self.journal.done:
                    continue  # finished by an earlier, killed process
                if self.scheduled >= self.site.max_pages:
                    # Over the page budget: recorded for the next run, not fetched now.
                    self.crawler.stats.inc_value("lookbench/max_pages_reached")
                    self.journal.add_deferred(fingerprint, request_to_json(output, self))
                    continue
                self.scheduled += 1
                self._log_pending(output)
            elif isinstance(output, CrawlItem):
                self.journal.add_item(output)
            keep.append(output)
        self.journal.mark_done(self._fingerprint(request), page=page)
        return keep

    # ------------------------------------------------------------------ items
    def in_window(self, product: NormalizedProduct) -> bool:
        """False for a product whose stated dates are all before `since` (not new work).

        The window is closed at `since`: a product whose latest date equals it is crawled. The
        latest of `published_at`/`updated_at` counts, so an updated product re-enters; one
        stating no date is always crawled (nothing says it is old)."""
        dates = [d for d in (product.published_at, product.updated_at) if d is not None]
        return not dates or not self.before_window(max(dates))

    def before_window(self, moment: dt.datetime | None) -> bool:
        """True when a stated date puts an item before the window (`moment < since`) of the run
        that discovered the page being parsed (an earlier run's, for its frontier)."""
        return self.window_since is not None and moment is not None and moment < self.window_since

    def _since_of(self, request: scrapy.Request) -> dt.datetime | None:
        stamp = request.meta.get(SINCE_META, self._since_text)
        return parse_moment(stamp)

    async def load_tdmrep(self, url: str) -> list[CrawlItem]:
        """Read the origin's /.well-known/tdmrep.json once (through every downloader middleware:
        the address guard, robots, pacing), at most `TDMREP_MAX_BYTES` and `TDMREP_TIMEOUT` s.

        No file (404/410) reserves nothing. A file that cannot be read or parsed reserves
        nothing either (headers and meta tags still apply) and is recorded as a rejection
        (`tdmrep_unavailable`, `tdmrep_malformed`) so the report shows it. A fetch the address
        guard or robots refuses is only counted: the host's pages are refused and recorded too."""
        host = urlsplit(url).netloc.lower()
        if host in self.tdmrep:
            return []
        self.tdmrep[host] = []
        target = tdmrep_url(url)
        request = scrapy.Request(
            target,
            meta={"dont_retry": True, "handle_httpstatus_all": True, "download_timeout": TDMREP_TIMEOUT,
                  "download_maxsize": TDMREP_MAX_BYTES, "download_warnsize": 0},
            priority=1000,
            dont_filter=True,
        )  # fmt: skip
        try:
            response = await self.crawler.engine.download_async(request)
        except RefusedRequest as exc:
            # Refused by the address guard or robots: the site's pages are refused the same way
            # and recorded there; nothing of this host is read, so no rule is needed.
            self.crawler.stats.inc_value(f"lookbench/tdmrep/refused/{exc.reason}")
            return []
        except Exception as exc:  # a network fault here never ends the crawl
            return [rejection(target, "tdmrep_unavailable", f"{type(exc).__name__}: {exc}"[:300])]
        self.crawler.stats.inc_value(f"lookbench/tdmrep/http_{response.status}")
        if response.status in (404, 410):
            return []
        if response.status != 200:
            return [rejection(target, "tdmrep_unavailable", f"HTTP {response.status}")]
        rules, fault = parse_tdmrep(response.body)
        self.tdmrep[host] = rules
        return [rejection(target, "tdmrep_malformed", fault)] if fault else []

    def tdm_rules(self, url: str) -> list[TdmRule]:
        return self.tdmrep.get(urlsplit(url).netloc.lower(), [])

    def opted_out(self, response: Response) -> CrawlItem | None:
        """A rejection when the page reserves its content from AI/TDM use (robots meta `noai` or
        `noimageai`, a TDMRep `tdm-reservation` header, meta or tdmrep.json rule); the page
        then gives nothing."""
        headers = [
            (key.decode("latin-1"), value.decode("latin-1"))
            for key, values in response.headers.items()
            for value in values
        ]
        html = response.text if hasattr(response, "text") else ""
        found = page_optout(
            response.url, headers=headers, html=html, tdmrep_rules=self.tdm_rules(response.url)
        )
        return None if found is None else rejection(response.url, found.reason, found.detail)

    def reserved(self, url: str) -> CrawlItem | None:
        """A rejection when the origin's tdmrep.json reserves `url` (a product or look page an API
        listing names without the crawler fetching it)."""
        found = tdmrep_optout(self.tdm_rules(url), url) if url else None
        return None if found is None else rejection(url, found.reason, found.detail)

    def items_from(
        self, extraction: Extraction, url: str, *, looks: bool | None = None
    ) -> Iterator[CrawlItem]:
        for product in extraction.products:
            if (refused := self.reserved(product.url)) is not None:
                yield refused  # TDMRep: its page's path is reserved, even when read from an API
            elif self.in_window(product):
                yield CrawlItem("product", product.to_json())
            else:
                self.crawler.stats.inc_value("lookbench/products_before_window")
        if looks if looks is not None else self.site.looks:
            for look in extraction.looks:
                refused = self.reserved(look.url)
                yield refused if refused is not None else CrawlItem("look", look.to_json())
        for problem in extraction.problems:
            yield rejection(url, problem.reason, problem.detail, stage="extract")

    # ------------------------------------------------------------------ failures
    def on_error(self, failure: Failure) -> Iterator[Any]:
        request = failure.request  # type: ignore[attr-defined]
        reason, detail = failure_reason(failure)
        self.crawler.stats.inc_value(f"lookbench/rejected/{reason}")
        outputs: list[Any] = [rejection(request.url, reason, detail)]
        fallback = request.meta.get("fallback_url")
        if fallback and reason in ("http_404", "http_410"):
            outputs.append(self.request(fallback, request.callback, meta={"page": 1}))
        yield from self.log_outputs(request, outputs, page=False)


def request_to_json(request: scrapy.Request, spider: scrapy.Spider) -> dict[str, Any]:
    """A request as JSON-safe data (bytes as base64; meta limited to JSON values)."""
    data = _request_dict(request, spider)
    data["body"] = base64.b64encode(data.get("body") or b"").decode()
    data["headers"] = {
        _text(key): [_text(v) for v in (values if isinstance(values, list) else [values])]
        for key, values in (data.get("headers") or {}).items()
    }
    meta = {}
    for key, value in (data.get("meta") or {}).items():
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            continue  # runtime state (slots, timers) is rebuilt by the next process
        meta[key] = value
    data["meta"] = meta
    return data


def _request_dict(request: scrapy.Request, spider: scrapy.Spider) -> dict[str, Any]:
    """`request.to_dict(spider=spider)` without its `inspect.getmembers` over the whole spider
    for every callback (0.1 ms a request: the crawl's largest fixed cost at 500 start URLs).
    A callback that is one of the spider's own methods is named directly; anything else takes
    Scrapy's path, which also raises for a callable that is not a method of the spider."""
    names: dict[str, Any] = {}
    for key in ("callback", "errback"):
        func = getattr(request, key)
        if not callable(func):
            names[key] = func
            continue
        name = getattr(func, "__name__", "")
        own = getattr(spider, name, None)
        if own is None or getattr(own, "__func__", None) is not getattr(func, "__func__", None):
            return request.to_dict(spider=spider)
        names[key] = name
    data: dict[str, Any] = {"url": request.url, **names, "headers": dict(request.headers)}
    for attr in request.attributes:
        data.setdefault(attr, getattr(request, attr))
    if type(request) is not scrapy.Request:
        data["_class"] = request.__module__ + "." + request.__class__.__name__
    return data


def request_from_json(data: dict[str, Any], spider: scrapy.Spider) -> scrapy.Request:
    values = dict(data)
    values["body"] = base64.b64decode(values.get("body") or "")
    return request_from_dict(values, spider=spider)


def _text(value: Any) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else str(value)


# A failed download's reason by the exception's type: Scrapy's own (2.13+) and the Twisted and
# builtin errors older handlers and middlewares raise. Checked in order; anything else is named
# after its class (`SomeError` -> `some_error`).
FAILURE_REASONS: tuple[tuple[tuple[type[BaseException], ...], str], ...] = (
    ((DownloadTimeoutError, TxTimeoutError, TCPTimedOutError, TimeoutError), "timeout"),
    ((CannotResolveHostError, DNSLookupError), "dns_error"),
    (
        (DownloadConnectionRefusedError, TxConnectionRefusedError, ConnectionRefusedError),
        "connection_refused",
    ),
    ((ResponseDataLossError,), "data_loss"),
    ((DownloadFailedError,), "download_failed"),
    ((IgnoreRequest,), "ignored"),
)


def failure_reason(failure: Failure) -> tuple[str, str]:
    """A machine-readable reason for a failed request, and a short detail."""
    exc = failure.value
    if isinstance(exc, RefusedRequest):
        return exc.reason, exc.detail
    response = getattr(exc, "response", None)
    if response is not None and hasattr(response, "status"):
        return (
            f"http_{response.status}",
            f"HTTP {response.status} after retries" if response.status >= 500 else "",
        )
    if isinstance(exc, (DownloadCancelledError, CancelledError)):
        if not str(exc):
            # Scrapy cancels a streamed body past DOWNLOAD_MAXSIZE without a message (http11
            # `_ResponseReader.dataReceived`): a cancelled Deferred, wrapped or not.
            return "max_size", "the body grew past DOWNLOAD_MAXSIZE while streaming"
        # Raised by the download handler itself (no cause): a declared Content-Length over
        # DOWNLOAD_MAXSIZE; wrapped around a cancelled Deferred: cancelled by someone else.
        declared = isinstance(exc, DownloadCancelledError) and exc.__cause__ is None
        return ("max_size" if declared else "cancelled"), str(exc)[:300]
    reason = next((code for kinds, code in FAILURE_REASONS if isinstance(exc, kinds)), None)
    if reason is None:
        name = type(exc).__name__
        reason = "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")
    return reason, str(exc)[:300]
