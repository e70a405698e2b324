"""Issue 14 §4: the refresh sharded on a local Dask cluster, over two annotation endpoints.

Its own module (and sample-store port), apart from `test_flows.py`'s reference run: it builds
both releases it compares, and under `make test`'s two workers it runs beside that module.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from flow_fixtures import VERSION, parquet_checksums
from flow_fixtures import refresh as run_refresh

from lookbench_live.warehouse.lake import Lake
from lookbench_live.warehouse.release import read_manifest

PORT = 48804  # both runs: release rows hold the sample store's URLs

pytestmark = pytest.mark.slow


def test_a_dask_refresh_over_two_vlm_endpoints_one_killed_builds_the_same_release(
    tmp_path: Path, cli: str
) -> None:
    """Issue 14 §4: a refresh on a local Dask cluster of 2 workers, annotating over 2 vLLM-like
    endpoints of which one is stopped mid-run, with generation, evaluation embedding and the dedup
    search also as shards on the workers, publishes the same release bytes and scores as the
    thread runner over one endpoint (where every one of those stages runs in the flow process)."""
    import re
    import sqlite3
    import threading

    from lookbench_live.testing.loopback_server import LoopbackServer

    def vlm_config(path: Path, urls: list[str], dask: bool) -> Path:
        runner = '[flows]\ntask_runner = "dask"\ndask_workers = 2\n' if dask else ""
        listed = ", ".join(f'"{u}"' for u in urls)
        shards = "shards = 2\n" if dask else ""  # annotation as 2 tasks on the Dask workers
        # Generation, evaluation embedding and the dedup search as 2 tasks each on the workers.
        sharded = "".join(f"[{stage}]\nshards = 2\n" for stage in ("generation", "evaluation", "dedup"))
        # The loopback VLM answers no street-look truth, so the street subsets come out empty: the
        # release is committed held (content check X8), with its files and manifest all the same.
        hold = '[release]\non_shortfall = "hold"\n'
        path.write_text(
            f"{runner}{hold}{sharded if dask else ''}"
            f'[annotation]\nbase_urls = [{listed}]\nmodel = "loopback-vlm"\n{shards}'
        )
        return path

    with LoopbackServer(model="loopback-vlm") as one:
        home_thread = tmp_path / "thread" / "lake"
        run = run_refresh(
            cli,
            home_thread,
            "--config",
            str(vlm_config(tmp_path / "one.toml", [one.base_url], False)),
            port=PORT,
        )
        assert run.returncode == 0, run.stderr[-4000:]
        assert one.total > 0

    a, b = LoopbackServer(model="loopback-vlm").start(), LoopbackServer(model="loopback-vlm").start()
    served_by_a_at_kill: list[int] = []
    stop = threading.Event()

    def kill_b() -> None:  # b dies once it has answered a few requests; the run goes on
        while b.total < 5 and not stop.wait(0.005):
            pass
        served_by_a_at_kill.append(a.total)
        b.stop()

    killer = threading.Thread(target=kill_b, daemon=True)
    killer.start()
    try:
        home_dask = tmp_path / "dask" / "lake"
        config = vlm_config(tmp_path / "two.toml", [a.base_url, b.base_url], True)
        prefect_home = tmp_path / "prefect"  # its own Prefect database, to read the task runs from
        run = run_refresh(
            cli,
            home_dask,
            "--config",
            str(config),
            timeout=1500,
            port=PORT,
            env={"PREFECT_HOME": str(prefect_home)},
        )
    finally:
        stop.set()
        killer.join()
        a.stop()
    assert run.returncode == 0, run.stderr[-4000:]
    assert b.total >= 5 and a.total > served_by_a_at_kill[0], "b was not stopped mid-run"
    with sqlite3.connect(prefect_home / "prefect.db") as db:  # the shards ran as tasks on the workers
        shard_runs = db.execute(
            "SELECT name, state_type FROM task_run WHERE name LIKE '%-shard-%' OR name LIKE 'annotate-%-of-%'"
        ).fetchall()
    states: dict[str, list[str]] = {}
    for name, state in shard_runs:
        # Annotation shards are named by pass and position (annotate-real-1-of-2); the others
        # carry Prefect's generated suffix (generate-shard-abc).
        kind = "annotate-shard" if re.fullmatch(r"annotate-\w+-\d+-of-\d+", name) else name.rsplit("-", 1)[0]
        states.setdefault(kind, []).append(state)
    assert states.pop("annotate-shard") == ["COMPLETED"] * 4  # 2 passes × 2 shards
    assert states.pop("generate-shard") == ["COMPLETED"] * 2
    assert states.pop("embed-shard") == ["COMPLETED"] * 2  # the baseline's images, 2 shards
    searches = states.pop("dedup-search-shard")  # 2 per range search, 2 searches a pass
    assert searches == ["COMPLETED"] * len(searches) and len(searches) >= 4 and len(searches) % 2 == 0
    assert states == {}
    manifest = read_manifest(Lake(home_dask), VERSION)
    assert manifest["annotation_mode"] == "vlm"
    assert manifest["evaluation"] == read_manifest(Lake(home_thread), VERSION)["evaluation"]
    assert parquet_checksums(home_dask) == parquet_checksums(home_thread)
    annotated = (
        Lake(home_dask).read("annotations").select(["sha256", "bbox", "task", "prompt_version"]).to_pylist()
    )
    assert len({tuple(r.values()) for r in annotated}) == len(annotated)  # nothing annotated twice
