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
from typing import TYPE_CHECKING, Any

from lookbench_live.config import FlowSettings

if TYPE_CHECKING:
    from lookbench_live.warehouse.assemble import Window

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


def default_as_of(now: dt.datetime | None = None) -> dt.datetime:
    now = now or dt.datetime.now(dt.UTC)
    return dt.datetime(now.year, now.month, now.day, tzinfo=dt.UTC)


@dataclass(frozen=True, slots=True)
class RunSpec:
    """Everything a task needs to rebuild its context in another process (no secrets).

    Moments are timezone-aware datetimes (UTC when given naive), parsed once where the run is
    made (`parse_moment`), never re-parsed from text by the steps."""

    flow: str
    home: str
    config_path: str | None
    as_of: dt.datetime
    version: str
    window_start: dt.datetime | None
    window_end: dt.datetime | None
    sample_store_url: str | None = None
    # The run's clock ("today"): None is the real one. Tests that run several months on
    # configured sites inject it; a real site is crawled only as of its own today.
    clock: dt.datetime | None = None

    def __post_init__(self) -> None:
        for name in ("as_of", "window_start", "window_end", "clock"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, dt.datetime):
                raise TypeError(f"RunSpec.{name} is a datetime, not {type(value).__name__}: {value!r}")
            if value is not None and value.tzinfo is None:
                object.__setattr__(self, name, value.replace(tzinfo=dt.UTC))

    @property
    def run_key(self) -> str:
        start = self.window_start.isoformat() if self.window_start else ""
        end = self.window_end.isoformat() if self.window_end else ""
        return f"{self.flow}:{self.version}:{start}..{end}"

    @property
    def window(self) -> Window:
        """The run's window of first-seen times: the one place a run's `Window` is made."""
        from lookbench_live.warehouse.assemble import Window  # pyarrow: not before Prefect starts

        return Window(self.window_start, self.window_end)

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


# ---------------------------------------------------------------------- stopping on a signal
def stoppable(fn: Any) -> Any:
    """A task body that ends `Cancelled` when the run is interrupted (`lookbench_live.interrupt`).

    Raised, `Interrupted` would make Prefect record the task as Failed and print its traceback;
    the returned state makes the task Cancelled, `future.result()` raises `CancelledRun`, and
    the flow reports the interruption once (`refresh.run_pipeline`)."""
    import functools

    from lookbench_live.interrupt import Interrupted

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Interrupted as exc:
            from prefect.states import Cancelled

            return Cancelled(message=str(exc))

    return run


