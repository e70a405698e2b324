"""A run's temporary Prefect API is its own: Prefect picks a random port that is free when it
looks, so two runs starting at once can pick the same one; the run whose server then fails to
bind is answered by the other run's server, and loses its API when that run exits
("connection refused" at its next state change: CI, two test workers each starting runs)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.slow

# The race's outcome, made certain: a server of another run already answers /api/health on the
# port Prefect picks. It stops before the flow runs, as the other run ends; the flow must still
# record its states, on its own server, on another port.
RUN = textwrap.dedent(
    """
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class OtherRun(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b"true")

        def log_message(self, *args):
            pass

    other = ThreadingHTTPServer(("127.0.0.1", 0), OtherRun)
    taken = other.server_address[1]
    threading.Thread(target=other.serve_forever, daemon=True).start()

    from prefect.server.api import server as api

    api.SubprocessASGIServer.find_available_port = lambda self: taken

    from lookbench_live.flows.runtime import start_local_api

    start_local_api()
    other.shutdown()
    other.server_close()

    from prefect import flow

    @flow
    def recorded() -> int:
        return 7

    state = recorded(return_state=True)
    print("port", api.SubprocessASGIServer().port, "taken", taken)
    print("state", state.type.value, state.result())
    """
)


def test_a_runs_local_api_serves_on_a_port_no_other_run_holds(tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env["PREFECT_HOME"] = str(tmp_path / "prefect")
    run = subprocess.run(
        [sys.executable, "-c", RUN], env=env, capture_output=True, text=True, timeout=240, cwd=tmp_path
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in run.stdout.splitlines())
    port, taken = lines["port"].split(" taken ")
    assert port != taken
    assert lines["state"] == "COMPLETED 7"
    # The API's own output is in a file, not in the run's terminal.
    assert (tmp_path / "prefect" / "local-api.log").is_file()
    assert "uvicorn" not in run.stderr.lower() and "Traceback" not in run.stderr
