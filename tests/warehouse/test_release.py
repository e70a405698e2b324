"""Releases: LookBench layout and columns, atomic commit, verification, reproducibility, loaders."""

from __future__ import annotations

import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb
import lakefill
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from lookbench_live.schema.release import PUBLISHED_COLUMNS, SUBSETS
from lookbench_live.warehouse.assemble import Window
from lookbench_live.warehouse.lake import ImageCorrupt, Lake
from lookbench_live.warehouse.release import (
    FILES,
    ReleaseError,
    build_release,
    committed_versions,
    correct_release,
    released_sha256s,
    resolve_version,
    verify_release,
    withdrawal,
)


class PlainTaxonomy:
    """Enough taxonomy for the builder: other_attributes = the visible values but the main one."""

    version = "test"

    def published_columns(self, category, attributes, main_attribute):
        return main_attribute, ", ".join(v for k, v in sorted(attributes.items()) if v != main_attribute)


# Every test starts from the lake `lakefill` writes (the shared `lake` fixture, filled).
pytestmark = pytest.mark.lake(fill=lakefill.fill)


# A release the content check held back: committed, not published, so it may be rebuilt in
# place (a published one never changes: test_release_immutable.py).
HELD = {"gate": {"passed": False, "reason": "content check: test"}}


def build(lake: Lake, version: str = "v20261201", **kw):
    return build_release(lake, version=version, taxonomy=PlainTaxonomy(), **kw)


def test_layout_columns_and_assembly_rules(lake: Lake) -> None:
    result = build(lake)
    base = Path(lake.path("releases", "v20261201"))
    for rel in FILES:
        table = pq.read_table(base / rel)
        assert tuple(table.column_names[:9]) == PUBLISHED_COLUMNS, rel
        assert table.schema.field("image").type.names == ["bytes", "path"]
        assert table.num_rows == result.rows[rel]
    for subset in SUBSETS:
        queries = pq.read_table(base / subset / "query.parquet").to_pylist()
        gallery = pq.read_table(base / subset / "gallery.parquet").to_pylist()
        assert queries, subset
        by_item: dict[str, int] = {}
        for row in gallery:
            by_item[row["item_ID"]] = by_item.get(row["item_ID"], 0) + 1
        for q in queries:
            assert 1 <= by_item.get(q["item_ID"], 0) <= 4, (subset, q["item_ID"])
            Image.open(io.BytesIO(q["image"]["bytes"])).verify()
    street = pq.read_table(base / "real_streetlook" / "query.parquet").to_pylist()
    # one query row per item crop; crops of one photo share raw_image; bbox inside it
    assert len({r["raw_sha256"] for r in street}) < len(street)
    for row in street:
        raw = Image.open(io.BytesIO(row["raw_image"]["bytes"]))
        x0, y0, x1, y1 = row["bbox"]
        assert 0 <= x0 < x1 <= raw.width and 0 <= y0 < y1 <= raw.height
        assert Image.open(io.BytesIO(row["image"]["bytes"])).size == (x1 - x0, y1 - y0)
    noise = pq.read_table(base / "noise" / "gallery.parquet").to_pylist()
    assert noise and {r["category"] for r in noise} == {"noise data"}
    query_items = {
        r["item_ID"] for s in SUBSETS for r in pq.read_table(base / s / "query.parquet").to_pylist()
    } | {r["item_ID"] for s in SUBSETS for r in pq.read_table(base / s / "gallery.parquet").to_pylist()}
    assert not query_items & {r["item_ID"] for r in noise}, (
        "a product is never both query item and distractor"
    )
    manifest = json.loads((base / "manifest.json").read_text())
    assert manifest["generation_tiny_local"] is True
    assert set(manifest["files"]) >= set(FILES) | {"README.md", "croissant.json"}


