"""One spider per platform kind; `SPIDERS` maps a `SiteSettings.platform` to its class."""

from __future__ import annotations

from lookbench_live.scrapers.spiders.looks import LooksSpider
from lookbench_live.scrapers.spiders.playwright_pages import PlaywrightSpider
from lookbench_live.scrapers.spiders.schema_org import SchemaOrgSpider
from lookbench_live.scrapers.spiders.shopify import ShopifySpider
from lookbench_live.scrapers.spiders.woocommerce import WooCommerceSpider

SPIDERS = {
    "shopify": ShopifySpider,
    "woocommerce": WooCommerceSpider,
    "schema_org": SchemaOrgSpider,
    "playwright": PlaywrightSpider,
    "looks": LooksSpider,
}

__all__ = [
    "SPIDERS",
    "LooksSpider",
    "PlaywrightSpider",
    "SchemaOrgSpider",
    "ShopifySpider",
    "WooCommerceSpider",
]
