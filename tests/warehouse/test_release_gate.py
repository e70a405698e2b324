"""The judge audit gates a release: built and kept, but `latest` moves only when the audit passes."""

from __future__ import annotations

import json
from pathlib import Path

import lakefill
from test_release import PlainTaxonomy

from lookbench_live.config import JudgeSettings, Settings
from lookbench_live.flows.refresh import audit_staging
from lookbench_live.testing.loopback_server import LoopbackServer
from lookbench_live.warehouse.lake import Lake
from lookbench_live.warehouse.release import (
    build_release,
    commit_release,
    read_manifest,
    resolve_version,
    stage_release,
    verify_release,
)


def test_a_failed_gate_builds_the_release_but_keeps_latest(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake")
    lakefill.fill(lake)
    build_release(lake, version="v20261101", taxonomy=PlainTaxonomy())
    lakefill.fill(lake, seed=3, start=lakefill.T0.replace(day=20))
    reason = "lower bound 0.71 < min_accuracy 0.90"
    result = build_release(
        lake,
        version="v20261201",
        taxonomy=PlainTaxonomy(),
        extra_manifest={"gate": {"passed": False, "reason": reason}},
    )
    assert result.published_latest is False and result.latest_reason == reason
    assert verify_release(lake, "v20261201") == []
    assert resolve_version(lake, "latest") == "v20261101"
    assert read_manifest(lake, "v20261201")["gate"] == {"passed": False, "reason": reason}


def test_the_flow_audits_the_staging_release_with_the_judge(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake")
    lakefill.fill(lake)
    with LoopbackServer(model="judge") as server:
        judge = JudgeSettings(
            base_url=server.base_url, model="judge", ci_half_width=0.2, min_accuracy=0.5, timeout=5
        )
        settings = Settings(judge=judge)
        audits: list[dict] = []

        staged = stage_release(lake, version="v20261201", taxonomy=PlainTaxonomy())
        audit = audit_staging(lake, settings, staged.path, "run-1")
        audits.append(audit)
        gate = {"passed": audit.gate_passed, "reason": audit.gate_reason}
        result = commit_release(lake, staged, {"audit": audit.summary(), "gate": gate})
        sent = server.total
    (audit,) = audits
    assert audit.status == "ok" and audit.sampled == sent > 0
    assert audit.overall.low is not None and audit.gate_passed is True
    assert result.published_latest and resolve_version(lake, "latest") == "v20261201"
    rows = list(lake.records("audits"))
    assert len(rows) == sent and {r.judge_model for r in rows} == {"judge"}
    stored = json.loads(Path(lake.path("releases", "v20261201", "manifest.json")).read_text())["audit"]
    assert stored["sampled"] == sent
