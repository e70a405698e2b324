"""The judge audit: sample size, stratification, Wilson intervals, and the release gate."""

from __future__ import annotations

import json
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


def colour_item(index: int, colour: str) -> AuditItem:
    return AuditItem(
        sha256=f"c{index:063x}",
        bbox="",
        subset="real_studio_flat",
        category="t-shirt",
        attributes={"color": colour},
        main_attribute=colour.split("|")[0],
        annotation_model="m",
        image=lambda: jpeg(index, (96, 128)),
    )


def test_judge_answers_multi_values_with_a_short_list_and_agrees_by_set(tmp_path: Path):
    """The judge's colour correction is a list like the annotator's: a two-colour answer given back in
    another order is agreement (as the metrics count it), a one-colour answer corrected to two is a
    correction stored as the release writes it ("red|white")."""
    from lookbench_live.annotation.judge import judge_schema, same_answer
    from lookbench_live.evaluation.labels import canonical_value
    from lookbench_live.schema.strict import openai_strict_problems

    two, one = colour_item(1, "red|white"), colour_item(2, "red")
    schema = judge_schema(TAXONOMY, two)["properties"]["color"]["properties"]["right_value"]
    assert schema["type"] == "array" and schema["maxItems"] == TAXONOMY.multi("color") == 2
    assert openai_strict_problems(judge_schema(TAXONOMY, two)) == []
    says = {"verdict": "wrong", "right_value": "white|red"}  # the loopback answers ["white", "red"]
    lake = Lake(tmp_path / "lake")
    with LoopbackServer(model="judge", truth={two.sha256: says, one.sha256: says}) as server:
        server.state.keep_bodies = True
        summary = run_audit(lake, judge_settings(server), TAXONOMY, [two, one], "a1")
        bodies = list(server.bodies)
        assert server.rejected_schemas == []
    assert summary.status == "ok" and summary.audited == 2
    assert all(b["response_format"]["json_schema"]["strict"] is True for b in bodies)
    assert any('"color": ["red", "white"]' in str(b["messages"][1]["content"][0]["text"]) for b in bodies)
    rows = {r.sha256: r for r in lake.records("audits")}
    assert rows[two.sha256].verdicts["color"] == "correct" and "color" not in rows[two.sha256].corrections
    assert rows[one.sha256].verdicts["color"] == "wrong"
    assert rows[one.sha256].corrections["color"] == "red|white" == canonical_value("white|red")
    assert same_answer("white|red", "red|white") and not same_answer("red", "red|white")


def test_judge_corrections_that_break_the_group_rules_are_dropped():
    from lookbench_live.annotation.judge import parse_verdicts

    item = colour_item(3, "red")
    for right in (["red", "white", "blue"], ["not_visible", "red"], ["plaid-ish-zebra"], "red|red|white"):
        answer = {"category": {"verdict": "correct", "right_value": ""}}
        answer["color"] = {"verdict": "wrong", "right_value": right}
        parsed = parse_verdicts(TAXONOMY, item, json.dumps(answer))
        assert not isinstance(parsed, str)
        assert parsed == ({"category": "correct", "color": "wrong"}, {}), right


def test_loopback_judge_refuses_a_schema_strict_mode_refuses(tmp_path: Path, monkeypatch):
    """With `strict: true` OpenAI answers 400 "Invalid schema for response_format ..." to a schema outside
    its subset (here `uniqueItems` on the colour list); the loopback does the same, and the audit records
    the refusal as a failed row with the HTTP reason instead of crashing."""
    import openai

    from lookbench_live.annotation import judge

    bad = {
        "type": "object",
        "properties": {"color": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}},
        "required": ["color"],
        "additionalProperties": False,
    }
    message = [{"role": "user", "content": "hi"}]
    with LoopbackServer(model="judge") as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        strict = {"type": "json_schema", "json_schema": {"name": "audit", "schema": bad, "strict": True}}
        with pytest.raises(openai.BadRequestError, match=r"Invalid schema for response_format 'audit'"):
            client.chat.completions.create(model="judge", messages=message, response_format=strict)  # type: ignore[arg-type]
        loose = {"type": "json_schema", "json_schema": {"name": "audit", "schema": bad}}
        assert client.chat.completions.create(model="judge", messages=message, response_format=loose).choices  # type: ignore[arg-type]
        client.close()

        original = judge.judge_schema

        def with_unique_items(taxonomy, item):
            schema = original(taxonomy, item)
            schema["properties"]["color"]["properties"]["right_value"]["uniqueItems"] = True
            return schema

        monkeypatch.setattr(judge, "judge_schema", with_unique_items)
        lake = Lake(tmp_path / "lake")
        summary = run_audit(lake, judge_settings(server), TAXONOMY, [colour_item(4, "red|white")], "a1")
        assert len(server.rejected_schemas) == 2 and "uniqueItems" in server.rejected_schemas[-1]
    assert summary.failed == {"llm_http_400": 1} and summary.gate_passed is False
