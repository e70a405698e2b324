"""`lookbench-live annotate`: run the annotation stage alone (the flow is the main caller)."""

from __future__ import annotations

import json
import uuid
from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    @app.command("annotate")
    def annotate(
        config: Annotated[str | None, typer.Option("--config", help="TOML configuration file.")] = None,
        home: Annotated[
            str | None, typer.Option("--home", help="Lake root (default $LOOKBENCH_HOME).")
        ] = None,
        run_id: Annotated[
            str | None, typer.Option("--run-id", help="Recorded on every row (default: random).")
        ] = None,
    ) -> None:
        """Annotate every kept image not annotated yet; prints the run's counts as JSON.

        With no [annotation] base_url configured, the metadata prior is the annotation.
        """
        from lookbench_live.annotation.run import run_annotation
        from lookbench_live.config import load_settings
        from lookbench_live.schema.taxonomy import default_taxonomy
        from lookbench_live.warehouse.lake import Lake

        settings = load_settings(config)
        lake = Lake(home or settings.lake.home)
        with lake.writer_lock("annotate"):
            result = run_annotation(
                lake, settings.annotation, default_taxonomy(), run_id or f"annotate-{uuid.uuid4().hex[:12]}"
            )
        typer.echo(json.dumps(result.summary(), indent=2, default=str))
