"""Checks of the package as it installs: the import contract and the types of the public API.

`lint-imports` walks the root package's folder and mypy ignores the editable install's import
hook, but the package map of pyproject puts `lookbench_live` in `core/` and each stage in a
top-level folder, so no folder on disk holds the whole package. This assembles that tree (Python
sources only) in a temporary folder and runs the tool on it. Exit status is the tool's own.

    python scripts/package_checks.py imports   # lint-imports, pyproject [tool.importlinter]
    python scripts/package_checks.py types     # mypy, pyproject [tool.mypy], on PUBLIC_API
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# The public API that mypy checks: what users and the other stages call (docs/architecture.md).
PUBLIC_API = (
    "lookbench_live.cli",
    "lookbench_live.config",
    "lookbench_live.schema",
    "lookbench_live.warehouse.lake",
    "lookbench_live.warehouse.views",
    "lookbench_live.warehouse.drops",
    "lookbench_live.retry",
    "lookbench_live.network.limits",
    "lookbench_live.evaluation",
    # The flows and the release path (issue 26 §1): the typed run, its steps, staging and commit.
    "lookbench_live.flows",
    "lookbench_live.warehouse.release",
    "lookbench_live.warehouse.assemble",
    "lookbench_live.terminal",
)


def package_map(repo: Path = REPO) -> dict[str, Path]:
    """Import name -> source folder, from `[tool.setuptools] package-dir`."""
    config = tomllib.loads((repo / "pyproject.toml").read_text())
    return {name: repo / folder for name, folder in config["tool"]["setuptools"]["package-dir"].items()}


def assemble(dest: Path, repo: Path = REPO) -> Path:
    """Copy every package's `.py` files to `dest/<import path>`; returns `dest`."""
    for name, folder in sorted(package_map(repo).items()):
        target = dest.joinpath(*name.split("."))
        for source in folder.rglob("*.py"):
            relative = source.relative_to(folder)
            # A sub-folder that the map installs from elsewhere is not part of this package.
            if "__pycache__" in relative.parts:
                continue
            out = target / relative
            if out.exists():
                continue
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, out)
    return dest


def lint(tree: Path, repo: Path = REPO, contracts: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    """Run `lint-imports` with the contracts of `repo`'s pyproject (all, or those ids) on a `tree`."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    command = [str(Path(sys.executable).parent / "lint-imports"), "--no-cache", str(repo / "pyproject.toml")]
    command += [arg for contract in contracts for arg in ("--contract", contract)]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=tree, timeout=300)


def typecheck(
    tree: Path, repo: Path = REPO, modules: tuple[str, ...] = PUBLIC_API
) -> subprocess.CompletedProcess[str]:
    """Run mypy (pyproject `[tool.mypy]`) on `modules` of an assembled `tree`; imports are followed
    silently, so only these modules' own errors count."""
    env = {**os.environ, "MYPYPATH": str(tree)}
    command = [
        sys.executable,
        "-m",
        "mypy",
        "--config-file",
        str(repo / "pyproject.toml"),
        "--follow-imports=silent",
        # The checkout's cache (gitignored): a rerun checks only what changed.
        "--cache-dir",
        str(repo / ".mypy_cache"),
    ]
    for name in modules:
        is_package = tree.joinpath(*name.split("."), "__init__.py").exists()
        command += ["-p" if is_package else "-m", name]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=tree, timeout=900)


def main(argv: list[str]) -> int:
    checks = {"imports": lint, "types": typecheck}
    if len(argv) != 1 or argv[0] not in checks:
        print(f"usage: package_checks.py {{{'|'.join(checks)}}}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="lookbench-package-") as folder:
        result = checks[argv[0]](assemble(Path(folder)))
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    return result.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
