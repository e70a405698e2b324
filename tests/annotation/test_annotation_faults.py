"""Every failure mode of the VLM annotator, against the vLLM-like loopback server."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from annotation_fixtures import build_lake

from lookbench_live.annotation.endpoint import ChatEndpoint, RequestFailed
from lookbench_live.annotation.run import AnnotationError, run_annotation
from lookbench_live.config import AnnotationSettings
from lookbench_live.schema.records import Annotation
from lookbench_live.schema.taxonomy import default_taxonomy
from lookbench_live.testing.loopback_server import LoopbackServer

# The endpoint asks for strict mode, so even a test schema must fit OpenAI's strict subset.
STRICT_SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "string", "enum": ["x"]}},
    "required": ["a"],
    "additionalProperties": False,
}

os.environ.setdefault("HF_HUB_OFFLINE", "1")
TAXONOMY = default_taxonomy()
LOOK_TRUTH = [
    {"category": "shirt", "box": [0.1, 0.05, 0.9, 0.5]},
    {"category": "pants", "box": [0.2, 0.5, 0.8, 0.98]},
]


@pytest.fixture
def fx(tmp_path: Path):
    return build_lake(tmp_path / "lake")


@pytest.fixture
def server(fx):
    with LoopbackServer(model="m", grounding={fx.shas["look"]: LOOK_TRUTH}, hang_seconds=3) as srv:
        yield srv


def settings(server: LoopbackServer, **overrides) -> AnnotationSettings:
    values = dict(
        base_url=server.base_url,
        model="m",
        timeout=0.5,
        max_retries=2,
        retry_base_delay=0.01,
        retry_max_delay=0.05,
        flush_rows=4,
        concurrency=4,
        # These tests inject faults into a product photo's one attributes request; the product
        # box's grounding request (on by default) is tested in tests/warehouse/test_product_box.py.
        product_boxes=False,
    )
    values.update(overrides)
    return AnnotationSettings(**values)


def rows(lake, sha: str, task: str = "attributes") -> list[Annotation]:
    return [a for a in lake.records("annotations") if a.sha256 == sha and a.task == task]  # type: ignore[misc]


def test_clean_run_annotates_every_kept_image_and_links_look_crops(fx, server):
    result = run_annotation(fx.lake, settings(server), TAXONOMY, "r1")
    assert result.mode == "vlm" and result.complete and not result.failed
    assert server.requests_for(fx.shas["dropped"]) == 0  # dropped by dedup: never annotated
    crops = {a.item_ref: a for a in rows(fx.lake, fx.shas["look"]) if a.bbox}
    assert set(crops) == {fx.keys["1002"], fx.keys["1003"]}
    assert crops[fx.keys["1002"]].category == "shirt"
    x0, y0, x1, y1 = (int(v) for v in crops[fx.keys["1003"]].bbox.split(","))
    # Boxes come back in pixels of the original 400x600 photo, not of the resized image sent.
    assert all(abs(a - b) <= 3 for a, b in zip((x0, y0, x1, y1), (80, 300, 320, 588), strict=True))
    dress = rows(fx.lake, fx.shas["p1001"])[0]
    assert dress.status == "ok" and dress.category == "dress" and dress.item_ref == fx.keys["1001"]
    assert dress.prior_agreement["category"] == "agree" and dress.prompt_tokens and dress.completion_tokens
    assert result.requests == server.total and result.prompt_tokens > 0
    # A new prompt version (here: a new pixel budget) annotates again; the same one sends nothing.
    server.reset_counts()
    again = run_annotation(fx.lake, settings(server), TAXONOMY, "r2")
    assert server.total == 0 and again.rows_written == 0
    assert again.images == 0, "an image whose work is all recorded is not planned again"
    run_annotation(fx.lake, settings(server, max_pixels=256 * 28 * 28), TAXONOMY, "r3")
    assert server.requests_for(fx.shas["p1001"]) == 1


def test_429_is_retried_after_retry_after(fx, server):
    server.state.retry_after = 0.05
    server.inject(fx.shas["p1001"], "429", "429")
    run_annotation(fx.lake, settings(server), TAXONOMY, "r1")
    [row] = rows(fx.lake, fx.shas["p1001"])
    assert row.status == "ok" and row.attempts == 3
    assert server.requests_for(fx.shas["p1001"]) == 3


def test_retry_after_header_sets_the_backoff(fx, server):
    server.state.retry_after = 7
    server.inject("x" * 64, "429")
    delays: list[float] = []

    async def record(delay: float) -> None:
        delays.append(delay)

    async def go() -> None:
        endpoint = ChatEndpoint(
            base_url=server.base_url,
            model="m",
            api_key=None,
            timeout=2,
            max_retries=1,
            concurrency=1,
            retry_base_delay=0.01,
            max_retry_after=60,
        )
        endpoint.sleep = record
        schema = STRICT_SCHEMA
        reply = await endpoint.complete(
            [], schema_name="t", schema=schema, max_tokens=16, request_id="x" * 64 + "||t"
        )
        await endpoint.close()
        assert reply.attempts == 2 and '"a":"x"' in reply.text

    asyncio.run(go())
    assert delays and delays[0] >= 7  # waited what the server asked, not the 10 ms base delay


def test_500_is_retried_and_a_persistent_500_is_retried_next_run(fx, server):
    server.inject(fx.shas["p1001"], "500")
    server.inject(fx.shas["p1002"], "503", sticky=True)
    result = run_annotation(fx.lake, settings(server), TAXONOMY, "r1")
    assert rows(fx.lake, fx.shas["p1001"])[0].attempts == 2
    assert server.requests_for(fx.shas["p1002"]) == 3  # 1 + max_retries
    assert result.retry_later == {"llm_http_503": 1} and not result.complete
    assert rows(fx.lake, fx.shas["p1002"]) == []  # not stored as done …
    rejected = [r for r in fx.lake.records("rejections") if r.reason == "llm_http_503"]
    assert len(rejected) == 1 and rejected[0].item.startswith(fx.shas["p1002"])
    server.state.sticky.clear()
    server.reset_counts()
    again = run_annotation(fx.lake, settings(server), TAXONOMY, "r2")
    assert rows(fx.lake, fx.shas["p1002"])[0].status == "ok"  # … so the next run does it
    assert server.total == 1 and again.complete


def test_a_hanging_server_times_out(fx, server):
    server.inject(fx.shas["p1001"], "hang", sticky=True)
    result = run_annotation(fx.lake, settings(server, timeout=0.3, max_retries=1), TAXONOMY, "r1")
    assert result.retry_later == {"llm_timeout": 1}
    assert server.requests_for(fx.shas["p1001"]) == 2
    assert rows(fx.lake, fx.shas["p1001"]) == []
    assert result.ok > 0  # the other images went on


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        ("invalid_json", "llm_invalid_json"),
        ("oov", "llm_schema_violation"),
        ("missing", "llm_schema_violation"),
        ("bad_main", "llm_schema_violation"),
        ("truncated", "llm_truncated"),
    ],
)
def test_invalid_answers_are_retried_once_then_recorded_with_raw_text(fx, server, fault, reason):
    server.state.keep_bodies = True
    server.inject(fx.shas["p1001"], fault, sticky=True)
    server.inject(fx.shas["p1002"], fault)  # once: the retry with the error stated fixes it
    result = run_annotation(fx.lake, settings(server), TAXONOMY, "r1")
    [failed] = rows(fx.lake, fx.shas["p1001"])
    assert failed.status == "failed" and failed.error == reason and failed.raw_response
    assert failed.attributes == {} and failed.error_detail
    assert server.requests_for(fx.shas["p1001"]) == 2  # the answer and one corrected retry, no more
    assert result.failed == {reason: 1}
    [fixed] = rows(fx.lake, fx.shas["p1002"])
    assert fixed.status == "ok" and fixed.attempts == 2
    retry = [
        b
        for b in server.state.bodies
        if b["messages"][-1]["role"] == "user" and "rejected" in str(b["messages"][-1])
    ]
    assert retry, "the retry states the error"
    if fault == "truncated":
        assert {b["max_tokens"] for b in retry} == {2 * settings(server).max_tokens}


def test_a_box_outside_the_image_is_an_error_not_a_crop(fx, server):
    server.inject(fx.shas["look"], "box_outside", sticky=True)
    result = run_annotation(fx.lake, settings(server), TAXONOMY, "r1")
    [grounding] = rows(fx.lake, fx.shas["look"], "grounding")
    assert grounding.status == "failed" and grounding.error == "llm_box_outside_image"
    assert rows(fx.lake, fx.shas["look"]) == []  # no crop was annotated
    assert result.failed == {"llm_box_outside_image": 1}


def test_400_is_recorded_once_and_not_retried(fx, server):
    server.inject(fx.shas["p1001"], "400", sticky=True)
    result = run_annotation(fx.lake, settings(server), TAXONOMY, "r1")
    assert server.requests_for(fx.shas["p1001"]) == 1
    [row] = rows(fx.lake, fx.shas["p1001"])
    assert row.status == "failed" and row.error == "llm_http_400"
    assert result.failed == {"llm_http_400": 1}


def test_401_stops_the_run_with_a_clear_error(fx, server):
    server.inject(fx.shas["p1001"], "401", sticky=True)
    with pytest.raises(AnnotationError, match="refused the credentials"):
        run_annotation(fx.lake, settings(server, concurrency=1), TAXONOMY, "r1")
    assert server.requests_for(fx.shas["p1001"]) == 1


def test_unreachable_endpoint_fails_fast(fx):
    with pytest.raises(AnnotationError, match="not answering"):
        run_annotation(
            fx.lake, AnnotationSettings(base_url="http://127.0.0.1:9/v1", timeout=0.5), TAXONOMY, "r1"
        )


def test_request_cap_defers_work_to_the_next_run(fx, server):
    result = run_annotation(fx.lake, settings(server, max_requests_per_run=3, concurrency=1), TAXONOMY, "r1")
    assert server.total == 3 and result.requests == 3
    assert result.deferred > 0 and result.stopped_reason and not result.complete
    server.reset_counts()
    again = run_annotation(fx.lake, settings(server), TAXONOMY, "r2")
    assert again.complete and server.total == again.requests
    done = {(a.sha256, a.bbox, a.task) for a in fx.lake.records("annotations")}
    assert len(done) == len(list(fx.lake.records("annotations")))


def test_spend_cap_stops_sending(fx, server):
    result = run_annotation(
        fx.lake,
        settings(server, max_cost_usd=0.0001, prompt_price_per_mtok=1000.0, concurrency=1),
        TAXONOMY,
        "r1",
    )
    assert result.cost_usd >= 0.0001 and result.deferred > 0 and "spend cap" in (result.stopped_reason or "")


def test_a_404_from_the_server_fails_once_with_its_reason(server):
    """A terminal status is not retried (O10): the endpoint raises after one request, carrying the
    status as the reason and the server's message as the detail."""
    server.inject("y" * 64, "404", sticky=True)

    async def go() -> RequestFailed:
        endpoint = ChatEndpoint(
            base_url=server.base_url, model="m", api_key=None, timeout=2, max_retries=3, concurrency=1
        )
        schema = STRICT_SCHEMA
        try:
            await endpoint.complete(
                [], schema_name="t", schema=schema, max_tokens=16, request_id="y" * 64 + "||t"
            )
        except RequestFailed as exc:
            return exc
        finally:
            await endpoint.close()
        raise AssertionError("a 404 must raise RequestFailed")

    error = asyncio.run(go())
    assert (error.reason, error.transient, error.attempts) == ("llm_http_404", False, 1)
    assert "injected 404" in error.detail and server.requests_for("y" * 64) == 1


