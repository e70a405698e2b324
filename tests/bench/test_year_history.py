"""bench/history.py: the year bench's history months are real records over real, stored bytes."""

from __future__ import annotations

import datetime as dt
import hashlib
import importlib.util
import io
from pathlib import Path

from PIL import Image

from lookbench_live.schema.hashing import hash_bytes
from lookbench_live.warehouse.lake import Lake

HISTORY = Path(__file__).resolve().parents[2] / "bench" / "history.py"


def _history():
    spec = importlib.util.spec_from_file_location("year_history", HISTORY)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_written_month_is_dated_hashed_stored_and_written_once(tmp_path):
    history = _history()
    home = tmp_path / "lake"
    counts = history.write_month(home, 3, dt.date(2026, 3, 1), 10)
    assert counts["products"] == 5 and counts["images"] == 10 and counts["dedup_decisions"] == 10
    lake = Lake(str(home))
    rows = lake.read("images").to_pylist()
    assert len({r["sha256"] for r in rows}) == 10  # distinct pictures, not one repeated
    for row in rows:
        data = lake.get_image(row["sha256"])
        assert hashlib.sha256(data).hexdigest() == row["sha256"]
        Image.open(io.BytesIO(data)).load()  # decodable
        assert hash_bytes(data).phash == row["phash"]
        # Dated in the 30 days before `dated`: old, dated items for the freshness rules.
        assert (
            dt.datetime(2026, 1, 30, tzinfo=dt.UTC)
            <= row["first_seen_at"]
            < dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
        )
    kept = lake.read("dedup_decisions").to_pylist()
    assert {r["decision"] for r in kept} == {"kept"}
    again = history.write_month(home, 3, dt.date(2026, 3, 1), 10)
    assert again["images"] == 0 and again["products"] == 0  # a rerun adds nothing
