"""Image ingestion: fetch product and look images within limits, validate by decoding, store by sha256.

The flow calls `pending_image_requests(lake)` then `ingest_images(lake, settings, requests, run_id)`.

The names below are imported on first use (PEP 562): a decode worker imports
`lookbench_live.ingest.workers`, and importing the whole package eagerly would load
the lake (pyarrow.dataset, pandas) in every worker, about 0.5 s of CPU per worker start.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lookbench_live.ingest.downloader import site_download_delays, site_private_hosts
    from lookbench_live.ingest.ingestor import IngestAborted, IngestResult, ingest_images
    from lookbench_live.ingest.pending import ImageRequest, pending_image_requests

_HOMES = {
    "ImageRequest": "pending",
    "IngestAborted": "ingestor",
    "IngestResult": "ingestor",
    "ingest_images": "ingestor",
    "pending_image_requests": "pending",
    "site_download_delays": "downloader",
    "site_private_hosts": "downloader",
}

__all__ = [
    "ImageRequest",
    "IngestAborted",
    "IngestResult",
    "ingest_images",
    "pending_image_requests",
    "site_download_delays",
    "site_private_hosts",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value
