"""The takedown list: persisted, applied to releases, and to exports through corrections."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import tarfile
from pathlib import Path

import lakefill
import pyarrow.parquet as pq
import pytest
import typer
from PIL import Image
from test_release import PlainTaxonomy, build
from typer.testing import CliRunner

from lookbench_live.flows.export import ExportError, export_release
from lookbench_live.warehouse.lake import FragmentError, Lake
from lookbench_live.warehouse.release import ReleaseWithdrawn, correct_release
from lookbench_live.warehouse.takedown import (
    TakedownError,
    TakedownList,
    add_takedowns,
    entries_for,
    normalize_url,
    releases_holding,
    takedown_filter,
)
from lookbench_live.warehouse.takedown_cli import register

VERSION = "v20261201"
NEXT = "v20261202"  # a build the damaged list must stop


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    lake = Lake(tmp_path / "lake")
    lakefill.fill(lake)
    build(lake, VERSION)
    return lake


def _rows(base: Path, rel: str) -> list[dict]:
    return pq.read_table(base / rel).to_pylist()


def _a_gallery_item(lake: Lake) -> tuple[str, dict]:
    """An item of real_studio_flat with a query, and one of its gallery rows."""
    base = Path(lake.path("releases", VERSION))
    queries = {r["item_ID"] for r in _rows(base, "real_studio_flat/query.parquet")}
    for row in _rows(base, "real_studio_flat/gallery.parquet"):
        if row["item_ID"] in queries:
            return row["item_ID"], row
    raise AssertionError("the fixture release has no answerable query")


def _cli(lake: Lake, *args: str):
    app = typer.Typer()
    register(app)
    return CliRunner().invoke(app, ["takedown", "add", *args, "--home", lake.home])


def test_a_takedown_reaches_exports_through_a_correction(lake: Lake, tmp_path: Path) -> None:
    """A published release never changes and is never rewritten by an export: once it holds a
    listed row, export refuses it; its correction (a new version without the rows, naming what it
    supersedes) is exported instead, and replaces the earlier export of the superseded version."""
    dest = tmp_path / "share"
    first = export_release(lake, VERSION, str(dest))
    assert not first.already_there and (dest / VERSION / "manifest.json").exists()
    item, _ = _a_gallery_item(lake)
    product_url = next(
        json.loads(r["provenance"])["product_url"]
        for r in _rows(Path(lake.path("releases", VERSION)), "real_studio_flat/gallery.parquet")
        if r["item_ID"] == item
    )
    # The owner names the product page, written differently from the stored URL.
    written = product_url.replace("https://shop.example", "HTTPS://Shop.Example:443") + "/"
    assert written != product_url
    result = _cli(lake, "--url", written, "--reason", "owner #7")
    assert result.exit_code == 0, result.output
    assert (
        f"held by release {VERSION}" in result.output and "real_studio_flat/gallery.parquet" in result.output
    )
    original = _tree(Path(lake.path("releases", VERSION)))
    with pytest.raises(ExportError, match="takedown list") as refused:
        export_release(lake, VERSION, str(tmp_path / "elsewhere"))
    assert f"release correct {VERSION}" in str(refused.value)
    assert not (tmp_path / "elsewhere").exists()

    corrected = correct_release(lake, VERSION, "owner #7", taxonomy=PlainTaxonomy())
    again = export_release(lake, "latest", str(dest))
    assert again.version == corrected.version and again.removed_superseded == [VERSION]
    exported = dest / corrected.version
    for rel in ("real_studio_flat/query.parquet", "real_studio_flat/gallery.parquet"):
        assert item not in {r["item_ID"] for r in _rows(exported, rel)}, rel
    assert not (dest / VERSION).exists()  # the superseded copy went with it
    # The lake's release is untouched (published means immutable), and withdrawn: never exported.
    assert _tree(Path(lake.path("releases", VERSION))) == original
    with pytest.raises(ReleaseWithdrawn):
        export_release(lake, VERSION, str(tmp_path / "snap-old.tar"))
    # The export is the correction's bytes, as its manifest names them.
    manifest = json.loads((exported / "manifest.json").read_text())
    assert manifest["supersedes"] == VERSION
    for rel, entry in manifest["files"].items():
        blob = (exported / rel).read_bytes()
        assert hashlib.sha256(blob).hexdigest() == entry["sha256"] and len(blob) == entry["size"], rel
    assert (exported / "manifest.json").read_bytes() == (
        Path(lake.path("releases", corrected.version)) / "manifest.json"
    ).read_bytes()
    # Exporting again finds the same copy; a tar export holds the correction too.
    assert export_release(lake, corrected.version, str(dest)).already_there
    tar_path = tmp_path / "snap.tar"
    export_release(lake, corrected.version, str(tar_path))
    with tarfile.open(tar_path) as tar:
        blob = tar.extractfile(f"{corrected.version}/real_studio_flat/gallery.parquet").read()
    assert item not in {r["item_ID"] for r in pq.read_table(io.BytesIO(blob)).to_pylist()}


def _tree(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def test_a_different_snapshot_is_still_never_overwritten(lake: Lake, tmp_path: Path) -> None:
    dest = tmp_path / "share"
    export_release(lake, VERSION, str(dest))
    manifest = dest / VERSION / "manifest.json"
    manifest.write_text(manifest.read_text().replace('"code_version"', '"code_version_x"'))
    with pytest.raises(ExportError, match="different snapshot"):
        export_release(lake, VERSION, str(dest))


def test_the_filter_matches_url_source_sha256_and_phash(lake: Lake) -> None:
    _, row = _a_gallery_item(lake)
    image = row["image"]["bytes"]
    assert takedown_filter(lake)(row) is None  # nothing listed yet
    # A re-encoded, resized copy of the photo: another sha256, the same pHash within the radius.
    with Image.open(io.BytesIO(image)) as im:
        copy = io.BytesIO()
        im.convert("RGB").resize((im.width * 2, im.height * 2)).save(copy, "JPEG", quality=70)
    add_takedowns(lake, entries_for(image=copy.getvalue(), radius=4))
    why = takedown_filter(lake)(row)
    assert why is not None and why.startswith("takedown: phash")
    listed = TakedownList.from_records(entries_for(sha256=row["sha256"]))
    assert listed.reason(row) == f"takedown: sha256 {row['sha256']}"
    assert (
        TakedownList.from_records(entries_for(source=row["source"]))
        .reason(row)
        .startswith("takedown: source")
    )
    assert (
        TakedownList.from_records(entries_for(url=row["source_url"])).reason(row).startswith("takedown: url")
    )
    other = dict(
        row, sha256="0" * 64, raw_sha256="0" * 64, source="elsewhere", source_url="", provenance="{}"
    )
    assert TakedownList.from_records(entries_for(sha256=row["sha256"])).reason(other) is None
    # Every row of the release the assembler would see is judged the same way (the lead wires the
    # filter into assembly, so a listed item stays out of the next release).
    flagged = [
        takedown_filter(lake)(r)
        for r in _rows(Path(lake.path("releases", VERSION)), "real_studio_flat/gallery.parquet")
    ]
    assert any(flagged)


def test_bad_requests_are_refused_and_entries_are_idempotent(lake: Lake, tmp_path: Path) -> None:
    with pytest.raises(TakedownError, match="not an http"):
        entries_for(url="ftp://x/y")
    with pytest.raises(TakedownError, match="64 hex"):
        entries_for(sha256="abc")
    with pytest.raises(TakedownError, match="name the item"):
        entries_for()
    with pytest.raises(TakedownError, match="cannot be decoded"):
        entries_for(image=b"not an image")
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"nope")
    result = _cli(lake, "--image", str(bad))
    assert result.exit_code == 2 and "cannot be decoded" in result.output
    assert _cli(lake, "--sha256", "f" * 64).exit_code == 0
    again = _cli(lake, "--sha256", "f" * 64)
    assert "already listed" in again.output and "no published release holds it" in again.output
    assert lake.read("takedowns").num_rows == 1
    assert normalize_url("HTTPS://Shop.Example:443/p/x/?a=1#top") == "https://shop.example/p/x?a=1"
    assert releases_holding(lake, TakedownList.from_records(entries_for(sha256="e" * 64))) == {}


def _damaged_takedowns(lake: Lake) -> tuple[str, str]:
    """Take down a published gallery item, then cut the takedowns fragment short (X10);
    returns the item and the fragment's path."""
    item, row = _a_gallery_item(lake)
    add_takedowns(lake, entries_for(sha256=row["sha256"], reason="owner #9"))
    (fragment,) = Path(lake.table_dir("takedowns")).glob("part-*.parquet")
    fragment.write_bytes(fragment.read_bytes()[: fragment.stat().st_size // 2])
    return item, str(fragment)


def _released_shas(base: Path) -> set[str]:
    return {r["sha256"] for r in _rows(base, "real_studio_flat/gallery.parquet")}


def test_a_damaged_takedowns_fragment_stops_every_step_that_reads_it(lake: Lake, tmp_path: Path) -> None:
    """X10: the list fails closed. Reading it, listing it, adding to it, building a release and
    exporting one each stop naming the fragment; nothing taken down is published or exported."""
    _, fragment = _damaged_takedowns(lake)
    reader = Lake(lake.home)
    with pytest.raises(FragmentError) as raised:
        reader.read("takedowns")
    assert raised.value.path == fragment and raised.value.table == "takedowns"
    # A query that skipped it (other tables' policy) does not hide it from the next read.
    reader.dataset("takedowns")
    with pytest.raises(FragmentError):
        reader.read("takedowns")
    with pytest.raises(FragmentError):
        add_takedowns(Lake(lake.home), entries_for(sha256="e" * 64))

    before = (Path(lake.path("releases", VERSION)) / "manifest.json").read_bytes()
    with pytest.raises(FragmentError, match="takedowns"):
        build(Lake(lake.home), NEXT)
    assert (Path(lake.path("releases", VERSION)) / "manifest.json").read_bytes() == before
    assert not Path(lake.path("releases", NEXT)).exists()
    assert not [p for p in Path(lake.path("releases")).iterdir() if p.name.startswith(".staging-")]

    dest = tmp_path / "share"
    with pytest.raises(FragmentError):
        export_release(Lake(lake.home), VERSION, str(dest))
    assert not dest.exists()


def test_the_cli_refuses_to_list_or_export_a_damaged_takedown_list(
    lake: Lake, tmp_path: Path, cli: str
) -> None:
    _, fragment = _damaged_takedowns(lake)
    env = {**os.environ, "LOOKBENCH_HOME": lake.home}
    listed = subprocess.run([cli, "takedown", "list"], capture_output=True, text=True, env=env, timeout=120)
    assert listed.returncode == 1 and fragment in listed.stderr, listed.stderr
    assert "Traceback" not in listed.stderr and listed.stdout == ""
    dest = tmp_path / "share"
    exported = subprocess.run(
        [cli, "export", VERSION, "--to", str(dest)], capture_output=True, text=True, env=env, timeout=120
    )
    assert exported.returncode == 1 and fragment in exported.stderr, exported.stderr
    assert not dest.exists()
    # The release build too (the one step that publishes).
    built = subprocess.run(
        [cli, "release", "build", "--version", NEXT],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert built.returncode == 1 and fragment in built.stderr, built.stderr


def test_a_whole_takedown_list_still_reads_and_filters(lake: Lake) -> None:
    """The fail-closed rule refuses only damage: an intact list still filters the correction."""
    _, row = _a_gallery_item(lake)
    assert row["sha256"] in _released_shas(Path(lake.path("releases", VERSION)))
    add_takedowns(lake, entries_for(sha256=row["sha256"]))
    corrected = correct_release(Lake(lake.home), VERSION, "owner", taxonomy=PlainTaxonomy())
    assert row["sha256"] not in _released_shas(Path(lake.path("releases", corrected.version)))
