"""Issue 14 §4: shards of a stage whose device is cuda carry `resources={"GPU": 1}` on Dask, so they
run only on workers that declared a GPU; with no such worker the flow fails at once, naming the fix,
instead of waiting forever for a worker that never comes."""

from __future__ import annotations

from typing import Any

import pytest

from lookbench_live.config import FlowSettings
from lookbench_live.flows.runtime import submit_sharded, task_runner, uses_gpu

pytestmark = pytest.mark.slow


def test_which_devices_ask_for_a_gpu() -> None:
    assert uses_gpu("cuda") and uses_gpu("cuda:1")
    assert not uses_gpu("cpu") and not uses_gpu(None) and not uses_gpu("mps")


def test_the_local_cluster_declares_the_configured_worker_resources() -> None:
    runner = task_runner(FlowSettings(task_runner="dask", dask_workers=2, dask_worker_resources={"GPU": 1}))
    assert runner.cluster_kwargs["resources"] == {"GPU": 1}
    assert "resources" not in task_runner(FlowSettings(task_runner="dask")).cluster_kwargs


def _cluster(gpu_workers: int) -> dict[str, Any]:
    from distributed import Scheduler, Worker

    workers = {
        f"gpu-{i}": {"cls": Worker, "options": {"nthreads": 1, "resources": {"GPU": 1}}}
        for i in range(gpu_workers)
    }
    workers.update({f"cpu-{i}": {"cls": Worker, "options": {"nthreads": 1}} for i in range(2)})
    return {"workers": workers, "scheduler": {"cls": Scheduler, "options": {"dashboard_address": ":0"}}}


def test_gpu_shards_run_only_on_gpu_workers_and_cpu_shards_anywhere() -> None:
    from prefect import flow, task
    from prefect_dask import DaskTaskRunner

    @task
    def where(i: int) -> str:
        from distributed import get_worker

        return str(get_worker().name)

    settings = FlowSettings(task_runner="dask")

    @flow(task_runner=DaskTaskRunner(cluster_class="distributed.SpecCluster", cluster_kwargs=_cluster(1)))
    def placed() -> tuple[list[str], list[str]]:
        gpu = submit_sharded(where, [(i,) for i in range(6)], gpu=True, flows=settings)
        anywhere = submit_sharded(where, [(i,) for i in range(12)], gpu=False, flows=settings)
        return [f.result() for f in gpu], [f.result() for f in anywhere]

    on_gpu, anywhere = placed()
    assert on_gpu == ["gpu-0"] * 6
    assert len(anywhere) == 12 and set(anywhere) <= {"gpu-0", "cpu-0", "cpu-1"}


def test_gpu_shards_without_a_gpu_worker_fail_with_the_fix() -> None:
    from prefect import flow, task
    from prefect_dask import DaskTaskRunner

    @task
    def nothing(i: int) -> int:
        return i

    @flow(task_runner=DaskTaskRunner(cluster_class="distributed.SpecCluster", cluster_kwargs=_cluster(0)))
    def stuck() -> list[int]:
        futures = submit_sharded(nothing, [(0,)], gpu=True, flows=FlowSettings(task_runner="dask"))
        return [f.result() for f in futures]

    with pytest.raises(RuntimeError, match=r"no Dask worker declares a GPU.*--resources GPU=1"):
        stuck()
