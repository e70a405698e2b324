"""`lookbench-live generate` on a fresh lake, with the embedded tiny pipeline."""

from __future__ import annotations

from typer.testing import CliRunner

from lookbench_live.cli import app
from lookbench_live.warehouse.lake import Lake

CONFIG = """
[generation]
width = 32
height = 32
steps = 2
gallery_per_item = 1
cpu_threads = 1
device = "cpu"
"""


def test_generate_command_builds_the_tiny_pipeline_and_resumes(tmp_path):
    config = tmp_path / "lookbench.toml"
    config.write_text(CONFIG)
    home = tmp_path / "lake"
    runner = CliRunner()
    args = ["generate", "--studio", "1", "--street", "0", "--config", str(config), "--home", str(home)]
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    assert "2 generated, 0 already in the lake, 0 failed" in first.output
    assert "tiny local" in first.output
    models = list((home / "models").iterdir())
    assert len(models) == 1 and (models[0] / "model_index.json").exists()
    lake = Lake(home)
    generations = list(lake.records("generations"))
    assert len(generations) == 2 and all(g.model == models[0].name for g in generations)

    second = runner.invoke(app, args)
    assert second.exit_code == 0, second.output
    assert "0 generated, 2 already in the lake" in second.output


def test_generate_reports_a_bad_setting_by_name(tmp_path):
    config = tmp_path / "bad.toml"
    config.write_text("[generation]\nsteps = 0\n")
    result = CliRunner().invoke(app, ["generate", "--config", str(config), "--home", str(tmp_path / "lake")])
    assert result.exit_code != 0
    assert "generation.steps" in str(result.exception)
