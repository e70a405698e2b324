"""Published means immutable (issue 22 §5): one version order, no rebuild of a published release,
corrections as new versions naming what they supersede, explicit withdrawal."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import lakefill
import pytest

from lookbench_live.evaluation.contamination import resolve_range
from lookbench_live.evaluation.report import previous_version
from lookbench_live.flows.export import export_release
from lookbench_live.schema.release import (
    VersionError,
    next_revision,
    parse_version,
    version_base,
    version_key,
    version_revision,
)
from lookbench_live.warehouse.assemble import Window
from lookbench_live.warehouse.lake import Lake
from lookbench_live.warehouse.release import (
    ReleaseError,
    ReleaseExists,
    ReleasePublished,
    ReleaseWithdrawn,
    build_release,
    check_version,
    committed_versions,
    correct_release,
    current_versions,
    default_release_window,
    read_latest,
    read_manifest,
    verify_release,
    withdraw_release,
    withdrawal,
)
from lookbench_live.warehouse.takedown import add_takedowns, entries_for

pytestmark = pytest.mark.lake(fill=lakefill.fill)

VERSION = "v20261201"
HELD = {"gate": {"passed": False, "reason": "content check: test"}}


class PlainTaxonomy:
    version = "test"

    def published_columns(self, category, attributes, main_attribute):
        return main_attribute, ", ".join(v for k, v in sorted(attributes.items()) if v != main_attribute)


def build(lake: Lake, version: str = VERSION, **kw):
    return build_release(lake, version=version, taxonomy=PlainTaxonomy(), **kw)


def _tree(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def test_one_version_order_puts_corrections_after_their_base() -> None:
    names = ["v20261201.10", "v20270101", "v20261201", "v20261201.2", "v20261101", "v20261201.1"]
    ordered = ["v20261101", "v20261201", "v20261201.1", "v20261201.2", "v20261201.10", "v20270101"]
    assert sorted(names, key=version_key) == ordered
    assert sorted(names) != ordered  # string order is what this replaces
    assert parse_version("v20261201.3") == (parse_version("v20261201")[0], 3)
    assert version_base("v20261201.3") == "v20261201" and version_revision("v20261201.3") == 3
    assert next_revision("v20261201", names) == "v20261201.11"
    assert next_revision("v20261101", names) == "v20261101.1"
    assert check_version("v20261201.2") == "v20261201.2"
    for bad in (
        "v20261201.0",
        "v20261201.",
        "v2026120",
        "v20261301",
        "v20261201.01",
        "20261201",
        "v20261201-1",
    ):
        with pytest.raises(VersionError):
            parse_version(bad)
        with pytest.raises(ReleaseError):
            check_version(bad)


def test_a_published_release_is_never_rebuilt_in_place(lake: Lake) -> None:
    build(lake)
    base = Path(lake.path("releases", VERSION))
    before = _tree(base)
    with pytest.raises(ReleaseExists):
        build(lake)
    with pytest.raises(ReleasePublished, match="release correct"):
        build(lake, replace=True)
    assert _tree(base) == before and verify_release(lake, VERSION) == []


def test_a_held_back_release_may_be_rebuilt_in_place(lake: Lake) -> None:
    held = build(lake, extra_manifest=HELD)
    assert not held.published_latest and read_latest(lake) is None
    rebuilt = build(lake, replace=True)  # now it passes: published, and immutable from here on
    assert rebuilt.published_latest and read_latest(lake) == VERSION
    with pytest.raises(ReleasePublished):
        build(lake, replace=True)


def test_the_cli_refuses_replace_of_a_published_release_in_one_line(lake: Lake) -> None:
    build(lake)
    cli = str(Path(sys.executable).parent / "lookbench-live")
    env = {**os.environ, "LOOKBENCH_HOME": lake.home}
    env.pop("LOOKBENCH_DEBUG", None)
    proc = subprocess.run(
        [cli, "release", "build", "--version", VERSION, "--replace", "--home", lake.home],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: release v20261201") and "published" in lines[0]


def test_a_correction_supersedes_and_withdraws_the_published_release(lake: Lake, tmp_path: Path) -> None:
    first = build(lake)
    base = Path(lake.path("releases", VERSION))
    before = _tree(base)
    gallery = [r for r in lakefill_rows(base, "real_studio_flat/gallery.parquet")]
    taken = gallery[0]["sha256"]
    add_takedowns(lake, entries_for(sha256=taken, reason="owner request"))
    result = correct_release(lake, VERSION, "owner request #7", taxonomy=PlainTaxonomy())
    assert result.version == "v20261201.1"
    manifest = read_manifest(lake, result.version)
    assert manifest["supersedes"] == VERSION and manifest["window"] == first.manifest["window"]
    card = (Path(lake.path("releases", result.version)) / "README.md").read_text()
    assert f"Supersedes release {VERSION}" in card and "A published version never changes" in card
    corrected = lakefill_rows(Path(lake.path("releases", result.version)), "real_studio_flat/gallery.parquet")
    assert taken not in {r["sha256"] for r in corrected} and corrected
    # The published bytes did not change; the original is withdrawn with the reason.
    assert _tree(base) == before and verify_release(lake, VERSION) == []
    record = withdrawal(lake, VERSION)
    assert record is not None and "owner request #7" in record["reason"] and record["withdrawn_at"]
    assert read_latest(lake) == "v20261201.1"
    assert committed_versions(lake) == [VERSION, "v20261201.1"]
    assert current_versions(lake) == ["v20261201.1"]
    assert resolve_range(lake, "all") == ["v20261201.1"]
    assert resolve_range(lake, "v20261101..latest") == ["v20261201.1"]
    with pytest.raises(ReleaseWithdrawn):
        resolve_range(lake, VERSION)
    with pytest.raises(ReleaseWithdrawn):
        export_release(lake, VERSION, str(tmp_path / "out"))
    assert export_release(lake, "latest", str(tmp_path / "out")).version == "v20261201.1"
    # A second correction sorts after the first, and the next day after both.
    again = correct_release(lake, "latest", "label fix", taxonomy=PlainTaxonomy())
    assert again.version == "v20261201.2" and read_latest(lake) == "v20261201.2"
    assert previous_version(lake, "v20261202") == "v20261201.2"


def test_withdrawal_moves_latest_back_and_is_recorded_once(lake: Lake) -> None:
    cut = lakefill.T0 + dt.timedelta(days=1)
    build(lake, window=Window(None, cut), version="v20261115")
    build(lake, window=Window(cut, None))
    assert read_latest(lake) == VERSION
    withdraw_release(lake, VERSION, "wrong gate")
    assert read_latest(lake) == "v20261115"
    with pytest.raises(ReleaseWithdrawn):
        withdraw_release(lake, VERSION, "again")
    with pytest.raises(ReleaseError, match="reason"):
        withdraw_release(lake, "v20261115", "  ")
    with pytest.raises(ReleaseWithdrawn):
        build(lake, replace=True)  # nor is a withdrawn release rebuilt
    withdraw_release(lake, "v20261115", "legal takedown")
    assert read_latest(lake) is None and current_versions(lake) == []
    stored = json.loads(Path(lake.path("releases", "withdrawn", "v20261115.json")).read_text())
    assert stored["reason"] == "legal takedown"


def test_a_build_without_window_starts_at_the_previous_published_end(lake: Lake) -> None:
    cut = lakefill.T0 + dt.timedelta(days=1)
    build(lake, window=Window(None, cut), version="v20261115")
    window = default_release_window(lake, VERSION)
    # The refresh's rule: to the end of the version's day.
    assert window.start == cut and window.end == parse_dt("2026-12-02T00:00:00+00:00")
    # With none before it: a cadence back from the as-of day, never the whole history.
    fresh = default_release_window(lake, "v20261115")
    assert fresh.start == parse_dt("2026-10-16T00:00:00+00:00") and fresh.end == parse_dt(
        "2026-11-16T00:00:00+00:00"
    )


def parse_dt(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


def lakefill_rows(base: Path, rel: str) -> list[dict]:
    import pyarrow.parquet as pq

    return pq.read_table(base / rel, columns=["sha256", "item_ID"]).to_pylist()


def test_the_cli_corrects_lists_and_withdraws(lake: Lake) -> None:
    import typer
    from typer.testing import CliRunner

    from lookbench_live.warehouse.cli import register

    app = typer.Typer()
    register(app)
    build(lake)
    runner = CliRunner()
    corrected = runner.invoke(
        app, ["release", "correct", VERSION, "--reason", "request #12", "--home", lake.home]
    )
    assert corrected.exit_code == 0, corrected.output
    assert f"release v20261201.1: supersedes {VERSION}" in corrected.output
    listed = runner.invoke(app, ["release", "list", "--home", lake.home])
    lines = listed.output.splitlines()
    assert (
        lines[0].startswith(f"  {VERSION}")
        and "withdrawn: superseded by v20261201.1: request #12" in lines[0]
    )
    assert lines[1].startswith("* v20261201.1")
    withdrawn = runner.invoke(
        app, ["release", "withdraw", "v20261201.1", "--reason", "wrong gate", "--home", lake.home]
    )
    assert withdrawn.exit_code == 0, withdrawn.output
    assert "no release is latest now" in withdrawn.output and read_latest(lake) is None
    again = runner.invoke(app, ["release", "withdraw", "v20261201.1", "--reason", "x", "--home", lake.home])
    assert again.exit_code != 0 and isinstance(again.exception, ReleaseWithdrawn)
