"""Read-only SQL over the lake and its releases, through DuckDB.

Every lake table is a view of the same name; every committed release file is a view
`<version>_<subset>_<split>` (e.g. `v20261201_real_studio_flat_query`), and `releases`
unions all of them with `version`, `subset`, `split` and `gate` (the release's audit gate:
`passed`, `failed` or `none`) columns, so month-over-month
questions are one query. Only files named by a manifest are opened.

Only SELECT-like statements run; after the views are registered the connection loses
file-system access and its configuration is locked, so `read_csv('/etc/passwd')`,
`COPY … TO`, `ATTACH` and writes are refused.
"""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pyarrow.dataset as pads

from lookbench_live.schema.records import TABLES
from lookbench_live.warehouse.lake import Lake
from lookbench_live.warehouse.release import committed_versions, gate_status, read_manifest, release_dir

READ_ONLY_STATEMENTS = {"SELECT", "EXPLAIN"}


class QueryError(ValueError):
    """The statement was refused or failed; nothing was changed."""


def _release_views(lake: Lake, con: duckdb.DuckDBPyConnection) -> list[str]:
    union_parts = []
    for version in committed_versions(lake):
        base = release_dir(lake, version)
        manifest = read_manifest(lake, version)
        gate = gate_status(manifest)  # "passed", "failed" or "none": a failed gate's rows are not "used up"
        for rel in sorted(manifest.get("files", {})):
            if not rel.endswith(".parquet"):
                continue
            subset, split = rel[: -len(".parquet")].split("/")
            name = f"{version}_{subset}_{split}"
            con.register(name, pads.dataset(f"{base}/{rel}", filesystem=lake.fs, format="parquet"))
            union_parts.append(
                f"SELECT '{version}' AS version, '{subset}' AS subset, '{split}' AS split, "
                f"'{gate}' AS gate, * FROM {name}"
            )
    if union_parts:
        con.execute("CREATE VIEW releases AS " + " UNION ALL BY NAME ".join(union_parts))
    return union_parts


def connect(lake: Lake) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with every table and release as a view, locked down."""
    con = duckdb.connect(":memory:")
    for table in TABLES:
        con.register(table, lake.dataset(table))
    _release_views(lake, con)
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    return con


def check_read_only(sql: str) -> None:
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryError(f"SQL does not parse: {exc}") from exc
    if not statements:
        raise QueryError("no SQL statement given")
    for statement in statements:
        kind = statement.type.name
        if kind not in READ_ONLY_STATEMENTS:
            raise QueryError(
                f"only read-only queries are allowed (SELECT, WITH … SELECT, EXPLAIN); refused a {kind} statement"
            )


def run_query(lake: Lake, sql: str) -> pa.Table:
    """Run read-only SQL; returns the last statement's result as Arrow."""
    check_read_only(sql)
    con = connect(lake)
    try:
        statements = duckdb.extract_statements(sql)
        for statement in statements[:-1]:
            con.execute(statement.query)
        # A relation hands Arrow over without the extra copy (and without the UserWarning that
        # the DB-API result's `to_arrow_table` prints to the user's terminal).
        relation = con.sql(statements[-1].query)
        if relation is None:  # a statement that returns no rows
            return pa.table({})
        return relation.to_arrow_table()
    except duckdb.Error as exc:
        raise QueryError(" ".join(str(exc).split())) from exc
    finally:
        con.close()
