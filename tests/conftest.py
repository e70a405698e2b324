"""Shared test settings: everything offline, the CLI found beside this interpreter."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# Offline everywhere, before any library reads its settings.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")

CLI = str(Path(sys.executable).parent / "lookbench-live")


@pytest.fixture(scope="session")
def cli() -> str:
    """Path of the installed `lookbench-live` command of this environment."""
    return CLI
