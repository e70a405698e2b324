"""Image ingestion: fetch, validate by decoding, hash, store by sha256, one `images` row per request.

`ingest_images` is what the flow calls. What a caller may rely on:
- Accounting (I12): every request ends as exactly one row of `images` (status `ok`, or
  `rejected` with a machine-readable `rejection_reason`), or is counted in
  `skipped_existing` because its row already exists (or it repeats another request of the
  batch); `ok + Σ rejected_by_reason + skipped_existing == len(requests)`.
- Resume: rows are committed every `shard_size` URLs; a killed run, rerun, fetches only
  what has no row yet. Image bytes are stored before their row, content-addressed, so a
  rerun never duplicates them.
- A URL shared by several owners is fetched once and gives each owner its row.
- Stored bytes are the original bytes (so the sha256 names what the retailer served); no
  metadata (EXIF, XMP, PNG text, GPS) is copied into any table, and the release
  re-encodes pixels only (see docs/ingestion.md).
- Fetching runs on one event loop in this process (`concurrency` requests in flight, one
  keep-alive HTTP/1.1 client, hosts paced); decoding, hashing, metadata stripping and
  writing the file run in `workers` bounded child processes (default 2, see `workers`).
  A decoder that kills its process, hangs or runs out of memory (I7) costs only that
  image (`decoder_crash` / `decode_timeout`) and the batch continues. `workers = 0`
  decodes in threads of this process instead (no isolation; for tests and tiny batches).
- Durability per batch: files are written without a per-image fsync and made durable all
  at once before the rows that name them are committed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from lookbench_live import activity, interrupt
from lookbench_live.config import DEFAULT_CONTACT_URL, IngestSettings
from lookbench_live.ingest.downloader import FetchFailed, ImageDownloader
from lookbench_live.ingest.pending import ImageRequest
from lookbench_live.ingest.validator import validate_image
from lookbench_live.ingest.workers import (
    DecodePool,
    Processed,
    Refused,
    Validate,
    WorkersUnavailable,
    process_image,
    sync_paths,
)
from lookbench_live.network.netguard import NO_PRIVATE, PrivateAllowance
from lookbench_live.schema.hashing import ImageHashes
from lookbench_live.schema.records import ImageRecord, utcnow
from lookbench_live.warehouse.lake import Lake


class IngestAborted(RuntimeError):
    """The run cannot go on (the lake refuses writes, decode processes cannot start).

    Not a property of any image, so no image gets a row for it: outcomes finished before
    the abort are committed, and a rerun continues with the rest.
    """


@dataclass
class IngestResult:
    """Counts of one `ingest_images` call."""

    ok: int = 0
    rejected_by_reason: dict[str, int] = field(default_factory=dict)
    skipped_existing: int = 0

    @property
    def rejected(self) -> int:
        return sum(self.rejected_by_reason.values())

    @property
    def total(self) -> int:
        return self.ok + self.rejected + self.skipped_existing


@dataclass(slots=True)
class Outcome:
    """What became of one URL (shared by every request of that URL)."""

    url: str
    status: str  # ok | rejected
    fetched_at: Any
    reason: str | None = None
    detail: str | None = None
    final_url: str | None = None
    sha256: str | None = None
    width: int | None = None
    height: int | None = None
    format: str | None = None
    byte_size: int | None = None
    hashes: ImageHashes | None = None
    path: str | None = None  # the image file this run wrote, to make durable before the row commits


class Decoder:
    """Validates, hashes, strips and (for a local lake) stores fetched bytes.

    In `workers` bounded child processes (`workers.DecodePool`: per-image deadline, memory
    and CPU limits, a crashed or hung worker replaced and only its image rejected), or with
    `workers = 0` in threads of this process (no isolation; for tests and tiny batches).
    `validate` must be importable by name (it is sent to the workers).
    """

    def __init__(
        self, settings: IngestSettings, validate: Validate = validate_image, lake: Lake | None = None
    ):
        self.settings = settings
        self.validate = validate
        # The fast path writes files itself (no fsync per image, see `_ingest_urls`); a Lake
        # subclass or an object store gets the bytes back and stores them through `put_image`.
        self.lake_root = (
            lake.root if lake is not None and lake.local and type(lake).put_image is Lake.put_image else None
        )
        self._image_path = Lake(self.lake_root).image_path if self.lake_root is not None else None
        self.in_processes = settings.workers > 0
        self._pool = (
            DecodePool(settings, settings.workers, validate=validate, lake_home=self.lake_root)
            if self.in_processes
            else None
        )

    async def process(self, data: bytes) -> Processed | Refused:
        if self._pool is None:
            # Pillow decodes without holding the GIL: a thread keeps the loop fetching.
            return await asyncio.to_thread(
                process_image, data, self.settings, self.validate, self._image_path
            )
        try:
            return await self._pool.process(data)
        except WorkersUnavailable as exc:
            raise IngestAborted(
                f"decode processes cannot start ({exc}); set ingest.workers = 0 to decode in threads"
            ) from exc

    async def aclose(self) -> None:
        if self._pool is not None:
            await self._pool.aclose()


async def _ingest_url(
    downloader: ImageDownloader,
    decoder: Decoder,
    store: Callable[[bytes], Awaitable[str]],
    url: str,
    private_hosts: PrivateAllowance,
    min_delay: float = 0.0,
) -> Outcome:
    fetched_at = utcnow()
    try:
        fetched = await downloader.fetch(url, private_hosts=private_hosts, min_delay=min_delay)
    except FetchFailed as exc:
        return Outcome(url, "rejected", fetched_at, reason=exc.reason, detail=exc.detail)
    final_url = fetched.url if fetched.url != url else None
    result = await decoder.process(fetched.data)
    if isinstance(result, Refused):
        return Outcome(
            url, "rejected", fetched_at, reason=result.reason, detail=result.detail, final_url=final_url
        )
    # Stored only once the decode succeeded: the lake holds no bytes that failed validation.
    if result.data is not None:
        try:
            sha = await store(result.data)
        except Exception as exc:  # disk full, permissions, object store down: the run stops
            raise IngestAborted(f"storing an image in the lake failed: {type(exc).__name__}: {exc}") from exc
    else:
        sha = result.sha256
    valid = result.valid
    return Outcome(
        url,
        "ok",
        fetched_at,
        final_url=final_url,
        sha256=sha,
        width=valid.width,
        height=valid.height,
        format=valid.format,
        byte_size=result.byte_size,
        hashes=valid.hashes,
        path=result.path,
        detail=result.note,
    )


async def _ingest_urls(
    lake: Lake,
    settings: IngestSettings,
    urls: Sequence[str],
    on_batch: Callable[[list[Outcome]], None] | None = None,
    private_hosts: Mapping[str, PrivateAllowance] | None = None,
    delays: Mapping[str, float] | None = None,
    contact: str = DEFAULT_CONTACT_URL,
) -> list[Outcome]:
    """Ingest `urls` with `concurrency` fetches in flight; hands every `shard_size` outcomes to `on_batch`.

    Durability per batch: image files written by the fast path are not fsynced one by one;
    before a batch's rows are handed to `on_batch` (which commits them), every file the
    batch wrote is made durable (`sync_paths`). So a crash loses nothing that a committed
    row names, and a rerun rewrites any file that a crash left short.
    """
    outcomes: list[Outcome] = []
    batch: list[Outcome] = []
    queue = iter(urls)
    decoder = Decoder(settings, lake=lake)
    hosts_of = private_hosts or {}
    loop = asyncio.get_running_loop()
    commit_lock = asyncio.Lock()
    # Only for object stores and Lake subclasses (the fast path writes in the decoders).
    storers = concurrent.futures.ThreadPoolExecutor(
        min(settings.concurrency, 16), thread_name_prefix="ingest-store"
    )

    async def store(data: bytes) -> str:
        return await loop.run_in_executor(storers, lake.put_image, data)

    def durable_commit(ready: list[Outcome]) -> None:
        sync_paths([o.path for o in ready if o.path is not None])
        if on_batch is not None:
            on_batch(ready)

    delay_of = delays or {}
    async with ImageDownloader(settings, contact=contact) as downloader:

        async def worker() -> None:
            for url in queue:  # the shared iterator hands each URL to exactly one worker
                # A safe point: after a signal no fetch begins; the finished ones are committed.
                interrupt.check("ingest")
                try:
                    outcome = await _ingest_url(
                        downloader, decoder, store, url, hosts_of.get(url, NO_PRIVATE), delay_of.get(url, 0.0)
                    )
                except IngestAborted:
                    raise
                except Exception as exc:  # a bug must not lose the URL's row or stop the batch
                    outcome = Outcome(
                        url, "rejected", utcnow(), reason="internal_error", detail=repr(exc)[:500]
                    )
                outcomes.append(outcome)
                activity.count("images fetched")
                batch.append(outcome)
                if len(batch) >= settings.shard_size:
                    ready = batch[:]
                    batch.clear()
                    # In a thread: syncing and writing Parquet must not stall the fetches.
                    async with commit_lock:
                        await asyncio.to_thread(durable_commit, ready)

        try:
            await asyncio.gather(*(worker() for _ in range(min(settings.concurrency, len(urls)) or 1)))
        finally:
            await decoder.aclose()
            storers.shutdown(wait=True)
            # Finished outcomes are committed even when the run aborts.
            if batch:
                async with commit_lock:
                    durable_commit(batch)
    return outcomes


def _run(coro_factory: Callable[[], Any]) -> Any:
    """Run a coroutine to completion, also when the caller already runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro_factory())
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: asyncio.run(coro_factory())).result()


