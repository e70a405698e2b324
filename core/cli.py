"""The `lookbench-live` command: one typer app, each stage registers its own commands.

Any error ends the command with a non-zero status and one line naming the problem
(`--verbose` or `LOOKBENCH_DEBUG=1` for the traceback).
"""

# ruff: noqa: E402 (the first line is shown before the stages' imports, which take a second)

from __future__ import annotations

import os
import sys
from typing import Any

from lookbench_live.terminal import clear_starting, show_starting

show_starting(sys.argv)  # `refresh`, `backfill` at a terminal: a line within a second

import typer
import typer.core

# The stage CLIs, imported by name so that a broken module fails here, loudly, and a reader sees
# each edge. Each module's imports are light: the stage's own code is imported inside its commands.
from lookbench_live.annotation import cli as annotation_cli
from lookbench_live.dedup import cli as dedup_cli
from lookbench_live.evaluation import cli as evaluation_cli
from lookbench_live.flows import cli as flows_cli
from lookbench_live.flows import models as models_cli
from lookbench_live.generation import cli as generation_cli
from lookbench_live.interrupt import Interrupted
from lookbench_live.sample_store import cli as sample_store_cli
from lookbench_live.schema import cli as schema_cli
from lookbench_live.scrapers import cli as scrapers_cli
from lookbench_live.terminal import configure_terminal
from lookbench_live.warehouse import cli as warehouse_cli
from lookbench_live.warehouse import takedown_cli


def _skip_coercion_of_absent_options() -> None:
    """An option left out (value None) is passed through without building typer's coercer.

    typer 0.29 builds a pydantic TypeAdapter for every non-flag parameter before it coerces the
    value, even when the value is None, which `coerce` then returns unchanged; that import and
    build cost ~0.1 s per command (`taxonomy`: 0.31 s → 0.2 s, docs/benchmarks.md). Given values
    and multi-value options (None becomes ()) still go through typer's own path, and a missing
    required option is refused as typer refuses it.
    """
    parameter = getattr(typer.core, "_TyperParameter", None)
    vendored = getattr(typer.core, "_click", None)  # typer's own click, whose errors it reports
    if parameter is None or vendored is None:
        # Another typer than the 0.29 line this was written against: its own path, only slower
        # (tests/core/test_startup_imports.py then fails and says so).
        return
    coerce = parameter.process_value

    def process_value(self: Any, ctx: Any, value: Any) -> Any:
        if value is not None or self.multiple or self.nargs == -1:
            return coerce(self, ctx, value)
        if self.required:
            raise vendored.exceptions.MissingParameter(ctx=ctx, param=self)
        return self.callback(ctx, self, value) if self.callback is not None else value

    parameter.process_value = process_value  # type: ignore[method-assign]


_skip_coercion_of_absent_options()

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

_VERBOSE = False  # `--verbose`: a failure shows its traceback too (as LOOKBENCH_DEBUG=1 does)

app = typer.Typer(help=HELP, no_args_is_help=True, add_completion=False, rich_markup_mode=None)


@app.callback()
def _options(
    verbose: bool = typer.Option(
        False,
        "--verbose",
        "-v",
        help="Show the libraries' warnings, logs and progress bars (hidden by default).",
    ),
) -> None:
    global _VERBOSE
    _VERBOSE = verbose
    configure_terminal(verbose or None)


# Each stage's `cli` module defines `register(app)`; the order is the order of `--help`.
STAGE_CLIS = (
    flows_cli,
    scrapers_cli,
    sample_store_cli,
    dedup_cli,
    generation_cli,
    annotation_cli,
    warehouse_cli,
    evaluation_cli,
    schema_cli,
    models_cli,
    takedown_cli,
)

for _module in STAGE_CLIS:
    _module.register(app)


# typer 0.29 raises its own Exit/Abort and its vendored click's errors, not the click package's.
_VENDORED = getattr(typer.core, "_click", None)


def _click_errors(name: str) -> tuple[Any, ...]:
    """click's exception class ``name`` from typer's vendored click and from the click package,
    each where loaded, so a usage error keeps click's message and exit code 2 whichever raised it.

    The click package is not imported for this: typer 0.29 does not load it, it would cost every
    command ~0.01 s (issue 27), and nothing raises its errors unless something loaded it (an
    older typer does, itself). Both classes carry ``show()`` and ``exit_code``. The vendored click
    has no Exit or Abort: typer raises its own (`typer.Exit`, `typer.Abort`).
    """
    modules = (m for m in (_VENDORED, sys.modules.get("click")) if m is not None)
    return tuple(getattr(m.exceptions, name) for m in modules if hasattr(m.exceptions, name))


def main() -> None:
    try:
        _main()
    finally:
        clear_starting()  # a command that printed nothing leaves no half line behind


def _main() -> None:
    try:
        # Without standalone mode click returns the code of `typer.Exit` instead of exiting.
        code = app(standalone_mode=False)
        if isinstance(code, int) and code:
            sys.exit(code)
    except (typer.Exit, *_click_errors("Exit")) as exc:
        sys.exit(exc.exit_code)
    except (typer.Abort, *_click_errors("Abort")):
        clear_starting()  # the one line starts the line, not after "checking …"
        print("error: aborted", file=sys.stderr)
        sys.exit(130)
    except _click_errors("ClickException") as exc:
        clear_starting()  # the one line starts the line, not after "checking …"
        exc.show()
        sys.exit(exc.exit_code)
    except Interrupted as exc:  # stopped at a safe point after SIGINT/SIGTERM: 130 or 143
        clear_starting()
        print(str(exc), file=sys.stderr)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        clear_starting()  # the one line starts the line, not after "checking …"
        print("error: interrupted", file=sys.stderr)
        sys.exit(130)
    except Exception as exc:  # one line for people, the traceback on request
        clear_starting()
        if os.environ.get("LOOKBENCH_DEBUG") or _VERBOSE:
            raise
        message = " ".join(str(exc).split()) or type(exc).__name__
        print(f"error: {message}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
