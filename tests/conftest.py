"""Shared test settings and fixtures: everything offline, the CLI found beside this interpreter.

Fixtures every module shares live here (helpers they build on: `*_fixtures.py` beside it):
`lake` (an empty lake in the test's folder; a module fills it with `pytest.mark.lake(fill)`),
`taxonomy` (the default taxonomy) and `tiny_vit` (a tiny random ViT folder, built once).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

# Offline everywhere, before any library reads its settings.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")

# Under pytest-xdist (`make test` runs two workers) each worker's flows get their own Prefect
# home: two temporary Prefect APIs migrating and writing one SQLite file at once can lock it.
# One home per worker, kept between runs, so only a worker's first API pays the migration.
if os.environ.get("PYTEST_XDIST_WORKER") and "PREFECT_HOME" not in os.environ:
    _home = Path.home() / ".prefect" / f"pytest-{os.environ['PYTEST_XDIST_WORKER']}"
    _home.mkdir(parents=True, exist_ok=True)  # Prefect's SQLite cannot open a file in a missing folder
    os.environ["PREFECT_HOME"] = str(_home)

CLI = str(Path(sys.executable).parent / "lookbench-live")


def required(variable: str) -> bool:
    """Whether `variable` (LOOKBENCH_REQUIRE_*) turns a missing tool into a failure, not a skip."""
    return os.environ.get(variable, "").strip().lower() not in ("", "0", "false", "no")


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test marked `browser` needs Debian's chromium: skipped without it, unless
    LOOKBENCH_REQUIRE_BROWSER is set (`make test`, whose `make setup` installs it), when a
    missing chromium fails the test instead of hiding it."""
    if item.get_closest_marker("browser") is None or shutil.which("chromium"):
        return
    if required("LOOKBENCH_REQUIRE_BROWSER"):
        pytest.fail(
            "LOOKBENCH_REQUIRE_BROWSER is set but Debian's chromium is missing: apt-get install -y chromium"
        )
    pytest.skip(
        "needs Debian's chromium (apt-get install -y chromium); LOOKBENCH_REQUIRE_BROWSER=1 makes this a failure"
    )


@pytest.fixture(scope="session", autouse=True)
def local_api() -> None:
    """The flows tests run in this process use the API the CLI starts (`start_local_api`: its own
    session, on a socket it already holds), started once per worker. Left to Prefect, it picks a
    random port that is free when it looks: a test run at once in the other worker, or a CLI run
    it starts, could pick the same one and this worker's flows would lose their API when that run
    ends (CI, stop 35: three flows tests failed with "connection refused")."""
    from lookbench_live.flows.runtime import start_local_api

    start_local_api()


@pytest.fixture(scope="session")
def cli() -> str:
    """Path of the installed `lookbench-live` command of this environment."""
    return CLI


@pytest.fixture
def lake(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """An empty lake at `<tmp_path>/lake`; `@pytest.mark.lake(fill=f)` (on a test or a module) fills
    it with `f(lake)` first. (A keyword: a mark called with one callable would decorate it.)"""
    from lookbench_live.warehouse.lake import Lake

    made = Lake(tmp_path / "lake")
    marker = request.node.get_closest_marker("lake")
    if marker is not None:
        fill: Callable[[Lake], Any] = marker.kwargs["fill"]
        fill(made)
    return made


@pytest.fixture(scope="session")
def taxonomy() -> Any:
    from lookbench_live.schema.taxonomy import default_taxonomy

    return default_taxonomy()


@pytest.fixture(scope="session")
def tiny_vit(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Folder of a tiny random ViT (model and image processor), as `from_pretrained` reads it."""
    from model_fixtures import tiny_vit as build

    return build(tmp_path_factory.mktemp("tiny-vit"))
