"""The judge audit: sample size, stratification, Wilson intervals, and the release gate."""

from __future__ import annotations

from pathlib import Path

import pytest
from annotation_fixtures import jpeg

from lookbench_live.annotation.judge import AuditItem, run_audit, sample_size, stratified_sample, wilson
from lookbench_live.config import JudgeSettings
from lookbench_live.schema.taxonomy import default_taxonomy
from lookbench_live.testing.loopback_server import LoopbackServer
from lookbench_live.warehouse.lake import Lake

TAXONOMY = default_taxonomy()


def items(count: int) -> list[AuditItem]:
    out = []
    for i in range(count):
        category, subset = [
            ("dress", "real_studio_flat"),
            ("pants", "real_streetlook"),
            ("boots", "aigen_studio"),
        ][i % 3]
        groups = TAXONOMY.groups_for(category)
        attributes = {g: TAXONOMY.values(g)[0] for g in groups[:4]}
        out.append(
            AuditItem(
                sha256=f"{i:064x}",
                bbox="",
                subset=subset,
                category=category,
                attributes=attributes,
                main_attribute=next(iter(attributes.values())),
                annotation_model="m",
                image=lambda i=i: jpeg(i, (96, 128)),
            )
        )
    return out


def test_wilson_interval_matches_reference_values():
    interval = wilson(93, 100)
    assert interval.accuracy == pytest.approx(0.93)
    assert interval.low == pytest.approx(0.8626, abs=5e-4) and interval.high == pytest.approx(
        0.9657, abs=5e-4
    )
    zero = wilson(0, 10)
    assert zero.low == 0 and zero.high == pytest.approx(0.2775, abs=5e-4)
    assert wilson(0, 0).accuracy is None


def test_sample_size_from_half_width():
    assert sample_size(0.03) == 1068 and sample_size(0.05) == 385
    assert sample_size(0.03, cap=500) == 500


def test_stratified_sample_covers_every_stratum_and_is_reproducible():
    population = items(90)
    population += [
        AuditItem("f" * 64, "", "aigen_streetlook", "hat", {}, None, "m", b"")  # a stratum of one
    ]
    sample = stratified_sample(population, 12, seed=3)
    assert len(sample) == 12
    assert {(i.subset, i.category) for i in sample} == {(i.subset, i.category) for i in population}
    assert [i.sha256 for i in sample] == [i.sha256 for i in stratified_sample(population, 12, seed=3)]
    assert [i.sha256 for i in sample] != [i.sha256 for i in stratified_sample(population, 12, seed=4)]


def judge_settings(server: LoopbackServer, **overrides) -> JudgeSettings:
    values = dict(base_url=server.base_url, model="judge", ci_half_width=0.2, min_accuracy=0.9, timeout=5)
    values.update(overrides)
    return JudgeSettings(**values)


def test_audit_passes_the_gate_when_the_judge_agrees(tmp_path: Path):
    lake = Lake(tmp_path / "lake")
    population = items(60)
    with LoopbackServer(model="judge") as server:
        summary = run_audit(lake, judge_settings(server), TAXONOMY, population, "a1")
        assert server.total == summary.sampled == sample_size(0.2)  # 25 items
    assert summary.status == "ok" and summary.gate_passed is True
    assert summary.overall is not None and summary.overall.accuracy == 1.0
    assert summary.overall.low is not None and 0.9 < summary.overall.low < 1.0
    assert set(summary.per_group) >= {"category", "neckline"}
    assert summary.prompt_tokens > 0 and summary.requests == summary.sampled
    rows = list(lake.records("audits"))
    assert len(rows) == summary.sampled and all(r.status == "ok" for r in rows)
    # Rerun: the stored verdicts are reused, nothing is sent again.
    with LoopbackServer(model="judge") as server:
        again = run_audit(lake, judge_settings(server), TAXONOMY, population, "a2")
        assert server.total == 0
    assert again.overall == summary.overall


