"""Decoding in worker processes: a process that dies on one image costs only that image (I7)."""

from __future__ import annotations

import asyncio
import os

import pytest
from ingest_fixtures import jpeg

from lookbench_live.config import IngestSettings
from lookbench_live.scrapers.ingest.ingestor import Decoder
from lookbench_live.scrapers.ingest.validator import ImageRejected, ValidImage, validate_image

# A real parser crash (the CVE-2023-4863 class) cannot be shipped as a fixture; a validator
# that kills its process on one marked image stands in for it. Spawned workers import it
# from this module by name.
POISON = jpeg(200, 200, (1, 2, 3))


def dying_validate(data: bytes, settings: IngestSettings) -> ValidImage:
    if data == POISON:
        os._exit(70)  # like a segfault: no exception, no cleanup
    return validate_image(data, settings)


@pytest.mark.slow  # three process pools start (the pool, its replacement, the quarantine)
def test_a_worker_crash_is_isolated_to_its_image() -> None:
    settings = IngestSettings(min_side=32, workers=2)
    good = [jpeg(200, 200, (10 * i, 80, 160)) for i in range(10)]
    batch = [*good[:5], POISON, *good[5:]]

    async def run() -> list[ValidImage | BaseException]:
        decoder = Decoder(settings, validate=dying_validate)
        try:
            return await asyncio.gather(*(decoder.decode(d) for d in batch), return_exceptions=True)
        finally:
            decoder.close()

    results = asyncio.run(run())
    crashed = results[5]
    assert isinstance(crashed, ImageRejected) and crashed.reason == "decoder_crash"
    others = results[:5] + results[6:]
    assert all(isinstance(r, ValidImage) and r.width == 200 for r in others)


def test_rejections_cross_the_process_boundary() -> None:
    settings = IngestSettings(min_side=32, workers=1)

    async def run() -> tuple[ValidImage, BaseException | None]:
        decoder = Decoder(settings)
        try:
            valid = await decoder.decode(jpeg(120, 100))
            try:
                await decoder.decode(b"<html>")
            except ImageRejected as exc:
                return valid, exc
            return valid, None
        finally:
            decoder.close()

    valid, rejected = asyncio.run(run())
    assert (valid.width, valid.height, valid.format) == (120, 100, "JPEG")
    assert isinstance(rejected, ImageRejected) and rejected.reason == "not_an_image"


def _decode_inside_a_daemon(queue: object) -> None:
    async def run() -> tuple[bool, int]:
        decoder = Decoder(IngestSettings(min_side=32, workers=2))
        try:
            return decoder.in_processes, (await decoder.decode(jpeg(90, 90))).width
        finally:
            decoder.close()

    queue.put(asyncio.run(run()))  # type: ignore[attr-defined]


def test_daemonic_hosts_decode_in_threads() -> None:
    # Dask worker processes are daemonic and may not start children.
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=_decode_inside_a_daemon, args=(queue,), daemon=True)
    process.start()
    result = queue.get(timeout=60)
    process.join(timeout=10)
    assert result == (False, 90)