def _records(requests: Iterable[ImageRequest], outcome: Outcome, run_id: str) -> list[ImageRecord]:
    rows = []
    for request in requests:
        hashes = outcome.hashes
        rows.append(
            ImageRecord(
                source_url=request.url,
                owner_kind=request.owner_kind,
                owner_id=request.owner_id,
                source=request.source,
                position=request.position,
                status="ok" if outcome.status == "ok" else "rejected",
                rejection_reason=outcome.reason,
                detail=outcome.detail,
                sha256=outcome.sha256,
                width=outcome.width,
                height=outcome.height,
                format=outcome.format,
                byte_size=outcome.byte_size,
                phash=hashes.phash if hashes else None,
                phash_mirror=hashes.phash_mirror if hashes else None,
                dhash=hashes.dhash if hashes else None,
                hash_method=hashes.method if hashes else None,
                fetched_at=outcome.fetched_at,
                first_seen_at=request.first_seen_at,
                published_at=request.published_at,
                final_url=outcome.final_url,
                run_id=run_id,
            )
        )
    return rows


class _Committer:
    """Turns URL outcomes into rows of every request of that URL and appends them to the lake."""

    def __init__(self, lake: Lake, by_url: dict[str, list[ImageRequest]], run_id: str, result: IngestResult):
        self.lake = lake
        self.by_url = by_url
        self.run_id = run_id
        self.result = result
        self.counts: Counter[str] = Counter()

    def __call__(self, outcomes: list[Outcome]) -> None:
        rows: list[ImageRecord] = []
        for outcome in outcomes:
            requests = self.by_url[outcome.url]
            rows.extend(_records(requests, outcome, self.run_id))
            if outcome.status == "ok":
                self.result.ok += len(requests)
            else:
                self.counts[outcome.reason or "unknown"] += len(requests)
        self.lake.append(rows)
        self.result.rejected_by_reason = dict(sorted(self.counts.items()))


