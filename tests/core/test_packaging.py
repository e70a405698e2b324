"""The built wheel, installed in a clean venv, works and installs nothing at top level but `lookbench_live`."""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SUBPACKAGES = [
    "lookbench_live.flows",
    "lookbench_live.scrapers",
    "lookbench_live.ingest",
    "lookbench_live.network",
    "lookbench_live.generation",
    "lookbench_live.annotation",
    "lookbench_live.schema",
    "lookbench_live.warehouse",
    "lookbench_live.dedup",
    "lookbench_live.evaluation",
    "lookbench_live.sample_store",
]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # Build from a copy of the sources: setuptools leaves a build/ folder beside them, whose stale
    # files could otherwise end up in a later wheel.
    source = tmp_path_factory.mktemp("source") / "lookbench-live"
    ignore = shutil.ignore_patterns(
        ".git", ".venv*", "build", "dist", "*.egg-info", "lookbench-data", "__pycache__"
    )
    shutil.copytree(REPO, source, ignore=ignore)
    # No build isolation: the wheel is built with the setuptools installed here (offline-safe).
    command = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "-w",
        str(out),
        str(source),
    ]
    subprocess.run(command, check=True, capture_output=True, cwd=source, timeout=300)
    (found,) = out.glob("lookbench_live-*.whl")
    return found


def test_wheel_has_one_top_level_package(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"lookbench_live"}
    assert "lookbench_live/schema/taxonomy.json" in names
    # The report's templates ship as package data.
    for template in ("report.html.j2", "macros.html.j2", "report.css"):
        assert f"lookbench_live/evaluation/templates/{template}" in names, template
    for pkg in SUBPACKAGES:
        assert f"{pkg.replace('.', '/')}/__init__.py" in names, pkg
    # The embedded default's store travels in the wheel: `refresh` with no config serves it.
    for module in ("server", "catalog", "pages", "images", "sites", "cli"):
        assert f"lookbench_live/sample_store/{module}.py" in names, module


def _dependency_paths() -> list[str]:
    """This environment's site-packages, and those it chains to through a path in a .pth file (a
    worktree's venv reuses the main venv's packages so): never a source folder of the checkout."""
    paths = [*site.getsitepackages(), *sys.path]
    return list(dict.fromkeys(p for p in paths if p.rstrip("/").endswith("site-packages")))


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, set[str]]:
    """A clean venv with the wheel installed `--no-deps`; returns its folder and what the install added."""
    venv = tmp_path_factory.mktemp("clean") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # Dependencies come from this environment's site-packages, added as a plain path so that its
    # .pth files (among them the editable checkout's finder) are NOT processed.
    Path(purelib, "deps.pth").write_text("\n".join(_dependency_paths()) + "\n")
    before = set(os.listdir(purelib))
    subprocess.run(
        [str(py), "-m", "pip", "install", "--no-deps", "--no-index", str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return venv, set(os.listdir(purelib)) - before


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


@pytest.mark.slow
def test_wheel_in_clean_venv(installed: tuple[Path, set[str]], tmp_path: Path) -> None:
    venv, added = installed
    py = venv / "bin" / "python"
    assert {a for a in added if not a.endswith(".dist-info")} == {"lookbench_live"}, added
    code = (
        "import importlib, lookbench_live\n"
        f"for name in {SUBPACKAGES!r}: importlib.import_module(name)\n"
        "assert '/site-packages/lookbench_live/' in lookbench_live.__file__, lookbench_live.__file__\n"
        "from lookbench_live.schema.taxonomy import default_taxonomy\n"
        "print(len(default_taxonomy().categories))\n"
    )
    env = _clean_env()
    run = subprocess.run(
        [str(py), "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert int(run.stdout.strip()) >= 20
    helped = subprocess.run(
        [str(venv / "bin" / "lookbench-live"), "--help"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert helped.returncode == 0, helped.stderr[-3000:]
    assert "release" in helped.stdout and "query" in helped.stdout


@pytest.mark.slow
def test_wheel_imports_from_the_repository_root(installed: tuple[Path, set[str]]) -> None:
    """Run from a clone's root, the installed package wins: no folder there shadows `lookbench_live`
    (issue 15 §1: a root `lookbench_live/` with only cli.py and config.py once did)."""
    venv, _ = installed
    env = _clean_env()
    code = (
        "import lookbench_live.flows, lookbench_live.cli\n"
        "print(lookbench_live.flows.__file__)\n"
        "print(lookbench_live.cli.__file__)\n"
    )
    run = subprocess.run(
        [str(venv / "bin" / "python"), "-c", code],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    files = run.stdout.split()
    assert len(files) == 2
    for file in files:
        assert str(venv) in file and "/site-packages/lookbench_live/" in file, file
        assert not file.startswith(str(REPO) + "/"), file
    helped = subprocess.run(
        [str(venv / "bin" / "lookbench-live"), "--help"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=300,
    )
    assert helped.returncode == 0, helped.stderr[-3000:]
    assert "refresh" in helped.stdout and "evaluate" in helped.stdout
