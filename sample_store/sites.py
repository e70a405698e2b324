"""The site settings that crawl the sample store: ordinary `SiteSettings`, each with its own
private-address allowance (the store listens on loopback), as a configured site would carry."""

from __future__ import annotations

from typing import Any

from lookbench_live.config import SiteSettings
from lookbench_live.sample_store.catalog import DEFAULT_PRODUCTS_PER_WEEK

__all__ = ["sample_sites"]

PAGES_PER_WEEKLY_PRODUCT = 25  # a site's page budget per weekly arrival: its ~9 listed weeks, and room


def sample_sites(base_url: str, products_per_week: int = DEFAULT_PRODUCTS_PER_WEEK) -> list[SiteSettings]:
    """Site configs crawling the sample store at `base_url` (loopback allowed, polite but quick).

    Each site's `max_pages` grows with the store's size (`products_per_week`), so a large store
    (benchmarks) is crawled whole in one run; the default store keeps the default budget."""
    base = base_url.rstrip("/")
    budget = max(SiteSettings.model_fields["max_pages"].default, PAGES_PER_WEEKLY_PRODUCT * products_per_week)
    common: dict[str, Any] = {
        "allow_private_addresses": True,
        "download_delay": 0.0,
        "concurrency": 8,
        "max_pages": budget,
    }
    return [
        SiteSettings(
            name="sample-shopify",
            platform="shopify",
            base_url=f"{base}/shopify",
            collections=["women"],
            **common,
        ),
        SiteSettings(name="sample-woo", platform="woocommerce", base_url=f"{base}/woo", **common),
        SiteSettings(
            name="sample-schema", platform="schema_org", base_url=f"{base}/schema", looks=False, **common
        ),
        SiteSettings(
            name="sample-js", platform="playwright", base_url=f"{base}/js", start_paths=["/js/"], **common
        ),
        SiteSettings(
            name="sample-looks", platform="looks", base_url=f"{base}/looks", look_paths=["/looks/"], **common
        ),
    ]
