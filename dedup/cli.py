"""`lookbench-live hash` (known-dataset hash files) and `lookbench-live dedup` (decide a lake)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated

import typer


def hash_command(
    paths: Annotated[list[Path], typer.Argument(help="Image files or folders (searched recursively).")],
    out: Annotated[
        Path, typer.Option("--out", help="Parquet file to write (path, sha256, phash, phash_mirror, method).")
    ],
    workers: Annotated[int, typer.Option(help="Processes that decode and hash.")] = min(
        4, os.cpu_count() or 1
    ),
    config: Annotated[
        str | None,
        typer.Option("--config", help="TOML configuration file (dedup.known_dataset_formats, _max_pixels)."),
    ] = None,
) -> None:
    """Hash images with the pipeline's own method, for `dedup.known_dataset_hashes`.

    Example: lookbench-live hash ~/data/fashion200k --out fashion200k.hashes.parquet
    """
    from lookbench_live.config import load_settings
    from lookbench_live.dedup.known import hash_files, write_hash_file

    result = hash_files(paths, workers=workers, settings=load_settings(config).dedup)
    # One line per file not hashed, each with a plain reason (other extensions included).
    for path, reason in result.failures:
        typer.echo(f"skipped {path}: {reason}", err=True)
    if result.table.num_rows == 0:
        raise typer.BadParameter(f"no decodable image under {', '.join(map(str, paths))}; nothing written")
    write_hash_file(result.table, out)
    typer.echo(f"hashed {result.table.num_rows} images into {out}; {len(result.failures)} files skipped")


def dedup_command(
    run_id: Annotated[str, typer.Option("--run-id", help="Recorded with every decision.")] = "manual",
    home: Annotated[
        str | None, typer.Option("--home", help="Lake root (default $LOOKBENCH_HOME or ./lookbench-data).")
    ] = None,
    config: Annotated[str | None, typer.Option("--config", help="TOML configuration file.")] = None,
) -> None:
    """Decide every undecided image of the lake: kept, or dropped with a reason (prints a JSON summary)."""
    import dataclasses

    from lookbench_live.config import load_settings
    from lookbench_live.dedup.decide import run_dedup
    from lookbench_live.warehouse.lake import Lake

    settings = load_settings(config)
    lake = Lake(home or settings.lake.home)
    with lake.writer_lock("dedup"):
        result = run_dedup(lake, settings.dedup, run_id)
    typer.echo(json.dumps(dataclasses.asdict(result), sort_keys=True))


def register(app: typer.Typer) -> None:
    app.command("hash")(hash_command)
    app.command("dedup")(dedup_command)
