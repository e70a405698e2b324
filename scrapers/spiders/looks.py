"""Editorial and "shop the look" pages: start at `look_paths`, follow links under the site's
base path (two levels), and extract looks from every page."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import scrapy
from scrapy.http import Response

from lookbench_live.scrapers.extract.looks import extract_looks
from lookbench_live.scrapers.spiders.base import SiteSpider, journaled

MAX_DEPTH = 2


class LooksSpider(SiteSpider):
    platform = "looks"

    def first_requests(self) -> Iterable[scrapy.Request]:
        host_root = "/".join(self.base.split("/", 3)[:3])
        for path in self.site.look_paths or self.site.start_paths or ["/"]:
            yield self.request(host_root + path, self.parse_page, cb_kwargs={"depth": 0})

    @journaled
    def parse_page(self, response: Response, depth: int = 0) -> Iterator[Any]:
        if not hasattr(response, "text"):
            return
        if (refused := self.opted_out(response)) is not None:
            yield refused
            return
        extraction = extract_looks(response.text, response.url)
        yield from self.items_from(extraction, response.url, looks=True)
        if depth >= MAX_DEPTH:
            return
        for href in response.css("a::attr(href)").getall():
            url = response.urljoin(href).split("#", 1)[0]
            if self.under_base(url) and url != response.url:
                yield self.request(url, self.parse_page, cb_kwargs={"depth": depth + 1})
