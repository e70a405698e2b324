"""scrapy-playwright's download handler with a render deadline that really ends the page (S11).

scrapy-playwright bounds `page.goto` by its navigation timeout, but nothing after it: reading
the content and closing the page have no deadline, and Playwright's `page.close()` can wait
forever on a page caught mid-navigation by a route handler (a meta-refresh or JavaScript
redirect loop; seen with Playwright 1.65 and Debian's chromium). One such page held the
whole crawl until the subprocess's hard timeout, which killed it.

Here each rendered request gets

- its own browser context (`playwright_context` = a fresh name), so ending the page means
  closing that context, which Chromium does even when the page's own close hangs, and no
  cookie or storage passes from one page to the next;
- one deadline over the whole render (`LOOKBENCH_RENDER_DEADLINE`, seconds: page creation,
  navigation, content, everything); past it the render is cancelled and the request fails
  with `RefusedRequest("render_timeout")`, which is an `IgnoreRequest`, so Scrapy's retry
  middleware does not retry it: a page that hung once is recorded once;
- its context closed in every outcome (bounded by `CLOSE_DEADLINE_S`), with
  `lookbench/pages_opened` and `lookbench/pages_closed` counted from Playwright's own page
  `close` events, so the crawl log says whether any page was left open.

A navigation timeout inside the deadline is the same `render_timeout`; another Playwright
failure (a page navigating while its content is read) is `render_error`.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import Any

from playwright.async_api import Browser, Page
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import TimeoutError as PlaywrightTimeoutError
from scrapy import Spider
from scrapy.http import Request, Response
from scrapy_playwright.handler import ScrapyPlaywrightDownloadHandler
from scrapy_playwright.provider import PlaywrightBrowserProvider

from lookbench_live.scrapers.middlewares import RefusedRequest

log = logging.getLogger(__name__)

CLOSE_DEADLINE_S = 10.0
DEFAULT_RENDER_DEADLINE_S = 60.0
_names = itertools.count(1)


class GuardedPlaywrightHandler(ScrapyPlaywrightDownloadHandler):
    """One context per rendered request, one deadline per render, the context always closed."""

    def __init__(self, crawler: Any) -> None:
        super().__init__(crawler)
        self.render_deadline = crawler.settings.getfloat(
            "LOOKBENCH_RENDER_DEADLINE", DEFAULT_RENDER_DEADLINE_S
        )

    async def _create_page(self, request: Request, spider: Spider) -> Page:
        page = await super()._create_page(request=request, spider=spider)
        self.stats.inc_value("lookbench/pages_opened")
        # Fired however the page ends (its own close, its context's, a renderer crash).
        page.on("close", lambda _page: self.stats.inc_value("lookbench/pages_closed"))
        return page

    async def _download_request(self, request: Request, spider: Spider | None = None) -> Response:
        name = f"render-{next(_names)}"
        request.meta["playwright_context"] = name
        # Keep the page out of scrapy-playwright's own close (which can hang): we end the context.
        request.meta["playwright_include_page"] = True
        try:
            return await asyncio.wait_for(super()._download_request(request, spider), self.render_deadline)
        except (TimeoutError, PlaywrightTimeoutError) as exc:
            self.stats.inc_value("lookbench/render_timeout")
            detail = (
                f"page not rendered within {self.render_deadline:g} s"
                if not isinstance(exc, PlaywrightTimeoutError)
                else str(exc).splitlines()[0][:300]
            )
            raise RefusedRequest("render_timeout", detail) from None
        except PlaywrightError as exc:
            raise RefusedRequest("render_error", str(exc).splitlines()[0][:300] if str(exc) else "") from None
        finally:
            request.meta.pop("playwright_page", None)
            request.meta.pop("playwright_include_page", None)
            await self._end_context(name)

    async def _end_context(self, name: str) -> None:
        wrapper = self.context_wrappers.get(name)
        if wrapper is None:
            return
        try:
            await asyncio.wait_for(wrapper.context.close(), CLOSE_DEADLINE_S)
        except (TimeoutError, PlaywrightError) as exc:
            # Chromium did not confirm: count it, the crawl log's stats then show the page open.
            self.stats.inc_value("lookbench/contexts_not_closed")
            log.warning("browser context %s did not close: %s", name, type(exc).__name__)
        finally:
            self.context_wrappers.pop(name, None)


class SharedBrowserProvider(PlaywrightBrowserProvider):
    """One Playwright and one Chromium for every handler of this crawl process.

    Scrapy makes one download handler per scheme (http, https), and each would start its own
    Playwright driver and Chromium, doubling the memory and Chromium's own background traffic.
    Both handlers run on the reactor's one asyncio loop, so they share the first handler's:
    the browser is launched once (under a lock), handed to both, and the driver is stopped
    when the last handler closes. A handler closing the browser at shutdown closes it for
    both; the crawl is over by then. A browser that died is launched again by whichever
    handler asks next (scrapy-playwright's PLAYWRIGHT_RESTART_DISCONNECTED_BROWSER)."""

    _users = 0
    _started: PlaywrightBrowserProvider | None = None
    _browser: Browser | None = None
    _lock: asyncio.Lock | None = None

    async def start(self) -> None:
        cls = type(self)
        if cls._started is None:
            await super().start()
            cls._started = self
        else:
            self.playwright_context_manager = None  # the first handler's driver, not ours to stop
            self.playwright = cls._started.playwright
            self.browser_type = cls._started.browser_type
        cls._users += 1

    async def launch_browser(self) -> Browser:
        cls = type(self)
        if cls._lock is None:
            cls._lock = asyncio.Lock()
        async with cls._lock:
            if cls._browser is None or not cls._browser.is_connected():
                cls._browser = await super().launch_browser()
                log.info("one Chromium for every handler of this crawl")
            return cls._browser

    async def close(self) -> None:
        cls = type(self)
        cls._users -= 1
        if cls._users > 0 or cls._started is None:
            return
        started, cls._started, cls._browser, cls._lock = cls._started, None, None, None
        await PlaywrightBrowserProvider.close(started)
