"""Pages built by JavaScript, rendered by scrapy-playwright with Debian's chromium.

Start pages (`start_paths`) are rendered, product links under the base path are followed
and rendered, and every rendered page goes through the schema.org extraction. Each
sub-request a page makes passes `abort_request` (the address guard), because scrapy-playwright
pages bypass Scrapy's middlewares; the navigation itself passes them as any request does.
Behind both, every connection Chromium opens goes through the crawl's browser proxy
(`browser_guard.py`), which checks redirects, WebSockets and rebinding names too.
scrapy-playwright enforces no `DOWNLOAD_MAXSIZE`: a rendered page larger than it is dropped
with reason `max_size` after rendering.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import scrapy
from scrapy.http import Response

from lookbench_live.scrapers.extract import extract_document
from lookbench_live.scrapers.items import rejection
from lookbench_live.scrapers.spiders.base import SiteSpider, journaled

# Set from the site config when the spider starts (one site per crawl process): the site's own
# `host:port` that may be private when it allows private addresses (the sample store).
PRIVATE_AUTHORITIES: set[str] = set()


async def abort_request(request: Any) -> bool:
    """scrapy-playwright's PLAYWRIGHT_ABORT_REQUEST: True refuses the browser's request.

    The first door only: it sees the first URL of a redirect chain and no WebSocket. The
    browser proxy (browser_guard.py) checks every connection Chromium opens."""
    import asyncio
    from urllib.parse import urlsplit

    from lookbench_live.network.netguard import BlockedURL, check_url
    from lookbench_live.scrapers.browser_guard import REFUSALS, authority

    if request.url.startswith(("data:", "blob:", "about:")):
        return False
    try:
        parts = urlsplit(request.url)
        own = authority(parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80))
        await asyncio.to_thread(check_url, request.url, allow_private=own in PRIVATE_AUTHORITIES)
    except BlockedURL as exc:
        REFUSALS.record(request.url, exc.reason, exc.detail)
        return True
    except ValueError as exc:
        REFUSALS.record(request.url, "blocked_scheme", str(exc))
        return True
    # Images, fonts and media are not needed to read product data.
    return request.resource_type in ("image", "media", "font")


class PlaywrightSpider(SiteSpider):
    platform = "playwright"

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        from lookbench_live.scrapers.browser_guard import REFUSALS
        from lookbench_live.scrapers.settings import site_authorities

        PRIVATE_AUTHORITIES.clear()
        if self.site.allow_private_addresses:
            PRIVATE_AUTHORITIES.update(site_authorities(self.site))
        # Refusals of the browser's requests are journaled as they happen (a kill loses none).
        REFUSALS.journal = self.journal

    def render(self, url: str, callback: Any, **kwargs: Any) -> scrapy.Request:
        meta = {
            "playwright": True,
            "playwright_page_goto_kwargs": {"wait_until": "load"},
            "playwright_context_kwargs": {"service_workers": "block"},
            # WebSockets never reach Playwright's route handler: refuse them per page.
            "playwright_page_init_callback": "lookbench_live.scrapers.browser_guard.init_page",
        }
        return self.request(url, callback, meta=meta, **kwargs)

    def first_requests(self) -> Iterable[scrapy.Request]:
        host_root = "/".join(self.base.split("/", 3)[:3])
        for path in self.site.start_paths or ["/"]:
            yield self.render(host_root + path, self.parse_listing)

    @journaled
    def parse_listing(self, response: Response) -> Iterator[Any]:
        yield from self._extract(response)
        for href in response.css("a::attr(href)").getall():
            url = response.urljoin(href).split("#", 1)[0]
            if self.under_base(url) and url != response.url:
                yield self.render(url, self.parse_page)

    @journaled
    def parse_page(self, response: Response) -> Iterator[Any]:
        yield from self._extract(response)

    def _extract(self, response: Response) -> Iterator[Any]:
        if (refused := self.opted_out(response)) is not None:
            yield refused
            return
        if len(response.body) > self.settings.getint("DOWNLOAD_MAXSIZE"):
            yield rejection(response.url, "max_size", f"rendered page of {len(response.body)} bytes")
            return
        extraction = extract_document(response.text, response.url, looks=self.site.looks)
        yield from self.items_from(extraction, response.url)
