"""Read-only SQL over the lake and its releases, through DuckDB.

Every lake table is a view of the same name; every committed release file is a view
`<version>_<subset>_<split>` (e.g. `v20261201_real_studio_flat_query`), and `releases`
unions all of them with `version`, `subset`, `split` and `gate` (the release's audit gate:
`passed`, `failed` or `none`) columns, so month-over-month
questions are one query. Only files named by a manifest are opened.

The connection is locked before it sees anything of the lake: it is opened without file-system
access (`enable_external_access = false`, no extension loading, no Python variables by name),
with bounded memory, spill and threads, and its configuration locked, so `read_csv('/etc/passwd')`,
`COPY … TO`, `ATTACH`, `SET` and writes are refused. No SQL text is ever made from lake data
(X9): tables and release files are registered as Arrow datasets under names given through the
Python API, a release file's `version`, `subset`, `split` and `gate` are bound constants of the
relation API, and the one statement we write, `releases`, names only generated views
(`_release_0`, `_release_1`, …). A manifest key that is not a file of the release format
(`check_file_key`) is skipped with a warning naming the release and the key; a damaged release
(`DamagedRelease`) or a listed file that cannot be opened is skipped with a warning naming it;
everything else stays queryable (X14).

Only SELECT-like statements run. A query still running after its timeout is interrupted
(`QueryTimeout`); Ctrl-C interrupts it too (X19).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading
import uuid
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.dataset as pads

from lookbench_live.config import QuerySettings
from lookbench_live.schema.records import TABLES
from lookbench_live.schema.release import FILES, ReleaseKeyError, check_file_key, split_of
from lookbench_live.warehouse.lake import Lake
from lookbench_live.warehouse.release import (
    DamagedRelease,
    committed_versions,
    gate_status,
    read_manifest,
    release_dir,
)

logger = logging.getLogger(__name__)

READ_ONLY_STATEMENTS = {"SELECT", "EXPLAIN"}
MiB = 1 << 20
GiB = 1 << 30


class QueryError(ValueError):
    """The statement was refused or failed; nothing was changed."""


class QueryTimeout(QueryError):
    """The query ran past its timeout and was interrupted."""

    def __init__(self, timeout: float):
        self.timeout = timeout
        super().__init__(
            f"the query ran past its timeout of {timeout:g} s and was stopped "
            "(raise it with --timeout SECONDS or `timeout` in the config file's [query] section)"
        )


def duckdb_config(limits: QuerySettings) -> dict[str, Any]:
    """The connection's settings, all given at connect: locked before any view of lake data exists."""
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    temp_root = tempfile.gettempdir()
    free = shutil.disk_usage(temp_root).free
    return {
        "enable_external_access": False,  # Arrow datasets we register are read by pyarrow, not DuckDB
        "autoinstall_known_extensions": False,
        "autoload_known_extensions": False,
        "python_enable_replacements": False,  # SQL never reaches the process's Python variables
        # DuckDB's defaults are 80% of RAM and 90% of the disk: far too much for a side query.
        "memory_limit": limits.memory_limit or f"{max(256 * MiB, min(4 * GiB, ram // 4)) // MiB}MiB",
        "max_temp_directory_size": limits.temp_limit or f"{min(8 * GiB, free // 4) // MiB}MiB",
        # A folder of its own (DuckDB creates it when it spills and removes it on close), not `.tmp`
        # in the user's working directory.
        "temp_directory": os.path.join(temp_root, f"lookbench-query-{uuid.uuid4().hex[:12]}"),
        "threads": limits.threads or min(4, os.cpu_count() or 1),
        "lock_configuration": True,
    }