def route_run_logs() -> None:
    """Flow and task runs log at INFO to Prefect's API, whatever `PREFECT_LOGGING_LEVEL` says for
    the console: a server's run page shows each step with its counts, a failure its traceback.
    The console shows Prefect's per-run lines only with `--verbose`: the progress lines and the
    command's one line (`error: …`, `interrupted by …`) say what happened; a failed run's
    traceback stays on the server (and `--verbose` or `LOOKBENCH_DEBUG=1` prints it)."""
    import logging

    from prefect.logging.handlers import PrefectConsoleHandler

    from lookbench_live import interrupt
    from lookbench_live.terminal import verbose_requested

    run_loggers = ("prefect.flow_runs", "prefect.task_runs")
    for name in run_loggers:
        logger = logging.getLogger(name)
        if logger.getEffectiveLevel() > logging.INFO:
            logger.setLevel(logging.INFO)

    class RunLines(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            if not record.name.startswith(run_loggers):
                return True
            return verbose_requested() and interrupt.requested() is None

    for handler in logging.getLogger().handlers:
        if isinstance(handler, PrefectConsoleHandler) and not any(
            type(f).__name__ == "RunLines" for f in handler.filters
        ):
            handler.addFilter(RunLines())


def scheduled_day(cron: str, timezone: str, now: dt.datetime) -> dt.date:
    """The day of the schedule's last tick at or before `now` (in the schedule's timezone).

    A scheduled refresh is versioned by it, not by the day it runs: the month's run retried or
    run again later that month builds the same release, while `first_seen_at` stays the day
    the crawl really saw the items."""
    from zoneinfo import ZoneInfo

    from cronsim import CronSim

    local = now.astimezone(ZoneInfo(timezone))
    tick: dt.datetime = next(CronSim(cron, local + dt.timedelta(seconds=1), reverse=True))
    return tick.date()


def start_local_api() -> None:
    """Start Prefect's temporary local API (no `PREFECT_API_URL`) in its own session, on a port
    it already holds.

    Prefect starts it as a child in the flow's process group, so the SIGINT of a Ctrl-C (sent to
    the whole foreground group) or a scheduler's SIGTERM to the group stops the API while the
    flow still needs it to record its end. In its own session only the flow stops it (at exit);
    it dies with the flow's main thread when that is killed (`PR_SET_PDEATHSIG`), so a kill -9
    leaves no orphan.

    Prefect picks a random port in 8000-8999 that is free when it looks, then waits for
    `/health` on it. Two runs starting at once can pick the same port: the second server fails
    to bind, the second run's health check is answered by the first run's server, and that run
    loses its API (connection refused) the moment the other run exits. So the socket is bound
    here (port 0: the kernel's choice, never one another process holds) and handed to uvicorn
    (`--fd`), which serves on it without binding anything. Its output goes to
    `$PREFECT_HOME/local-api.log`, not to the run's terminal. Called from the main thread before
    the flow; a no-op with a server."""
    import socket
    import subprocess
    import sys
    from pathlib import Path

    from prefect.server.api import server as api
    from prefect.settings import PREFECT_API_URL, PREFECT_HOME, PREFECT_SERVER_EPHEMERAL_ENABLED

    if PREFECT_API_URL.value() or not PREFECT_SERVER_EPHEMERAL_ENABLED.value():
        return
    instance = api.SubprocessASGIServer()
    if instance.running:
        return

    def die_with_parent() -> None:
        if sys.platform.startswith("linux"):
            import ctypes
            import signal

            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG

    # Bound, not listening: until uvicorn listens on it (ready to answer), a health check is
    # refused and retried rather than left waiting in the backlog; and without SO_REUSEADDR no
    # other socket can bind the port meanwhile.
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    fd = listener.fileno()
    port = listener.getsockname()[1]

    class OwnSession:
        """`subprocess` as Prefect's server module sees it while it starts the API."""

        def __getattr__(self, name: str) -> Any:
            return getattr(subprocess, name)

        @staticmethod
        def Popen(args: list[str], **kwargs: Any) -> Any:
            kwargs.setdefault("start_new_session", True)
            kwargs.setdefault("preexec_fn", die_with_parent)
            kwargs["pass_fds"] = (*kwargs.get("pass_fds", ()), fd)
            # Its output goes to a file, not the run's terminal: a request the API cancels when the
            # run exits prints a traceback after the run's one last line ("interrupted by …").
            kwargs.setdefault("stdout", log)
            kwargs.setdefault("stderr", subprocess.STDOUT)
            # Prefect re-picks a random port before it respawns a server that failed to start;
            # the respawn serves on the same socket, so its health check must look there.
            instance.port = port
            return subprocess.Popen([*args, "--fd", str(fd)], **kwargs)

    home = Path(PREFECT_HOME.value())
    home.mkdir(parents=True, exist_ok=True)
    log_path = home / "local-api.log"
    log = open(log_path, "ab")  # noqa: SIM115 - the server holds its own copy once started
    instance.port = port
    api.subprocess = OwnSession()  # type: ignore[assignment]
    try:
        instance.start()
    except RuntimeError as exc:
        raise RuntimeError(f"{exc} (the local API's output: {log_path})") from exc
    finally:
        api.subprocess = subprocess
        listener.close()  # the server holds its own copies of these
        log.close()
