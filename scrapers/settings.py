"""Scrapy settings for lookbench-live crawls, as data, and their per-site overrides.

`BASE_SETTINGS` holds what never changes; `crawl_settings()` adds one site's politeness and
limits from the config (`CrawlSettings`, `SiteSettings`).
"""

from __future__ import annotations

import shutil
from typing import Any
from urllib.parse import urlsplit

from lookbench_live.config import CrawlSettings, SiteSettings, agent_string
from lookbench_live.network import limits
from lookbench_live.network.netguard import PrivateAllowance

BOT_NAME = limits.BOT_NAME

BASE_SETTINGS: dict[str, Any] = {
    "BOT_NAME": BOT_NAME,
    "SPIDER_MODULES": ["lookbench_live.scrapers.spiders"],
    # Our own robots gate replaces Scrapy's, which fails open (docs/reliability.md C1–C3).
    "ROBOTSTXT_OBEY": False,
    "COOKIES_ENABLED": False,
    # No listening sockets in a crawler process (telnet console, remote-control HTTP server).
    "TELNETCONSOLE_ENABLED": False,
    "REMOTE_CONTROL_ENABLED": False,
    "TWISTED_REACTOR": "twisted.internet.asyncioreactor.AsyncioSelectorReactor",
    "LOG_LEVEL": "INFO",
    "DNSCACHE_ENABLED": True,
    # Twisted connects to the address the guard checked, never to a second lookup.
    "TWISTED_DNS_RESOLVER": "lookbench_live.scrapers.resolver.PinnedResolver",
    "REDIRECT_MAX_TIMES": 5,
    "METAREFRESH_MAXDELAY": 30,
    # Only transient failures are retried (C10, C11): never 404/410/451.
    "RETRY_ENABLED": True,
    "RETRY_HTTP_CODES": [408, 429, 500, 502, 503, 504, 522, 524],
    "DOWNLOADER_MIDDLEWARES": {
        "lookbench_live.scrapers.middlewares.AddressGuardMiddleware": 50,
        "lookbench_live.scrapers.middlewares.RobotsGateMiddleware": 100,
        "lookbench_live.scrapers.middlewares.HostPacingMiddleware": 600,
        # Offsite requests are refused, and recorded, by the address guard.
        "scrapy.downloadermiddlewares.offsite.OffsiteMiddleware": None,
    },
    "ITEM_PIPELINES": {"lookbench_live.scrapers.pipelines.LakePipeline": 300},
    # Scrapy (2.13+, asyncio reactor) starts CONCURRENT_ITEMS worker tasks for every callback's
    # output, however little it yields: 100 by default, ~1 ms of CPU per response. Our pipeline
    # and request scheduling never wait on I/O, so a few workers process the same output.
    "CONCURRENT_ITEMS": 4,
}


def user_agent(crawl: CrawlSettings) -> str:
    return agent_string(crawl.user_agent, crawl.contact_url)


def allowed_hosts(site: SiteSettings) -> list[str]:
    parts = urlsplit(site.base_url)
    host = (parts.hostname or "").lower()
    return [host + (f":{parts.port}" if parts.port else "")]


def site_authorities(site: SiteSettings) -> set[str]:
    """The site's own `host:port` (default port spelled out), as the browser proxy compares them.

    The origin comes from `netguard.PrivateAllowance`, the one rule for private allowances."""
    allowance = PrivateAllowance.for_site(site.base_url)
    return {f"{host}:{port}" for _, host, port in allowance.origins}


