"""Bounded decode workers (I7): a worker that dies, hangs or runs out of memory costs only its image.

A real parser crash or hang (the CVE-2023-4863 class) cannot be shipped as a fixture; a
validator that misbehaves on one marked image stands in for it. Workers import it from this
module by name (it is pickled by reference), so it runs inside the real worker processes
under the real limits.
"""

from __future__ import annotations

import asyncio
import os
import time

import pytest
from ingest_fixtures import jpeg

from lookbench_live.config import IngestSettings
from lookbench_live.ingest.ingestor import Decoder
from lookbench_live.ingest.validator import ImageRejected, ValidImage, validate_image
from lookbench_live.ingest.workers import DecodePool, Processed, Refused

POISON = jpeg(200, 200, (1, 2, 3))
GOOD = [jpeg(200, 200, (10 * i, 80, 160)) for i in range(10)]


def dying_validate(data: bytes, settings: IngestSettings) -> ValidImage:
    if data == POISON:
        os.abort()  # like a segfault: no exception, no cleanup
    return validate_image(data, settings)


def hanging_validate(data: bytes, settings: IngestSettings) -> ValidImage:
    if data == POISON:
        time.sleep(3600)  # a decoder stuck forever
    return validate_image(data, settings)


def spinning_validate(data: bytes, settings: IngestSettings) -> ValidImage:
    if data == POISON:
        while True:  # a decoder burning CPU in a loop
            pass
    return validate_image(data, settings)


def hogging_validate(data: bytes, settings: IngestSettings) -> ValidImage:
    if data == POISON:
        blocks = [bytearray(256 * 1024 * 1024) for _ in range(64)]  # 16 GB, touched lazily
        return blocks  # type: ignore[return-value]
    return validate_image(data, settings)


def env_validate(data: bytes, settings: IngestSettings) -> ValidImage:
    raise ImageRejected("decode_error", ",".join(sorted(os.environ)))


def pipe_validate(data: bytes, settings: IngestSettings) -> ValidImage:
    import fcntl

    raise ImageRejected("decode_error", str(fcntl.fcntl(0, fcntl.F_GETPIPE_SZ)))  # the worker's inbox


def run_batch(settings: IngestSettings, validate, batch: list[bytes]) -> list[Processed | Refused]:
    async def run() -> list[Processed | Refused]:
        pool = DecodePool(settings, settings.workers, validate=validate)
        try:
            return list(await asyncio.gather(*(pool.process(d) for d in batch)))
        finally:
            await pool.aclose()

    return asyncio.run(run())


def assert_only_poison_refused(results: list[Processed | Refused], reason: str) -> None:
    poisoned = results[5]
    assert isinstance(poisoned, Refused) and poisoned.reason == reason, poisoned
    others = results[:5] + results[6:]
    assert all(isinstance(r, Processed) and r.valid.width == 200 for r in others), others


@pytest.mark.parametrize("workers", [1, 2])
def test_a_worker_crash_is_isolated_to_its_image(workers: int) -> None:
    # Images queued behind the poison in the same worker are decoded again, not blamed.
    settings = IngestSettings(min_side=32, workers=workers)
    results = run_batch(settings, dying_validate, [*GOOD[:5], POISON, *GOOD[5:]])
    assert_only_poison_refused(results, "decoder_crash")


@pytest.mark.parametrize("validate", [hanging_validate, spinning_validate], ids=["sleeping", "spinning"])
def test_a_hung_decoder_ends_as_decode_timeout_and_the_batch_finishes(validate) -> None:
    settings = IngestSettings(min_side=32, workers=2, decode_timeout=2.0)
    started = time.monotonic()
    results = run_batch(settings, validate, [*GOOD[:5], POISON, *GOOD[5:]])
    # Bounded: the poison's deadline plus starting one replacement worker, far below its hour.
    assert time.monotonic() - started < 60
    assert_only_poison_refused(results, "decode_timeout")