@pytest.mark.parametrize("change", ["prompt", "taxonomy", "model"])
def test_a_new_prompt_taxonomy_or_model_redoes_every_row_and_readers_see_only_the_new(
    fx, server, change, monkeypatch
):
    """O7: completion is the annotation key (sha256, bbox, task, taxonomy_version,
    prompt_version, model), not a cache: a change of any of them sends every unit again, and the
    read model (what a release is built from) holds no annotation of the old key."""
    import copy

    from lookbench_live.annotation import prompts
    from lookbench_live.warehouse.views import annotations_of

    first = run_annotation(fx.lake, settings(server), TAXONOMY, "r1")
    assert first.complete and first.ok
    server.reset_counts()
    taxonomy, config, other = TAXONOMY, settings(server), None
    if change == "prompt":
        monkeypatch.setattr(prompts, "PROMPT_VERSION", prompts.PROMPT_VERSION + "-next")
    elif change == "taxonomy":
        taxonomy = copy.copy(TAXONOMY)
        taxonomy.version = f"{TAXONOMY.version}-next"
    else:
        other = LoopbackServer(model="m2", grounding={fx.shas["look"]: LOOK_TRUTH}).__enter__()
        config = settings(other, model="m2")
    try:
        second = run_annotation(fx.lake, config, taxonomy, "r2")
        sent = (other or server).total
    finally:
        if other is not None:
            other.__exit__(None, None, None)
    assert second.complete and second.skipped_existing == 0
    assert second.ok == first.ok and sent >= first.ok  # every row redone, none taken as done
    new_key = (taxonomy.version, second.prompt_version, config.model)
    assert new_key != (TAXONOMY.version, first.prompt_version, "m")
    chosen = annotations_of(fx.lake)
    assert chosen and {(a.taxonomy_version, a.prompt_version, a.model) for a in chosen.values()} == {new_key}
