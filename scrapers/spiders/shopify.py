"""Shopify stores: `/products.json?limit=250&page=N` and `/collections/<handle>/products.json`,
page by page until an empty page (or `max_pages`)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

import scrapy
from scrapy.http import Response

from lookbench_live.scrapers.extract.shopify import extract_shopify
from lookbench_live.scrapers.items import rejection
from lookbench_live.scrapers.spiders.base import SiteSpider, journaled

PAGE_SIZE = 250


class ShopifySpider(SiteSpider):
    platform = "shopify"

    def listing_url(self, prefix: str, page: int) -> str:
        return f"{self.base}{prefix}/products.json?limit={PAGE_SIZE}&page={page}"

    def first_requests(self) -> Iterable[scrapy.Request]:
        prefixes = [""] + [f"/collections/{handle}" for handle in self.site.collections]
        for prefix in prefixes:
            yield self.request(
                self.listing_url(prefix, 1), self.parse_listing, cb_kwargs={"prefix": prefix, "page": 1}
            )

    @journaled
    def parse_listing(self, response: Response, prefix: str, page: int) -> Iterator[Any]:
        try:
            data = json.loads(response.text)
        except (ValueError, RecursionError) as exc:
            yield rejection(response.url, "invalid_json", str(exc)[:200], stage="extract")
            return
        extraction = extract_shopify(data, response.url)
        yield from self.items_from(extraction, response.url)
        if extraction.next_page:
            yield self.request(
                self.listing_url(prefix, page + 1),
                self.parse_listing,
                cb_kwargs={"prefix": prefix, "page": page + 1},
            )
