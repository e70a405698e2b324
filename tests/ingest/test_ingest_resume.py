"""A SIGKILLed ingestion, rerun, ends with every image once and fetches only what was missing."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter

import pytest
from ingest_fixtures import jpeg
from ingest_server import Route, serve

from lookbench_live.config import IngestSettings
from lookbench_live.ingest import ingest_images, pending_image_requests
from lookbench_live.schema.records import Product
from lookbench_live.warehouse.lake import Lake

T0 = dt.datetime(2026, 5, 1, tzinfo=dt.UTC)
N = 40
SETTINGS = dict(allow_private_addresses=True, min_side=32, workers=0, concurrency=2, shard_size=5, retries=0)

CHILD = textwrap.dedent(
    """
    import sys
    from lookbench_live.config import IngestSettings
    from lookbench_live.ingest import ingest_images, pending_image_requests
    from lookbench_live.warehouse.lake import Lake
    lake = Lake(sys.argv[1])
    ingest_images(lake, IngestSettings(**eval(sys.argv[2])), pending_image_requests(lake), "killed-run")
    """
)


@pytest.mark.slow
def test_sigkill_mid_run_then_rerun_converges(tmp_path) -> None:
    lake = Lake(tmp_path / "lake")
    routes = {f"/{i}.jpg": Route(body=jpeg(96, 96, (i * 5, 40, 90)), delay=0.05) for i in range(N)}
    with serve(routes) as server:
        images = [f"{server.base}/{i}.jpg" for i in range(N)]
        lake.append([
            Product(product_id="p", source="s", platform="shopify", url="u", images=images,
                    first_seen_at=T0, content_hash="h")
        ])  # fmt: skip
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(lake.home), repr(SETTINGS)],
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )
        deadline = time.monotonic() + 60
        # Kill once at least one shard is committed and the run is still going.
        while time.monotonic() < deadline and not lake.fragments("images"):
            time.sleep(0.02)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
        committed = lake.read("images").num_rows
        assert 0 < committed < N, "the kill must land mid-run for this test to mean anything"
        hits_before = sum(v for k, v in server.hits.items() if k.endswith(".jpg"))

        result = ingest_images(lake, IngestSettings(**SETTINGS), pending_image_requests(lake), "rerun")
        refetched = sum(v for k, v in server.hits.items() if k.endswith(".jpg")) - hits_before

    rows = lake.read("images").to_pylist()
    keys = Counter((r["owner_kind"], r["owner_id"], r["source_url"]) for r in rows)
    assert len(rows) == N and max(keys.values()) == 1
    assert all(r["status"] == "ok" for r in rows)
    assert result.ok == N - committed and refetched == N - committed
    assert pending_image_requests(lake) == []