def test_loads_untouched_with_pyarrow_duckdb_polars_and_datasets(lake: Lake, tmp_path: Path) -> None:
    build(lake)
    base = Path(lake.path("releases", "v20261201"))
    query = base / "real_studio_flat" / "query.parquet"
    assert pq.read_table(query).num_rows > 0
    con = duckdb.connect()
    n = con.execute(f"SELECT count(*) FROM read_parquet('{query}') WHERE image.bytes IS NOT NULL").fetchall()[
        0
    ][0]
    assert n == pq.read_table(query).num_rows
    import polars as pl

    frame = pl.read_parquet(query)
    assert frame.columns[:9] == list(PUBLISHED_COLUMNS)
    import datasets

    # A cache of this test's own: the shared one can hold an earlier run's table for the same
    # (reused) temp path, and would answer with its row count.
    cache = str(tmp_path / "hf-datasets-cache")
    # One file alone (no card): the file's own `huggingface` metadata makes the images PIL.
    ds = datasets.load_dataset("parquet", data_files={"query": str(query)}, split="query", cache_dir=cache)
    assert isinstance(ds[0]["image"], Image.Image) and ds[0]["image"].size[0] > 0
    # The folder: the card's `configs:` resolve each subset's splits, untouched (no cast), and
    # every config and split (noise too) gives PIL images for `image` and `raw_image`.
    for config in (*SUBSETS, "noise"):
        by_config = datasets.load_dataset(str(base), config, cache_dir=cache)
        splits = ("gallery",) if config == "noise" else ("query", "gallery")
        assert set(by_config) == set(splits), config
        for split in splits:
            table = by_config[split]
            assert table.num_rows == pq.read_table(base / config / f"{split}.parquet").num_rows
            assert table.column_names == pq.read_schema(base / config / f"{split}.parquet").names
            first = table[0]
            for column in ("image", "raw_image"):
                assert isinstance(first[column], Image.Image), (config, split, column)
                assert first[column].size[0] > 0


def test_croissant_validates(lake: Lake) -> None:
    build(lake)
    path = Path(lake.path("releases", "v20261201", "croissant.json"))
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "mlcroissant"), "validate", "--jsonld", str(path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "error" not in proc.stderr.lower().replace("0 error", ""), proc.stderr[-2000:]


def test_reproducible_bytes_and_immutability(lake: Lake, tmp_path: Path) -> None:
    first = build(lake, extra_manifest=HELD)  # held back: the only kind rebuilt in place
    with pytest.raises(ReleaseError, match="already exists"):
        build(lake)
    replaced = build(lake, replace=True, extra_manifest=HELD)
    twin = Lake(tmp_path / "twin")  # the same content written at another time
    lakefill.fill(twin)
    other = build(twin)
    for rel in FILES:
        sha = first.manifest["files"][rel]["sha256"]
        assert replaced.manifest["files"][rel]["sha256"] == sha == other.manifest["files"][rel]["sha256"], rel
    assert committed_versions(lake) == ["v20261201"]


def test_window_and_no_image_is_released_twice(lake: Lake) -> None:
    lakefill.fill(lake, products=8, looks=1, start=lakefill.T0.replace(month=10), seed=1)
    november = build(lake, version="v20261201", window=Window(start=lakefill.T0, end=None))
    base = Path(lake.path("releases", "v20261201"))
    for rel in FILES:
        for row in pq.read_table(base / rel, columns=["first_seen_at"]).to_pylist():
            assert row["first_seen_at"] >= lakefill.T0
    # a later release over everything takes only what no earlier release published
    later = build(lake, version="v20261215")
    assert 0 < sum(later.rows.values()) < sum(november.rows.values()) + sum(later.rows.values())
    released = set(released_sha256s(lake, before="v20261215"))
    base = Path(lake.path("releases", "v20261215"))
    for rel in FILES:
        for row in pq.read_table(base / rel, columns=["first_seen_at", "sha256", "raw_sha256"]).to_pylist():
            assert row["first_seen_at"] < lakefill.T0
            assert row["sha256"] not in released and row["raw_sha256"] not in released
    # an older window built afterwards does not take `latest` from the newer release
    older = build(lake, version="v20261020", window=Window(end=lakefill.T0))
    assert older.published_latest is False and resolve_version(lake, "latest") == "v20261215"


def test_verify_names_altered_missing_and_extra_files(lake: Lake) -> None:
    build(lake)
    assert verify_release(lake, "latest") == []
    base = Path(lake.path("releases", "v20261201"))
    target = base / "aigen_studio" / "gallery.parquet"
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0x01
    target.write_bytes(bytes(data))
    (base / "noise" / "extra.parquet").write_bytes(b"PAR1")
    (base / "croissant.json").unlink()
    problems = verify_release(lake, "v20261201")
    assert any("aigen_studio/gallery.parquet was altered" in p for p in problems)
    assert any("noise/extra.parquet is not listed" in p for p in problems)
    assert any("croissant.json is listed in manifest.json but missing" in p for p in problems)
    (base / "manifest.json").unlink()
    with pytest.raises(ReleaseError):
        resolve_version(lake, "v20261201")


def _damaged(data: bytes) -> bytes:
    """The bytes with one bit flipped past the JPEG header: Pillow still opens them."""
    out = bytearray(data)
    out[len(out) // 2] ^= 0x10
    return bytes(out)


def test_a_damaged_lake_image_is_never_packed_into_a_release(lake: Lake) -> None:
    """X13: image bytes read for a release are re-hashed against their name; a rebuild over a
    damaged file stops naming it, and the published release stays as it was."""
    build(lake)
    base = Path(lake.path("releases", "v20261201"))
    manifest = (base / "manifest.json").read_bytes()
    row = pq.read_table(base / "real_studio_flat" / "gallery.parquet").to_pylist()[0]
    stored = Path(lake.image_path(row["sha256"]))
    stored.write_bytes(_damaged(stored.read_bytes()))
    Image.open(stored).load()  # still a decodable JPEG: only the hash tells
    with pytest.raises(ImageCorrupt) as raised:
        correct_release(lake, "v20261201", "a fixed label", taxonomy=PlainTaxonomy())
    assert raised.value.sha256 == row["sha256"] and str(stored) in str(raised.value)
    assert (base / "manifest.json").read_bytes() == manifest
    assert verify_release(lake, "v20261201") == []
    # No correction was committed, so the published release was not withdrawn either.
    assert committed_versions(lake) == ["v20261201"] and withdrawal(lake, "v20261201") is None


def test_verify_rehashes_every_rows_image_bytes(lake: Lake) -> None:
    """X13: a file that matches its manifest can still hold bytes that are not the images its
    rows name (what a build that packed a damaged image wrote); verify re-hashes each row."""
    build(lake)
    base = Path(lake.path("releases", "v20261201"))
    rel = "real_streetlook/query.parquet"
    table = pq.read_table(base / rel)
    rows = table.to_pylist()
    rows[1]["raw_image"] = {**rows[1]["raw_image"], "bytes": _damaged(rows[1]["raw_image"]["bytes"])}
    sink = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), sink)
    (base / rel).write_bytes(sink.getvalue())
    manifest = json.loads((base / "manifest.json").read_text())
    manifest["files"][rel].update(
        sha256=hashlib.sha256(sink.getvalue()).hexdigest(), size=len(sink.getvalue())
    )
    (base / "manifest.json").write_text(json.dumps(manifest))
    problems = verify_release(lake, "v20261201")
    assert problems == [
        f"{rel} row 1: its raw_image bytes do not hash to its raw_sha256 {rows[1]['raw_sha256']}"
    ]