def _release_views(lake: Lake, con: duckdb.DuckDBPyConnection) -> list[str]:
    """Register every committed release file and the `releases` union; returns the views made."""
    parts: list[str] = []
    for version in committed_versions(lake):
        try:
            manifest = read_manifest(lake, version)
        except DamagedRelease as exc:
            logger.warning("query: skipped %s", exc)
            continue
        base = release_dir(lake, version)
        gate = gate_status(manifest)  # "passed", "failed" or "none": a failed gate's rows are not "used up"
        for key in sorted(manifest["files"]):
            try:
                rel = check_file_key(key, release=version)
            except ReleaseKeyError as exc:
                logger.warning("query: skipped a file: %s", exc)
                continue
            if rel not in FILES:  # the card, Croissant file, report
                continue
            subset, split = split_of(rel)  # our own names for the key, never parsed from it
            try:
                dataset = pads.dataset(f"{base}/{rel}", filesystem=lake.fs, format="parquet")
            except (OSError, pa.ArrowException) as exc:
                logger.warning("query: skipped release %s file %s: %s", version, rel, exc)
                continue
            name = f"{version}_{subset}_{split}"
            con.register(name, dataset)  # a name given through the API: no SQL text
            part = f"_release_{len(parts)}"
            con.view(name).project(
                duckdb.ConstantExpression(version).alias("version"),
                duckdb.ConstantExpression(subset).alias("subset"),
                duckdb.ConstantExpression(split).alias("split"),
                duckdb.ConstantExpression(gate).alias("gate"),
                duckdb.StarExpression(),
            ).create_view(part)
            parts.append(part)
    if parts:
        # The only statement we write: generated names, nothing read from the lake.
        con.execute(
            "CREATE VIEW releases AS " + " UNION ALL BY NAME ".join(f"SELECT * FROM {p}" for p in parts)
        )
    return parts


def connect(lake: Lake, limits: QuerySettings | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection, locked down first, with every table and release as a view."""
    con = duckdb.connect(":memory:", config=duckdb_config(limits or QuerySettings()))
    for table in TABLES:
        con.register(table, lake.dataset(table))
    _release_views(lake, con)
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


def run_query(lake: Lake, sql: str, limits: QuerySettings | None = None) -> pa.Table:
    """Run read-only SQL; returns the last statement's result as Arrow.

    `QueryTimeout` past `limits.timeout` seconds; Ctrl-C (KeyboardInterrupt) interrupts it too."""
    check_read_only(sql)
    limits = limits or QuerySettings()
    statements = [s.query for s in duckdb.extract_statements(sql)]
    return _run_bounded(connect(lake, limits), statements, limits.timeout)


def _run_bounded(con: duckdb.DuckDBPyConnection, statements: list[str], timeout: float) -> pa.Table:
    """Run `statements` in a worker thread, then close `con`; this thread waits, and interrupts the
    connection when the timeout passes or Ctrl-C arrives (a wait in Python sees the signal).

    The wait is on an Event the worker sets last, not `Thread.join`: a KeyboardInterrupt inside
    `join` can mark a running thread as stopped on Python 3.11 (bpo-45274's workaround)."""
    outcome: dict[str, Any] = {}
    stop, done = threading.Event(), threading.Event()

    def work() -> None:
        try:
            for statement in statements[:-1]:
                if stop.is_set():
                    return
                con.execute(statement)
            if stop.is_set():
                return
            # A relation hands Arrow over without the extra copy (and without the UserWarning that
            # the DB-API result's `to_arrow_table` prints to the user's terminal).
            relation = con.sql(statements[-1])
            outcome["table"] = pa.table({}) if relation is None else relation.to_arrow_table()
        except BaseException as exc:  # handed to the waiting thread
            outcome["error"] = exc
        finally:
            done.set()

    threading.Thread(target=work, name="lookbench-query", daemon=True).start()
    try:
        try:
            finished = done.wait(timeout)
        except KeyboardInterrupt:
            _stop(con, stop, done)
            raise
        if not finished:
            _stop(con, stop, done)
            raise QueryTimeout(timeout)
    finally:
        if done.is_set():  # else a second Ctrl-C left it running: the process is ending anyway
            con.close()
    error = outcome.get("error")
    if isinstance(error, duckdb.Error):
        raise QueryError(" ".join(str(error).split())) from error
    if error is not None:
        raise error
    return outcome["table"]


def _stop(con: duckdb.DuckDBPyConnection, stop: threading.Event, done: threading.Event) -> None:
    """Interrupt until the worker has ended: an interrupt that lands between two statements (or
    before the first starts) is lost, the next one is not."""
    stop.set()
    while not done.is_set():
        con.interrupt()
        done.wait(0.1)
