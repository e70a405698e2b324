"""The monthly refresh as a Prefect deployment, for `lookbench-live serve` or a server and worker."""

from __future__ import annotations

from typing import Any

from prefect.schedules import Cron

from lookbench_live.config import Settings

DEPLOYMENT_NAME = "monthly-refresh"


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