def test_cli_verify_exit_status_names_the_file(lake: Lake, cli: str) -> None:
    build(lake)
    env = {**os.environ, "LOOKBENCH_HOME": lake.home}
    ok = subprocess.run([cli, "release", "verify", "latest"], capture_output=True, text=True, env=env)
    assert ok.returncode == 0, ok.stderr
    target = Path(lake.path("releases", "v20261201", "real_studio_flat", "query.parquet"))
    data = bytearray(target.read_bytes())
    data[100] ^= 0xFF
    target.write_bytes(bytes(data))
    bad = subprocess.run([cli, "release", "verify", "latest"], capture_output=True, text=True, env=env)
    assert bad.returncode != 0
    assert "real_studio_flat/query.parquet" in bad.stderr


def test_released_sha256s_includes_raw_photos(lake: Lake) -> None:
    build(lake)
    found = released_sha256s(lake)
    base = Path(lake.path("releases", "v20261201"))
    street = pq.read_table(base / "real_streetlook" / "query.parquet").to_pylist()
    assert street[0]["raw_sha256"] in found and street[0]["sha256"] in found
    assert released_sha256s(lake, before="v20261201") == {}


KILLER = textwrap.dedent(
    """
    import os, signal, sys
    sys.path[:0] = [{tests!r}, {here!r}]  # the shared helpers, and this module (PlainTaxonomy)
    import lakefill
    from lookbench_live.warehouse import lake as lake_mod, release as release_mod
    from lookbench_live.warehouse.lake import Lake
    from test_release import PlainTaxonomy
    kill_at = int(sys.argv[1])
    calls = 0
    real = lake_mod.atomic_write_bytes
    def dying(fs, path, data):
        global calls
        calls += 1
        if calls == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(fs, path, data)
    # The staging files (rows) and the manifest and LATEST (commit): every write of a build.
    release_mod.rows.atomic_write_bytes = dying
    release_mod.commit.atomic_write_bytes = dying
    lake = Lake({home!r})
    release_mod.build_release(
        lake, version="v20261201", taxonomy=PlainTaxonomy(), replace=True, extra_manifest={extra!r}
    )
    print("finished", calls)
    """
)


