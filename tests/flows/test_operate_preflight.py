"""Issue 25: `refresh` and `backfill` refuse a bad option, an `--as-of` before the latest release, a
configuration without a look source and a held lake with one `error:` line naming the problem,
before Prefect is imported; read commands never create a lake."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import lakefill
import pytest

from lookbench_live.warehouse.lake import Lake

# The real CLI in a fresh interpreter; after it exits, says whether Prefect was ever imported.
RUNNER = textwrap.dedent(
    """
    import json, sys
    from lookbench_live.cli import main
    sys.argv = ["lookbench-live", *sys.argv[1:]]
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code
    loaded = any(name == "prefect" or name.startswith("prefect.") for name in sys.modules)
    print(json.dumps({"code": code, "prefect": loaded}))
    """
)


def run_cli(*args: str, cwd: Path) -> tuple[dict, list[str]]:
    proc = subprocess.run(
        [sys.executable, "-c", RUNNER, *args], capture_output=True, text=True, timeout=120, cwd=cwd
    )
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    return json.loads(proc.stdout.strip().splitlines()[-1]), lines


def assert_refused(result: dict, lines: list[str], naming: str) -> None:
    assert result["code"] == 1, (result, lines)
    assert len(lines) == 1 and lines[0].startswith(f"error: {naming}"), lines
    assert result["prefect"] is False, "refused after Prefect was imported"


@pytest.mark.parametrize(
    ("args", "naming"),
    [
        (["refresh", "--as-of", "2026-13-45"], "--as-of '2026-13-45' is not a date"),
        (["refresh", "--as-of", "yesterday"], "--as-of 'yesterday' is not a date"),
        (["refresh", "--since", "last month"], "--since 'last month' is not a date"),
        (
            ["refresh", "--as-of", "2026-11-01", "--since", "2026-12-01"],
            "--since 2026-12-01 is after --as-of",
        ),
        (["backfill", "--start", "2026-10-01", "--end", "soon"], "--end 'soon' is not a date"),
        (["backfill", "--start", "2026-11-01", "--end", "2026-10-01"], "--start 2026-11-01 --end 2026-10-01"),
        (
            ["backfill", "--start", "2026-10-01", "--end", "2026-11-01", "--stages", "relase"],
            "--stages relase: not a stage",
        ),
    ],
)
def test_each_bad_option_fails_with_one_line_naming_it_before_prefect(
    tmp_path: Path, args: list[str], naming: str
) -> None:
    home = tmp_path / "lake"
    result, lines = run_cli(*args, "--home", str(home), cwd=tmp_path)
    assert_refused(result, lines, naming)
    assert not home.exists()  # no work began


@pytest.mark.lake(fill=lakefill.fill)
def test_an_as_of_before_the_latest_release_is_refused_before_prefect(lake: Lake, tmp_path: Path) -> None:
    from test_release import PlainTaxonomy

    from lookbench_live.warehouse.release import build_release

    build_release(lake, version="v20261201", taxonomy=PlainTaxonomy())
    before = sorted(p.name for p in Path(lake.path("releases")).iterdir())
    result, lines = run_cli("refresh", "--home", lake.home, "--as-of", "2026-11-01", cwd=tmp_path)
    assert_refused(result, lines, "--as-of 2026-11-01 is before the lake's latest release v20261201")
    assert sorted(p.name for p in Path(lake.path("releases")).iterdir()) == before


def test_a_configuration_without_a_look_source_is_refused_before_crawling(tmp_path: Path) -> None:
    config = tmp_path / "lookbench.toml"
    config.write_text(
        '[[crawl.sites]]\nname = "shop"\nplatform = "shopify"\nbase_url = "https://shop.example"\n',
        encoding="utf-8",
    )
    home = tmp_path / "lake"
    result, lines = run_cli("refresh", "--config", str(config), "--home", str(home), cwd=tmp_path)
    assert_refused(result, lines, "crawl.sites (shop): no site has look pages")
    assert "look_paths" in lines[0]  # says how to fix it
    assert not home.exists()


def test_a_configuration_with_look_pages_passes_the_reach_check() -> None:
    from lookbench_live.config import Settings
    from lookbench_live.flows.preflight import check_reach

    sites = [
        {"name": "shop", "platform": "shopify", "base_url": "https://shop.example"},
        {"name": "mag", "platform": "schema_org", "base_url": "https://mag.example", "look_paths": ["/lb/"]},
    ]
    check_reach(Settings.model_validate({"crawl": {"sites": sites}}))
    check_reach(Settings())  # the embedded sample store has look pages


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_a_second_refresh_seconds_after_the_first_is_refused_before_prefect(tmp_path: Path) -> None:
    home = tmp_path / "lake"
    lock = home / "locks" / "writer.lock"
    first = subprocess.Popen(
        [sys.executable, "-c", RUNNER, "refresh", "--home", str(home), "--port", str(_free_port())],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not (lock.exists() and lock.read_text(encoding="utf-8").strip()):
            assert first.poll() is None and time.monotonic() < deadline, (
                "the first refresh never took the lock"
            )
            time.sleep(0.1)
        # The first is still starting Prefect (or crawling): the second must not get past the lock.
        result, lines = run_cli("refresh", "--home", str(home), "--port", str(_free_port()), cwd=tmp_path)
        assert first.poll() is None
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    assert_refused(result, lines, "another lookbench-live writer holds the writer lock")


@pytest.mark.parametrize(
    "args",
    [
        ["release", "list"],
        ["release", "verify", "latest"],
        ["query", "SELECT 1"],
        ["export", "latest", "--to", "x"],
    ],
)
def test_read_commands_never_create_a_lake(tmp_path: Path, args: list[str]) -> None:
    home = tmp_path / "nonexistent"
    result, lines = run_cli(*args, "--home", str(home), cwd=tmp_path)
    assert result["code"] == 1 and len(lines) == 1 and lines[0].startswith(f"error: no lake at {home}"), lines
    assert "--home" in lines[0]
    assert not home.exists() and not (tmp_path / "x").exists()


def test_a_scheduled_month_keeps_its_version_when_its_run_is_retried_later_in_the_month() -> None:
    """The deployment passes its cron (`schedule`): a run on the 1st and its retry on the 9th build
    v20261201, while the as-of (stamped as `first_seen_at`) stays the day each really ran."""
    from lookbench_live.config import Settings
    from lookbench_live.flows.refresh import refresh_version

    settings = Settings()
    for today in ("2026-12-01T03:00:05+00:00", "2026-12-09T17:30:00+00:00", "2026-12-31T23:59:00+00:00"):
        assert refresh_version(settings, None, None, today, "0 3 1 * *") == "v20261201", today
    assert refresh_version(settings, None, None, "2026-12-01T02:59:00+00:00", "0 3 1 * *") == "v20261101"
    # An explicit --as-of or --version wins; without a schedule (the CLI) the version is the as-of day.
    assert refresh_version(settings, "2026-12-09", None, None, "0 3 1 * *") == "v20261209"
    assert refresh_version(settings, None, "v20261215", None, "0 3 1 * *") == "v20261215"
    assert refresh_version(settings, None, None, "2026-12-09T10:00:00+00:00", None) == "v20261209"


def test_the_preflight_stages_are_the_flows_stages() -> None:
    from lookbench_live.flows.preflight import STAGES
    from lookbench_live.flows.refresh import ALL_STAGES

    assert STAGES == ALL_STAGES


@pytest.fixture(scope="module")
def prefect_server(tmp_path_factory: pytest.TempPathFactory) -> str:
    """`prefect server start` on loopback with a Prefect home of its own; yields its API URL."""
    import httpx

    home = tmp_path_factory.mktemp("prefect-server")
    port = _free_port()
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_UI_ENABLED": "false"}
    env.pop("PREFECT_API_URL", None)
    prefect = str(Path(sys.executable).parent / "prefect")
    server = subprocess.Popen(
        [prefect, "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}/api"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None, "prefect server start exited"
            assert time.monotonic() < deadline, "prefect server start not healthy in 120 s"
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        yield url
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


@pytest.mark.slow
def test_a_failing_run_notifies_the_configured_webhook_and_prints_one_line(
    tmp_path: Path, prefect_server: str
) -> None:
    """Against a loopback `prefect server start`: the configuration names the variable holding
    the webhook's URL; a backfill that fails in the flow (nothing to release in an empty lake)
    POSTs one JSON notification naming the run, its state and why; the terminal gets one
    `error:` line, no Prefect traceback; the server has the run named, tagged, Failed, with its
    INFO lines and the error's traceback."""
    import http.server
    import threading

    import httpx

    received: list[dict] = []

    class Hook(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    config = tmp_path / "lookbench.toml"
    config.write_text('[flows]\nnotify_url_env = "LOOKBENCH_TEST_HOOK"\n', encoding="utf-8")
    url = f"http://127.0.0.1:{server.server_port}/hook?token=canary-4711"
    env = {**os.environ, "LOOKBENCH_TEST_HOOK": url, "PREFECT_API_URL": prefect_server}
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "lookbench_live.cli", "backfill", "--start", "2026-10-01", "--end",
             "2026-11-01", "--stages", "release", "--home", str(tmp_path / "lake"), "--config", str(config)],
            capture_output=True, text=True, timeout=300, env=env,
        )  # fmt: skip
    finally:
        server.shutdown()
    assert proc.returncode == 1, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("error: nothing to release"), proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "canary-4711" not in proc.stderr + proc.stdout
    (body,) = received
    assert body["state"] == "Failed" and body["run"] == "backfill-2026-10-01-2026-11-01"
    assert body["flow"] == "lookbench-backfill" and "nothing to release" in body["message"]
    assert body["text"].startswith("lookbench-live backfill-2026-10-01-2026-11-01 Failed: ")

    (run,) = httpx.post(f"{prefect_server}/flow_runs/filter", json={}, timeout=10).json()
    assert run["name"] == "backfill-2026-10-01-2026-11-01" and run["state_type"] == "FAILED"
    assert {"lookbench-live", "backfill"} <= set(run["tags"])
    logs = httpx.post(
        f"{prefect_server}/logs/filter", json={"logs": {"flow_run_id": {"any_": [run["id"]]}}}, timeout=10
    ).json()
    assert any(log["level"] == 20 for log in logs), logs  # INFO lines reach the server
    assert any(log["level"] == 40 and "nothing to release" in log["message"] for log in logs), logs
    assert not any("canary-4711" in log["message"] for log in logs)


