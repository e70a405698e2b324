"""Helpers of the flow tests (`test_flows*.py`): one refresh run as users run it, release checksums.

Every run uses the same logical date, because product URLs (and so release rows) hold the
sample store's port and the run's date: runs compared byte for byte use the same port too.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from lookbench_live.warehouse.lake import Lake
from lookbench_live.warehouse.release import FILES, read_manifest

AS_OF = "2026-12-01"
VERSION = "v20261201"


def refresh(
    cli: str, home: Path, *extra: str, port: int, env: dict[str, str] | None = None, timeout: int = 900
) -> subprocess.CompletedProcess[str]:
    """`lookbench-live refresh` on the embedded default at `AS_OF`, its sample store on `port`."""
    return subprocess.run(
        [cli, "refresh", "--home", str(home), "--as-of", AS_OF, "--port", str(port), *extra],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def parquet_checksums(home: Path, version: str = VERSION) -> dict[str, str]:
    files = read_manifest(Lake(home), version)["files"]
    return {rel: files[rel]["sha256"] for rel in FILES}