def test_sigkill_during_build_leaves_no_release_or_the_complete_one(tmp_path: Path) -> None:
    home = tmp_path / "lake"
    lakefill.fill(Lake(home))
    reference_lake = Lake(tmp_path / "twin")  # the same content, built without interruption
    lakefill.fill(reference_lake)
    reference = build(reference_lake)
    script = tmp_path / "killer.py"
    script.write_text(
        KILLER.format(
            tests=str(Path(__file__).parents[1]), here=str(Path(__file__).parent), home=str(home), extra=HELD
        )
    )
    outcomes = set()
    for kill_at in (1, 4, 9, 11, 13, 14):
        proc = subprocess.run(
            [sys.executable, str(script), str(kill_at)], capture_output=True, text=True, timeout=120
        )
        lake = Lake(home)
        killed = proc.returncode == -signal.SIGKILL
        try:
            version = resolve_version(lake, "v20261201")
        except ReleaseError:
            outcomes.add("none")
            assert killed, proc.stderr
            continue
        outcomes.add("complete" if killed else "finished")
        assert verify_release(lake, version) == []
    assert "none" in outcomes and outcomes & {"complete", "finished"}
    # a rerun finishes the work: complete, verified, same files as an uninterrupted build
    final = build(Lake(home), version="v20261201", replace=True, extra_manifest=HELD)
    assert verify_release(Lake(home), "v20261201") == []
    for rel in FILES:
        assert final.manifest["files"][rel]["sha256"] == reference.manifest["files"][rel]["sha256"]
    leftovers = [p for p in os.listdir(Lake(home).path("releases")) if p.startswith(".")]
    assert leftovers == []


@pytest.mark.parametrize("full_at", ["parquet", "croissant.json", "manifest.json"])
def test_a_full_disk_while_releasing_commits_nothing_and_the_rerun_finishes(
    lake: Lake, monkeypatch: pytest.MonkeyPatch, full_at: str
) -> None:
    """R3: the disk fills up (ENOSPC from a real write, half the bytes written) while a staged
    file or the manifest is written: one clear error, the previous release and `latest`
    untouched, no temp file or staging folder left, and a rerun commits the release."""
    import errno

    from lookbench_live.warehouse import lake as lake_module
    from lookbench_live.warehouse import release as release_module

    # October's products were released in November; the December build takes the rest.
    lakefill.fill(lake, products=8, looks=1, start=lakefill.T0.replace(month=10), seed=1)
    build(lake, version="v20261101", window=Window(end=lakefill.T0))
    real_write = release_module.commit.atomic_write_bytes
    armed = {"on": False}

    class FullDisk(io.FileIO):
        def write(self, data) -> int:  # type: ignore[override]
            super().write(bytes(data)[: len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")

    def open_on_full_disk(path, mode="r", *args, **kwargs):
        if armed["on"] and "w" in mode:
            armed["on"] = False
            return FullDisk(path, "w")
        return open(path, mode, *args, **kwargs)

    def arming_write(fs, path, data) -> None:
        armed["on"] = path.endswith(full_at)
        real_write(fs, path, data)

    real_put_rows = release_module.stage._put_rows

    def arming_put_rows(lake, staged, rel, rows, load_image) -> None:  # the streamed Parquet files
        armed["on"] = full_at == "parquet"
        real_put_rows(lake, staged, rel, rows, load_image)

    monkeypatch.setattr(lake_module, "open", open_on_full_disk, raising=False)
    monkeypatch.setattr(release_module.rows, "open", open_on_full_disk, raising=False)
    monkeypatch.setattr(release_module.rows, "atomic_write_bytes", arming_write)
    monkeypatch.setattr(release_module.commit, "atomic_write_bytes", arming_write)
    monkeypatch.setattr(release_module.stage, "_put_rows", arming_put_rows)
    with pytest.raises(ReleaseError, match=r"storage is full .*nothing was committed") as caught:
        build(lake, version="v20261201")
    assert caught.value.__cause__.errno == errno.ENOSPC  # type: ignore[union-attr]
    monkeypatch.undo()
    assert committed_versions(lake) == ["v20261101"]
    assert resolve_version(lake, "latest") == "v20261101"
    assert verify_release(lake, "v20261101") == []
    debris = [
        str(p) for p in Path(lake.path("releases")).rglob("*") if p.name.startswith((".tmp-", ".staging-"))
    ]
    assert debris == []
    rerun = build(lake, version="v20261201")
    assert rerun.published_latest and resolve_version(lake, "latest") == "v20261201"
    assert verify_release(lake, "v20261201") == []
