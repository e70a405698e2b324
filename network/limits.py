"""The network constants of every fetch path (crawl, ingest, the `extract` command): one home.

Settings (`config.CrawlSettings`, `config.IngestSettings`) take their defaults and bounds from
here, and code without a setting (the robots gate's fallbacks, the address guard's cache, the
`extract` command) reads these directly, so the crawl and ingest never drift apart.
"""

from __future__ import annotations

# Who we are: the robots.txt product token, and the user agent template (`{contact}` is
# `crawl.contact_url`, filled by `config.agent_string`).
BOT_NAME = "lookbench-live"
USER_AGENT = f"{BOT_NAME}/0.1 (+{{contact}})"

# Redirect hops followed by hand, each through the address guard (RFC 9309 and Nutch use 5).
MAX_REDIRECTS = 5
# How long a checked name's addresses are reused: the pin makes reuse safe, the TTL keeps DNS fresh.
RESOLUTION_TTL_S = 60.0

# A response's deadline (a crawl's download timeout, an image fetch's attempt, the robots gate's cap).
DOWNLOAD_TIMEOUT_S = 30.0
# robots.txt: RFC 9309 §2.5 asks crawlers to parse at least 500 KiB; a failed fetch disallows
# its host this long; a Crawl-delay above the maximum disallows the host.
ROBOTS_MAX_BYTES = 500 * 1024
ROBOTS_TIMEOUT_S = 10.0
ROBOTS_ERROR_TTL_S = 600.0
MAX_CRAWL_DELAY_S = 30.0

# Body size caps: a crawled page or JSON listing, an image.
PAGE_MAX_BYTES = 32 * 1024 * 1024
IMAGE_MAX_BYTES = 20 * 1024 * 1024
