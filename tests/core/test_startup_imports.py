"""`extract`, `--help` and `taxonomy` import only what they use (issue 27): the heavy stacks
(pyarrow, pandas, faiss, torch, extruct's rdflib/bs4/requests) stay out of their processes.
The times are measured by bench/startup_bench.py (docs/benchmarks.md); this holds the cause."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

PAGE = Path(__file__).parents[1] / "corpus" / "payloads" / "page_weekday-sale.html"
# click: typer 0.29 runs on its vendored copy; the entry point matches the package's errors only
# where something loaded it (core/cli.py), so no command pays its import.
HEAVY = ("pyarrow", "pandas", "numpy", "faiss", "torch", "extruct", "rdflib", "bs4", "requests",
         "duckdb", "prefect", "lookbench_live.dedup.decide", "lookbench_live.schema.records",
         "click")  # fmt: skip
PROBE = """
import json, sys
from lookbench_live.cli import main
sys.argv = ["lookbench-live", *json.loads(sys.argv[1])]
try:
    main()
except SystemExit as exc:
    assert not exc.code, exc.code
print("\\nMODULES " + json.dumps(sorted(sys.modules)))
"""


@pytest.mark.parametrize(
    "args",
    [["extract", str(PAGE), "--url", "https://www.weekday.com/p"], ["--help"], ["taxonomy"]],
    ids=["extract", "help", "taxonomy"],
)
def test_command_loads_no_heavy_stack(args):
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(args)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    modules = json.loads(done.stdout.rsplit("MODULES ", 1)[1])
    loaded = sorted({m for m in modules for heavy in HEAVY if m == heavy or m.startswith(heavy + ".")})
    assert not loaded, loaded
    if args[0] != "extract":  # typer builds no pydantic coercer for options left out (cli.py)
        assert not [m for m in modules if m.startswith("typer._adapters")]
    if args[0] != "extract":  # --help validates nothing; taxonomy's packaged file is validated
        assert "pydantic" not in modules  # once, not per process (schema/taxonomy/load.py)
    if args[0] == "taxonomy":
        assert "LookBench taxonomy" in done.stdout  # the command did its work
    if args[0] == "extract":
        assert '"price"' in done.stdout  # the command did its work


def test_extraction_hash_json_is_the_lake_canonical_json():
    """model.dumps stands in for schema.records.dumps: content hashes must not change."""
    from lookbench_live.schema.records import dumps as lake_dumps
    from lookbench_live.scrapers.extract.model import dumps

    payload = {"b": [1, "é", None], "a": {"z": 1.5, "y": "2026-12-01"}, "price": "26.00"}
    assert dumps(payload) == lake_dumps(payload)


def test_an_error_of_the_click_package_keeps_its_message_and_exit_code(monkeypatch, capsys):
    """The entry point no longer imports click to match its errors (see HEAVY): where a library
    has loaded it and raises its usage error, the error is still shown and exits 2."""
    import click

    from lookbench_live import cli

    def raise_usage_error(**_: object) -> None:
        raise click.UsageError("no such thing")

    monkeypatch.setattr(cli, "app", raise_usage_error)
    with pytest.raises(SystemExit) as exit_:
        cli.main()
    assert exit_.value.code == 2
    assert "no such thing" in capsys.readouterr().err