def test_a_decoder_allocating_gigabytes_is_stopped_by_the_memory_limit() -> None:
    settings = IngestSettings(min_side=32, workers=1, decode_memory_mb=256)
    results = run_batch(settings, hogging_validate, [*GOOD[:5], POISON, *GOOD[5:]])
    assert_only_poison_refused(results, "decoder_crash")
    assert "out of memory" in results[5].detail  # type: ignore[union-attr]


def test_rejections_cross_the_process_boundary() -> None:
    results = run_batch(IngestSettings(min_side=32, workers=1), validate_image, [jpeg(120, 100), b"<html>"])
    valid, rejected = results
    assert isinstance(valid, Processed)
    assert (valid.valid.width, valid.valid.height, valid.valid.format) == (120, 100, "JPEG")
    assert valid.data is not None and len(valid.data) == valid.byte_size  # no lake: bytes come back
    assert isinstance(rejected, Refused) and rejected.reason == "not_an_image"


def test_workers_get_no_credentials(monkeypatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "canary-aws")
    monkeypatch.setenv("OPENAI_API_KEY", "canary-openai")
    (result,) = run_batch(IngestSettings(workers=1), env_validate, [b"x"])
    assert isinstance(result, Refused)
    names = result.detail.split(",")
    assert "AWS_SECRET_ACCESS_KEY" not in names and "OPENAI_API_KEY" not in names
    assert "PYTHONPATH" in names


@pytest.mark.skipif(not hasattr(__import__("fcntl"), "F_GETPIPE_SZ"), reason="Linux pipes only")
def test_a_workers_inbox_holds_its_queue_of_images() -> None:
    """The pipe to a worker holds the images sent ahead to it (4 of ~80-100 kB): each goes in
    one write, not 64 KiB at a time with the worker waiting for the parent in between (measured
    +10 % images/s in bench/ingest_ab.py). Where pipe-max-size is lower, 64 KiB still works."""
    with open("/proc/sys/fs/pipe-max-size") as handle:
        limit = int(handle.read())
    (result,) = run_batch(IngestSettings(workers=1), pipe_validate, [b"x"])
    assert isinstance(result, Refused)
    # Above pipe-max-size only a privileged process may go; others keep the 64 KiB default.
    widened = limit >= 1 << 20 or os.geteuid() == 0
    assert int(result.detail) == (1 << 20 if widened else 65536)


def _decode_inside_a_daemon(queue: object) -> None:
    async def run() -> tuple[bool, int]:
        decoder = Decoder(IngestSettings(min_side=32, workers=2))
        try:
            result = await decoder.process(jpeg(90, 90))
            assert isinstance(result, Processed)
            return decoder.in_processes, result.valid.width
        finally:
            await decoder.aclose()

    queue.put(asyncio.run(run()))  # type: ignore[attr-defined]


def test_daemonic_hosts_still_decode_in_bounded_workers() -> None:
    # Dask worker processes are daemonic and may not start multiprocessing children; the
    # decode workers are plain subprocesses, so the I7 bounds hold there too.
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=_decode_inside_a_daemon, args=(queue,), daemon=True)
    process.start()
    result = queue.get(timeout=60)
    process.join(timeout=10)
    assert result == (True, 90)


def test_workers_store_images_where_the_lake_reads_them(tmp_path) -> None:
    """Workers name image files without importing the lake; the names must be the lake's own."""
    import hashlib
    import subprocess
    import sys

    from lookbench_live.ingest.workers import images_root, local_image_path
    from lookbench_live.warehouse.lake import Lake

    lake = Lake(str(tmp_path / "lake"))
    sha = hashlib.sha256(GOOD[0]).hexdigest()
    assert local_image_path(images_root(lake.home), sha) == lake.image_path(sha)
    with pytest.raises(ValueError):
        local_image_path(images_root(lake.home), "../" * 21 + "x")
    # And a worker's imports stay light: the lake (pyarrow.dataset, pandas) is not among them.
    probe = (
        "import sys; from lookbench_live.ingest.workers import _worker_main; print('pandas' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
