"""R9, R10: `lookbench-live query` SQL can neither write nor touch files outside the lake's views."""

from __future__ import annotations

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
