"""A notification when a run needs someone: it failed or crashed, or it finished with a flag (a
site that answered but yielded far less than its earlier months, a release held back or not
published as latest).

The webhook's URL is a secret (a Slack or Teams incoming webhook carries its token), so the
configuration names the environment variable that holds it (`flows.notify_url_env`); the
value is read when a run ends. One POST of JSON, bounded by a 10 s timeout; a notification
that cannot be delivered is logged, never a second failure of the run:

    {"text": "lookbench-live refresh-v20261201 Failed: …", "flow": "lookbench-refresh",
     "run": "refresh-v20261201", "state": "Failed", "message": "…", "flags": ["site shop: yield_drop …"]}

`text` is what Slack, Mattermost and Teams' workflows show; the other keys are for machines.
The flow's `on_failure`, `on_crashed` and `on_completion` hooks call it.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)
TIMEOUT_S = 10.0


def flags(summary: Any) -> list[str]:
    """What a finished run's summary asks someone to look at (empty: nothing)."""
    if not isinstance(summary, dict):
        return []
    found = [
        f"site {site.get('site')}: {site['flag']}"
        for site in summary.get("stages", {}).get("crawl", [])
        if isinstance(site, dict) and site.get("flag")
    ]
    release = summary.get("release") or {}
    if release.get("published_latest") is False:
        found.append(
            f"release {release.get('version')} not published as latest: {release.get('latest_reason')}"
        )
    return found


def payload(flow: str, run: str, state: str, message: str, found: list[str]) -> dict[str, Any]:
    text = f"lookbench-live {run} {state}"
    if message:
        text += f": {message}"
    if found:
        text += "; " + "; ".join(found)
    return {"text": text[:3000], "flow": flow, "run": run, "state": state, "message": message, "flags": found}


def send(url: str, body: dict[str, Any]) -> bool:
    """POST `body` to `url`; False (logged) when it was not accepted."""
    import httpx

    try:
        response = httpx.post(url, json=body, timeout=TIMEOUT_S)
        response.raise_for_status()
    except httpx.HTTPError as exc:
        log.warning("notification not delivered: %s", type(exc).__name__)
        return False
    return True


def _url(flow_run: Any) -> str | None:
    from lookbench_live.config import load_settings, secret

    parameters = getattr(flow_run, "parameters", None) or {}
    name = load_settings(parameters.get("config_path")).flows.notify_url_env
    return secret(name) if name else None


def on_failure(flow: Any, flow_run: Any, state: Any) -> None:
    """Prefect's `on_failure` / `on_crashed` hook of the refresh and backfill flows."""
    url = _url(flow_run)
    if url:
        send(url, payload(flow.name, flow_run.name, state.name, state.message or "", []))


def flagged(flow: str, summary: dict[str, Any], config_path: str | None) -> bool:
    """A finished run with flags (`flags`) is reported too; returns whether it was sent."""
    from types import SimpleNamespace

    from prefect.runtime import flow_run

    found = flags(summary)
    url = _url(SimpleNamespace(parameters={"config_path": config_path})) if found else None
    if not url:
        return False
    return send(url, payload(flow, flow_run.name or summary.get("run_key", ""), "Completed", "", found))
