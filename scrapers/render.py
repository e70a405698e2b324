"""scrapy-playwright's download handler with a render deadline that really ends the page (S11).

scrapy-playwright bounds `page.goto` by its navigation timeout, but nothing after it: reading
the content and closing the page have no deadline, and Playwright's `page.close()` can wait
forever on a page caught mid-navigation by a route handler (a meta-refresh or JavaScript
redirect loop; seen with Playwright 1.65 and Debian's chromium). One such page held the
whole crawl until the subprocess's hard timeout, which killed it.

Here each rendered request gets

- a page in the crawl's current browser context, shared by the site's renders (one site per
  crawl process, so nothing passes between sites; at most `PLAYWRIGHT_MAX_PAGES_PER_CONTEXT`
  pages at once). A context of its own per page would isolate more but made a JavaScript
  crawl 2.2x slower here (3.6 against 8.1 pages/s: Chromium starts a renderer per context);
- one deadline over the whole render (`LOOKBENCH_RENDER_DEADLINE`, seconds: page creation,
  navigation, content, everything); past it the render is cancelled and the request fails
  with `RefusedRequest("render_timeout")`, which is an `IgnoreRequest`, so Scrapy's retry
  middleware does not retry it: a page that hung once is recorded once;
- its page closed within `PAGE_CLOSE_DEADLINE_S`. A render that failed, or a page that would
  not close, *retires* the context: new renders open a fresh one, and the retired context is
  closed (bounded by `CLOSE_DEADLINE_S`) as soon as the last render still in it ends, which
  Chromium does even when a page's own close hangs, without failing the good pages that
  shared it. A context is also retired after `PAGES_PER_CONTEXT` pages (memory, storage);
- `lookbench/pages_opened` and `lookbench/pages_closed` counted from Playwright's own page
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
PAGE_CLOSE_DEADLINE_S = 5.0
PAGES_PER_CONTEXT = 200
DEFAULT_RENDER_DEADLINE_S = 60.0
_names = itertools.count(1)


class GuardedPlaywrightHandler(ScrapyPlaywrightDownloadHandler):
    """Pages in a shared context, one deadline per render, a failed render's context retired."""

    def __init__(self, crawler: Any) -> None:
        super().__init__(crawler)
        self.render_deadline = crawler.settings.getfloat(
            "LOOKBENCH_RENDER_DEADLINE", DEFAULT_RENDER_DEADLINE_S
        )
        self._current = f"render-{next(_names)}"  # the context new renders open their page in
        self._in_flight: dict[str, int] = {}  # context -> renders still using it
        self._served: dict[str, int] = {}  # context -> pages it was given

    async def _create_page(self, request: Request, spider: Spider) -> Page:
        page = await super()._create_page(request=request, spider=spider)
        self.stats.inc_value("lookbench/pages_opened")
        # Fired however the page ends (its own close, its context's, a renderer crash).
        page.on("close", lambda _page: self.stats.inc_value("lookbench/pages_closed"))
        return page

    def _checkout(self) -> str:
        name = self._current
        self._in_flight[name] = self._in_flight.get(name, 0) + 1
        self._served[name] = self._served.get(name, 0) + 1
        if self._served[name] >= PAGES_PER_CONTEXT:
            self._retire(name)
        return name

    def _retire(self, name: str) -> None:
        """No new page goes into `name`; it is closed once its last render ends."""
        if self._current == name:
            self._current = f"render-{next(_names)}"

    async def _download_request(self, request: Request, spider: Spider | None = None) -> Response:
        name = self._checkout()
        request.meta["playwright_context"] = name
        # Keep the page out of scrapy-playwright's own close (which can hang): we end it.
        request.meta["playwright_include_page"] = True
        rendered = False
        try:
            response = await asyncio.wait_for(
                super()._download_request(request, spider), self.render_deadline
            )
            rendered = True
            return response
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
            page = request.meta.pop("playwright_page", None)
            request.meta.pop("playwright_include_page", None)
            await self._release(name, page, rendered)

    async def _release(self, name: str, page: Page | None, rendered: bool) -> None:
        closed = False
        if page is not None:
            try:
                await asyncio.wait_for(page.close(), PAGE_CLOSE_DEADLINE_S)
                closed = True
            except (TimeoutError, PlaywrightError):
                pass
        if not (rendered and closed):
            # A page that hung, failed or would not close may still run: its context goes.
            self._retire(name)
        self._in_flight[name] -= 1
        if self._in_flight[name] == 0 and name != self._current:
            del self._in_flight[name]
            self._served.pop(name, None)
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
