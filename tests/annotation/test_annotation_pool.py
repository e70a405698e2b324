"""Annotation over several vLLM endpoints: balanced, a dead one drained, nothing lost or duplicated."""

from __future__ import annotations

import asyncio
import collections
import threading
import time
from pathlib import Path

import pytest
from annotation_fixtures import build_lake

from lookbench_live.annotation.endpoint import ChatEndpoint, EndpointUnavailable
from lookbench_live.annotation.pool import EndpointPool
from lookbench_live.annotation.run import AnnotationError, run_annotation
from lookbench_live.config import AnnotationSettings
from lookbench_live.schema.taxonomy import default_taxonomy
from lookbench_live.testing.loopback_server import LoopbackServer, free_port

# The endpoint asks for strict mode, so even a test schema must fit OpenAI's strict subset.
STRICT_SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "string", "enum": ["x"]}},
    "required": ["a"],
    "additionalProperties": False,
}

TAXONOMY = default_taxonomy()


@pytest.fixture
def fx(tmp_path: Path):
    return build_lake(tmp_path / "lake", extra_products=24)


def settings(*urls: str, **overrides) -> AnnotationSettings:
    values = dict(
        base_urls=list(urls),
        model="m",
        timeout=2,
        max_retries=2,
        retry_base_delay=0.01,
        retry_max_delay=0.05,
        concurrency=2,
        endpoint_cooloff=60,
    )
    values.update(overrides)
    return AnnotationSettings(**values)


def work_done(lake) -> collections.Counter:
    return collections.Counter((a.sha256, a.bbox, a.task) for a in lake.records("annotations"))


def test_both_endpoints_get_work_and_every_item_is_annotated_once(fx):
    with LoopbackServer(model="m") as a, LoopbackServer(model="m") as b:
        result = run_annotation(fx.lake, settings(a.base_url, b.base_url), TAXONOMY, "r1")
        assert result.complete and not result.failed and not result.retry_later
        assert a.total > 0 and b.total > 0  # least-in-flight spreads the load
        assert a.total + b.total == result.requests
    done = work_done(fx.lake)
    assert done and set(done.values()) == {1}
    assert all(a.status == "ok" for a in fx.lake.records("annotations"))


def test_an_endpoint_killed_mid_run_is_drained_and_nothing_is_lost_or_duplicated(fx, tmp_path):
    a, b = LoopbackServer(model="m").start(), LoopbackServer(model="m").start()
    stopped_at: list[int] = []

    def kill_b() -> None:  # stop b once it has served a few requests, while the run goes on
        deadline = time.monotonic() + 60
        while b.total < 3 and time.monotonic() < deadline:
            time.sleep(0.002)
        stopped_at.append(a.total)
        b.stop()

    killer = threading.Thread(target=kill_b)
    killer.start()
    try:
        result = run_annotation(fx.lake, settings(a.base_url, b.base_url), TAXONOMY, "r1")
    finally:
        killer.join()
        a.stop()
    assert result.complete and not result.failed and not result.retry_later
    assert b.total >= 3 and a.total > stopped_at[0]  # b served some, a finished the rest
    done = work_done(fx.lake)
    assert set(done.values()) == {1}  # each item exactly once …
    assert len(done) == result.ok  # … and every one of them stored
    # The same work on one healthy endpoint: the same items, nothing more, nothing less.
    again = build_lake(tmp_path / "again", extra_products=24)
    with LoopbackServer(model="m") as one:
        run_annotation(again.lake, settings(one.base_url), TAXONOMY, "r1")
    assert set(work_done(again.lake)) == set(done)


def test_all_endpoints_down_fails_the_run_naming_them(fx):
    urls = [f"http://127.0.0.1:{free_port()}/v1", f"http://127.0.0.1:{free_port()}/v1"]
    with pytest.raises(AnnotationError, match="all 2 annotation endpoints are down") as err:
        run_annotation(fx.lake, settings(*urls, timeout=0.5), TAXONOMY, "r1")
    assert all(url.removesuffix("/v1") in str(err.value) for url in urls)


