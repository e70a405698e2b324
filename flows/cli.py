"""`lookbench-live refresh | backfill | export | serve`: the flows users run."""

from __future__ import annotations

from typing import Annotated, Any

import typer

ConfigOption = Annotated[
    str | None, typer.Option("--config", help="TOML configuration file (default: embedded).")
]
HomeOption = Annotated[
    str | None, typer.Option("--home", help="Lake root (default $LOOKBENCH_HOME or ./lookbench-data).")
]


def _prepare(config: str | None) -> Any:
    """Validate the configuration before any work, and set the offline defaults."""
    from lookbench_live.config import load_settings
    from lookbench_live.flows.runtime import offline_defaults

    settings = load_settings(config)  # a wrong setting fails here, naming it
    offline_defaults()
    return settings


def _lake_lock(home: str | None, settings: Any) -> Any:
    """The lake's writer lock for this whole process, taken before Prefect starts: a second run
    is refused at once naming the holder, and none can start between this check and the flow's."""
    from lookbench_live.warehouse.lake import Lake

    return Lake(home or settings.lake.home).process_writer_lock("flow")


def _starting(what: str, home: str | None, settings: Any) -> None:
    """The first line, at once: Prefect's local API takes seconds to start before any stage."""
    import os
    import sys

    from lookbench_live.terminal import clear_starting
    from lookbench_live.warehouse.lake import resolve_home

    clear_starting()
    api = os.environ.get("PREFECT_API_URL") or "Prefect's local API (starting, about 10 s)"
    print(f"{what}: lake {resolve_home(home or settings.lake.home)}, {api}", file=sys.stderr, flush=True)


def _run_flow(flow: Any, **parameters: Any) -> dict[str, Any]:
    """Run `flow` in this process with Ctrl-C and SIGTERM turned into a stop at the next safe
    point (`lookbench_live.interrupt`): an interrupted run raises `Interrupted` (exit 130/143,
    one line), anything else as the flow ended."""
    from lookbench_live import interrupt
    from lookbench_live.flows.runtime import route_run_logs, start_local_api

    with interrupt.guard():
        start_local_api()  # its own session: a Ctrl-C to the group leaves it serving the flow
        route_run_logs()
        from prefect import tags

        with tags("lookbench-live", flow.name.removeprefix("lookbench-")):
            state = flow(**parameters, return_state=True)
        stopped = interrupt.last()
        if state.is_cancelled() and stopped is not None:
            raise stopped
        return state.result()


def _report(summary: dict[str, Any]) -> None:
    typer.echo(summary["markdown"])
    release = summary.get("release")
    if release:
        typer.echo(f"Release {release['version']} is at {release['path']}")
        if release.get("report"):
            typer.echo(
                f"Open its report: lookbench-live report {release['version']} --open  ({release['report']})"
            )
        typer.echo(
            'Query it: lookbench-live query "SELECT subset, split, count(*) FROM releases GROUP BY ALL"'
        )


def refresh(
    config: ConfigOption = None,
    home: HomeOption = None,
    as_of: Annotated[str | None, typer.Option(help="Logical date of the run (default: today, UTC).")] = None,
    since: Annotated[
        str | None, typer.Option(help="Window start (default: the previous release's end).")
    ] = None,
    version: Annotated[str | None, typer.Option(help="Release version (default: v<as-of date>).")] = None,
    replace: Annotated[bool, typer.Option(help="Rebuild the release if it exists.")] = False,
    port: Annotated[int, typer.Option(help="Loopback port of the sample store (embedded default).")] = 48721,
) -> None:
    """The monthly refresh, end to end: crawl, ingest, dedup, annotate, generate, audit, release, evaluate, report.

    With no configuration it runs on the embedded default: the sample store on 127.0.0.1, a tiny
    local diffusion pipeline, metadata annotation, the weight-free evaluator, Prefect's embedded
    API and a local lake. Rerun after a crash: it resumes where it stopped.

    \b
    Examples:
      lookbench-live refresh
      lookbench-live refresh --config lookbench.toml --as-of 2026-12-01
    """
    from lookbench_live.flows.preflight import check_refresh

    settings = _prepare(config)
    checked = check_refresh(settings, home, as_of=as_of, since=since, replace=replace)  # before Prefect
    with _lake_lock(home, settings):
        _starting(f"refresh as of {checked.as_of.date()}", home, settings)
        from lookbench_live.flows.refresh import refresh_flow, with_runner

        summary = _run_flow(
            with_runner(settings, refresh_flow),
            config_path=config,
            home=home,
            as_of=as_of,
            window_start=since,
            version=version,
            replace=replace,
            sample_store_port=port,
        )
    _report(summary)


