"""X9, X14: what the lake holds never becomes SQL or a path, and one damaged release is named
while the rest of the lake stays readable (query, `release list`, `release verify`); every step
that must see all earlier releases fails closed naming it, and nothing is committed on top of a
damaged `LATEST`."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
from pathlib import Path

import lakefill
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_release import PlainTaxonomy

from lookbench_live.flows.export import ExportError, export_release
from lookbench_live.schema.release import FILES, LATEST, MANIFEST, ReleaseKeyError, check_file_key
from lookbench_live.warehouse.lake import Lake
from lookbench_live.warehouse.query import run_query
from lookbench_live.warehouse.release import (
    DamagedRelease,
    build_release,
    counted_index,
    resolve_version,
    stage_release,
    verify_release,
)

pytestmark = pytest.mark.lake(fill=lakefill.fill)

GOOD, EARLIER = "v20261201", "v20261115"
# The file name: it closes the quoted split, ends the statement and copies to a file.
HOSTILE = "zz/q' AS split FROM range(1); COPY (SELECT 42 AS leaked) TO 'leak.csv'; --.parquet"


def _build(lake: Lake, version: str = GOOD) -> None:
    build_release(lake, version=version, taxonomy=PlainTaxonomy())


def _list(lake: Lake, version: str = GOOD) -> Path:
    return Path(lake.path("releases", version))


def _add_listed_file(lake: Lake, key: str, version: str = GOOD) -> None:
    """A Parquet file at `key` in the release folder, listed in its manifest with the right
    sha256, size and row count, as someone who can write under `releases/` would add it."""
    path = _list(lake, version) / key
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"leaked": [1]}), path)
    data = path.read_bytes()
    manifest_path = _list(lake, version) / MANIFEST
    manifest = json.loads(manifest_path.read_text())
    manifest["files"][key] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data), "rows": 1}
    manifest_path.write_text(json.dumps(manifest, indent=2, sort_keys=True))


def _env(lake: Lake) -> dict[str, str]:
    return {**os.environ, "LOOKBENCH_HOME": lake.home}


# ---------------------------------------------------------------------- X9: no SQL from the lake
def test_a_manifest_key_carrying_sql_runs_nothing_and_is_refused_as_a_path(
    lake: Lake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _build(lake)
    _add_listed_file(lake, HOSTILE)
    monkeypatch.chdir(tmp_path)  # where the payload's relative 'leak.csv' would land
    with caplog.at_level(logging.WARNING, logger="lookbench_live.warehouse.query"):
        assert run_query(lake, "SELECT 1 AS one").to_pylist() == [{"one": 1}]
        counts = run_query(lake, "SELECT subset, split, count(*) AS n FROM releases GROUP BY ALL").to_pylist()
    assert not (tmp_path / "leak.csv").exists(), "a file name from the lake ran as SQL"
    assert not list(tmp_path.rglob("leak.csv"))
    # The release's own files are all there; the hostile one is skipped, named with its release.
    assert {(r["subset"], r["split"]) for r in counts} == {tuple(rel[:-8].split("/")) for rel in FILES}
    assert any(GOOD in m and repr(HOSTILE) in m and "refused" in m for m in caplog.messages)
    # verify refuses the key (it passed before: the file is listed with its right checksum)
    problems = verify_release(lake, GOOD)
    assert any(repr(HOSTILE) in p and "not a file of the release format" in p for p in problems)
    # the steps that see every earlier release fail closed naming it; export refuses it as a path
    with pytest.raises(DamagedRelease, match=GOOD):
        counted_index(lake)
    with pytest.raises(ExportError, match="not a safe relative path"):
        export_release(lake, GOOD, str(tmp_path / "out"))


def test_the_cli_query_of_a_lake_with_a_hostile_key_runs_no_copy(
    lake: Lake, tmp_path: Path, cli: str
) -> None:
    _build(lake)
    _add_listed_file(lake, HOSTILE)
    done = subprocess.run(
        [cli, "query", "SELECT 1 AS one", "--format", "csv"],
        capture_output=True,
        text=True,
        env=_env(lake),
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["one", "1"]
    assert not (tmp_path / "leak.csv").exists()
    assert "not a file of the release format" in done.stderr and GOOD in done.stderr


@pytest.mark.parametrize(
    "key",
    [
        HOSTILE,
        "extra.parquet",
        "../escape.parquet",
        "real_studio_flat/../noise/gallery.parquet",
        "noise/x.parquet",
    ],
)
def test_only_the_release_formats_own_names_pass_the_key_check(key: str) -> None:
    with pytest.raises(ReleaseKeyError, match=f"release {GOOD}: manifest file key"):
        check_file_key(key, release=GOOD)
    for rel in (*FILES, "README.md", "croissant.json", "report.html"):
        assert check_file_key(rel) == rel


def test_a_top_level_extra_parquet_is_flagged_by_verify_and_skipped_by_query(
    lake: Lake, caplog: pytest.LogCaptureFixture
) -> None:
    _build(lake)
    _add_listed_file(lake, "extra.parquet")
    with caplog.at_level(logging.WARNING, logger="lookbench_live.warehouse.query"):
        rows = run_query(lake, "SELECT count(*) AS n FROM releases").column("n").to_pylist()
    assert rows[0] > 0
    assert any("'extra.parquet'" in m for m in caplog.messages)
    assert any("'extra.parquet'" in p for p in verify_release(lake, GOOD))


# ---------------------------------------------------------------------- X14: one damaged release
def _two_releases_one_damaged(lake: Lake, damage: bytes) -> Path:
    """GOOD built, EARLIER a committed copy of it whose manifest is then replaced by `damage`."""
    _build(lake)
    shutil.copytree(_list(lake), _list(lake, EARLIER))
    manifest = _list(lake, EARLIER) / MANIFEST
    manifest.write_bytes(damage)
    return manifest


DAMAGE = pytest.mark.parametrize(
    "damage", [b"", b"[]", b'{"files": ['], ids=["zero-byte", "list", "truncated"]
)


@DAMAGE
def test_a_damaged_manifest_is_named_and_the_other_release_stays_readable(
    lake: Lake, cli: str, damage: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    manifest = _two_releases_one_damaged(lake, damage)
    with caplog.at_level(logging.WARNING, logger="lookbench_live.warehouse.query"):
        versions = run_query(lake, "SELECT DISTINCT version FROM releases").column("version").to_pylist()
    assert versions == [GOOD]
    assert any(EARLIER in m and str(manifest) in m for m in caplog.messages)

    listed = subprocess.run([cli, "release", "list"], capture_output=True, text=True, env=_env(lake))
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert any(line.startswith(f"* {GOOD}") and "rows" in line for line in lines), lines
    assert any(
        line.startswith(f"! {EARLIER}") and "damaged" in line and str(manifest) in line for line in lines
    )

    good = subprocess.run([cli, "release", "verify", GOOD], capture_output=True, text=True, env=_env(lake))
    assert good.returncode == 0, good.stderr
    bad = subprocess.run([cli, "release", "verify", EARLIER], capture_output=True, text=True, env=_env(lake))
    assert bad.returncode == 1 and f"release {EARLIER}: {MANIFEST}" in bad.stderr, bad.stderr
    assert "Expecting value" not in bad.stderr or "not valid JSON" in bad.stderr

    # Every step that must see all earlier releases stops, naming the damaged one.
    with pytest.raises(DamagedRelease, match=f"release {EARLIER} is damaged: {manifest}") as info:
        counted_index(lake)  # dedup's released-image index
    assert info.value.version == EARLIER and info.value.path == str(manifest)
    before = sorted(p.name for p in Path(lake.path("releases")).iterdir())
    with pytest.raises(DamagedRelease, match=EARLIER):
        stage_release(lake, version="v20261215", taxonomy=PlainTaxonomy())
    assert sorted(p.name for p in Path(lake.path("releases")).iterdir()) == before  # nothing staged
    with pytest.raises(DamagedRelease, match=EARLIER):
        export_release(lake, EARLIER, str(lake.path("..", "out")))
    exported = export_release(lake, GOOD, str(Path(lake.home).parent / "out"))  # the other one still exports
    assert exported.version == GOOD


def test_damage_appearing_between_stage_and_commit_is_refused_at_commit(lake: Lake) -> None:
    from lookbench_live.warehouse.release import commit_release

    # Held back by its gate: the only kind of committed release that may be rebuilt in place.
    build_release(lake, version=GOOD, taxonomy=PlainTaxonomy(), extra_manifest={"gate": {"passed": False}})
    manifest = (_list(lake) / MANIFEST).read_bytes()
    staged = stage_release(lake, version=GOOD, replace=True, taxonomy=PlainTaxonomy())
    shutil.copytree(_list(lake), _list(lake, EARLIER))
    (_list(lake, EARLIER) / MANIFEST).write_bytes(b"")
    with pytest.raises(DamagedRelease, match=EARLIER):
        commit_release(lake, staged)
    assert (_list(lake) / MANIFEST).read_bytes() == manifest


# ---------------------------------------------------------------------- X14: a damaged LATEST
@pytest.mark.parametrize(
    "pointer", [b"", b"[]", b'{"version": "latest; DROP"}'], ids=["zero-byte", "list", "bad"]
)
def test_nothing_is_committed_on_top_of_a_damaged_latest(lake: Lake, cli: str, pointer: bytes) -> None:
    _build(lake)
    latest = Path(lake.path("releases", LATEST))
    latest.write_bytes(pointer)
    manifest = (_list(lake) / MANIFEST).read_bytes()
    replaced = subprocess.run(
        [cli, "release", "build", "--version", GOOD, "--replace"],
        capture_output=True,
        text=True,
        env=_env(lake),
        timeout=300,
    )
    assert replaced.returncode == 1
    errors = [line for line in replaced.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and str(latest) in errors[0] and "LATEST pointer is damaged" in errors[0], errors
    assert (_list(lake) / MANIFEST).read_bytes() == manifest, "a release was committed on a damaged LATEST"
    assert latest.read_bytes() == pointer
    assert sorted(p.name for p in Path(lake.path("releases")).iterdir()) == [LATEST, GOOD]
    with pytest.raises(DamagedRelease, match="LATEST"):
        build_release(lake, version="v20261215", taxonomy=PlainTaxonomy())
    assert not _list(lake, "v20261215").exists()
    # Readers of one release go on: a named version resolves and verifies; `latest` is named damaged.
    assert verify_release(lake, GOOD) == []
    with pytest.raises(DamagedRelease, match=str(latest)):
        resolve_version(lake, "latest")
    assert run_query(lake, "SELECT count(*) AS n FROM releases").column("n").to_pylist()[0] > 0


def test_the_refresh_flow_refuses_a_damaged_latest_before_any_work(lake: Lake) -> None:
    from lookbench_live.flows.refresh import refresh_flow

    _build(lake)
    latest = Path(lake.path("releases", LATEST))
    latest.write_bytes(b"")
    before = _lake_files(lake)
    with pytest.raises(DamagedRelease, match=str(latest)):
        refresh_flow.fn(home=lake.home, as_of="2026-12-20")  # the flow's body: no Prefect server needed
    assert _lake_files(lake) == before, "the flow worked (crawled, wrote) before refusing"


def _lake_files(lake: Lake) -> list[str]:
    """Every file of the lake but the writer lock's (which stays, released)."""
    files = (p.relative_to(lake.home) for p in Path(lake.home).rglob("*") if p.is_file())
    return sorted(str(p) for p in files if p.parts[0] != "locks")