def chromium_path() -> str:
    """Debian's chromium, or a clear error saying how to install it."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        raise RuntimeError(
            "the playwright spider needs Debian's chromium, which is not installed: "
            "run `apt-get install -y chromium` (playwright's own `playwright install` cannot work offline)"
        )
    return path


def crawl_settings(
    site: SiteSettings,
    crawl: CrawlSettings,
    *,
    lake_home: str,
    run_key: str,
    state_dir: str,
    browser_proxy_port: int | None = None,
) -> dict[str, Any]:
    """All Scrapy settings of one site's crawl.

    A playwright site needs `browser_proxy_port`, the port of the crawl's `BrowserProxy`
    (browser_guard.py): Chromium reaches the network only through it."""
    settings = dict(BASE_SETTINGS)
    settings.update(
        {
            "USER_AGENT": user_agent(crawl),
            "LOOKBENCH_ROBOTS_AGENT": BOT_NAME,
            "LOOKBENCH_OBEY_ROBOTS": crawl.obey_robots,
            "LOOKBENCH_ROBOTS_MAX_BYTES": crawl.robots_max_bytes,
            "LOOKBENCH_ROBOTS_ERROR_TTL": crawl.robots_error_ttl,
            "LOOKBENCH_MAX_CRAWL_DELAY": crawl.max_crawl_delay,
            "LOOKBENCH_MAX_RETRY_AFTER": crawl.max_retry_after,
            "LOOKBENCH_MAX_HOST_FAILURES": crawl.max_host_failures,
            # The resolver's fallback for names the guard has not pinned (the guard decides per origin).
            "LOOKBENCH_ALLOW_PRIVATE": site.allow_private_addresses,
            # The same origin rule as image and robots fetches (netguard.PrivateAllowance).
            "LOOKBENCH_PRIVATE_ORIGINS": PrivateAllowance.for_site(site.base_url, site.image_hosts).as_urls()
            if site.allow_private_addresses
            else [],
            "LOOKBENCH_ALLOWED_HOSTS": allowed_hosts(site),
            "LOOKBENCH_LAKE": lake_home,
            "LOOKBENCH_SOURCE": site.name,
            "LOOKBENCH_RUN_KEY": run_key,
            "LOOKBENCH_STATE_DIR": state_dir,
            "LOOKBENCH_BATCH_SIZE": crawl.batch_size,
            "LOOKBENCH_MAX_SITEMAP_URLS": crawl.max_sitemap_urls,
            "AUTOTHROTTLE_ENABLED": crawl.autothrottle,
            "AUTOTHROTTLE_START_DELAY": max(site.download_delay, 0.1) if crawl.autothrottle else 0,
            "AUTOTHROTTLE_MAX_DELAY": max(60.0, site.download_delay),
            "AUTOTHROTTLE_TARGET_CONCURRENCY": float(site.concurrency),
            "CONCURRENT_REQUESTS": max(16, site.concurrency),
            "CONCURRENT_REQUESTS_PER_DOMAIN": site.concurrency,
            "DOWNLOAD_DELAY": site.download_delay,
            "DOWNLOAD_DELAY_JITTER": 0.5 if site.download_delay > 0 else 0,
            "DOWNLOAD_TIMEOUT": crawl.download_timeout,
            "DOWNLOAD_MAXSIZE": crawl.download_maxsize,
            "DOWNLOAD_WARNSIZE": min(crawl.download_maxsize, limits.PAGE_MAX_BYTES),
            "RETRY_TIMES": crawl.retry_times,
            # The time budget: Scrapy closes the spider cleanly (finish_reason closespider_timeout).
            "CLOSESPIDER_TIMEOUT": site.max_duration or 0,
        }
    )
    if site.platform == "playwright":
        from lookbench_live.scrapers.browser_guard import browser_env, chromium_args, sandbox_available

        if browser_proxy_port is None:
            raise ValueError("a playwright crawl needs the browser proxy (browser_guard.BrowserProxy)")
        timeout_ms = int(crawl.download_timeout * 1000)
        sandbox = sandbox_available()
        settings.update(
            {
                "DOWNLOAD_HANDLERS": {
                    # scrapy-playwright's handler plus a render deadline that ends the page (render.py).
                    "http": "lookbench_live.scrapers.render.GuardedPlaywrightHandler",
                    "https": "lookbench_live.scrapers.render.GuardedPlaywrightHandler",
                },
                # Navigation gets DOWNLOAD_TIMEOUT; the whole render (content, close) twice that, then
                # the page's context is closed and the request recorded once as `render_timeout`.
                "LOOKBENCH_RENDER_DEADLINE": 2 * crawl.download_timeout + 5,
                "PLAYWRIGHT_BROWSER_TYPE": "chromium",
                "PLAYWRIGHT_LAUNCH_OPTIONS": {
                    "executable_path": chromium_path(),
                    "args": chromium_args(browser_proxy_port, sandbox=sandbox),
                    "chromium_sandbox": sandbox,
                    # Only what Chromium needs: no AWS_*, no API keys (X3).
                    "env": browser_env(),
                    "headless": True,
                    "timeout": timeout_ms,
                },
                # One Chromium for both scheme handlers, launched at the first render, not at engine
                # start (no startup context: each render has its own, service workers blocked,
                # spiders/playwright_pages.py), so a crawl starts at most one browser.
                "PLAYWRIGHT_BROWSER_PROVIDER": "lookbench_live.scrapers.render.SharedBrowserProvider",
                "PLAYWRIGHT_DEFAULT_NAVIGATION_TIMEOUT": timeout_ms,
                "PLAYWRIGHT_MAX_PAGES_PER_CONTEXT": max(1, min(site.concurrency, 4)),
                # Sub-requests of a page bypass Scrapy's middlewares (scrapy-playwright README):
                # each one goes through the address guard here.
                "PLAYWRIGHT_ABORT_REQUEST": "lookbench_live.scrapers.spiders.playwright_pages.abort_request",
            }
        )
    return settings
