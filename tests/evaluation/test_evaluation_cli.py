"""`lookbench-live evaluate`, `leaderboard` and their errors, through the installed command."""

from __future__ import annotations

import json
import subprocess

import pytest
from evaluation_fixtures import make_release, sample_rows

from lookbench_live.evaluation.evaluate import metric_names

V = "v20261101"
# Each command starts a Python with torch: a few seconds apiece on 2 busy cores.
pytestmark = [
    pytest.mark.slow,
    # The shared `lake` fixture holds release V of the sample rows.
    pytest.mark.lake(fill=lambda lake: make_release(lake, V, sample_rows(shift=3))),
]


def run(cli: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([cli, *args], capture_output=True, text=True, timeout=180)


def test_evaluate_json_then_leaderboard(cli, lake):
    out = run(cli, "evaluate", "latest", "--json", "--home", lake.home)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["release"] == V and result["model"] == "baseline:hsv-hog-v1"
    for entry in [*result["subsets"].values(), result["overall"]]:
        assert set(metric_names()) <= set(entry)
    after = run(cli, "evaluate", V, "--after", "2026-10-05", "--json", "--home", lake.home)
    assert json.loads(after.stdout)["overall"]["queries"] == 8  # queries first seen 10 and 20 days after T0
    board = run(cli, "leaderboard", "--json", "--home", lake.home)
    assert board.returncode == 0, board.stderr
    rows = json.loads(board.stdout)
    assert [(r["release"], r["after"]) for r in rows] == [(V, ""), (V, "2026-10-05")]
    assert rows[0]["fine_r1"] == pytest.approx(result["overall"]["fine_recall@1"], abs=0.01)
    table = run(cli, "evaluate", V, "--home", lake.home)
    assert table.returncode == 0 and "overall" in table.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["evaluate", "v20200101"], "does not exist"),
        (["evaluate", "latest", "--after", "yesterday"], "not an ISO date"),
        (["evaluate", "latest", "--embeddings", "/nonexistent.parquet"], "does not exist"),
    ],
)
def test_errors_are_one_line(cli, lake, args, message):
    out = run(cli, *args, "--home", lake.home)
    assert out.returncode != 0
    assert message in out.stderr and "Traceback" not in out.stderr


def test_leaderboard_on_an_empty_lake(cli, tmp_path):
    out = run(cli, "leaderboard", "--home", str(tmp_path / "empty"))
    assert out.returncode == 0 and "no evaluations yet" in out.stdout


def test_evaluate_a_range_of_releases_with_the_contamination_gap(cli, lake):
    make_release(lake, "v20261201", sample_rows(shift=5))
    out = run(
        cli,
        "evaluate",
        "--releases",
        "v20261101..latest",
        "--after",
        "2026-10-05",
        "--json",
        "--home",
        lake.home,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert [r["release"] for r in result["releases"]] == [V, "v20261201"]
    single = json.loads(
        run(cli, "evaluate", V, "--after", "2026-10-05", "--json", "--home", lake.home).stdout
    )
    assert result["releases"][0]["overall"] == single["overall"]  # the same as one release with --after
    after, before = result["after_cutoff"], result["before"]
    total = sum(r["overall"]["queries"] for r in result["releases"])
    assert after["queries"] == total == 16 and before["queries"] > 0
    for metric, gap in result["gap"].items():
        assert gap == round(before[metric] - after[metric], 4)
    bad = run(cli, "evaluate", "--releases", "v20990101..latest", "--home", lake.home)
    assert bad.returncode != 0 and "no committed release" in bad.stderr


def test_evaluate_refuses_a_release_that_fails_verification(cli, lake):
    """X13: a tampered release is not scored (exit 1, naming the fault); --allow-unverified scores
    it with a warning and records nothing in the leaderboard."""
    from pathlib import Path

    import pyarrow.parquet as pq

    # Altered but still readable (a flipped byte may leave nothing to score at all): the same
    # rows written again, so only the manifest's sha256 and size tell.
    target = Path(lake.path("releases", V, "real_studio_flat", "gallery.parquet"))
    pq.write_table(pq.read_table(target), target, compression="gzip")
    refused = run(cli, "evaluate", "latest", "--json", "--home", lake.home)
    assert refused.returncode == 1 and refused.stdout == ""
    assert f"release {V} fails verification" in refused.stderr
    assert "real_studio_flat/gallery.parquet" in refused.stderr and "Traceback" not in refused.stderr
    ranged = run(cli, "evaluate", "--releases", "all", "--home", lake.home)
    assert ranged.returncode == 1 and "fails verification" in ranged.stderr
    anyway = run(cli, "evaluate", "latest", "--json", "--allow-unverified", "--home", lake.home)
    assert anyway.returncode == 0, anyway.stderr
    assert "warning:" in anyway.stderr and "not recorded" in anyway.stderr
    assert json.loads(anyway.stdout)["release"] == V
    board = run(cli, "leaderboard", "--json", "--home", lake.home)
    assert json.loads(board.stdout) == []
