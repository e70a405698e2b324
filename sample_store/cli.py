"""`lookbench-live sample-store`: serve the sample fashion store until interrupted."""

from __future__ import annotations

import contextlib
from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    app.command("sample-store")(sample_store_command)


def sample_store_command(
    port: Annotated[int, typer.Option("--port", help="port on 127.0.0.1 (0: any free port)")] = 8765,
) -> None:
    """Serve the sample fashion store on 127.0.0.1 until interrupted."""
    from lookbench_live.sample_store.server import SampleStore

    store = SampleStore(port=port)
    print(f"sample store at {store.base_url} (Ctrl-C to stop)", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        store.serve_forever()
