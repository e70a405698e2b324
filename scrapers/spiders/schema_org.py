"""Any site with schema.org Product data, found through its sitemaps.

robots.txt `Sitemap:` lines (else `/sitemap.xml`) → sitemap indexes → urlsets; entries whose
`lastmod` is before `since` are not fetched. Sitemaps are parsed by Scrapy's `Sitemap`
(entities never resolved: S1, S2), gunzipped under `DOWNLOAD_MAXSIZE` (S3), capped at
`max_sitemap_urls` entries per file with the overflow recorded (S5), visited once each
(cycles end), and every discovered URL passes the address guard and the offsite check (S6).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import scrapy
from scrapy.http import Response
from scrapy.utils.gz import gunzip
from scrapy.utils.sitemap import Sitemap, sitemap_urls_from_robots

from lookbench_live.scrapers.extract import decode_body, extract_document
from lookbench_live.scrapers.extract.model import parse_datetime
from lookbench_live.scrapers.items import rejection
from lookbench_live.scrapers.spiders.base import SiteSpider, journaled


class SchemaOrgSpider(SiteSpider):
    platform = "schema_org"

    def first_requests(self) -> Iterable[scrapy.Request]:
        root = self.base.split("/", 3)
        host_root = "/".join(root[:3])
        # A missing robots.txt (404/410) allows all (C4) and means "try /sitemap.xml": parse_robots
        # handles it rather than the errback recording it as a failed page.
        yield self.request(
            f"{host_root}/robots.txt", self.parse_robots, meta={"handle_httpstatus_list": [404, 410]}
        )
        for path in self.site.start_paths:
            yield self.request(host_root + path, self.parse_page)

    @journaled
    def parse_robots(self, response: Response) -> Iterator[Any]:
        found = []
        if response.status == 200:
            found = [u for u in sitemap_urls_from_robots(response.text, base_url=response.url) if u]
        wanted = [u for u in found if self.under_base(u)] or ([] if found else [f"{self.base}/sitemap.xml"])
        for url in wanted:
            yield self.request(url, self.parse_sitemap)

    @journaled
    def parse_sitemap(self, response: Response) -> Iterator[Any]:
        body = response.body
        if body[:2] == b"\x1f\x8b":
            try:
                body = gunzip(body, max_size=self.settings.getint("DOWNLOAD_MAXSIZE"))
            except Exception as exc:  # over the cap or corrupt
                yield rejection(response.url, "invalid_sitemap", f"gunzip: {exc}"[:200])
                return
        try:
            sitemap = Sitemap(body)
        except Exception as exc:
            yield rejection(response.url, "invalid_sitemap", f"{type(exc).__name__}: {exc}"[:200])
            return
        if sitemap.type not in ("sitemapindex", "urlset"):
            yield rejection(response.url, "invalid_sitemap", f"root element {sitemap.type!r}")
            return
        cap = self.settings.getint("LOOKBENCH_MAX_SITEMAP_URLS", 50_000)
        count = 0
        overflow = 0
        for entry in sitemap:
            loc = (entry.get("loc") or "").strip()
            if not loc:
                continue
            count += 1
            if count > cap:
                overflow += 1
                continue
            lastmod = parse_datetime(entry.get("lastmod"))
            if self.before_window(lastmod):
                self.crawler.stats.inc_value("lookbench/sitemap_before_window")
                continue
            if sitemap.type == "sitemapindex":
                yield self.request(loc, self.parse_sitemap)
            else:
                yield self.request(loc, self.parse_page)
        if overflow:
            yield rejection(response.url, "sitemap_overflow", f"{overflow} entries over the cap of {cap}")

    @journaled
    def parse_page(self, response: Response) -> Iterator[Any]:
        text = response.text if hasattr(response, "text") else decode_body(response.body)
        if (refused := self.opted_out(response)) is not None:
            yield refused
            return
        # Looks are always read, so a look page is not "no product data"; items_from keeps them
        # only when the site's config asks for looks.
        extraction = extract_document(text, response.url, looks=True)
        if not extraction.products and not extraction.looks and not extraction.problems:
            yield rejection(
                response.url, "no_product_data", "no JSON-LD, microdata or OpenGraph product", stage="extract"
            )
        yield from self.items_from(extraction, response.url)
