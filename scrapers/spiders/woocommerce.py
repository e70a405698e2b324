"""WooCommerce stores through the Store API: `/wp-json/wc/store/v1/products?per_page=100&page=N`,
falling back to the older unversioned `/wp-json/wc/store/products` when v1 is missing."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

import scrapy
from scrapy.http import Response

from lookbench_live.scrapers.extract.woocommerce import extract_woocommerce
from lookbench_live.scrapers.items import rejection
from lookbench_live.scrapers.spiders.base import SiteSpider, journaled

PER_PAGE = 100
V1 = "/wp-json/wc/store/v1/products"
UNVERSIONED = "/wp-json/wc/store/products"


class WooCommerceSpider(SiteSpider):
    platform = "woocommerce"

    def listing_url(self, path: str, page: int) -> str:
        return f"{self.base}{path}?per_page={PER_PAGE}&page={page}"

    def first_requests(self) -> Iterable[scrapy.Request]:
        yield self.request(
            self.listing_url(V1, 1),
            self.parse_listing,
            cb_kwargs={"path": V1, "page": 1},
            meta={"fallback_url": self.listing_url(UNVERSIONED, 1)},
        )

    @journaled
    def parse_listing(self, response: Response, path: str = UNVERSIONED, page: int = 1) -> Iterator[Any]:
        try:
            data = json.loads(response.text)
        except (ValueError, RecursionError) as exc:
            yield rejection(response.url, "invalid_json", str(exc)[:200], stage="extract")
            return
        extraction = extract_woocommerce(data, response.url)
        yield from self.items_from(extraction, response.url)
        total = response.headers.get(b"X-WP-TotalPages")
        last = int(total) if total and total.isdigit() else None
        if extraction.next_page and (last is None or page < last):
            yield self.request(
                self.listing_url(path, page + 1),
                self.parse_listing,
                cb_kwargs={"path": path, "page": page + 1},
            )
