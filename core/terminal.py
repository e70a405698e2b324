"""What the terminal shows: the command's own output and progress; library chatter only with `--verbose`.

The main job loads transformers, diffusers, torch, DuckDB and Prefect, which print fallback
notices ("requires torchvision"), token-length warnings, tqdm bars ("Writing model shards",
"Loading pipeline components") and Python `UserWarning`s. None of it is actionable for someone
running `lookbench-live refresh`, and it buries the progress lines, so by default it is kept
out; `--verbose` (or `LOOKBENCH_VERBOSE=1`) shows all of it, plus Prefect's INFO logs.

Environment variables are set (not overwritten when the user set them) before the libraries
are imported, so they also reach task runner processes (Dask workers inherit the environment).
"""

from __future__ import annotations

import logging
import os
import sys
import warnings

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
