"""`export` streams (issue 24 §7) and refuses its traps (§8): its memory does not grow with the
release, a file altered in the lake is never exported, `--to` inside the lake and malformed URLs
are refused before anything is written."""

from __future__ import annotations

import os
import tarfile
import tracemalloc
from pathlib import Path

import lakefill
import pytest
from test_release import PlainTaxonomy

from lookbench_live.flows.export import ExportError, export_release
from lookbench_live.warehouse.lake import Lake
from lookbench_live.warehouse.release import commit_release, stage_release, verify_release

VERSION = "v20261201"
BIG = 48 << 20  # the release's largest file: much more than the export may hold in memory
BOUND = 8 << 20  # what the export may allocate at its peak (a few 1 MiB chunks and the tar's buffer)


@pytest.fixture(scope="module")
def big_lake(tmp_path_factory: pytest.TempPathFactory) -> Lake:
    """A committed release with a 48 MiB file: its report, added to the staging folder before the
    commit as the refresh adds its report.html, so it is checksummed and listed like any file."""
    lake = Lake(tmp_path_factory.mktemp("big") / "lake")
    lakefill.fill(lake)
    staged = stage_release(lake, version=VERSION, taxonomy=PlainTaxonomy())
    with open(os.path.join(staged.path, "report.html"), "wb") as handle:
        for _ in range(BIG >> 20):
            handle.write(os.urandom(1 << 20))
    commit_release(lake, staged)
    assert verify_release(lake, VERSION) == []
    return lake


def _peak(run) -> tuple[object, int]:
    tracemalloc.start()
    try:
        result = run()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("kind", ["folder", "tar"])
def test_export_memory_does_not_grow_with_the_release(big_lake: Lake, tmp_path: Path, kind: str) -> None:
    destination = tmp_path / ("snap.tar" if kind == "tar" else "share")
    result, peak = _peak(lambda: export_release(big_lake, VERSION, str(destination)))
    assert result.bytes > BIG and not result.already_there
    assert peak < BOUND, f"export allocated {peak} bytes for a {result.bytes}-byte release"
    # Again: the same snapshot is found and verified there, in the same bound.
    again, peak = _peak(lambda: export_release(big_lake, VERSION, str(destination)))
    assert again.already_there and peak < BOUND
    if kind == "tar":
        with tarfile.open(destination) as tar:
            names = tar.getnames()
        assert f"{VERSION}/report.html" in names and f"{VERSION}/manifest.json" in names
    else:
        report = destination / VERSION / "report.html"
        assert report.read_bytes() == Path(big_lake.path("releases", VERSION, "report.html")).read_bytes()
    assert not [p for p in tmp_path.rglob(".tmp-*")]


def test_a_file_altered_in_the_lake_is_never_exported(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake")
    lakefill.fill(lake)
    staged = stage_release(lake, version=VERSION, taxonomy=PlainTaxonomy())
    commit_release(lake, staged)
    card = Path(lake.path("releases", VERSION, "README.md"))
    text = card.read_bytes()
    card.write_bytes(text[:-1] + (b"x" if text[-1:] != b"x" else b"y"))  # same size, other bytes
    for destination in (tmp_path / "share", tmp_path / "snap.tar"):
        with pytest.raises(ExportError, match=r"README\.md does not match its manifest checksum"):
            export_release(lake, VERSION, str(destination))
        assert not (destination / VERSION / "manifest.json").exists() and not destination.is_file()
        assert not [p for p in tmp_path.rglob(".tmp-*")]


@pytest.mark.parametrize("url", ["s3:/bucket/x", "s3:bucket", "s3://", "gs:/b", "nosuchfs://b/x"])
def test_a_malformed_url_is_refused_and_writes_nothing(
    big_lake: Lake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ExportError, match="--to"):
        export_release(big_lake, VERSION, url)
    assert list(tmp_path.iterdir()) == []  # no local folder named `s3:`


def test_a_destination_inside_the_lake_is_refused(big_lake: Lake) -> None:
    releases = Path(big_lake.path("releases"))
    before = {p: p.stat().st_mtime_ns for p in (releases / VERSION).rglob("*")}
    for inside in (
        releases,  # the export would land on the release itself
        releases / VERSION,
        releases / VERSION / "real_studio_flat",
        Path(big_lake.home),
        Path(big_lake.home) / "exports",
        releases / ".." / "releases",
    ):
        with pytest.raises(ExportError, match="inside the lake"):
            export_release(big_lake, VERSION, str(inside))
        with pytest.raises(ExportError, match="inside the lake"):
            export_release(big_lake, VERSION, str(inside / "snap.tar"))
    assert {p: p.stat().st_mtime_ns for p in (releases / VERSION).rglob("*")} == before
    assert not (Path(big_lake.home) / "exports").exists()
    assert verify_release(big_lake, VERSION) == []


def test_a_symlink_into_the_lake_is_refused(big_lake: Lake, tmp_path: Path) -> None:
    link = tmp_path / "looks-outside"
    link.symlink_to(Path(big_lake.path("releases")))
    with pytest.raises(ExportError, match="inside the lake"):
        export_release(big_lake, VERSION, str(link))
