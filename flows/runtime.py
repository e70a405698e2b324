"""How flows run: offline Prefect settings, the task runner, and the run's logical time.

A run has a logical time `as_of` (default: today 00:00 UTC; a scheduled run's date). It
names the run (`run_key`), the release (`vYYYYMMDD`) and stamps `first_seen_at` of what
the run discovers, so a killed run rerun the same day resumes the same work and builds
byte-identical files.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import asdict, dataclass
from typing import Any

from lookbench_live.config import FlowSettings

OFFLINE_ENV = {
    # Prefect's embedded API otherwise tries to reach a telemetry host and logs errors.
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "90",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "PREFECT_LOGGING_LEVEL": "WARNING",
}


def offline_defaults() -> None:
    """Set the offline defaults the user has not set (call before importing prefect)."""
    for key, value in OFFLINE_ENV.items():
        os.environ.setdefault(key, value)


def parse_moment(value: str | dt.datetime | dt.date | None) -> dt.datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, dt.datetime):
        moment = value
    elif isinstance(value, dt.date):
        moment = dt.datetime(value.year, value.month, value.day)
    else:
        moment = dt.datetime.fromisoformat(value)
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


def default_as_of(now: dt.datetime | None = None) -> dt.datetime:
    now = now or dt.datetime.now(dt.UTC)
    return dt.datetime(now.year, now.month, now.day, tzinfo=dt.UTC)


@dataclass(frozen=True, slots=True)
class RunSpec:
    """Everything a task needs to rebuild its context in another process (no secrets)."""

    flow: str
    home: str
    config_path: str | None
    as_of: str  # ISO datetime, UTC
    version: str
    window_start: str | None
    window_end: str | None
    sample_store_url: str | None = None
    # The run's clock ("today", ISO datetime): None is the real one. Tests that run several
    # months on configured sites inject it; a real site is crawled only as of its own today.
    clock: str | None = None

    @property
    def run_key(self) -> str:
        return f"{self.flow}:{self.version}:{self.window_start or ''}..{self.window_end or ''}"

    @property
    def as_of_dt(self) -> dt.datetime:
        moment = parse_moment(self.as_of)
        assert moment is not None
        return moment

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def task_runner(flows: FlowSettings) -> Any:
    """The Prefect task runner the config names: threads (default), Dask or Ray."""
    if flows.task_runner == "dask":
        try:
            from prefect_dask import DaskTaskRunner
        except ImportError as exc:
            raise RuntimeError(
                "flows.task_runner = 'dask' needs prefect-dask: pip install 'lookbench-live[dask]'"
            ) from exc
        if flows.dask_address:
            return DaskTaskRunner(address=flows.dask_address)
        cluster: dict[str, Any] = {
            "n_workers": flows.dask_workers,
            "threads_per_worker": 1,
            "processes": True,
            "dashboard_address": None,
        }
        if flows.dask_worker_resources:
            cluster["resources"] = dict(flows.dask_worker_resources)
        return DaskTaskRunner(cluster_kwargs=cluster)
    if flows.task_runner == "ray":
        try:
            from prefect_ray import RayTaskRunner
        except ImportError as exc:
            raise RuntimeError(
                "flows.task_runner = 'ray' needs prefect-ray: pip install prefect-ray"
            ) from exc
        return RayTaskRunner()
    from prefect.task_runners import ThreadPoolTaskRunner

    return ThreadPoolTaskRunner(max_workers=4)


def runs_in_worker_processes(flows: FlowSettings) -> bool:
    """Whether the runner's tasks run in processes of their own (Dask, Ray), not threads of the
    flow: torch's thread count and loaded models are per process, so GPU/torch stages shard
    only there."""
    return flows.task_runner in ("dask", "ray")


def uses_gpu(device: str | None) -> bool:
    """Whether a stage configured with `device` needs a GPU: "cuda", "cuda:N"; None means "cuda
    when present", which a worker decides for itself (no resource is asked for)."""
    return device is not None and device.split(":", 1)[0] == "cuda"


def submit_sharded(task: Any, shards: list[tuple[Any, ...]], *, gpu: bool, flows: FlowSettings) -> list[Any]:
    """Submit `task(*args)` for each args tuple of `shards` to the flow's task runner.

    With `gpu` on a Dask runner each task carries `resources={"GPU": 1}` (prefect-dask's
    documented way: `dask.annotate` around `.submit`), so the scheduler places it only on a
    worker that declared a GPU (`dask worker --resources GPU=1`, or `flows.dask_worker_resources`)
    and never two on one GPU at a time. Ray and threads take the tasks as they are."""
    if not (gpu and flows.task_runner == "dask"):
        return [task.submit(*args) for args in shards]
    import dask

    _require_gpu_workers()
    with dask.annotate(resources={"GPU": 1}):
        return [task.submit(*args) for args in shards]


def _require_gpu_workers() -> None:
    """A task asking for a GPU that no worker has waits forever: fail with the fix instead."""
    from prefect.context import FlowRunContext

    context = FlowRunContext.get()
    client = getattr(getattr(context, "task_runner", None), "client", None) if context else None
    if client is None:
        return
    workers = client.scheduler_info(n_workers=-1).get("workers", {})
    if not any(w.get("resources", {}).get("GPU", 0) >= 1 for w in workers.values()):
        raise RuntimeError(
            "a stage's device is cuda but no Dask worker declares a GPU resource: start workers with "
            "`dask worker --resources GPU=1` (or set flows.dask_worker_resources = {GPU = 1} for the "
            "local cluster), or set the stage's device to cpu"
        )
