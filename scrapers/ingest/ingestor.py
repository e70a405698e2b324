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
- Fetching runs on one event loop in this process (`concurrency` requests in flight);
  decoding runs in `workers` spawned processes (default 2); bytes are stored from threads.
  A decoder that kills its process (I7) costs only that image: it is recorded
  `decoder_crash` and the batch continues. `workers = 0` decodes in threads of this
  process instead (no isolation; for tests and tiny batches).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import multiprocessing
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Sequence
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any

from lookbench_live.config import IngestSettings
from lookbench_live.schema.hashing import ImageHashes
from lookbench_live.schema.records import ImageRecord, utcnow
from lookbench_live.scrapers.ingest.downloader import FetchFailed, ImageDownloader
from lookbench_live.scrapers.ingest.metadata import MetadataError, strip_metadata
from lookbench_live.scrapers.ingest.pending import ImageRequest
from lookbench_live.scrapers.ingest.validator import ImageRejected, ValidImage, validate_image
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


Validate = Callable[[bytes, IngestSettings], ValidImage]

# Decode-process state, set once per worker by the pool initializer (not pickled per image).
_WORKER_STATE: tuple[IngestSettings, Validate] | None = None


def _init_worker(settings: IngestSettings, validate: Validate) -> None:
    global _WORKER_STATE
    _WORKER_STATE = (settings, validate)


def _decode_in_worker(data: bytes) -> ValidImage | tuple[str, str]:
    assert _WORKER_STATE is not None, "decode worker used without its initializer"
    settings, validate = _WORKER_STATE
    try:
        return validate(data, settings)
    except ImageRejected as exc:
        # Returned, not raised: the exception's signature does not survive pickling.
        return exc.reason, exc.detail


def _ping() -> bool:
    return True


class Decoder:
    """Validates fetched bytes by decoding: in threads (`workers = 0`) or in `workers` processes.

    With processes, a decoder that kills its process (I7) breaks the pool: the pool is
    replaced, and every image that was in flight is decoded again alone in a one-process
    quarantine pool, so only the image that kills it is rejected `decoder_crash`. A pool
    must answer a ping before it gets images, so processes that cannot start at all raise
    `IngestAborted` instead of blaming images. `validate` must be a module-level function
    (it is sent to spawned processes).
    """

    def __init__(self, settings: IngestSettings, validate: Validate = validate_image):
        self.settings = settings
        self.validate = validate
        self._context = multiprocessing.get_context("spawn")  # never fork a process that holds threads
        # A daemonic process (a Dask worker, a pool worker) may not have children; there the
        # hosting process is the isolation unit and decoding runs in threads.
        self.in_processes = settings.workers > 0 and not multiprocessing.current_process().daemon
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None
        self._quarantine: concurrent.futures.ProcessPoolExecutor | None = None
        self._start_lock = asyncio.Lock()
        self._quarantine_lock = asyncio.Lock()

    async def _started(self, size: int) -> concurrent.futures.ProcessPoolExecutor:
        pool = concurrent.futures.ProcessPoolExecutor(
            size, mp_context=self._context, initializer=_init_worker, initargs=(self.settings, self.validate)
        )
        try:
            await asyncio.get_running_loop().run_in_executor(pool, _ping)
        except Exception as exc:  # BrokenProcessPool, RuntimeError, OSError: no process could start
            pool.shutdown(wait=False, cancel_futures=True)
            # Typically a caller's main module without `if __name__ == "__main__":`, which
            # spawned processes re-import; or no memory for new processes.
            detail = " ".join(str(exc).split()) or type(exc).__name__
            raise IngestAborted(
                f"decode processes cannot start ({detail}); set ingest.workers = 0 to decode in threads"
            ) from exc
        return pool

    async def _running_pool(self) -> concurrent.futures.ProcessPoolExecutor:
        async with self._start_lock:
            if self._pool is None:
                self._pool = await self._started(self.settings.workers)
            return self._pool

    async def decode(self, data: bytes) -> ValidImage:
        """The facts and hashes of valid image bytes; raises `ImageRejected` with the reason."""
        if not self.in_processes:
            # Pillow decodes without holding the GIL: a thread keeps the loop fetching.
            return await asyncio.to_thread(self.validate, data, self.settings)
        pool = await self._running_pool()
        try:
            result = await asyncio.get_running_loop().run_in_executor(pool, _decode_in_worker, data)
        except BrokenProcessPool:
            async with self._start_lock:
                if self._pool is pool:
                    self._pool = None  # the next image starts (and pings) a fresh pool
                    pool.shutdown(wait=False, cancel_futures=True)
            result = await self._decode_alone(data)
        if isinstance(result, tuple):
            raise ImageRejected(*result)
        return result

    async def _decode_alone(self, data: bytes) -> ValidImage | tuple[str, str]:
        async with self._quarantine_lock:
            if self._quarantine is None:
                self._quarantine = await self._started(1)
            try:
                return await asyncio.get_running_loop().run_in_executor(
                    self._quarantine, _decode_in_worker, data
                )
            except BrokenProcessPool:
                self._quarantine.shutdown(wait=False, cancel_futures=True)
                self._quarantine = None
                return "decoder_crash", "the decoding process died on this image (decoded alone)"

    def close(self) -> None:
        for pool in (self._pool, self._quarantine):
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)


