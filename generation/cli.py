"""`lookbench-live generate`: make the AIGen images of the configuration that are not in the lake yet."""

from __future__ import annotations

from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    app.command("generate")(generate)


def generate(
    studio: Annotated[
        int | None, typer.Option("--studio", min=0, help="AIGen-Studio items (default: config).")
    ] = None,
    street: Annotated[
        int | None, typer.Option("--street", min=0, help="AIGen-StreetLook outfits (default: config).")
    ] = None,
    config: Annotated[str | None, typer.Option("--config", help="TOML configuration file.")] = None,
    home: Annotated[
        str | None, typer.Option("--home", help="Lake root (default $LOOKBENCH_HOME or ./lookbench-data).")
    ] = None,
) -> None:
    """Synthesize AIGen-Studio and AIGen-StreetLook images into the lake (resumable: reruns make only what is missing).

    With no `generation.model` configured, a tiny random pipeline is built offline and used;
    its images are noise and its rows say `model_is_tiny_local`.

    Example: lookbench-live generate --studio 8 --street 4
    """
    import datetime as dt

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from lookbench_live.config import load_settings
    from lookbench_live.generation.synthesis import run_generation
    from lookbench_live.schema.taxonomy import default_taxonomy
    from lookbench_live.warehouse.lake import Lake

    settings = load_settings(config)
    overrides = {k: v for k, v in {"studio_items": studio, "street_looks": street}.items() if v is not None}
    generation = settings.generation.model_copy(update=overrides)
    lake = Lake(home or settings.lake.home)
    run_id = "generate-" + dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    columns = (TextColumn("generating"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with lake.writer_lock("generate"), Progress(*columns, transient=True) as bar:
        task = bar.add_task("generate", total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        result = run_generation(lake, generation, default_taxonomy(), run_id, progress=progress)
    typer.echo(
        f"{result.generated} generated, {result.skipped_existing} already in the lake, {result.failed} failed "
        f"(model {result.model}{', tiny local' if result.model_is_tiny_local else ''}; {result.seconds:.1f} s) "
        f"in {lake.home}"
    )
    for generation_id, reason in list(result.failures.items())[:10]:
        typer.echo(f"  failed {generation_id[:16]}: {reason}", err=True)
    if result.failed and not result.generated and not result.skipped_existing:
        raise typer.Exit(1)
