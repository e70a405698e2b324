"""Labels the evidence supports (issue 22 §4): what the VLM and the judge say changes what is released.

A loopback VLM (behaving like vLLM) annotates a filled lake through the real annotator; a
loopback judge (behaving like OpenAI's API) audits the staged release through the flow's own
`audit_staging`; `stage_release(labels=LabelRules...)` is what the flow's `labels` step runs.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import lakefill
import pyarrow.parquet as pq
import pytest

from lookbench_live.annotation.judge import (
    AuditItem,
    cluster_wilson,
    sample_weights,
    stratified_sample,
    wilson,
)
from lookbench_live.annotation.run import run_annotation
from lookbench_live.config import AnnotationSettings, JudgeSettings, Settings
from lookbench_live.flows.refresh import audit_staging
from lookbench_live.schema.records import Annotation, ImageRecord, Rejection
from lookbench_live.schema.release import SUBSETS
from lookbench_live.schema.taxonomy import default_taxonomy, split_values
from lookbench_live.testing.loopback_server import LoopbackServer
from lookbench_live.warehouse.labels import LabelRules
from lookbench_live.warehouse.lake import Lake
from lookbench_live.warehouse.release import StagedRelease, stage_release

TAXONOMY = default_taxonomy()


def _photos_of(lake: Lake, products: set[str]) -> set[str]:
    return {
        r.sha256
        for r in lake.records("images")
        if isinstance(r, ImageRecord) and r.owner_kind == "product" and r.owner_id in products and r.sha256
    }


def _annotated(tmp_path: Path, truth: dict[str, dict[str, Any]]) -> Lake:
    lake = Lake(tmp_path / "lake")
    lakefill.fill(lake)
    with LoopbackServer(model="vlm", truth=truth) as server:
        settings = AnnotationSettings(base_url=server.base_url, model="vlm", timeout=5)
        run_annotation(lake, settings, TAXONOMY, "annotate")
    return lake


def _rows(lake: Lake, staged: StagedRelease) -> list[dict[str, Any]]:
    rows = []
    for subset in SUBSETS:
        for split in ("query", "gallery"):
            path = f"{staged.path}/{subset}/{split}.parquet"
            with lake.fs.open(path, "rb") as handle:
                columns = ["raw_sha256", "main_attribute", "attributes", "label_disputes", "item_ID"]
                for row in pq.read_table(handle, columns=columns).to_pylist():
                    rows.append({**row, "subset": subset, "split": split})
    return rows


def _judge(server: LoopbackServer, **overrides: Any) -> Settings:
    values: dict[str, Any] = dict(
        base_url=server.base_url, model="judge", ci_half_width=0.1, min_accuracy=0.0, timeout=5
    )
    values.update(overrides)
    return Settings(judge=JudgeSettings(**values))


def _rules(lake: Lake, settings: Settings) -> LabelRules:
    return LabelRules.from_lake(
        lake, on_wrong_main_attribute=settings.judge.on_wrong_main_attribute, judge_model=settings.judge.model
    )


def _reasons(lake: Lake) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in lake.records("rejections"):
        assert isinstance(r, Rejection)
        if r.stage == "release":
            counts[r.reason] = counts.get(r.reason, 0) + 1
    return counts


def _non_empty(staged: StagedRelease) -> None:
    assert all(entry["rows"] > 0 for rel, entry in staged.files.items() if rel.endswith(".parquet"))


# ----------------------------------------------------------------- category disputes


def test_a_vlm_that_sees_another_category_is_recorded_audited_first_and_held_back_unless_confirmed(
    tmp_path: Path,
) -> None:
    # The prior reads "coat" from the titles of p0-1, p0-5, p0-9; the VLM says their photos show dresses.
    lake = Lake(tmp_path / "probe")
    lakefill.fill(lake)
    coats = _photos_of(lake, {"shop:p0-1", "shop:p0-5", "shop:p0-9"})
    lake = _annotated(tmp_path, {sha: {"category": "dress"} for sha in coats})

    disputed = [
        a
        for a in lake.records("annotations")
        if isinstance(a, Annotation) and a.source == "vlm" and a.task == "attributes" and a.sha256 in coats
    ]
    assert disputed and all(a.prior_agreement["category"] == "disagree" for a in disputed)
    assert all(a.category == "coat" and a.prompt_version.startswith("p3") for a in disputed)

    # No verdict yet: the rules hold every disputed row back, with the reason.
    unresolved = stage_release(lake, version="v20261201", labels=_rules(lake, Settings()))
    assert not [r for r in _rows(lake, unresolved) if r["raw_sha256"] in coats]
    _non_empty(unresolved)
    card = Path(unresolved.path, "README.md").read_text()
    assert "published only if the judge confirms it" in card

    # Unruled staging (what the audit samples; a staging replaces the last): the rows are
    # there, each naming its dispute.
    plain = stage_release(lake, version="v20261201")
    published = [r for r in _rows(lake, plain) if r["raw_sha256"] in coats]
    assert published and all("category" in r["label_disputes"] for r in published)
    # One rejection per item and reason (the `rejections` key).
    assert _reasons(lake)["category_disputed"] == len({r["item_ID"] for r in published})

    # A judge that says the category is wrong: still held back. Disputed items are drawn first.
    wrong = {sha: {"verdict": "wrong", "right_value": "dress"} for sha in coats}
    with LoopbackServer(model="judge", truth=wrong) as server:
        settings = _judge(server, max_items=len(published))
        audit = audit_staging(lake, settings, plain.path, "audit-1")
        judged = {sha for sha in coats if server.requests_for(sha)}
    assert audit.sampled == len(published) and judged == {r["raw_sha256"] for r in published}
    held = stage_release(lake, version="v20261201", labels=_rules(lake, settings))
    assert not [r for r in _rows(lake, held) if r["raw_sha256"] in coats]

    # A judge (another model) that confirms the category: published again.
    plain = stage_release(lake, version="v20261201")
    with LoopbackServer(model="judge2") as server:
        confirming = _judge(server, model="judge2", max_items=len(published))
        audit_staging(lake, confirming, plain.path, "audit-2")
    confirmed = stage_release(lake, version="v20261201", labels=_rules(lake, confirming))
    assert {r["raw_sha256"] for r in _rows(lake, confirmed)} >= {r["raw_sha256"] for r in published}
    _non_empty(confirmed)


# ----------------------------------------------------------------- the judge's wrong main attribute


def _main_group(row: dict[str, Any]) -> str:
    return next(kv["key"] for kv in row["attributes"] if row["main_attribute"] in split_values(kv["value"]))


@pytest.mark.parametrize("rule", ["hold_back", "correct"])
def test_a_judge_marking_the_main_attribute_wrong_holds_back_or_corrects_as_configured(
    tmp_path: Path, rule: str
) -> None:
    lake = _annotated(tmp_path, {})
    plain = stage_release(lake, version="v20261201")
    rows = _rows(lake, plain)
    target = next(r for r in rows if r["subset"] == "real_studio_flat" and r["split"] == "gallery")
    group = _main_group(target)
    right = next(v for v in TAXONOMY.values(group) if v != target["main_attribute"])
    with LoopbackServer(
        model="judge", truth={target["raw_sha256"]: {"verdict": "wrong", "right_value": right}}
    ) as s:
        settings = _judge(s, on_wrong_main_attribute=rule)
        audit_staging(lake, settings, plain.path, "audit")
    staged = stage_release(lake, version="v20261201", labels=_rules(lake, settings))
    after = [r for r in _rows(lake, staged) if r["raw_sha256"] == target["raw_sha256"]]
    card = Path(staged.path, "README.md").read_text()
    if rule == "hold_back":
        assert after == [] and _reasons(lake)["main_attribute_wrong"] >= 1
        assert "main attribute the judge marked wrong is held back" in card
    else:
        assert after and all(r["main_attribute"] == right for r in after)
        assert all({"key": group, "value": right} in r["attributes"] for r in after)
        assert "replaced by the judge's correction" in card and "(1 rows corrected by the judge)" in card
    others = {r["raw_sha256"] for r in rows} - {target["raw_sha256"]}
    assert others <= {r["raw_sha256"] for r in _rows(lake, staged)}, "only the judged row changes"
    _non_empty(staged)


# ----------------------------------------------------------------- the gate's interval


def _width(interval: Any) -> float:
    return float(interval.high - interval.low)


def test_correlated_verdicts_widen_the_interval_and_independent_ones_do_not() -> None:
    # 40 items of 10 verdicts, 90% correct. Correlated: an item is all right or all wrong.
    correlated = [(0, 10, 1.0) if i % 10 == 0 else (10, 10, 1.0) for i in range(40)]
    naive = wilson(360, 400)
    clustered = cluster_wilson(correlated)
    assert clustered.accuracy == naive.accuracy == 0.9
    assert _width(clustered) > 2.5 * _width(naive) and clustered.low < naive.low - 0.05
    # Independent: each verdict its own Bernoulli(0.9) draw.
    rng = random.Random(7)
    independent = []
    for _ in range(40):
        correct = sum(rng.random() < 0.9 for _ in range(10))
        independent.append((correct, 10, 1.0))
    c = sum(x for x, _, _ in independent)
    assert _width(cluster_wilson(independent)) == pytest.approx(_width(wilson(c, 400)), rel=0.15)


def test_the_gate_uses_the_cluster_interval_on_a_judge_whose_verdicts_move_per_item(tmp_path: Path) -> None:
    from lookbench_live.annotation.judge import run_audit

    population = [
        AuditItem(
            sha256=f"{i:064x}",
            bbox="",
            subset="real_studio_flat",
            category="dress",
            attributes={g: TAXONOMY.values(g)[0] for g in TAXONOMY.groups_for("dress")[:6]},
            main_attribute=TAXONOMY.values(TAXONOMY.groups_for("dress")[0])[0],
            annotation_model="m",
            image=lakefill.draw(i),
        )
        for i in range(30)
    ]
    wrong = {item.sha256: {"verdict": "wrong", "right_value": "not_visible"} for item in population[::6]}
    with LoopbackServer(model="judge", truth=wrong) as server:
        settings = JudgeSettings(base_url=server.base_url, model="judge", ci_half_width=0.1, timeout=5)
        summary = run_audit(Lake(tmp_path / "lake"), settings, TAXONOMY, population, "a")
    assert summary.overall is not None and summary.overall.low is not None
    naive = wilson(summary.overall.correct, summary.overall.total)
    assert summary.overall.accuracy == naive.accuracy
    assert summary.overall.low < naive.low and "cluster Wilson" in summary.gate_reason


def test_disputed_items_are_drawn_first_and_weighted_back_to_the_population() -> None:
    def item(i: int, disputes: tuple[str, ...]) -> AuditItem:
        return AuditItem(f"{i:064x}", "", "real_studio_flat", "dress", {}, None, "m", b"", disputes)

    population = (
        [item(i, ("category",)) for i in range(5)]
        + [item(i, ("colour",)) for i in range(5, 25)]
        + [item(i, ()) for i in range(25, 105)]
    )
    sample = stratified_sample(population, 20, seed=1)
    drawn = {i.sha256 for i in sample}
    assert {i.sha256 for i in population[:5]} <= drawn
    weights = sample_weights(population, sample)
    share = {d: sum(1 for i in sample if i.disputes == d) for d in [("colour",), ()]}
    assert share[("colour",)] / 20 > 20 / 100 * 15 / 20, "attribute disputes are over-drawn"
    # The weights sum to the population in every stratum: an unbiased total.
    assert sum(weights.values()) == pytest.approx(len(population))
    assert all(weights[(i.sha256, "")] == 1.0 for i in population[:5])