def test_endpoints_dying_after_the_start_stop_the_run_with_a_clear_error():
    async def go(a: LoopbackServer, b: LoopbackServer) -> None:
        members = [
            ChatEndpoint(
                base_url=s.base_url, model="m", api_key=None, timeout=1, max_retries=1, concurrency=1
            )
            for s in (a, b)
        ]
        pool = EndpointPool(members, cooloff=60)
        pool.sleep = asyncio.sleep
        await pool.check()
        a.stop()
        b.stop()
        schema = STRICT_SCHEMA
        with pytest.raises(EndpointUnavailable, match="all 2 annotation endpoints are down") as err:
            await pool.complete(
                [], schema_name="t", schema=schema, max_tokens=16, request_id="x" * 64 + "||t"
            )
        assert a.base_url in str(err.value) and b.base_url in str(err.value)
        await pool.close()

    a, b = LoopbackServer(model="m").start(), LoopbackServer(model="m").start()
    asyncio.run(go(a, b))


def test_base_url_and_base_urls_make_one_pool():
    both = AnnotationSettings(base_url="http://h1/v1", base_urls=["http://h2/v1", "http://h1/v1"])
    assert both.endpoints == ["http://h1/v1", "http://h2/v1"]
    assert AnnotationSettings().endpoints == []
    with pytest.raises(ValueError, match="twice"):
        AnnotationSettings(base_urls=["http://h2/v1", "http://h2/v1"])
    with pytest.raises(ValueError, match="not an http"):
        AnnotationSettings(base_urls=["h2:8000"])


def test_shards_split_the_work_exactly(fx, tmp_path):
    """n shard runs (as the refresh submits them to Dask workers) annotate what one run does, each
    image once, whatever order they run in."""
    from lookbench_live.annotation.run import in_shard

    with LoopbackServer(model="m") as a, LoopbackServer(model="m") as b:
        results = [
            run_annotation(fx.lake, settings(a.base_url, b.base_url), TAXONOMY, "r1", shard=(i, 3))
            for i in (2, 0, 1)
        ]
        whole = build_lake(tmp_path / "whole", extra_products=24)
        one = run_annotation(whole.lake, settings(a.base_url), TAXONOMY, "r1")
    assert all(r.complete for r in results) and sum(r.images for r in results) == one.images
    assert all(r.images > 0 for r in results)  # the hash split is even enough to give each some
    done = work_done(fx.lake)
    assert set(done.values()) == {1} and set(done) == set(work_done(whole.lake))
    with pytest.raises(ValueError, match="does not exist"):
        in_shard("ab" * 32, 3, 3)


def test_repeated_5xx_drain_an_endpoint_and_retries_go_elsewhere():
    """An endpoint answering 503 gets each failed request retried on the other; after
    `drain_after` 5xx in a row it gets nothing more during its cool-off."""
    ids = [f"{i:064x}" for i in range(5)]
    slept: list[float] = []

    async def record(delay: float) -> None:
        slept.append(delay)

    async def go(a: LoopbackServer, b: LoopbackServer) -> list[int]:
        members = [
            ChatEndpoint(
                base_url=s.base_url, model="m", api_key=None, timeout=2, max_retries=2, concurrency=1
            )
            for s in (b, a)  # b first: it wins the ties while both are idle
        ]
        pool = EndpointPool(members, cooloff=60, drain_after=3)
        pool.sleep = record
        schema = STRICT_SCHEMA
        attempts = []
        for sha in ids:
            reply = await pool.complete(
                [], schema_name="t", schema=schema, max_tokens=16, request_id=f"{sha}||t"
            )
            assert '"a":"x"' in reply.text
            attempts.append(reply.attempts)
        await pool.close()
        assert pool.usage.requests == sum(attempts)
        return attempts

    with LoopbackServer(model="m") as a, LoopbackServer(model="m") as b:
        for sha in ids:
            b.inject(sha, "503", sticky=True)
        attempts = asyncio.run(go(a, b))
        assert attempts == [2, 2, 2, 1, 1]  # b fails three in a row, then is drained
        assert [b.requests_for(s) for s in ids] == [1, 1, 1, 0, 0]
        assert [a.requests_for(s) for s in ids] == [1, 1, 1, 1, 1]
    assert len(slept) == 2  # the third failure drained b: its retry went to a at once
