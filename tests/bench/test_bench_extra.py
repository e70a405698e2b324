"""Every bench runs from a declared install: what bench/*.py imports is a dependency of the package
or of its `bench` extra (pyproject.toml), apart from the two exceptions docs/benchmarks.md names."""

from __future__ import annotations

import ast
import importlib.metadata as md
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# eval_bench's contender (installed --no-deps: its torchvision fails beside the CPU torch) and the
# test lake export_bench imports from tests/.
NOT_IN_THE_EXTRA = {"look_bench", "lakefill"}


def _name(requirement: str) -> str:
    return re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_every_bench_import_is_declared():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {_name(r) for r in [*project["dependencies"], *project["optional-dependencies"]["bench"]]}
    local = {p.stem for p in (ROOT / "bench").glob("*.py")}
    distributions = md.packages_distributions()
    missing = []
    for path in sorted((ROOT / "bench").glob("*.py")):
        for module in _imported(path):
            if module in sys.stdlib_module_names or module in local or module == "lookbench_live":
                continue
            if module in NOT_IN_THE_EXTRA:
                continue
            owners = {_name(d) for d in distributions.get(module, [module])}
            if not owners & declared:
                missing.append(f"{path.name}: {module} ({', '.join(sorted(owners))})")
    assert not missing, missing