def test_a_site_flagged_for_its_yield_is_in_the_manifest_entry_and_the_notification() -> None:
    from lookbench_live.flows import notify
    from lookbench_live.flows.stages import SiteOutcome

    flag = "yield_drop: 0 products from 12 pages, after 40 in its last month"
    site = SiteOutcome("shop", "ok", flag=flag)
    assert site.manifest_entry() == {"site": "shop", "status": "ok", "reason": "", "flag": flag}
    assert "flag" not in SiteOutcome("shop", "ok").manifest_entry()
    outcome = site.as_dict()
    summary = {
        "stages": {"crawl": [outcome, {"site": "mag", "status": "ok"}]},
        "release": {"published_latest": True},
    }
    assert notify.flags(summary) == [f"site shop: {flag}"]
    body = notify.payload("lookbench-refresh", "refresh-v20261201", "Completed", "", notify.flags(summary))
    assert body["flags"] == [f"site shop: {flag}"] and flag in body["text"]
    assert notify.flags({"stages": {"crawl": [{"site": "mag", "status": "ok"}]}}) == []


@pytest.mark.lake(fill=lakefill.fill)
def test_backfill_and_export_deployments_take_their_parameters_and_export_runs(
    lake: Lake, tmp_path: Path
) -> None:
    """`serve` serves the backfill and the export beside the refresh, each run given its
    parameters; the export flow's body is the CLI's export, verified at the destination."""
    from test_release import PlainTaxonomy

    from lookbench_live.config import Settings
    from lookbench_live.flows.deploy import backfill_deployment, export_deployment, export_flow
    from lookbench_live.warehouse.release import build_release

    backfill = backfill_deployment(Settings(), "/etc/lookbench.toml")
    assert backfill.name == "backfill" and backfill.parameters == {"config_path": "/etc/lookbench.toml"}
    assert not backfill.schedules and {"lookbench-live", "backfill"} <= set(backfill.tags)
    assert backfill.flow_name == "lookbench-backfill"
    export = export_deployment(lake.home)
    assert export.name == "export" and export.parameters == {"home": lake.home}
    assert export.flow_name == "lookbench-export" and not export.schedules

    build_release(lake, version="v20261201", taxonomy=PlainTaxonomy())
    result = export_flow.fn("latest", str(tmp_path / "out"), lake.home)
    assert result["version"] == "v20261201" and result["files"] > 0 and not result["already_there"]
    assert (tmp_path / "out" / "v20261201" / "manifest.json").exists()
