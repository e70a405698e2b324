"""R9, R10, X19: `lookbench-live query` SQL can neither write nor touch files outside the lake's views,
and a query is bounded in time, memory, spill and threads."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from lookbench_live.schema.records import Rejection
from lookbench_live.warehouse.lake import Lake
from lookbench_live.warehouse.query import QueryError, run_query


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    lake = Lake(tmp_path / "lake")
    lake.append([Rejection(stage="crawl", item="https://x.example/1", reason="http_404")])
    (tmp_path / "outside.csv").write_text("secret,value\ncanary-row-5e1f,1\n")
    return lake


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM read_csv('/etc/passwd')",
        "SELECT * FROM read_csv_auto('{outside}')",
        "SELECT * FROM sniff_csv('{outside}')",
        "SELECT * FROM read_text('/etc/hostname')",
        "SELECT * FROM read_parquet('{outside}')",
    ],
)
def test_file_functions_are_denied(lake: Lake, tmp_path: Path, sql: str) -> None:
    with pytest.raises(QueryError) as info:
        run_query(lake, sql.format(outside=tmp_path / "outside.csv"))
    assert "canary-row-5e1f" not in str(info.value) and "root:x:0" not in str(info.value)
    assert "disabled by configuration" in str(info.value) or "Permission" in str(info.value)


@pytest.mark.parametrize(
    "sql",
    [
        "ATTACH '{db}' AS x",
        "COPY (SELECT 1) TO '{out}'",
        "INSTALL httpfs",
        "SET enable_external_access = true",
        "DELETE FROM rejections",
        "CREATE TABLE t AS SELECT 1",
        "SELECT 1; COPY (SELECT 1) TO '{out}'",
    ],
)
def test_writes_attach_copy_and_settings_are_refused(lake: Lake, tmp_path: Path, sql: str) -> None:
    with pytest.raises(QueryError):
        run_query(lake, sql.format(db=tmp_path / "x.duckdb", out=tmp_path / "out.csv"))
    assert not (tmp_path / "out.csv").exists() and not (tmp_path / "x.duckdb").exists()


def test_configuration_is_locked_even_inside_a_select(lake: Lake) -> None:
    with pytest.raises(QueryError):
        run_query(lake, "SELECT set_config('enable_external_access', 'true')")
    assert run_query(lake, "SELECT count(*) AS n FROM rejections").column("n").to_pylist() == [1]


def test_query_raises_no_library_warning(lake: Lake) -> None:
    """13 §2: `query` prints results and errors only; DuckDB's Arrow-copy UserWarning never fires."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = run_query(lake, "SELECT stage, reason FROM rejections")
    assert table.to_pylist() == [{"stage": "crawl", "reason": "http_404"}]
    assert [str(w.message) for w in caught] == []


# ---------------------------------------------------------------------- X19: bounded queries
CROSS_JOIN = "SELECT count(*) AS n FROM range(1000000) a, range(1000000) b"  # 10^12 rows: hours


def test_a_query_past_its_timeout_is_stopped_with_one_error_line(lake: Lake, cli: str) -> None:

    started = time.monotonic()
    done = subprocess.run(
        [cli, "query", "--timeout", "1", CROSS_JOIN],
        capture_output=True,
        text=True,
        env={**os.environ, "LOOKBENCH_HOME": lake.home},
        timeout=120,
    )
    elapsed = time.monotonic() - started
    assert done.returncode == 1, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "timeout of 1 s" in lines[0], lines
    assert elapsed < 30, f"a 1 s timeout took {elapsed:.0f} s"


def test_the_timeout_comes_from_the_config_file_and_the_connection_is_bounded(
    lake: Lake, tmp_path: Path
) -> None:
    from lookbench_live.config import load_settings
    from lookbench_live.warehouse.query import QueryTimeout

    config = tmp_path / "lookbench.toml"
    config.write_text('[query]\ntimeout = 0.5\nmemory_limit = "300MiB"\ntemp_limit = "1GiB"\nthreads = 2\n')
    limits = load_settings(config).query
    with pytest.raises(QueryTimeout, match=r"timeout of 0\.5 s"):
        run_query(lake, CROSS_JOIN, limits)
    settings = run_query(
        lake,
        "SELECT current_setting('memory_limit') AS memory, current_setting('max_temp_directory_size') AS temp, "
        "current_setting('threads') AS threads, current_setting('lock_configuration') AS locked, "
        "current_setting('enable_external_access') AS external",
        limits,
    ).to_pylist()
    assert settings == [
        {"memory": "300.0 MiB", "temp": "1.0 GiB", "threads": 2, "locked": True, "external": False}
    ]


def test_the_default_limits_are_a_share_of_the_machine(lake: Lake) -> None:
    """Not DuckDB's 80% of RAM and 90% of the disk: a quarter of RAM at most 4 GiB, a quarter of the
    free temp space at most 8 GiB, at most 4 threads, spilling into a folder of its own."""

    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    free = shutil.disk_usage(tempfile.gettempdir()).free
    (row,) = run_query(
        lake,
        "SELECT current_setting('memory_limit') AS memory, current_setting('max_temp_directory_size') AS temp, "
        "current_setting('threads') AS threads, current_setting('temp_directory') AS folder",
    ).to_pylist()

    def size(text: str) -> float:
        number, unit = text.split()
        return float(number) * {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}[unit]

    assert size(row["memory"]) <= min(4 << 30, max(256 << 20, ram // 4)) * 1.01
    assert size(row["temp"]) <= min(8 << 30, free // 4) * 1.01
    assert row["threads"] <= 4
    assert row["folder"].startswith(os.path.join(tempfile.gettempdir(), "lookbench-query-"))


def test_ctrl_c_interrupts_a_running_query(lake: Lake, cli: str) -> None:

    process = subprocess.Popen(
        [cli, "query", CROSS_JOIN],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "LOOKBENCH_HOME": lake.home},
        # A background job's SIGINT may be ignored by the shell that ran pytest: Ctrl-C as at a terminal.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        time.sleep(4)  # imported, connected, the cross join running
        assert process.poll() is None, process.communicate()
        sent = time.monotonic()
        process.send_signal(signal.SIGINT)
        process.wait(timeout=20)
        assert time.monotonic() - sent < 10
        assert process.returncode == 130
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
