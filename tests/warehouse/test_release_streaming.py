"""The release writer streams: a file's rows are written a row group at a time, with only that
group's images in memory, and the bytes are the lake's (issue 14 §3: a 70,000-image month)."""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import tracemalloc
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from lookbench_live.schema import verify
from lookbench_live.warehouse import release
from lookbench_live.warehouse.assemble import materialize, ordered_rows

IMAGE_BYTES = 200_000
ROWS = 200


def _image(sha: str) -> bytes:
    """A fresh allocation per call (as reading the lake's file is), sized like a product photo."""
    return hashlib.sha256(sha.encode()).digest() * (IMAGE_BYTES // 32)


def _row(i: int, *, crop: bytes | None = None) -> dict:
    sha = f"{i:064x}"
    image_sha = hashlib.sha256(crop).hexdigest() if crop else sha
    return {
        "image": {"bytes": crop, "path": f"{image_sha}.jpg"},
        "raw_image": {"bytes": None, "path": f"{sha}.jpg"},
        "bbox": [0, 0, 4, 4] if crop else None,
        "item_ID": f"shop:{i // 2:05d}",
        "task": "t",
        "difficulty": "d",
        "difficulty_estimate": "easy",
        "sha256": image_sha,
        "raw_sha256": sha,
        "first_seen_at": dt.datetime(2026, 11, 2, tzinfo=dt.UTC),
        "published_at": None,
        "source": "shop",
        "source_url": f"http://shop.test/{i}.jpg",
        "provenance": "{}",
        "category": "dress",
        "taxonomy_category": "dress",
        "main_attribute": "red",
        "other_attributes": "",
        "taxonomy_version": "test",
        "annotation_model": "prior",
        "attributes": [{"key": "color", "value": "red"}],
    }


def test_rows_are_written_in_row_groups_with_the_lakes_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(release.rows, "ROW_GROUP_ROWS", 16)
    crop = b"\xff\xd8crop-bytes"
    rows = ordered_rows([_row(i, crop=crop if i == 7 else None) for i in range(ROWS)])
    sink = io.BytesIO()
    assert release.write_rows(sink, rows, _image) == ROWS
    parquet = pq.ParquetFile(io.BytesIO(sink.getvalue()))
    assert parquet.metadata.num_rows == ROWS
    assert parquet.metadata.num_row_groups == -(-ROWS // 16)
    table = parquet.read()
    for row in table.to_pylist():
        assert row["raw_image"]["bytes"] == _image(row["raw_sha256"])
        if row["bbox"]:  # a crop keeps the bytes the assembler made; its raw photo is loaded
            assert row["image"]["bytes"] == crop
        else:
            assert row["image"]["bytes"] == _image(row["sha256"])


def test_writer_holds_one_row_group_of_images_not_the_release(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(release.rows, "ROW_GROUP_ROWS", 16)
    rows = ordered_rows([_row(i) for i in range(ROWS)])  # 40 MB of images in all
    tracemalloc.start()
    try:
        release.write_rows(io.BytesIO(), rows, _image)  # the file itself is kept by pyarrow, untraced
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * 16 * IMAGE_BYTES, f"peak {peak / 1e6:.1f} MB: more than a few row groups of images"


def test_a_whole_image_row_is_loaded_once_for_image_and_raw_image() -> None:
    calls: list[str] = []

    def load(sha: str) -> bytes:
        calls.append(sha)
        return _image(sha)

    out = materialize(_row(3), load)
    assert calls == [f"{3:064x}"]
    assert out["image"]["bytes"] is out["raw_image"]["bytes"]


def test_staged_file_checksum_is_computed_in_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lookbench_live.warehouse.lake import Lake

    monkeypatch.setattr(verify, "HASH_CHUNK", 1000)
    lake = Lake(tmp_path)
    data = bytes(range(256)) * 50
    path = lake.path("blob")
    Path(path).write_bytes(data)
    assert release.file_digest(lake, path) == (hashlib.sha256(data).hexdigest(), len(data))


def test_audit_loads_each_judged_image_as_the_release_holds_it(tmp_path: Path) -> None:
    import os

    import lakefill
    from test_release import PlainTaxonomy

    from lookbench_live.flows.refresh import _release_image
    from lookbench_live.schema.release import SUBSETS
    from lookbench_live.warehouse.lake import Lake

    lake = Lake(tmp_path / "lake")
    lakefill.fill(lake)
    staged = release.stage_release(lake, version="v20261201", taxonomy=PlainTaxonomy())
    crops = 0
    for subset in SUBSETS:
        for split in ("query", "gallery"):
            path = f"{staged.path}/{subset}/{split}.parquet"
            for row in pq.read_table(path).to_pylist():
                load = _release_image(lake, path, row["sha256"], row["raw_sha256"], row["bbox"])
                assert load() == row["image"]["bytes"], (subset, split, row["sha256"])
                crops += row["bbox"] is not None
    assert crops, "the fixture lake has street crops"
    # A photo gone from the lake: the bytes come from the staged file instead.
    path = f"{staged.path}/real_studio_flat/query.parquet"
    row = pq.read_table(path).to_pylist()[0]
    os.unlink(lake.image_path(row["raw_sha256"]))
    assert _release_image(lake, path, row["sha256"], row["raw_sha256"], None)() == row["image"]["bytes"]
