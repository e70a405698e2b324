"""Tables are read from committed fragments only (R2, R11): a foreign, footer-less or mistyped file
under tables/ is skipped and reported, and every stage still reads the real rows."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from lookbench_live.schema.records import Rejection
from lookbench_live.warehouse.lake import Lake


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
