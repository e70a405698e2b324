"""Zombie flow runs: a run killed by SIGKILL or an evicted container stays `Running` on the
Prefect server. With heartbeats on (`PREFECT_FLOWS_HEARTBEAT_FREQUENCY`, > 30 s), this
automation marks a run `Crashed` when its heartbeats stop, which frees its concurrency slot so
the next scheduled refresh is not blocked. Our own completion markers, not this state, decide
what a rerun redoes (docs/flows.md). Pattern from Prefect's "detect zombie flows" guide.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

AUTOMATION_NAME = "lookbench-live: crash zombie flow runs"
HEARTBEAT_SECONDS = 60


def zombie_automation(heartbeat_seconds: int = HEARTBEAT_SECONDS) -> Any:
    """The automation: after a heartbeat, expect another (or a terminal state) within 3 beats."""
    from prefect.automations import Automation
    from prefect.client.schemas.objects import StateType
    from prefect.events.actions import ChangeFlowRunState
    from prefect.events.schemas.automations import EventTrigger, Posture
    from prefect.events.schemas.events import ResourceSpecification

    return Automation(
        name=AUTOMATION_NAME,
        trigger=EventTrigger(
            after={"prefect.flow-run.heartbeat"},
            expect={
                "prefect.flow-run.heartbeat",
                "prefect.flow-run.Completed",
                "prefect.flow-run.Failed",
                "prefect.flow-run.Cancelled",
                "prefect.flow-run.Crashed",
            },
            match=ResourceSpecification({"prefect.resource.id": ["prefect.flow-run.*"]}),
            for_each={"prefect.resource.id"},
            posture=Posture.Proactive,
            threshold=1,
            within=timedelta(seconds=3 * heartbeat_seconds),
        ),
        actions=[
            ChangeFlowRunState(
                name=None,
                force=False,
                state=StateType.CRASHED,
                message="lookbench-live: flow run marked as crashed after missing heartbeats.",
            )
        ],
    )


def install_zombie_automation(heartbeat_seconds: int = HEARTBEAT_SECONDS) -> str:
    """Create the automation on the configured Prefect server, once; returns what was done."""
    from prefect.automations import Automation

    try:
        # `read` is sync-compatible: called outside an event loop it runs and returns the
        # automation (its annotation says coroutine).
        Automation.read(name=AUTOMATION_NAME)  # type: ignore[unused-coroutine]
        return "present"
    except ValueError:
        pass
    zombie_automation(heartbeat_seconds).create()
    return "created"