def test_audit_fails_the_gate_when_the_judge_finds_errors(tmp_path: Path):
    lake = Lake(tmp_path / "lake")
    population = items(60)
    wrong = {item.sha256: {"verdict": "wrong", "right_value": "not_visible"} for item in population[::2]}
    with LoopbackServer(model="judge", truth=wrong) as server:
        summary = run_audit(lake, judge_settings(server), TAXONOMY, population, "a1")
    assert summary.status == "ok" and summary.gate_passed is False
    assert summary.overall is not None and summary.overall.accuracy is not None
    assert 0.2 < summary.overall.accuracy < 0.8 and "<" in summary.gate_reason
    wrong_rows = [r for r in lake.records("audits") if r.sha256 in wrong]
    assert wrong_rows and all(set(r.verdicts.values()) == {"wrong"} for r in wrong_rows)
    assert any(r.corrections for r in wrong_rows)


def test_invalid_judge_answers_are_recorded_not_counted(tmp_path: Path):
    lake = Lake(tmp_path / "lake")
    population = items(30)
    with LoopbackServer(model="judge") as server:
        server.inject(population[0].sha256, "invalid_json", sticky=True)
        summary = run_audit(
            lake, judge_settings(server, ci_half_width=0.1, max_items=30), TAXONOMY, population, "a1"
        )
    assert summary.failed == {"llm_invalid_json": 1} and summary.audited == 29


def test_no_judge_configured_skips_with_a_reason(tmp_path: Path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    summary = run_audit(Lake(tmp_path / "lake"), JudgeSettings(), TAXONOMY, items(10), "a1")
    assert summary.status == "skipped" and "OPENAI_API_KEY" in (summary.reason or "")
    assert summary.overall is None and summary.gate_passed is None
    assert list(Lake(tmp_path / "lake").records("audits")) == []


def test_loopback_judge_rejects_what_openais_api_rejects():
    """The fake judge answers a GPT-5 request carrying `max_tokens` or `temperature=0` with the API's own
    400 body (X4); a vLLM-served model name accepts both."""
    import openai

    with LoopbackServer(model="gpt-5.1") as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        message = [{"role": "user", "content": "hi"}]
        with pytest.raises(openai.BadRequestError) as too_old:
            client.chat.completions.create(model="gpt-5.1", messages=message, max_tokens=10)
        assert too_old.value.body["code"] == "unsupported_parameter"  # type: ignore[index]
        assert "Use 'max_completion_tokens' instead" in str(too_old.value)
        with pytest.raises(openai.BadRequestError, match=r"'temperature' does not support 0 with this model"):
            client.chat.completions.create(model="gpt-5.1", messages=message, temperature=0)
        ok = client.chat.completions.create(model="qwen2-vl", messages=message, max_tokens=10, temperature=0)
        assert ok.choices
        client.close()


def test_a_gpt5_judge_gets_verdicts(tmp_path: Path):
    """The default judge family: the audit sends `max_completion_tokens` and no temperature."""
    lake = Lake(tmp_path / "lake")
    with LoopbackServer(model="gpt-5.1") as server:
        server.state.keep_bodies = True
        summary = run_audit(lake, judge_settings(server, model="gpt-5.1"), TAXONOMY, items(30), "a1")
        bodies = list(server.bodies)
        assert server.rejected_parameters == []
    assert summary.status == "ok" and summary.failed == {} and summary.audited == summary.sampled > 0
    assert bodies and all("max_completion_tokens" in b and "max_tokens" not in b for b in bodies)
    assert all("temperature" not in b for b in bodies)


def test_failed_audit_rows_are_retried_by_the_next_run(tmp_path: Path):
    """X5: a judgement that failed (here a 400) is tried again by the next audit, not kept as failed forever."""
    lake = Lake(tmp_path / "lake")
    population = items(30)
    settings = judge_settings(LoopbackServer(), ci_half_width=0.1, max_items=30)
    with LoopbackServer(model="judge") as server:
        server.inject(population[0].sha256, "400", sticky=True)
        first = run_audit(
            lake, settings.model_copy(update={"base_url": server.base_url}), TAXONOMY, population, "a1"
        )
    assert first.failed == {"llm_http_400": 1}
    with LoopbackServer(model="judge") as server:
        second = run_audit(
            lake, settings.model_copy(update={"base_url": server.base_url}), TAXONOMY, population, "a2"
        )
        assert server.total == 1  # only the failed item is sent again
    assert second.failed == {} and second.audited == 30
    rows = [r for r in lake.records("audits") if r.sha256 == population[0].sha256]
    assert sorted((r.attempt, r.status) for r in rows) == [(0, "failed"), (1, "ok")]
