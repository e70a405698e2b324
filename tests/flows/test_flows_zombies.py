"""O2: the automation that marks zombie runs Crashed is installed once on a Prefect server."""

from __future__ import annotations

import pytest

from lookbench_live.flows.zombies import AUTOMATION_NAME, install_zombie_automation


@pytest.mark.slow
def test_zombie_automation_is_installed_once() -> None:
    from prefect.automations import Automation
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness():
        assert install_zombie_automation(60) == "created"
        assert install_zombie_automation(60) == "present"
        stored = Automation.read(name=AUTOMATION_NAME)
        assert stored.trigger.within.total_seconds() == 180
        assert stored.trigger.expect >= {"prefect.flow-run.heartbeat", "prefect.flow-run.Crashed"}
        assert stored.actions[0].state.value == "CRASHED"
