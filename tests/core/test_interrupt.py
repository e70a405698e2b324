"""Issue 25: SIGINT and SIGTERM become a stop at the next safe point (`lookbench_live.interrupt`);
a crawl subprocess is stopped within a second of one. The whole run: test_flows.py
::test_sigint_and_sigterm_stop_at_a_safe_point_and_the_rerun_publishes_the_same_release."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lookbench_live import interrupt


@pytest.fixture(autouse=True)
def _forget() -> None:
    interrupt.reset()
    yield
    interrupt.reset()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_is_a_stop_request_raised_at_the_next_safe_point(signum: int) -> None:
    with interrupt.guard():
        os.kill(os.getpid(), signum)  # delivered before kill() returns, to this (the main) thread
        assert interrupt.requested() == signum
        with pytest.raises(interrupt.Interrupted) as raised:
            interrupt.check("generate")
    assert raised.value.exit_code == 128 + signum and raised.value.stage == "generate"
    assert str(raised.value).startswith(f"interrupted by {signal.Signals(signum).name} during generate: ")
    assert signal.getsignal(signum) is not interrupt._handler  # the previous handler is back


def test_a_crawl_subprocess_is_stopped_within_a_second_of_the_request(tmp_path: Path) -> None:
    from lookbench_live.scrapers.crawl import _wait

    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        interrupt.request(signal.SIGINT)
        started = time.monotonic()
        with pytest.raises(interrupt.Interrupted):
            _wait(process, 60, tmp_path)
        assert time.monotonic() - started < 1
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
