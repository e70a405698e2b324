"""Image ingestion: fetch product and look images within limits, validate by decoding, store by sha256.

The flow calls `pending_image_requests(lake)` then `ingest_images(lake, settings, requests, run_id)`.
"""

from lookbench_live.scrapers.ingest.downloader import site_private_hosts
from lookbench_live.scrapers.ingest.ingestor import IngestAborted, IngestResult, ingest_images
from lookbench_live.scrapers.ingest.pending import ImageRequest, pending_image_requests

__all__ = [
    "ImageRequest",
    "IngestAborted",
    "IngestResult",
    "ingest_images",
    "pending_image_requests",
    "site_private_hosts",
]
