"""What a user relies on when a month goes wrong (issue 13 §2-§4, X8):

- a release with an empty subset, or far fewer queries than the last one, is never published
  silently: the run fails with one line (or, configured, the release is held back unpublished);
- an evaluation model that cannot run is recorded and does not abort the release;
- a taken-down item never enters a later release;
- `difficulty` carries the published subset levels, our estimate its own column.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import lakefill
import pyarrow.parquet as pq
import pytest
from test_release import PlainTaxonomy

from lookbench_live.config import EvaluationSettings, Settings
from lookbench_live.flows.refresh import Run, commit, content_shortfall, evaluate
from lookbench_live.flows.runtime import RunSpec
from lookbench_live.schema.records import Takedown
from lookbench_live.schema.release import FILES, SUBSET_DIFFICULTY, SUBSETS
from lookbench_live.warehouse.lake import Lake
from lookbench_live.warehouse.release import read_manifest, resolve_version, stage_release
from lookbench_live.warehouse.takedown import add_takedowns

FULL = {rel: 5 for rel in FILES}


def test_every_subset_split_must_have_rows() -> None:
    assert content_shortfall(FULL, None, min_share_of_previous=0.25) is None
    rows = {**FULL, "real_streetlook/query.parquet": 0}
    reason = content_shortfall(rows, None, min_share_of_previous=0.25)
    assert reason == "empty subset split(s): real_streetlook/query"


def test_far_fewer_queries_than_the_previous_release_is_a_shortfall() -> None:
    queries = 5 * len(SUBSETS)  # 20
    assert content_shortfall(FULL, 80, min_share_of_previous=0.25) is None  # 20 >= 0.25 * 80
    reason = content_shortfall(FULL, 81, min_share_of_previous=0.25)
    assert reason == f"{queries} queries, under 25% of the previous release's 81"
    assert content_shortfall(FULL, 10_000, min_share_of_previous=0.0) is None  # the check can be off


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOKBENCH_")}
    env.update(
        HF_HUB_OFFLINE="1",
        DO_NOT_TRACK="1",
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        PREFECT_HOME=str(home / "prefect"),
        PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="90",
    )
    return env


@pytest.mark.slow
def test_an_empty_real_subset_stops_the_run_with_one_line(tmp_path: Path) -> None:
    # A month in which no product becomes a studio query: real_studio_flat would be empty.
    config = tmp_path / "lookbench.toml"
    config.write_text("[release]\nquery_share = 0.0001\n")
    home = tmp_path / "lake"
    command = [
        sys.executable, "-m", "lookbench_live.cli", "refresh", "--home", str(home),
        "--config", str(config), "--as-of", "2026-12-01", "--port", "48751",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, env=_env(tmp_path))
    assert done.returncode == 1, done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, done.stderr
    assert "held back, not published" in errors[0] and "real_studio_flat/query" in errors[0]
    lake = Lake(home)
    assert not (home / "releases" / "v20261201" / "manifest.json").exists()
    with pytest.raises(Exception, match="no release is published"):
        resolve_version(lake, "latest")
    report = home / "reports" / "v20261201" / "report.html"
    assert (
        report.exists()
        and "content check: empty subset split(s): real_studio_flat/query" in report.read_text()
    )
    reasons = {(r.stage, r.reason) for r in lake.records("rejections")}
    assert ("release", "content_shortfall") in reasons


def _run(lake: Lake, tmp_path: Path, settings: Settings) -> Run:
    config = tmp_path / "empty.toml"
    config.write_text("")
    spec = RunSpec(
        flow="refresh",
        home=lake.home,
        config_path=str(config),
        as_of=dt.datetime(2026, 12, 1, tzinfo=dt.UTC),
        version="v20261201",
        window_start=None,
        window_end=None,
    )
    staged = stage_release(lake, version="v20261201", taxonomy=PlainTaxonomy())
    return Run(spec=spec, settings=settings, lake=lake, selected=("release",), replace=False, staged=staged)


def test_a_failing_evaluation_model_is_recorded_and_the_release_commits(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake")
    lakefill.fill(lake)
    missing = str(tmp_path / "no-such-model")  # a model that cannot load here
    settings = Settings(evaluation=EvaluationSettings(models=[missing], trust_remote_code=True))
    run = commit(evaluate(_run(lake, tmp_path, settings)))
    assert [e["model"].split(":")[0] for e in run.evaluations] == ["baseline"]
    (failure,) = run.evaluation_failures
    assert failure["model"] == missing and failure["error"]
    manifest = read_manifest(lake, "v20261201")
    assert manifest["evaluation_failures"] == run.evaluation_failures
    assert [e["model"] for e in manifest["evaluation"]] == [e["model"] for e in run.evaluations]
    rejected = [r for r in lake.records("rejections") if r.stage == "evaluate"]
    assert [(r.reason, r.item) for r in rejected] == [("model_failed", f"v20261201:{missing}")]


def test_a_taken_down_item_never_enters_a_later_release(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake")
    lakefill.fill(lake)
    first = stage_release(lake, version="v20261201", taxonomy=PlainTaxonomy())
    rows = pq.read_table(f"{first.path}/real_studio_flat/gallery.parquet").to_pylist()
    victim = rows[0]
    add_takedowns(lake, [Takedown(kind="sha256", value=victim["sha256"], reason="owner request #1")])
    again = stage_release(lake, version="v20261202", taxonomy=PlainTaxonomy())
    for rel in FILES:
        shas = set(pq.read_table(f"{again.path}/{rel}", columns=["sha256"]).column("sha256").to_pylist())
        assert victim["sha256"] not in shas, rel
    dropped = [r for r in lake.records("rejections") if r.reason == "takedown"]
    assert dropped and victim["sha256"] in dropped[0].detail and "takedown" in dropped[0].detail


def test_difficulty_is_the_subset_level_and_the_estimate_has_its_own_column(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake")
    lakefill.fill(lake)
    staged = stage_release(lake, version="v20261201", taxonomy=PlainTaxonomy())
    seen = set()
    for subset in SUBSETS:
        for split in ("query", "gallery"):
            table = pq.read_table(f"{staged.path}/{subset}/{split}.parquet")
            if not table.num_rows:
                continue
            seen.add(subset)
            assert set(table.column("difficulty").to_pylist()) == {SUBSET_DIFFICULTY[subset]}
            assert set(table.column("difficulty_estimate").to_pylist()) <= {"easy", "medium", "hard"}
    assert {"real_studio_flat", "real_streetlook"} <= seen
    noise = pq.read_table(f"{staged.path}/noise/gallery.parquet")
    assert set(noise.column("difficulty").to_pylist()) <= {""}
    assert json.loads(json.dumps(SUBSET_DIFFICULTY)) == {
        "real_studio_flat": "easy",
        "aigen_studio": "medium",
        "real_streetlook": "hard",
        "aigen_streetlook": "hard",
    }


def test_the_configured_device_and_trust_remote_code_reach_every_evaluation_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`[evaluation] device` and `trust_remote_code` (deploy/lookbench.toml: cuda; false, since GR-Lite
    now loads from its safetensors and only a pickle-only folder needs it) are what the flow passes
    to each model; dropping them ran evaluation on CPU and failed a pickle-only GR-Lite."""
    from lookbench_live.evaluation import evaluate as evaluation_module

    real = evaluation_module.run_evaluation
    seen: dict[str | None, dict] = {}

    def spy(lake, version, **kwargs):
        seen[kwargs.get("model")] = kwargs
        if kwargs.get("model") is None:
            return real(lake, version, **kwargs)
        raise RuntimeError("no GPU in this test")  # recorded, as a missing GPU would be

    monkeypatch.setattr(evaluation_module, "run_evaluation", spy)
    lake = Lake(tmp_path / "lake")
    lakefill.fill(lake)
    settings = Settings(
        evaluation=EvaluationSettings(models=["srpone/gr-lite"], device="cuda:1", trust_remote_code=True)
    )
    run = evaluate(_run(lake, tmp_path, settings))
    assert seen["srpone/gr-lite"]["device"] == "cuda:1"
    assert seen["srpone/gr-lite"]["trust_remote_code"] is True
    assert [f["model"] for f in run.evaluation_failures] == ["srpone/gr-lite"]
    assert "no GPU in this test" in run.evaluation_failures[0]["error"]