def backfill(
    start: Annotated[str, typer.Option(help="Window start (ISO date, inclusive).")],
    end: Annotated[str, typer.Option(help="Window end (ISO date, exclusive).")],
    stages: Annotated[
        list[str] | None, typer.Option("--stages", help="Stages to rerun (repeatable).")
    ] = None,
    config: ConfigOption = None,
    home: HomeOption = None,
    version: Annotated[
        str | None, typer.Option(help="Release version (default: the window's last day).")
    ] = None,
    replace: Annotated[bool, typer.Option(help="Rebuild that window's release if it exists.")] = False,
) -> None:
    """Rerun stages over the items first seen in a window, reusing cached results, and build its release.

    \b
    Examples:
      lookbench-live backfill --start 2026-10-01 --end 2026-11-01
      lookbench-live backfill --start 2026-10-01 --end 2026-11-01 --stages annotate --stages release --replace
    """
    from lookbench_live.flows.preflight import check_backfill

    settings = _prepare(config)
    check_backfill(start, end, stages)  # before Prefect
    with _lake_lock(home, settings):
        _starting(f"backfill {start}..{end}", home, settings)
        from lookbench_live.flows.refresh import backfill_flow, with_runner

        summary = _run_flow(
            with_runner(settings, backfill_flow),
            start=start,
            end=end,
            stages_=stages,
            config_path=config,
            home=home,
            version=version,
            replace=replace,
        )
    _report(summary)


def export(
    version: Annotated[str, typer.Argument(help="vYYYYMMDD or latest.")],
    to: Annotated[str, typer.Option("--to", help="A folder, an fsspec URL (s3://…) or a .tar path.")],
    home: HomeOption = None,
) -> None:
    """Copy a release snapshot (data, manifest, card, Croissant, report) and verify it at the destination.

    \b
    Examples:
      lookbench-live export latest --to /mnt/share/lookbench
      lookbench-live export v20261201 --to lookbench-v20261201.tar
    """
    _prepare(None)
    from lookbench_live.flows.export import export_release
    from lookbench_live.warehouse.lake import Lake

    result = export_release(Lake(home, create=False), version, to)
    state = "already there, verified" if result.already_there else "copied and verified"
    typer.echo(
        f"release {result.version}: {result.files} files, {result.bytes} bytes {state} at {result.destination}"
    )
    for old in result.removed_superseded:  # a correction: the copy of what it supersedes goes
        typer.echo(f"removed the export of {old}, which {result.version} supersedes")


def serve(
    config: ConfigOption = None,
    cron: Annotated[
        str | None, typer.Option(help="Cron schedule (default from config: 03:00 UTC on the 1st).")
    ] = None,
) -> None:
    """Serve the monthly refresh deployment on its schedule, and the backfill and export
    deployments on demand (Prefect `serve`; runs until stopped).

    Schedules do not fire on Prefect's temporary local API: run this, or a Prefect server and
    worker (docker-compose.yml).
    """
    import os

    # Heartbeats let the server mark a killed run Crashed (see flows/zombies.py).
    os.environ.setdefault("PREFECT_FLOWS_HEARTBEAT_FREQUENCY", "60")
    settings = _prepare(config)
    from prefect import serve as prefect_serve

    from lookbench_live.flows.deploy import backfill_deployment, export_deployment, refresh_deployment

    if os.environ.get("PREFECT_API_URL"):
        from lookbench_live.flows.zombies import install_zombie_automation

        state = install_zombie_automation(int(os.environ["PREFECT_FLOWS_HEARTBEAT_FREQUENCY"]))
        typer.echo(f"zombie-run automation: {state}")
    prefect_serve(
        refresh_deployment(settings, config, cron=cron),
        backfill_deployment(settings, config),
        export_deployment(settings.lake.home),
    )


def register(app: typer.Typer) -> None:
    from lookbench_live.flows import release_build

    release_build.register()
    app.command("refresh")(refresh)
    app.command("backfill")(backfill)
    app.command("export")(export)
    app.command("serve")(serve)
