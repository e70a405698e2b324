"""`lookbench-live takedown add | list`: the persisted takedown list (see warehouse/takedown.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

HomeOption = Annotated[
    str | None, typer.Option("--home", help="Lake root (default $LOOKBENCH_HOME or ./lookbench-data).")
]
ConfigOption = Annotated[
    str | None, typer.Option("--config", help="TOML configuration file (lake home, dedup radius).")
]


def add_command(
    url: Annotated[str | None, typer.Option("--url", help="Product page or image URL.")] = None,
    sha256: Annotated[str | None, typer.Option("--sha256", help="sha256 of the image bytes.")] = None,
    source: Annotated[
        str | None, typer.Option("--source", help="A whole site (its configured name).")
    ] = None,
    image: Annotated[
        Path | None,
        typer.Option(
            "--image", metavar="FILE", help="The photo: its sha256, and its pHash within the radius."
        ),
    ] = None,
    reason: Annotated[
        str | None, typer.Option("--reason", help="The request or ticket, for the record.")
    ] = None,
    requested_by: Annotated[str | None, typer.Option("--requested-by", help="Who asked.")] = None,
    config: ConfigOption = None,
    home: HomeOption = None,
) -> None:
    """Add an item to the takedown list and report which published releases hold it.

    The item is left out of every later release and every export (re-export the releases named
    below to replace copies already published). Exit code 2: bad request; 1: bad configuration.

    Examples:

    lookbench-live takedown add --url https://shop.example.com/products/red-dress --reason "owner request #12"

    lookbench-live takedown add --image complaint.jpg
    """
    from lookbench_live.config import ConfigError, load_settings
    from lookbench_live.warehouse.lake import Lake
    from lookbench_live.warehouse.takedown import (
        TakedownError,
        TakedownList,
        add_takedowns,
        entries_for,
        releases_holding,
    )

    try:
        settings = load_settings(config)
    except ConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    try:
        data = image.read_bytes() if image is not None else None
    except OSError as exc:
        typer.echo(f"error: cannot read --image {image}: {exc.strerror or exc}", err=True)
        raise typer.Exit(2) from None
    try:
        records = entries_for(
            url=url,
            source=source,
            sha256=sha256,
            image=data,
            radius=settings.dedup.radius,
            reason=reason,
            requested_by=requested_by,
        )
    except TakedownError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    lake = Lake(home or settings.lake.home)
    # A writer like any other: never beside a release build that is reading the list (X6).
    with lake.writer_lock("takedown"):
        written = add_takedowns(lake, records)
    for record in records:
        typer.echo(f"takedown {record.kind} {record.value}" + ("" if written else " (already listed)"))
    holding = releases_holding(lake, TakedownList.from_records(records))
    if not holding:
        typer.echo("no published release holds it")
        return
    for version, files in holding.items():
        where = ", ".join(f"{rel} ({rows} rows)" for rel, rows in files.items())
        typer.echo(f"held by release {version}: {where}")
    typer.echo(
        "re-export those releases to replace published copies: lookbench-live export VERSION --to DEST"
    )


def list_command(home: HomeOption = None, config: ConfigOption = None) -> None:
    """Print the takedown list, one entry a line: kind, value, reason, added at.

    A damaged fragment of the list stops the command naming it (exit 1): an empty or partial
    list printed as if whole would tell the operator the item is not listed."""
    from lookbench_live.config import load_settings
    from lookbench_live.warehouse.lake import Lake

    settings = load_settings(config)  # a bad configuration is reported even with --home
    lake = Lake(home or settings.lake.home)
    # FragmentError (the list fails closed) ends the command with its one line.
    for row in lake.read("takedowns").to_pylist():
        typer.echo(f"{row['kind']}\t{row['value']}\t{row.get('reason') or ''}\t{row['created_at']:%Y-%m-%d}")


def register(app: typer.Typer) -> None:
    """Add the ``takedown`` command group to ``app``."""
    group = typer.Typer(help="Items owners asked to remove: kept out of releases and exports.")
    group.command("add")(add_command)
    group.command("list")(list_command)
    app.add_typer(group, name="takedown")
