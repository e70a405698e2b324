"""The run's steps (issue 26 §1): each step INSTANCE keeps its own results and counts (the two dedup
and the two annotate passes are never summed), the steps a stage needs run with it (`backfill
--stages audit`), the gate is merged in one place, and completion records are read strictly."""

from __future__ import annotations

import datetime as dt
import io
from pathlib import Path

import pytest

from lookbench_live.config import Settings
from lookbench_live.flows.refresh import PIPELINE, PipelineStep, Run, run_steps, steps_for, summary_of
from lookbench_live.flows.run_state import Gate, RecordError, ReleaseOutcome, Verdict
from lookbench_live.flows.runtime import RunSpec
from lookbench_live.flows.stages import SiteOutcome
from lookbench_live.flows.summary import stage_lines
from lookbench_live.warehouse.lake import Lake

T0 = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)


def _run(tmp_path: Path) -> Run:
    spec = RunSpec(
        flow="refresh", home=str(tmp_path), config_path=None, as_of=T0, version="v20261201",
        window_start=None, window_end=T0,
    )  # fmt: skip
    return Run(spec=spec, settings=Settings(), lake=Lake(tmp_path), selected=("dedup",), replace=False)


def test_two_dedup_passes_keep_their_own_counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def dedup(label: str, radius: int, kept: int):  # what `stages.dedup` returns for one pass
        def step(run: Run) -> Run:
            run.record({"pass": label, "radius": radius, "kept": kept})
            return run

        return step

    steps = [
        PipelineStep("dedup", dedup("real", 4, 228), frozenset({"dedup"}), "real"),
        PipelineStep("dedup", dedup("aigen", 3, 315), frozenset({"dedup"}), "aigen"),
    ]
    monkeypatch.setattr("sys.stderr", io.StringIO())
    summary = summary_of(run_steps(_run(tmp_path), steps))
    assert summary["stage_counts"] == {
        "dedup real": {"radius": 4, "kept": 228},
        "dedup aigen": {"radius": 3, "kept": 315},
    }
    assert list(summary["timings"]) == ["dedup real", "dedup aigen"]
    table = stage_lines(summary)
    assert any(line.startswith("| dedup real |") and "radius 4, kept 228" in line for line in table)
    assert any(line.startswith("| dedup aigen |") and "radius 3, kept 315" in line for line in table)


def test_the_pipeline_names_each_pass_once() -> None:
    labels = [step.label for step in PIPELINE]
    assert len(labels) == len(set(labels))
    assert {"dedup real", "dedup aigen", "annotate real", "annotate aigen"} <= set(labels)


@pytest.mark.parametrize(
    ("stages", "runs"),
    [
        (("audit",), ["review", "audit", "discard", "summary"]),
        (("evaluate",), ["review", "evaluate", "report", "discard", "summary"]),
        (("release", "audit"), ["evidence", "stage", "check", "audit", "labels", "commit", "summary"]),
    ],
)
def test_a_selected_step_runs_with_what_it_needs(stages: tuple[str, ...], runs: list[str]) -> None:
    """`backfill --stages audit` audits (the version's committed release, or the window's staged for
    it), never silently only `summary`."""
    assert [step.label for step in steps_for(stages)] == runs


def test_the_gate_keeps_a_failure_and_names_each_check_once() -> None:
    assert Gate().as_json() == {"passed": None, "reason": "no audit gate"}
    content = Gate().with_verdict(Verdict("content", False, "empty subset split(s): noise/gallery"))
    assert content.as_json() == {
        "passed": False,
        "reason": "content check: empty subset split(s): noise/gallery",
    }
    audited = content.with_verdict(Verdict("audit", True, "accuracy 0.95 ≥ 0.9"))
    assert audited.passed is False
    assert audited.reason == "content check: empty subset split(s): noise/gallery; audit: accuracy 0.95 ≥ 0.9"
    again = audited.with_verdict(Verdict("content", False, "empty subset split(s): aigen_studio/query"))
    assert again.reason.count("content check") == 1 and "aigen_studio/query" in again.reason
    assert Gate().with_verdict(Verdict("audit", True, "ok")).as_json() == {"passed": True, "reason": "ok"}


def test_completion_records_round_trip_and_are_read_strictly() -> None:
    site = SiteOutcome(
        "shop", "ok", products=3, flag="yield_drop: 0", crawl={"pages": 40, "note": "x" * 5000}
    )
    assert SiteOutcome.from_record(site.record()) == site  # whole: never cut at a length
    release = ReleaseOutcome("v20261201", "/lake/releases/v20261201", {"a": 1}, True, {"passed": None})
    assert ReleaseOutcome.from_record(release.record()) == release
    with pytest.raises(RecordError, match="not a 'site' record"):
        SiteOutcome.from_record(release.record())
    with pytest.raises(RecordError, match="not JSON"):
        SiteOutcome.from_record(site.record()[:4000])
    with pytest.raises(RecordError, match="version"):
        SiteOutcome.from_record(site.record().replace('"v": 1', '"v": 0'))
