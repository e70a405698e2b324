"""The terminal: one line per stage with counts and time; library noise only with `--verbose`."""

from __future__ import annotations

import io
import os
import re
import subprocess
from pathlib import Path

import pytest
from evaluation_fixtures import make_release, sample_rows
from model_fixtures import tiny_clip

from lookbench_live.evaluation.vectors import cache_path
from lookbench_live.flows.progress import stage_counts, stage_progress
from lookbench_live.flows.summary import stage_lines
from lookbench_live.warehouse.lake import Lake

# What transformers prints, unasked, when CLIP's image processor loads without torchvision (this
# environment has none), and the shapes of other library noise the main job used to print.
NOISE = re.compile(
    r"^\[transformers\]|requires torchvision|Loading weights|Writing model shards|Warning:|warnings\.warn",
    re.M,
)


def test_one_line_per_stage_with_counts_and_elapsed_time() -> None:
    out = io.StringIO()
    with stage_progress(["crawl", "ingest", "release"], stream=out) as progress:
        progress.start("crawl")
        shards = [{"site": "a", "products": 30, "pages": 4, "partial": False}, {"site": "b", "products": 17}]
        progress.done(stage_counts(shards))
        progress.start("ingest")
        progress.done({"images": 222, "rejected": 0})
        progress.start("release")  # the block ends: closed as done, no counts
    lines = out.getvalue().splitlines()
    assert len(lines) == 3
    assert re.fullmatch(r"crawl\s+47 products, 4 pages\s+\(\d+\.\d s\)", lines[0]), lines[0]
    assert re.fullmatch(r"ingest\s+222 images\s+\(\d+\.\d s\)", lines[1]), lines[1]  # zero counts left out
    assert re.fullmatch(r"release\s+done\s+\(\d+\.\d s\)", lines[2]), lines[2]
    assert list(progress.timings) == ["crawl", "ingest", "release"]
    assert all(seconds >= 0 for seconds in progress.timings.values())
    assert progress.counts["crawl"] == {"products": 47, "pages": 4}  # booleans are states, not counts

    table = stage_lines({"timings": progress.timings, "stage_counts": progress.counts})
    assert table[0] == "## Stages"
    assert any(line.startswith("| crawl | ") and "products 47" in line for line in table)
    assert stage_lines({}) == []


def test_a_stage_that_raises_is_marked_failed() -> None:
    out = io.StringIO()
    with pytest.raises(RuntimeError), stage_progress(["dedup"], stream=out) as progress:
        progress.start("dedup")
        raise RuntimeError("boom")
    assert re.fullmatch(r"dedup\s+failed\s+\(\d+\.\d s\)\n", out.getvalue())
    assert "dedup" in progress.timings


@pytest.mark.slow
def test_library_noise_only_with_verbose(tmp_path, cli) -> None:
    """`evaluate --model <tiny CLIP folder>` makes transformers warn about the model's config and
    draw a "Loading weights" bar: lines the user cannot act on, hidden unless --verbose."""
    lake = Lake(tmp_path / "lake")
    make_release(lake, "v20261101", sample_rows())
    model = tiny_clip(tmp_path / "clip")
    # The user's environment, not the test session's: no verbosity switches preset.
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("TRANSFORMERS_VERBOSITY", "TQDM_DISABLE", "PYTHONWARNINGS", "LOOKBENCH_VERBOSE")
    }

    def evaluate(*flags: str) -> subprocess.CompletedProcess[str]:
        command = [cli, *flags, "evaluate", "latest", "--model", model, "--home", lake.home, "--json"]
        return subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)

    # Evaluation loads a model only for images its embedding cache lacks: each run starts with no
    # cache, so each really loads the model (the noise's source) and then writes the cache.
    cache = Path(cache_path(lake, "v20261101", model))
    assert not cache.exists()
    quiet = evaluate()
    assert quiet.returncode == 0, quiet.stderr[-3000:]
    assert cache.exists()  # the model was loaded and ran
    assert not NOISE.search(quiet.stderr), quiet.stderr[-3000:]
    assert '"model"' in quiet.stdout

    cache.unlink()
    loud = evaluate("--verbose")
    assert cache.exists()
    assert loud.returncode == 0, loud.stderr[-3000:]
    assert re.search(r"^\[transformers\]", loud.stderr, re.M), loud.stderr[-3000:]
    assert loud.stdout == quiet.stdout  # the same result either way


def test_the_stage_counter_counts_each_step_once_also_a_name_that_runs_twice() -> None:
    steps = ["crawl", "dedup", "generate", "dedup", "commit"]
    with stage_progress(steps, stream=io.StringIO()) as progress:
        positions = []
        for name in steps:
            progress.start(name)
            positions.append(progress.position)
            progress.done()
    assert positions == ["1/5", "2/5", "3/5", "4/5", "5/5"]


def test_a_long_stage_shows_its_counts_while_it_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a terminal a running stage prints a line with what it has counted so far
    (`lookbench_live.activity`); at a terminal the same counts fill its live row."""
    import threading

    from lookbench_live import activity
    from lookbench_live.flows import progress as progress_mod

    class Stream(io.StringIO):
        seen = threading.Event()

        def write(self, text: str) -> int:
            if "images generated" in text:
                self.seen.set()
            return super().write(text)

    monkeypatch.setattr(progress_mod, "PLAIN_EVERY_S", 0.02)
    out = Stream()
    with stage_progress(["generate"], stream=out) as progress:
        progress.start("generate")
        activity.count("images generated", 8)
        assert out.seen.wait(5), out.getvalue()
        progress.done({"generated": 8})
    during = out.getvalue().splitlines()[0]
    assert re.fullmatch(r"generate\s+… 8 images generated\s+\(\d+ s\)", during), during
    assert re.fullmatch(r"generate\s+8 generated\s+\(\d+\.\d s\)", out.getvalue().splitlines()[-1])
    # At a terminal, the running stage's column reads the same counts.
    from rich.progress import Task

    column = progress_mod.LiveCounts()
    task = Task(0, "generate", total=1, completed=0, _get_time=lambda: 0.0, fields={"counts": "running"})
    activity.reset()
    activity.count("pages crawled", 12)
    assert column.render(task).plain == "12 pages crawled"


def test_a_usage_error_gets_clicks_usage_and_exit_code_2(tmp_path, cli) -> None:
    """typer raises its vendored click's errors: the entry point still shows the usage and exits
    2 (a script tells a mistyped option from a failed run), and a bad value names the option."""
    env = {**os.environ, "LOOKBENCH_HOME": str(tmp_path / "none")}
    for argv, says in (
        (["refresh", "--bogus"], "No such option: --bogus"),
        (["query", "SELECT 1", "--timeout", "soon"], "--timeout"),
    ):
        run = subprocess.run([cli, *argv], capture_output=True, text=True, env=env, timeout=60)
        assert run.returncode == 2, (argv, run.returncode, run.stderr)
        assert "Usage: lookbench-live" in run.stderr and says in run.stderr, run.stderr
