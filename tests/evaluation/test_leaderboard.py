"""`lookbench-live leaderboard`: the paper's layout from the `evaluations` table, as wide as the
terminal, never cutting a score short; outfit-level Fine R@1 where evaluations have it."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from lookbench_live.cli import app
from lookbench_live.schema.records import Evaluation
from lookbench_live.schema.release import SUBSETS
from lookbench_live.warehouse.lake import Lake

LONG = "organisation-with-a-long-name/very-long-model-name-finetuned-on-fashion"
OLD, NEW = "v20261001", "v20261101"


def _evaluations(release: str, model: str, fine: float, outfit: float | None) -> list[Evaluation]:
    rows = []
    for i, subset in enumerate([*SUBSETS, "overall"]):
        metrics = {
            "fine_recall@1": f"{fine + i:.4f}",
            "coarse_recall@1": f"{fine + 10 + i:.4f}",
            "mrr": "1.0",
        }
        if subset == "real_streetlook" and outfit is not None:
            metrics |= {
                "outfit_fine_recall@1": f"{outfit:.4f}",
                "outfit_looks": "12",
                "outfit_crops_per_look": "2.5",
            }
        rows.append(
            Evaluation(
                release=release, model=model, subset=subset, after="", queries=10, corpus=9, metrics=metrics
            )
        )
    return rows


@pytest.fixture()
def home(tmp_path):
    lake = Lake(tmp_path / "lake")
    # The older release's evaluations predate outfit metrics.
    lake.append(_evaluations(OLD, LONG, 50.0, None) + _evaluations(OLD, "small", 60.0, None))
    lake.append(_evaluations(NEW, LONG, 70.125, 33.333) + _evaluations(NEW, "small", 40.0, 21.5))
    return lake.home


def _run(home, *args, columns: int = 200):
    result = CliRunner().invoke(app, ["leaderboard", *args, "--home", home], env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("columns", [200, 80])
def test_paper_layout_fits_the_terminal(home, columns):
    out = _run(home, columns=columns)
    assert max(len(line) for line in out.splitlines()) <= columns
    assert "…" not in out  # no score or name is cut short
    parts = out.count("the terminal is too narrow for one table")
    assert (parts == 0) if columns == 200 else (parts >= 2)
    # Every score in full: per subset coarse and fine, overall, outfit on Real StreetLook
    # (70.125 and its subsets 71.125 …; overall is the fifth row of each model: + 4).
    for score in ("80.12", "70.12", "71.12", "73.12", "74.12", "84.12", "33.33", "21.50", "60.00", "64.00"):
        assert score in out, score
    assert out.count("–") == 2  # the older release's two outfit cells (evaluated before outfit metrics)
    if columns == 200:
        lines = [line for line in out.splitlines() if "v2026" in line]
        # Newest release first, best overall Fine R@1 first within a release.
        assert [(NEW in line, "small" in line) for line in lines] == [
            (True, False),
            (True, True),
            (False, True),
            (False, False),
        ]


def test_overall_layout_json_and_a_bad_layout(home):
    assert "ndcg5" in _run(home, "--layout", "overall") and "mrr" in _run(home, "--layout", "overall")
    rows = json.loads(_run(home, "--json"))
    assert [(r["release"], r["model"]) for r in rows] == [
        (NEW, LONG),
        (NEW, "small"),
        (OLD, "small"),
        (OLD, LONG),
    ]
    assert rows[0]["fine_r1"] == 74.12 and rows[0]["outfit_fine_r1"] == 33.33
    assert rows[0]["subsets"]["real_streetlook"] == {"coarse_r1": 82.12, "fine_r1": 72.12, "queries": 10}
    assert rows[2]["outfit_fine_r1"] is None
    bad = CliRunner().invoke(app, ["leaderboard", "--layout", "wide", "--home", home])
    assert bad.exit_code == 2 and "--layout" in bad.output
