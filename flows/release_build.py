"""`lookbench-live release build`: the flow's release path, outside a flow run.

The same steps as the refresh's release (`refresh.PIPELINE`): stage (the settings meet
`stage_release` in `warehouse.release.stage_options` only) → content check → audit, whose verdict is
the gate → stage again with the label rules and check again → commit. So `release build`
refuses what the refresh refuses: a release with an empty subset is held back from `latest`
(or not committed, with `release.on_shortfall = "fail"`), and a failed audit keeps `latest`
where it is. It runs in the command's process, without Prefect (the steps are plain
functions), and never resumes: a committed version is refused (`ReleaseExists`).
"""

from __future__ import annotations

import datetime as dt
import io
from typing import TYPE_CHECKING, Annotated

import typer

from lookbench_live.warehouse.cli import ConfigOption, HomeOption, parse_window, release_app

if TYPE_CHECKING:  # imported where used: registering the command must stay light (`--help`)
    from lookbench_live.config import Settings
    from lookbench_live.flows.run_state import ReleaseOutcome
    from lookbench_live.warehouse.assemble import Window
    from lookbench_live.warehouse.lake import Lake

# The refresh's release steps, in its order; `evidence` (the checks on generated images) and
# the evaluation belong to the refresh, whose stages produce what they read.
BUILD_STEPS = ("stage", "check", "audit", "labels", "commit")


def build_checked(
    lake: Lake, settings: Settings, *, version: str, window: Window, replace: bool = False
) -> ReleaseOutcome:
    """Build `version` over `window` through the flow's stage → check → audit → labels → commit."""
    from lookbench_live.flows.refresh import PIPELINE, Run, run_steps
    from lookbench_live.flows.runtime import RunSpec

    now = dt.datetime.now(dt.UTC)
    spec = RunSpec(
        flow="release-build",
        home=lake.home,
        config_path=None,
        as_of=window.end or now,
        version=version,
        window_start=window.start,
        window_end=window.end,
    )
    run = Run(spec=spec, settings=settings, lake=lake, selected=("release",), replace=replace, resume=False)
    steps = [step for step in PIPELINE if step.name in BUILD_STEPS]
    # The command prints the release (or its one `error:` line), as it always has, not step lines.
    run = run_steps(run, steps, as_tasks=False, stream=io.StringIO())
    assert run.release is not None  # commit made it, or raised
    return run.release


def build(
    version: Annotated[str | None, typer.Option(help="vYYYYMMDD (default: today, UTC).")] = None,
    window: Annotated[
        str | None,
        typer.Option(
            help="START..END on first_seen_at, start inclusive (default: from the previous published "
            "release's end, or 30 days back, to the version's day)."
        ),
    ] = None,
    replace: Annotated[
        bool, typer.Option(help="Rebuild a held-back version (a published one never changes).")
    ] = False,
    home: HomeOption = None,
    config: ConfigOption = None,
) -> None:
    """Assemble a release from the lake's kept, annotated items, check, audit, verify and commit it
    atomically, as the refresh does: a release it would hold back is held back here too."""
    from lookbench_live.config import load_settings
    from lookbench_live.warehouse.assemble import Window
    from lookbench_live.warehouse.lake import Lake
    from lookbench_live.warehouse.release import check_version, default_release_window, version_for

    settings = load_settings(config)
    lake = Lake(home or settings.lake.home)
    version = check_version(version or version_for(dt.datetime.now(dt.UTC).date()))
    with lake.writer_lock("release build"):
        span = Window(*parse_window(window)) if window else default_release_window(lake, version)
        outcome = build_checked(lake, settings, version=version, window=span, replace=replace)
    total = sum(outcome.rows.values())
    typer.echo(f"release {outcome.version}: {total} rows at {outcome.path}")
    for rel, rows in outcome.rows.items():
        typer.echo(f"  {rel:36} {rows:>7}")
    if outcome.published_latest is False:
        typer.echo(f"not published as latest: {outcome.latest_reason}")


def register() -> None:
    """`release build` on the warehouse's `release` command group (its other commands stay there)."""
    release_app.command("build")(build)
