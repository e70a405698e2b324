"""Tables are read from committed fragments only (R2, R11): a foreign, footer-less or mistyped file
under tables/ is skipped and reported, and every stage still reads the real rows."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from lookbench_live.schema.records import Rejection, to_arrow
from lookbench_live.warehouse.lake import FragmentError, Lake


def _rows(n: int, start: int = 0) -> list[Rejection]:
    return [
        Rejection(stage="crawl", item=f"https://x.example/{i}", reason="http_404")
        for i in range(start, start + n)
    ]


def test_foreign_and_broken_files_are_skipped_and_reported(tmp_path: Path) -> None:
    lake = Lake(tmp_path)
    assert lake.append(_rows(3)) == 3
    table_dir = Path(lake.table_dir("rejections"))
    (committed,) = table_dir.glob("part-*.parquet")
    # A footer-less copy under a committed-looking name (a crash of some other writer) …
    (table_dir / ("part-" + "a" * 24 + ".parquet")).write_bytes(committed.read_bytes()[:-40])
    # … a foreign Parquet file with the right name shape but other column types …
    pq.write_table(
        pa.table({"stage": [1, 2], "item": [3.0, 4.0]}), table_dir / ("part-" + "b" * 24 + ".parquet")
    )
    # … and files nobody should have put there.
    (table_dir / "notes.parquet").write_bytes(b"PAR1 not really")
    (table_dir / "README.txt").write_text("hello")
    (table_dir / ".tmp-0123").write_bytes(b"half")  # a killed writer's temp file: silent

    reader = Lake(tmp_path)
    table = reader.read("rejections")
    assert sorted(table.column("item").to_pylist()) == [f"https://x.example/{i}" for i in range(3)]
    assert sorted(Path(p).name for p in reader.skipped) == sorted(
        ["part-" + "a" * 24 + ".parquet", "part-" + "b" * 24 + ".parquet", "notes.parquet", "README.txt"]
    )
    assert all(reason for reason in reader.skipped.values())
    # Writing goes on: keys come from the good fragments, new rows land, nothing is duplicated.
    assert reader.append(_rows(4)) == 1
    assert len(Lake(tmp_path).read("rejections")) == 4


def test_queries_skip_what_reads_skip(tmp_path: Path) -> None:
    from lookbench_live.warehouse.query import run_query

    lake = Lake(tmp_path)
    lake.append(_rows(2))
    table_dir = Path(lake.table_dir("rejections"))
    (table_dir / ("part-" + "c" * 24 + ".parquet")).write_bytes(b"PAR1" + b"\0" * 64)  # no footer
    counted = run_query(lake, "SELECT count(*) AS n FROM rejections").column("n").to_pylist()
    assert counted == [2]


def _varied_rows(n: int) -> list[Rejection]:
    return [
        Rejection(
            stage="crawl", item=f"https://x.example/{i}", reason=f"http_{400 + i % 7}", detail="d" * (i % 13)
        )
        for i in range(n)
    ]


def _flip(path: Path, original: bytes, pos: int) -> None:
    damaged = bytearray(original)
    damaged[pos] ^= 1 << (pos % 8)
    path.write_bytes(bytes(damaged))


def test_a_flipped_byte_in_a_fragment_never_reads_as_other_values(tmp_path: Path) -> None:
    """X13: one flipped bit anywhere in a fragment (pages: their CRC-32 page checksums; footer: its
    schema checked against the stored Arrow schema, its row counts against each other) is an
    unreadable fragment, skipped and
    reported, or changes nothing; the table never reads back with other values. Without the
    checksums about one flip in eight changed values silently (measured 48 of 400)."""
    lake = Lake(tmp_path)
    lake.append(_varied_rows(150))
    (fragment,) = Path(lake.table_dir("rejections")).glob("part-*.parquet")
    original = fragment.read_bytes()
    good = Lake(tmp_path).read("rejections")
    silent, detected = [], 0
    for pos in range(len(original)):  # every byte: the footer's layout moves with the timestamps
        _flip(fragment, original, pos)
        reader = Lake(tmp_path)
        table = reader.read("rejections")
        if reader.skipped:
            assert table.num_rows == 0 and str(fragment) in reader.skipped
            detected += 1
        elif not table.equals(good):
            silent.append(pos)
    fragment.write_bytes(original)
    assert silent == [], f"flips at {silent[:10]} changed values silently"
    assert detected > len(original) // 6  # most flips are caught (the rest hit unused bytes)


def test_a_flipped_byte_in_a_takedowns_fragment_stops_the_read(tmp_path: Path) -> None:
    from lookbench_live.schema.records import Takedown

    lake = Lake(tmp_path)
    lake.append(Takedown(kind="sha256", value=f"{i:064x}", reason="owner") for i in range(40))
    (fragment,) = Path(lake.table_dir("takedowns")).glob("part-*.parquet")
    original = fragment.read_bytes()
    good = Lake(tmp_path).read("takedowns")
    refused = 0
    for pos in range(0, len(original), 5):
        _flip(fragment, original, pos)
        try:
            table = Lake(tmp_path).read("takedowns")
        except FragmentError as exc:
            assert exc.path == str(fragment)
            refused += 1
        else:
            assert table.equals(good), pos  # never fewer entries, never other values
    assert refused > 0


def test_fragments_written_without_page_checksums_still_read(tmp_path: Path) -> None:
    """Lakes written before page checksums were on: their fragments carry none and read as before."""
    lake = Lake(tmp_path)
    table = to_arrow(_rows(5), Rejection)
    old_options = {"compression": "zstd", "write_statistics": True, "use_dictionary": True}
    directory = Path(lake.table_dir("rejections"))
    directory.mkdir(parents=True)
    pq.write_table(table, directory / ("part-" + "d" * 24 + ".parquet"), **old_options)
    reader = Lake(tmp_path)
    assert reader.read("rejections").column("item").to_pylist() == table.column("item").to_pylist()
    assert reader.skipped == {}
    assert reader.append(_rows(6)) == 1  # and the lake goes on appending beside it
