"""What the terminal shows: the command's own output and progress; library chatter only with `--verbose`.

The main job loads transformers, diffusers, torch, DuckDB and Prefect, which print fallback
notices ("requires torchvision"), token-length warnings, tqdm bars ("Writing model shards",
"Loading pipeline components") and Python `UserWarning`s. None of it is actionable for someone
running `lookbench-live refresh`, and it buries the progress lines, so by default it is kept
out; `--verbose` (or `LOOKBENCH_VERBOSE=1`) shows all of it, plus Prefect's INFO logs.

Environment variables are set (not overwritten when the user set them) before the libraries
are imported, so they also reach task runner processes (Dask workers inherit the environment).

Tables the commands print (`print_table`) take the terminal's width and never cut a value short:
columns that do not fit go into further tables.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from typing import Any

# Libraries' own switches, read when each is imported.
QUIET_ENV = {
    "TRANSFORMERS_VERBOSITY": "error",
    "DIFFUSERS_VERBOSITY": "error",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TQDM_DISABLE": "1",  # tqdm >= 4.66 reads TQDM_<argument> defaults: no bar at all
    "TOKENIZERS_PARALLELISM": "false",  # else tokenizers warns when a worker forks
    "PYTHONWARNINGS": "ignore",  # child processes (Dask workers, subprocesses)
}
VERBOSE_ENV = {"PREFECT_LOGGING_LEVEL": "INFO"}
# Loggers of the libraries the job loads; ours (`lookbench_live`) stay as they are.
LIBRARY_LOGGERS = (
    "transformers",
    "diffusers",
    "torch",
    "huggingface_hub",
    "accelerate",
    "safetensors",
    "duckdb",
    "scrapy",
    "scrapy_playwright",
    "playwright",
    "httpx",
    "httpcore",
    "openai",
    "PIL",
    "asyncio",
    "distributed",
    "faiss",
)


def verbose_requested() -> bool:
    return os.environ.get("LOOKBENCH_VERBOSE", "").strip().lower() not in ("", "0", "false", "no")


def configure_terminal(verbose: bool | None = None) -> bool:
    """Quiet the libraries unless `verbose` (default: `LOOKBENCH_VERBOSE`); returns the choice."""
    if verbose is None:
        verbose = verbose_requested()
    if verbose:
        os.environ["LOOKBENCH_VERBOSE"] = "1"
        for key, value in VERBOSE_ENV.items():
            os.environ.setdefault(key, value)
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
        # One INFO line per HTTP request (Prefect's API calls) would drown everything else.
        for name in ("httpx", "httpcore"):
            logging.getLogger(name).setLevel(logging.WARNING)
        warnings.simplefilter("default")  # every warning, once per place
        return True
    for key, value in QUIET_ENV.items():
        os.environ.setdefault(key, value)
    # Warnings of every module but ours are dropped (ours are meant for the user).
    warnings.filterwarnings("ignore")
    warnings.filterwarnings("default", module=r"lookbench_live(\.|$)")
    for name in LIBRARY_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    return False


def print_table(
    title: str,
    headers: list[str],
    rows: list[list[str]],
    *,
    keys: int = 1,
    groups: list[tuple[str, int]] | None = None,
    console: Any = None,
) -> int:
    """Print `rows` as a table as wide as the terminal (rich's console width: the terminal's, or
    `COLUMNS`), never cutting a score short.

    The first `keys` columns (model, release) may wrap; the others (scores) never wrap. When they
    do not all fit, the columns after the keys are printed in several tables, each repeating the
    key columns, a group of `groups` ((title, column count) over the columns, the first covering
    the keys) never split unless it alone is too wide. A group title heads its first column.
    Returns the number of tables printed."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    groups = groups or [("", keys)] + [("", 1)] * (len(headers) - keys)
    spans, start = [], 0
    for name, count in groups:
        spans.append((name, list(range(start, start + count))))
        start += count
    key_columns, parts = spans[0][1], spans[1:]

    def build(part: list[tuple[str, list[int]]], caption: str | None) -> Any:
        table = Table(title=title, caption=caption, title_justify="left")
        for i in key_columns:
            # Capped, so one long model name cannot push every score into another table.
            table.add_column(headers[i], overflow="fold", max_width=max(16, console.width // 3))
        for name, columns in part:
            for n, i in enumerate(columns):
                # The group title heads its first column; the others get blank lines in its place.
                above = name if n == 0 else "\n" * name.count("\n")
                head = f"{above}\n{headers[i]}" if name else headers[i]
                table.add_column(head, justify="right", no_wrap=True)
        cells = [i for _, columns in part for i in columns]
        for row in rows:
            table.add_row(*[row[i] for i in key_columns], *[row[i] for i in cells])
        return table

    def fits(part: list[tuple[str, list[int]]]) -> bool:
        # Measured without the console's limit: rich clamps a measurement to the width it is given.
        wide = console.options.update_width(1_000_000)
        return console.measure(build(part, None), options=wide).minimum <= console.width

    chunks: list[list[tuple[str, list[int]]]] = []
    current: list[tuple[str, list[int]]] = []
    for group in parts:
        if current and not fits([*current, group]):
            chunks.append(current)
            current = []
        current.append(group)
    if current or not chunks:
        chunks.append(current)
    for n, chunk in enumerate(chunks, start=1):
        caption = (
            f"part {n} of {len(chunks)} (the terminal is too narrow for one table)"
            if len(chunks) > 1
            else None
        )
        console.print(build(chunk, caption))
    return len(chunks)


# ---------------------------------------------------------------------- the first line, at once
LONG_COMMANDS = ("refresh", "backfill")
_starting_shown = False


def show_starting(argv: list[str]) -> None:
    """At a terminal, `refresh` and `backfill` show a line at once, before the command's imports,
    checks and lock (a second or more on a busy machine). The command's own first line or its
    error replaces it (`clear_starting`); elsewhere (a pipe, a log) nothing is shown early."""
    global _starting_shown
    command = next((a for a in argv[1:] if not a.startswith("-")), None)
    if command in LONG_COMMANDS and "--help" not in argv and sys.stderr.isatty():
        sys.stderr.write(f"lookbench-live {command}: checking the options and the configuration …")
        sys.stderr.flush()
        _starting_shown = True


def clear_starting() -> None:
    """Erase the line `show_starting` wrote, so what follows starts the line."""
    global _starting_shown
    if _starting_shown:
        sys.stderr.write("\r\033[K")
        sys.stderr.flush()
        _starting_shown = False