def ingest_images(
    lake: Lake,
    settings: IngestSettings,
    requests: Sequence[ImageRequest],
    run_id: str,
    *,
    private_hosts: Mapping[str, PrivateAllowance] | None = None,
    site_delays: Mapping[str, float] | None = None,
    contact: str = DEFAULT_CONTACT_URL,
) -> IngestResult:
    """Fetch, validate, hash and store the images of `requests`; one `images` row per request.

    Requests whose row already exists are skipped (counted in `skipped_existing`).
    Returns the counts; `ok + rejected + skipped_existing == len(requests)`.
    `private_hosts`: per source (site name), the origins its images may be fetched from at
    private addresses (`downloader.site_private_hosts(settings.crawl.sites)`); every other
    private address stays refused unless `settings.allow_private_addresses`.
    `site_delays`: per source, its `download_delay` (`downloader.site_download_delays`), the
    least time between requests to the hosts of its images; `contact`: `crawl.contact_url`,
    filled into the user agent.
    """
    result = IngestResult()
    # Only the requests' own keys are looked up (the lake's key index), never the whole column.
    existing = lake.stored_keys(
        "images",
        pa.table(
            {
                "owner_kind": [r.owner_kind for r in requests],
                "owner_id": [r.owner_id for r in requests],
                "source_url": [r.url for r in requests],
            }
        ),
    )
    by_url: dict[str, list[ImageRequest]] = {}
    seen: set[tuple[str, str, str]] = set()
    for request in requests:
        key = request.key()
        if key in existing or key in seen:
            result.skipped_existing += 1
            continue
        seen.add(key)
        by_url.setdefault(request.url, []).append(request)
    if not by_url:
        return result
    urls = list(by_url)
    allowed: dict[str, PrivateAllowance] = {}
    if private_hosts:
        for url, owners in by_url.items():
            hosts = NO_PRIVATE
            for r in owners:
                hosts = hosts | private_hosts.get(r.source, NO_PRIVATE)
            if hosts:
                allowed[url] = hosts
    delays: dict[str, float] = {}
    if site_delays:
        for url, owners in by_url.items():
            delay = max((site_delays.get(r.source, 0.0) for r in owners), default=0.0)
            if delay > 0:
                delays[url] = delay
    commit = _Committer(lake, by_url, run_id, result)
    _run(
        lambda: _ingest_urls(
            lake, settings, urls, on_batch=commit, private_hosts=allowed, delays=delays, contact=contact
        )
    )
    return result