def test_release_build_refuses_what_the_refresh_refuses(tmp_path: Path) -> None:
    """Issue 26 §2: `release build` runs the flow's stage → content check → audit → commit. A
    release with an empty subset is not committed (`on_shortfall = "fail"`, the default), or is
    committed but never published as latest (`"hold"`), exactly as the refresh treats it."""
    from typer.testing import CliRunner

    from lookbench_live.cli import app
    from lookbench_live.flows.refresh import ReleaseHeldBack

    home = tmp_path / "lake"
    lakefill.fill(Lake(home))
    build = ["release", "build", "--version", "v20261201", "--home", str(home), "--config"]
    failing = tmp_path / "fail.toml"
    failing.write_text("[release]\nquery_share = 0.0001\n")  # no product becomes a studio query
    refused = CliRunner().invoke(app, [*build, str(failing)])
    assert isinstance(refused.exception, ReleaseHeldBack), refused.output
    assert "empty subset split(s): real_studio_flat/query" in str(refused.exception)
    assert not (home / "releases" / "v20261201" / "manifest.json").exists()

    holding = tmp_path / "hold.toml"
    holding.write_text('[release]\nquery_share = 0.0001\non_shortfall = "hold"\n')
    held = CliRunner().invoke(app, [*build, str(holding)])
    assert held.exit_code == 0, held.output
    assert (
        "not published as latest: content check: empty subset split(s): real_studio_flat/query" in held.output
    )
    manifest = read_manifest(Lake(home), "v20261201")
    assert (
        manifest["gate"]["passed"] is False
        and manifest["files"]["real_studio_flat/query.parquet"]["rows"] == 0
    )
    assert not (home / "releases" / "LATEST").exists()
