"""One writer lock for every writer of a lake (X6): the flow and each CLI writer exclude each other,
a refused writer names the holder, and a killed holder's lock is taken over and recorded."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lookbench_live.warehouse.lake import Lake, LakeError

HOLD = (
    "import sys, time\n"
    "from lookbench_live.warehouse.lake import Lake\n"
    "with Lake(sys.argv[1]).writer_lock('refresh-flow'):\n"
    "    print('held', flush=True); time.sleep(600)\n"
)


def _holder(home: str) -> subprocess.Popen[str]:
    process = subprocess.Popen([sys.executable, "-c", HOLD, home], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stdout.readline().strip() == "held"
    return process


@pytest.fixture
def held(tmp_path: Path):
    home = str(tmp_path / "lake")
    Lake(home)
    process = _holder(home)
    yield home, process
    process.kill()
    process.wait()


WRITERS = {
    "release build": ["release", "build", "--version", "v20261201"],
    "dedup": ["dedup"],
    "annotate": ["annotate"],
    "generate": ["generate", "--studio", "1", "--street", "0"],
    "evaluate": ["evaluate", "latest"],
    "evaluate --releases": ["evaluate", "--releases", "v20261101..latest"],
    "takedown add": ["takedown", "add", "--url", "https://shop.example.com/products/red-dress"],
}


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_every_cli_writer_refuses_while_the_flow_holds_the_lake(held, writer: str) -> None:
    from lookbench_live.cli import app

    home, process = held
    before = sorted(p.name for p in Path(home).rglob("*"))
    result = CliRunner().invoke(app, [*WRITERS[writer], "--home", home])
    assert result.exit_code != 0
    message = str(result.exception)
    assert isinstance(result.exception, LakeError), result.output
    assert f"refresh-flow (pid {process.pid}" in message  # names the holder
    assert sorted(p.name for p in Path(home).rglob("*")) == before  # wrote nothing


def test_flow_and_cli_writers_share_one_lock(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake")
    with (
        lake.writer_lock("flow"),
        pytest.raises(LakeError, match=r"flow \(pid"),
        Lake(tmp_path / "lake").writer_lock("release build"),
    ):
        pass


def test_a_killed_local_holder_is_taken_over_and_recorded(tmp_path: Path) -> None:
    home = str(tmp_path / "lake")
    process = _holder(home)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    with Lake(home).writer_lock("release build"):
        pass
    rows = Lake(home).read("rejections").to_pylist()
    assert [(r["stage"], r["reason"]) for r in rows] == [("lock", "lock_taken_over")]
    assert f"refresh-flow (pid {process.pid}" in rows[0]["detail"]
    with Lake(home).writer_lock("dedup"):  # a clean release leaves nothing to take over
        pass
    assert len(Lake(home).read("rejections")) == 1


KILLED_MID_WRITE = (
    "import os, signal, sys\n"
    "from lookbench_live.warehouse import lake as lake_mod\n"
    "from lookbench_live.schema.records import Rejection\n"
    "real_replace = os.replace\n"
    "def die(src, dst):  # the temp file is written and synced, the rename never happens\n"
    "    os.kill(os.getpid(), signal.SIGKILL)\n"
    "lake = lake_mod.Lake(sys.argv[1])\n"
    "with lake.writer_lock('refresh-flow'):\n"
    "    lake.append([Rejection(stage='crawl', item='u1', reason='http_404', detail='')])\n"
    "    os.replace = die\n"
    "    lake.append([Rejection(stage='crawl', item='u2', reason='http_404', detail='')])\n"
)


def test_the_next_writer_after_a_sigkill_reconciles_lock_temp_files_and_ledger(tmp_path: Path) -> None:
    """O3: no exit hook runs under SIGKILL. The next start of any writer takes the lock over
    (recorded), sweeps the killed writer's temp file, and the rows it had committed stay;
    the row it was writing is absent, not half there."""
    home = str(tmp_path / "lake")
    killed = subprocess.run([sys.executable, "-c", KILLED_MID_WRITE, home], capture_output=True, text=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    debris = [p for p in Path(home).rglob(".tmp-*")]
    assert debris, "the killed writer left its temp file"
    from lookbench_live.cli import app

    # The next writer is a CLI command, not the flow: reconciling does not depend on who starts.
    result = CliRunner().invoke(
        app, ["takedown", "add", "--url", "https://shop.example.com/p/1", "--home", home]
    )
    assert result.exit_code == 0, result.output
    assert not [p for p in Path(home).rglob(".tmp-*")]
    rows = Lake(home).read("rejections").to_pylist()
    assert sorted(r["item"] for r in rows if r["stage"] == "crawl") == ["u1"]
    assert [r["reason"] for r in rows if r["stage"] == "lock"] == ["lock_taken_over"]
    assert len(Lake(home).read("takedowns")) == 1
