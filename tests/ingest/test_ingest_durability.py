"""Durability per batch: the files a batch wrote are synced before the rows naming them commit."""

from __future__ import annotations

import datetime as dt
import os

from ingest_fixtures import jpeg
from ingest_server import Route, serve

from lookbench_live.config import IngestSettings
from lookbench_live.ingest import ImageRequest, ingest_images, ingestor
from lookbench_live.ingest.workers import write_unsynced
from lookbench_live.warehouse.lake import Lake

T0 = dt.datetime(2026, 5, 1, tzinfo=dt.UTC)


def test_every_committed_row_names_a_file_synced_before_the_commit(tmp_path, monkeypatch) -> None:
    events: list[tuple[str, object]] = []
    real_sync = ingestor.sync_paths

    def sync(paths: list[str]) -> None:
        real_sync(paths)
        events.append(("sync", set(paths)))

    class RecordingLake(Lake):
        def append(self, records):  # type: ignore[no-untyped-def]
            records = list(records)
            events.append(("append", [r.sha256 for r in records if r.sha256]))
            return super().append(records)

    monkeypatch.setattr(ingestor, "sync_paths", sync)
    routes = {f"/{i}.jpg": Route(body=jpeg(64, 64, (i * 9, 3, 3))) for i in range(7)}
    settings = IngestSettings(
        allow_private_addresses=True, workers=1, min_side=32, shard_size=3, concurrency=2
    )
    with serve(routes) as server:
        lake = RecordingLake(tmp_path / "lake")
        requests = [
            ImageRequest(url=f"{server.base}/{i}.jpg", owner_kind="product", owner_id=f"s:p{i}", source="s",
                         position=0, first_seen_at=T0)
            for i in range(7)
        ]  # fmt: skip
        result = ingest_images(lake, settings, requests, "r")
    assert result.ok == 7
    synced: set[str] = set()
    appended = 0
    for kind, payload in events:
        if kind == "sync":
            synced |= payload  # type: ignore[operator]
        else:
            for sha in payload:  # type: ignore[union-attr]
                assert lake.image_path(sha) in synced, "a row was committed before its file was synced"
                appended += 1
    assert appended == 7 and sum(kind == "append" for kind, _ in events) == 3  # batches of 3, 3, 1


def test_a_short_file_left_by_a_crash_is_rewritten(tmp_path) -> None:
    # Written but not synced when the machine died: the name exists, the bytes do not.
    path = str(tmp_path / "ab" / "cd" / "x")
    os.makedirs(os.path.dirname(path))
    open(path, "wb").close()
    write_unsynced(path, b"0123456789")
    with open(path, "rb") as handle:
        assert handle.read() == b"0123456789"