async def _ingest_url(
    downloader: ImageDownloader,
    decoder: Decoder,
    store: Callable[[bytes], Awaitable[str]],
    url: str,
    lane: int,
) -> Outcome:
    fetched_at = utcnow()
    try:
        fetched = await downloader.fetch(url, lane)
    except FetchFailed as exc:
        return Outcome(url, "rejected", fetched_at, reason=exc.reason, detail=exc.detail)
    final_url = fetched.url if fetched.url != url else None
    try:
        valid = await decoder.decode(fetched.data)
    except ImageRejected as exc:
        return Outcome(url, "rejected", fetched_at, reason=exc.reason, detail=exc.detail, final_url=final_url)
    # Metadata (EXIF GPS, XMP, text chunks) never enters the lake; pixel data is kept byte for byte.
    try:
        data = strip_metadata(fetched.data, valid.format)
    except MetadataError as exc:
        return Outcome(
            url, "rejected", fetched_at, reason="malformed_container", detail=str(exc), final_url=final_url
        )
    # Stored only once the decode succeeded: the lake holds no bytes that failed validation.
    try:
        sha = await store(data)
    except (
        Exception
    ) as exc:  # disk full, permissions, object store down: the run stops, the image is not at fault
        raise IngestAborted(f"storing an image in the lake failed: {type(exc).__name__}: {exc}") from exc
    return Outcome(
        url,
        "ok",
        fetched_at,
        final_url=final_url,
        sha256=sha,
        width=valid.width,
        height=valid.height,
        format=valid.format,
        byte_size=len(data),
        hashes=valid.hashes,
    )


async def _ingest_urls(
    lake: Lake,
    settings: IngestSettings,
    urls: Sequence[str],
    on_batch: Callable[[list[Outcome]], None] | None = None,
) -> list[Outcome]:
    """Ingest `urls` with `concurrency` fetches in flight; hands every `shard_size` outcomes to `on_batch`."""
    outcomes: list[Outcome] = []
    batch: list[Outcome] = []
    queue = iter(urls)
    decoder = Decoder(settings)
    # The lake fsyncs every image (file and folder): many threads overlap those waits.
    storers = concurrent.futures.ThreadPoolExecutor(settings.concurrency, thread_name_prefix="ingest-store")
    loop = asyncio.get_running_loop()

    async def store(data: bytes) -> str:
        return await loop.run_in_executor(storers, lake.put_image, data)

    async with ImageDownloader(settings) as downloader:

        async def worker(lane: int) -> None:
            for url in queue:  # the shared iterator hands each URL to exactly one worker
                try:
                    outcome = await _ingest_url(downloader, decoder, store, url, lane)
                except IngestAborted:
                    raise
                except Exception as exc:  # a bug must not lose the URL's row or stop the batch
                    outcome = Outcome(
                        url, "rejected", utcnow(), reason="internal_error", detail=repr(exc)[:500]
                    )
                outcomes.append(outcome)
                if on_batch is not None:
                    batch.append(outcome)
                    if len(batch) >= settings.shard_size:
                        ready = batch[:]
                        batch.clear()
                        on_batch(ready)

        try:
            await asyncio.gather(*(worker(lane) for lane in range(min(settings.concurrency, len(urls)) or 1)))
        finally:
            decoder.close()
            storers.shutdown(wait=True)
            # Finished outcomes are committed even when the run aborts.
            if on_batch is not None and batch:
                on_batch(batch)
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
    lake: Lake, settings: IngestSettings, requests: Sequence[ImageRequest], run_id: str
) -> IngestResult:
    """Fetch, validate, hash and store the images of `requests`; one `images` row per request.

    Requests whose row already exists are skipped (counted in `skipped_existing`).
    Returns the counts; `ok + rejected + skipped_existing == len(requests)`.
    """
    result = IngestResult()
    existing = lake.keys("images")
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
    commit = _Committer(lake, by_url, run_id, result)
    _run(lambda: _ingest_urls(lake, settings, urls, on_batch=commit))
    return result
