"""The import contract of pyproject `[tool.importlinter]` holds, and breaks when a rule is broken."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("package_checks", REPO / "scripts" / "package_checks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


lint_imports = _script()


def test_the_tree_keeps_the_contract(tmp_path: Path) -> None:
    tree = lint_imports.assemble(tmp_path)
    # The assembled tree is the installed package's layout: the stages under `lookbench_live`.
    assert (tree / "lookbench_live" / "cli.py").is_file()
    assert (tree / "lookbench_live" / "flows" / "refresh.py").is_file()
    assert (tree / "lookbench_live" / "testing" / "calibration.py").is_file()
    result = lint_imports.lint(tree)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


def _inject(tree: Path, module: str, line: str) -> None:
    path = tree.joinpath(*module.split(".")).with_suffix(".py")
    path.write_text(path.read_text() + f"\n{line}\n")


@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        # A stage importing another stage (even lazily, inside a function).
        (
            "lookbench_live.evaluation.metrics",
            "def _peek():\n    from lookbench_live.dedup import decide  # noqa",
            "layers",
        ),
        ("lookbench_live.scrapers.pipelines", "import lookbench_live.annotation.run", "layers"),
        # A stage ordering the pipeline itself.
        ("lookbench_live.generation.plan", "import lookbench_live.flows.stages", "layers"),
        # The sample store importing a stage (it sits beside them: only `flows` and the CLI use it).
        ("lookbench_live.sample_store.server", "import lookbench_live.scrapers.extract", "layers"),
        # The warehouse importing a stage.
        ("lookbench_live.warehouse.lake", "import lookbench_live.evaluation.metrics", "layers"),
        # A stage reaching into the release build instead of the lake.
        ("lookbench_live.dedup.known", "import lookbench_live.warehouse.assemble", "release-stage"),
        # The product importing a test harness.
        ("lookbench_live.scrapers.crawl", "import lookbench_live.testing.loopback_server", "harnesses"),
    ],
)
def test_a_broken_rule_fails_the_check(tmp_path: Path, module: str, line: str, contract: str) -> None:
    tree = lint_imports.assemble(tmp_path)
    _inject(tree, module, line)
    result = lint_imports.lint(tree, contracts=(contract,))
    assert result.returncode != 0
    text = " ".join(result.stdout.split())
    assert "Contracts: 0 kept, 1 broken." in text, text[-3000:]
    assert f"{module} -> " in text  # the report names the offending import
    # The same tree without the injected line keeps that contract.
    clean = lint_imports.lint(lint_imports.assemble(tmp_path / "clean"), contracts=(contract,))
    assert clean.returncode == 0, clean.stdout[-3000:]
