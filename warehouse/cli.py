"""`lookbench-live release build|correct|withdraw|verify|list` and `lookbench-live query`."""

from __future__ import annotations

import datetime as dt
import json
import sys
from typing import Annotated

import typer

from lookbench_live.schema.moments import parse_moment

release_app = typer.Typer(
    help="Build, verify and list dated releases.\n\nExamples:\n\n"
    "  lookbench-live release build --version v20261201 --window 2026-11-01..2026-12-01\n\n"
    "  lookbench-live release verify latest\n\n  lookbench-live release list\n\n"
    '  lookbench-live release correct v20261201 --reason "takedown #12"\n\n'
    '  lookbench-live release withdraw v20261201 --reason "legal takedown"',
    no_args_is_help=True,
)

HomeOption = Annotated[
    str | None, typer.Option("--home", help="Lake root (default $LOOKBENCH_HOME or ./lookbench-data).")
]
ConfigOption = Annotated[str | None, typer.Option("--config", help="TOML configuration file.")]


def parse_window(text: str | None) -> tuple[dt.datetime | None, dt.datetime | None]:
    """`START..END` (ISO dates or datetimes, UTC); either side may be empty."""
    if not text:
        return None, None
    if ".." not in text:
        raise typer.BadParameter(f"window {text!r} must look like 2026-11-01..2026-12-01")
    start_text, end_text = text.split("..", 1)

    def parse(value: str) -> dt.datetime | None:
        if not value:
            return None
        try:
            return parse_moment(value)
        except ValueError as exc:
            raise typer.BadParameter(f"{value!r} is not an ISO date") from exc

    return parse(start_text), parse(end_text)


# `release build` is registered by `flows/release_build.py`: it runs the flow's release steps
# (stage, content check, audit, labels, commit), which the warehouse cannot import.


@release_app.command("correct")
def correct(
    version: Annotated[
        str, typer.Argument(help="The published version to correct (vYYYYMMDD[.N] or latest).")
    ],
    reason: Annotated[str, typer.Option("--reason", help="Why (recorded with the withdrawal).")],
    home: HomeOption = None,
    config: ConfigOption = None,
) -> None:
    """Rebuild a published version's window as its correction vYYYYMMDD.N (takedowns and fixed
    labels apply); the card names what it supersedes, and the corrected version is withdrawn."""
    from lookbench_live.config import load_settings
    from lookbench_live.warehouse.lake import Lake
    from lookbench_live.warehouse.release import correct_release
    from lookbench_live.warehouse.release.stage import stage_options

    settings = load_settings(config)
    lake = Lake(home or settings.lake.home)
    with lake.writer_lock("release correct"):
        result = correct_release(lake, version, reason, **stage_options(settings))
    typer.echo(f"release {result.version}: supersedes {result.manifest.get('supersedes')} at {result.path}")


@release_app.command("withdraw")
def withdraw(
    version: Annotated[str, typer.Argument(help="The version to withdraw (vYYYYMMDD[.N]).")],
    reason: Annotated[str, typer.Option("--reason", help="Why (a legal takedown, a wrong gate).")],
    home: HomeOption = None,
) -> None:
    """Withdraw a version: it leaves latest, ranges and exports; the reason is recorded."""
    from lookbench_live.warehouse.lake import Lake
    from lookbench_live.warehouse.release import read_latest, withdraw_release

    lake = Lake(home)
    with lake.writer_lock("release withdraw"):
        record = withdraw_release(lake, version, reason)
        latest = read_latest(lake)
    typer.echo(f"release {version} withdrawn at {record['withdrawn_at']}: {record['reason']}")
    typer.echo(f"latest is now {latest}" if latest else "no release is latest now")


@release_app.command("verify")
def verify(
    version: Annotated[str, typer.Argument(help="vYYYYMMDD or latest.")] = "latest",
    home: HomeOption = None,
) -> None:
    """Recompute every checksum and row count; name each missing, extra or altered file."""
    from lookbench_live.warehouse.lake import Lake
    from lookbench_live.warehouse.release import resolve_version, verify_release

    lake = Lake(home, create=False)
    resolved = resolve_version(lake, version) if version == "latest" else version
    problems = verify_release(lake, resolved)
    if problems:
        for problem in problems:
            typer.echo(f"release {resolved}: {problem}", err=True)
        raise typer.Exit(1)
    typer.echo(f"release {resolved}: every file matches its manifest")


@release_app.command("list")
def list_releases(home: HomeOption = None) -> None:
    """Committed releases, oldest first, with row counts; `*` marks latest."""
    from lookbench_live.warehouse.lake import Lake
    from lookbench_live.warehouse.release import (
        DamagedRelease,
        ReleaseError,
        committed_versions,
        read_manifest,
        resolve_version,
        withdrawal,
    )

    lake = Lake(home, create=False)
    try:
        latest = resolve_version(lake, "latest")
    except DamagedRelease as exc:  # named; the releases themselves are still listed
        typer.echo(f"warning: {exc}", err=True)
        latest = None
    except ReleaseError:
        latest = None
    for version in committed_versions(lake):
        try:
            rows = sum(read_manifest(lake, version).get("rows", {}).values())
        except DamagedRelease as exc:  # one damaged release is named; the others are listed
            typer.echo(f"! {version}  damaged: {exc.path} {exc.reason}")
            continue
        record = withdrawal(lake, version)
        note = f"  withdrawn: {record['reason']}" if record else ""
        typer.echo(f"{'*' if version == latest else ' '} {version}  {rows} rows{note}")


def query(
    sql: Annotated[str, typer.Argument(help="A read-only SQL statement.")],
    format: Annotated[str, typer.Option("--format", help="table, csv or json.")] = "table",
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout",
            min=0.001,
            help="Stop the query after this many seconds (default: [query] timeout, 300).",
        ),
    ] = None,
    home: HomeOption = None,
    config: ConfigOption = None,
) -> None:
    """Run read-only SQL over every lake table and release (DuckDB).

    Examples:

      lookbench-live query "SELECT reason, count(*) FROM rejections GROUP BY ALL"

      lookbench-live query "SELECT version, subset, count(*) FROM releases WHERE split='query' GROUP BY ALL" --format csv
    """
    from lookbench_live.config import load_settings
    from lookbench_live.warehouse.lake import Lake
    from lookbench_live.warehouse.query import run_query

    if format not in ("table", "csv", "json"):
        raise typer.BadParameter("--format must be table, csv or json")
    settings = load_settings(config)
    limits = settings.query if timeout is None else settings.query.model_copy(update={"timeout": timeout})
    table = run_query(Lake(home or settings.lake.home, create=False), sql, limits)
    # Image bytes are never printed.
    rows = [
        {k: (f"<{len(v)} bytes>" if isinstance(v, bytes) else v) for k, v in row.items()}
        for row in table.to_pylist()
    ]
    if format == "json":
        for row in rows:
            typer.echo(json.dumps(row, default=str, ensure_ascii=False))
    elif format == "csv":
        import csv

        writer = csv.DictWriter(sys.stdout, fieldnames=table.column_names)
        writer.writeheader()
        writer.writerows(rows)
    else:
        from rich.console import Console
        from rich.table import Table

        out = Table(*table.column_names)
        for row in rows:
            out.add_row(*(str(v) for v in row.values()))
        Console().print(out)


def register(app: typer.Typer) -> None:
    app.add_typer(release_app, name="release")
    app.command("query")(query)
