"""`lookbench-live hash` and the optional embedding stage (tiny random ViT built offline)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from test_dedup_decide import add, decisions, photo
from typer.testing import CliRunner

from lookbench_live.cli import app
from lookbench_live.config import DedupSettings
from lookbench_live.dedup import run_dedup
from lookbench_live.schema.hashing import HASH_METHOD, hash_bytes
from lookbench_live.testing.calibration import jpeg
from lookbench_live.warehouse.lake import Lake


def test_hash_command_writes_the_documented_columns(tmp_path: Path) -> None:
    folder = tmp_path / "dataset" / "sub"
    folder.mkdir(parents=True)
    (folder / "a.jpg").write_bytes(jpeg(photo(0)))
    (folder / "b.png").write_bytes(b"broken")
    single = tmp_path / "c.jpeg"
    single.write_bytes(jpeg(photo(1)))
    out = tmp_path / "hashes.parquet"
    result = CliRunner().invoke(app, ["hash", str(tmp_path / "dataset"), str(single), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "hashed 2 images" in result.output and "1 files skipped" in result.output
    assert "skipped " in result.output and "b.png: not a readable image" in result.output
    table = pq.read_table(out)
    assert table.column_names == ["path", "sha256", "phash", "phash_mirror", "method"]
    rows = {Path(r["path"]).name: r for r in table.to_pylist()}
    expected = hash_bytes(jpeg(photo(1)))
    assert (
        rows["c.jpeg"]["phash"] == expected.phash and rows["c.jpeg"]["phash_mirror"] == expected.phash_mirror
    )
    assert all(len(r["phash"]) == 16 and r["phash"] == r["phash"].lower() for r in rows.values())
    assert {r["method"] for r in rows.values()} == {HASH_METHOD}


def test_every_file_not_hashed_gets_one_plain_line(tmp_path: Path) -> None:
    """External datasets are untrusted: the pixel cap applies, other extensions are named, and no
    reason is Pillow's internals (`<_io.BytesIO object at 0x…>`)."""
    import io

    from PIL import Image

    folder = tmp_path / "dataset"
    folder.mkdir()
    (folder / "ok.jpg").write_bytes(jpeg(photo(0)))
    (folder / "notes.txt").write_text("hello")
    (folder / "Makefile").write_text("all:")
    (folder / "broken.png").write_bytes(b"broken")
    (folder / "empty.jpg").write_bytes(b"")
    (folder / "half.jpg").write_bytes(jpeg(photo(1))[:600])
    huge = io.BytesIO()
    Image.new("1", (8000, 6000)).save(huge, "PNG")  # 48 MP: under Pillow's own limit, over ours
    (folder / "huge.png").write_bytes(huge.getvalue())
    eps = tmp_path / "dataset" / "fake.jpg"
    eps.write_bytes(b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\n")
    result = CliRunner().invoke(app, ["hash", str(folder), "--out", str(tmp_path / "h.parquet")])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("skipped ")]
    named = {Path(line.split(":", 1)[0].removeprefix("skipped ")).name: line for line in lines}
    assert set(named) == {
        "notes.txt",
        "Makefile",
        "broken.png",
        "empty.jpg",
        "half.jpg",
        "huge.png",
        "fake.jpg",
    }
    assert len(lines) == len(named)  # one line each
    assert "not an image file name" in named["notes.txt"] and "not a readable image" in named["broken.png"]
    assert "empty file" in named["empty.jpg"] and "over the cap" in named["huge.png"]
    assert "not a readable image" in named["fake.jpg"]  # EPS never reaches Ghostscript
    assert not any("object at 0x" in line or "BytesIO" in line for line in lines), lines
    assert "hashed 1 images" in result.output and "7 files skipped" in result.output


def test_hash_command_refuses_a_missing_path(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["hash", str(tmp_path / "nope"), "--out", str(tmp_path / "h.parquet")])
    assert result.exit_code != 0
    assert not (tmp_path / "h.parquet").exists()


def test_dedup_command_prints_a_summary(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake")
    add(lake, jpeg(photo(0)), "shop:a")
    result = CliRunner().invoke(app, ["dedup", "--home", lake.home, "--run-id", "cli"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert (summary["pending"], summary["kept"], summary["written"]) == (1, 1, 1)


def test_embedding_stage_drops_what_hashes_keep(tmp_path: Path, tiny_vit: str) -> None:
    def lake_with_two_garments(name: str) -> tuple[Lake, str, str]:
        lake = Lake(tmp_path / name)
        return lake, add(lake, jpeg(photo(0)), "shop:a"), add(lake, jpeg(photo(2)), "shop:b", hours=1)

    lake, first, second = lake_with_two_garments("hash-only")
    run_dedup(lake, DedupSettings(), "r")
    assert {d["decision"] for d in decisions(lake).values()} == {"kept"}  # hashes tell them apart

    lake, first, second = lake_with_two_garments("loose")
    # A random model finds everything similar: a tiny threshold makes the second a duplicate.
    run_dedup(lake, DedupSettings(embedding_model=tiny_vit, embedding_threshold=1e-6), "r")
    got = decisions(lake)
    assert got[first]["decision"] == "kept"
    assert (got[second]["reason"], got[second]["matched_sha256"]) == ("near_in_run", first)
    assert 1e-6 < got[second]["similarity"] <= 1.0 + 1e-6

    lake, first, second = lake_with_two_garments("strict")
    run_dedup(lake, DedupSettings(embedding_model=tiny_vit, embedding_threshold=1.0), "r")
    assert {d["decision"] for d in decisions(lake).values()} == {"kept"}


def test_embedding_model_that_cannot_load_is_a_clear_error(tmp_path: Path) -> None:
    from lookbench_live.dedup.embedding import EmbeddingModelError

    lake = Lake(tmp_path / "lake")
    add(lake, jpeg(photo(0)), "shop:a")
    with pytest.raises(EmbeddingModelError, match="cannot be loaded offline"):
        run_dedup(lake, DedupSettings(embedding_model=str(tmp_path / "missing-model")), "r")
    assert lake.read("dedup_decisions").num_rows == 0
