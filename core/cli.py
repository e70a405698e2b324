"""The `lookbench-live` command: one typer app, each stage registers its own commands.

Any error ends the command with a non-zero status and one line naming the problem
(set `LOOKBENCH_DEBUG=1` for the traceback).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys

import click
import typer

HELP = """Build, verify, query and score releases of the live LookBench benchmark.

Examples:

\b
  lookbench-live refresh                     # the monthly job, on the embedded default
  lookbench-live backfill --start 2026-10-01 --end 2026-11-01
  lookbench-live release verify latest       # recompute every checksum of a release
  lookbench-live query "SELECT subset, count(*) FROM releases GROUP BY ALL"
  lookbench-live evaluate latest --json      # score the weight-free baseline
  lookbench-live taxonomy --schema dress     # the JSON Schema annotation requests
"""

app = typer.Typer(help=HELP, no_args_is_help=True, add_completion=False, rich_markup_mode=None)

# Each stage's `cli` module defines `register(app)`; the order is the order of `--help`.
STAGE_CLIS = (
    "lookbench_live.flows.cli",
    "lookbench_live.scrapers.cli",
    "lookbench_live.dedup.cli",
    "lookbench_live.generation.cli",
    "lookbench_live.annotation.cli",
    "lookbench_live.warehouse.cli",
    "lookbench_live.evaluation.cli",
    "lookbench_live.schema.cli",
    "lookbench_live.flows.models",
    "lookbench_live.warehouse.takedown_cli",
)

for _name in STAGE_CLIS:
    if importlib.util.find_spec(_name) is not None:
        importlib.import_module(_name).register(app)


def main() -> None:
    try:
        # Without standalone mode click returns the code of `typer.Exit` instead of exiting.
        code = app(standalone_mode=False)
        if isinstance(code, int) and code:
            sys.exit(code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        print("error: aborted", file=sys.stderr)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        sys.exit(130)
    except Exception as exc:  # one line for people, the traceback on request
        if os.environ.get("LOOKBENCH_DEBUG"):
            raise
        message = " ".join(str(exc).split()) or type(exc).__name__
        print(f"error: {message}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
