"""A killed annotation run, rerun, finishes the work without re-sending what was recorded."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from annotation_fixtures import build_lake

from lookbench_live.annotation.run import run_annotation
from lookbench_live.config import AnnotationSettings
from lookbench_live.schema.taxonomy import default_taxonomy
from lookbench_live.testing.loopback_server import LoopbackServer
from lookbench_live.warehouse.lake import Lake

CHILD = """
import sys
from lookbench_live.annotation.run import run_annotation
from lookbench_live.config import AnnotationSettings
from lookbench_live.schema.taxonomy import default_taxonomy
from lookbench_live.warehouse.lake import Lake
settings = AnnotationSettings(base_url=sys.argv[2], model="m", concurrency=2, flush_rows=1, timeout=5)
run_annotation(Lake(sys.argv[1]), settings, default_taxonomy(), "killed-run")
"""


def test_kill_mid_run_then_rerun_sends_no_recorded_request_again(tmp_path: Path):
    fx = build_lake(tmp_path / "lake", extra_products=40)
    with LoopbackServer(model="m", latency=0.1) as server:
        env = dict(os.environ, HF_HUB_OFFLINE="1")
        child = subprocess.Popen([sys.executable, "-c", CHILD, fx.lake.home, server.base_url], env=env)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if len(Lake(fx.lake.home).keys("annotations")) >= 6:
                    break
                assert child.poll() is None, "the run ended before it could be killed"
                time.sleep(0.05)
            child.send_signal(signal.SIGKILL)
        finally:
            child.wait(timeout=10)
        lake = Lake(fx.lake.home)
        lake.reconcile()
        recorded = {key[:3] for key in lake.keys("annotations")}  # (sha256, bbox, task)
        assert 6 <= len(recorded) < 48, "killed mid-run"
        sent_before = server.total
        server.reset_counts()

        settings = AnnotationSettings(base_url=server.base_url, model="m", concurrency=4, timeout=5)
        result = run_annotation(lake, settings, default_taxonomy(), "rerun")

        assert all(server.requests_for_work(*work) == 0 for work in recorded)
        assert result.complete and result.requests == server.total
        # The rerun did the rest: images whose work is all recorded are not planned at all, and the
        # recorded rows of images planned again are skipped, never sent.
        assert result.skipped_existing <= len(recorded) and sent_before >= len(recorded)
        assert result.images < len(set(fx.shas.values()) - {fx.shas["dropped"]})
        rows = lake.read(
            "annotations", columns=["sha256", "bbox", "task", "prompt_version", "model"]
        ).to_pylist()
        keys = [tuple(r.values()) for r in rows]
        assert len(keys) == len(set(keys)), "no duplicate rows"
        done = {r["sha256"] for r in rows}
        assert set(fx.shas.values()) - {fx.shas["dropped"]} <= done
