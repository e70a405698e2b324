"""The flows as Prefect deployments, for `lookbench-live serve` or a server and worker.

`monthly-refresh` runs on its schedule; `backfill` and `export` run when asked, with their
parameters (`prefect deployment run lookbench-backfill/backfill -p start=2026-10-01 -p
end=2026-11-01`; `prefect deployment run lookbench-export/export -p version=latest -p
to=s3://bucket/lookbench`). Only paths and options are parameters: secrets stay in the
environment, never in Prefect's database.
"""

from __future__ import annotations

from typing import Any

from prefect import flow
from prefect.schedules import Cron

from lookbench_live.config import Settings

DEPLOYMENT_NAME = "monthly-refresh"
BACKFILL_DEPLOYMENT = "backfill"
EXPORT_DEPLOYMENT = "export"


def refresh_deployment(settings: Settings, config_path: str | None, *, cron: str | None = None) -> Any:
    from lookbench_live.flows.refresh import refresh_flow, with_runner

    cron = cron or settings.flows.schedule_cron
    schedule = Cron(cron, timezone=settings.flows.timezone)
    flow = with_runner(settings, refresh_flow)
    # Only the config path is a parameter: secrets stay in the environment (never in Prefect's database).
    return flow.to_deployment(
        name=DEPLOYMENT_NAME,
        schedule=schedule,
        # The cron versions each run by its scheduled day (`refresh_version`), also when retried.
        parameters={"config_path": config_path, "schedule": cron},
        description="The monthly LookBench-live refresh (crawl → … → release → evaluate → report).",
        tags=["lookbench-live", "refresh"],
    )


def backfill_deployment(settings: Settings, config_path: str | None) -> Any:
    """The backfill on demand: `start` and `end` (and `stages_`, `version`, `replace`) per run."""
    from lookbench_live.flows.refresh import backfill_flow, with_runner

    return with_runner(settings, backfill_flow).to_deployment(
        name=BACKFILL_DEPLOYMENT,
        parameters={"config_path": config_path},
        description="Rerun stages over the items first seen in [start, end) and build that window's release.",
        tags=["lookbench-live", "backfill"],
    )


@flow(name="lookbench-export", flow_run_name="export-{version}")
def export_flow(version: str, to: str, home: str | None = None) -> dict[str, Any]:
    """`lookbench-live export` as a flow: copy a release snapshot and verify it at `to`."""
    from dataclasses import asdict

    from lookbench_live.flows.export import export_release
    from lookbench_live.warehouse.lake import Lake

    return asdict(export_release(Lake(home, create=False), version, to))


def export_deployment(home: str | None) -> Any:
    """The export on demand: `version` and `to` per run; `home` the served lake."""
    return export_flow.to_deployment(
        name=EXPORT_DEPLOYMENT,
        parameters={"home": home},
        description="Copy a release (data, manifest, card, Croissant, report) and verify it at the destination.",
        tags=["lookbench-live", "export"],
    )
