"""The flows users run: the monthly refresh and a backfill over a date window.

`flows/` alone orders the stages:

    crawl -> ingest -> dedup -> annotate -> generate -> dedup -> annotate
          -> [staging release: audit -> evaluate -> report] -> commit -> summary

Real products are deduplicated and annotated before generation so that image-conditioned
AIGen queries start from annotated gallery products; the second dedup and annotate passes
take only what generation added (every stage skips what the lake already holds).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from typing import Any

from prefect import flow, get_run_logger, task

from lookbench_live.config import Settings, load_settings
from lookbench_live.flows import ledger, stages
from lookbench_live.flows.progress import stage_progress
from lookbench_live.flows.runtime import RunSpec, default_as_of, parse_moment, task_runner
from lookbench_live.flows.summary import markdown_summary, publish_artifact, rejection_counts
from lookbench_live.warehouse.assemble import SUBSETS, Window
from lookbench_live.warehouse.lake import Lake
from lookbench_live.warehouse.release import (
    ReleaseError,
    build_release,
    committed_versions,
    read_manifest,
    version_for,
)

ALL_STAGES = ("crawl", "ingest", "dedup", "annotate", "generate", "audit", "release", "evaluate")
BACKFILL_STAGES = ("dedup", "annotate", "audit", "release", "evaluate")


def previous_window_end(lake: Lake, before: str) -> dt.datetime | None:
    """Where the newest committed release before `before` stopped: the refresh's default start."""
    for version in reversed(committed_versions(lake)):
        if version < before:
            end = read_manifest(lake, version).get("window", {}).get("end")
            return parse_moment(end)
    return None


@task(name="audit-evaluate-report")
def audit_evaluate_report(
    spec: RunSpec, staging: str, run_audit_stage: bool, evaluate: bool
) -> dict[str, Any]:
    """Runs inside the release build, on the staging folder, before checksums are taken."""
    settings, lake = load_settings(spec.config_path), Lake(spec.home)
    extra: dict[str, Any] = {}
    audit: dict[str, Any] = {"status": "skipped", "reason": "audit stage not selected"}
    if run_audit_stage:
        audit = audit_staging(lake, settings, staging, spec.run_key)
        extra["audit"] = audit
        if audit.get("status") == "ok":
            extra["gate"] = {"passed": bool(audit.get("gate_passed")), "reason": audit.get("gate_reason", "")}
    evaluations: list[dict[str, Any]] = []
    if evaluate:
        from lookbench_live.evaluation.evaluate import evaluate_release

        for model in [None, *settings.evaluation.models]:
            evaluations.append(
                evaluate_release(
                    lake,
                    spec.version,
                    model=model,
                    release_path=staging,
                    batch_size=settings.evaluation.batch_size,
                    chunk_size=settings.evaluation.chunk_size,
                )
            )
        extra["evaluation"] = [{"model": e["model"], "overall": e["overall"]} for e in evaluations]
        from lookbench_live.evaluation.report import write_report

        write_report(
            lake,
            spec.version,
            f"{staging}/report.html",
            release_path=staging,
            evaluations=evaluations,
            audit=audit,
        )
    return extra


def audit_staging(lake: Lake, settings: Settings, staging: str, run_key: str) -> dict[str, Any]:
    """Send a stratified sample of the staging release's rows to the judge."""
    import pyarrow.parquet as pq

    from lookbench_live.annotation.judge import AuditItem, run_audit
    from lookbench_live.schema.taxonomy import default_taxonomy

    items = []
    for subset in SUBSETS:
        for split in ("query", "gallery"):
            # Not `raw_image`: the judge sees what was labelled (the crop), and photos would double memory.
            columns = [
                "image",
                "raw_sha256",
                "bbox",
                "category",
                "attributes",
                "main_attribute",
                "annotation_model",
            ]
            with lake.fs.open(f"{staging}/{subset}/{split}.parquet", "rb") as handle:
                rows = pq.read_table(handle, columns=columns).to_pylist()
            for row in rows:
                items.append(
                    AuditItem(
                        sha256=row["raw_sha256"],
                        bbox=",".join(str(v) for v in row["bbox"]) if row["bbox"] else "",
                        subset=subset,
                        category=row["category"],
                        attributes={kv["key"]: kv["value"] for kv in row["attributes"]},
                        main_attribute=row["main_attribute"],
                        annotation_model=row["annotation_model"],
                        image=row["image"]["bytes"],
                    )
                )
    summary = run_audit(lake, settings.judge, default_taxonomy(), items, run_key)
    return stages._summary(summary)


def run_pipeline(
    spec: RunSpec, settings: Settings, selected: Sequence[str], *, replace: bool
) -> dict[str, Any]:
    """Run the selected stages in order; returns the summary the CLI prints and the artifact shows."""
    logger = get_run_logger()
    lake = Lake(spec.home)
    summary: dict[str, Any] = {"run_key": spec.run_key, "version": spec.version, "stages": {}}
    steps = [s for s in ALL_STAGES if s in selected and s not in ("audit", "evaluate")]
    with stage_progress(steps) as progress:
        if "crawl" in selected:
            progress.start("crawl")
            sites = stages.sites_for(spec, settings)
            futures = [stages.crawl_site.submit(spec, site) for site in sites]
            summary["stages"]["crawl"] = [f.result() for f in futures]
            progress.done()
        if "ingest" in selected:
            progress.start("ingest")
            allow_private = spec.sample_store_url is not None
            shards = stages.pending_shards(spec)
            futures = [
                stages.ingest_shard.submit(spec, shard, str(i), allow_private)
                for i, shard in enumerate(shards)
            ]
            summary["stages"]["ingest"] = [f.result() for f in futures]
            progress.done()
        if "dedup" in selected:
            progress.start("dedup")
            summary["stages"]["dedup"] = [stages.dedup(spec, "real")]
            progress.done()
        if "annotate" in selected:
            progress.start("annotate")
            summary["stages"]["annotate"] = [stages.annotate(spec, "real")]
            progress.done()
        if "generate" in selected:
            progress.start("generate")
            summary["stages"]["generate"] = stages.generate(spec)
            summary["stages"]["dedup"] = [*summary["stages"].get("dedup", []), stages.dedup(spec, "aigen")]
            summary["stages"]["annotate"] = [
                *summary["stages"].get("annotate", []),
                stages.annotate(spec, "aigen"),
            ]
            progress.done()
        if "release" in selected:
            progress.start("release")
            summary["release"] = release_stage(lake, spec, settings, selected, replace=replace)
            logger.info("release %s: %s", spec.version, summary["release"].get("path"))
            progress.done()
    return summary


def release_stage(
    lake: Lake, spec: RunSpec, settings: Settings, selected: Sequence[str], *, replace: bool
) -> dict:
    if ledger.is_done(lake, spec.run_key, "release", spec.version) and not replace:
        return json.loads(ledger.details(lake, spec.run_key)[("release", spec.version)])
    window = Window(parse_moment(spec.window_start), parse_moment(spec.window_end))

    def before_commit(staging: str) -> dict[str, Any]:
        return audit_evaluate_report(spec, staging, "audit" in selected, "evaluate" in selected)

    try:
        result = build_release(
            lake,
            version=spec.version,
            window=window,
            replace=replace,
            query_share=settings.release.query_share,
            max_gallery=settings.release.max_gallery_per_item,
            seed=settings.release.seed,
            run_id=spec.run_key,
            before_commit=before_commit,
            # Every drop the lake has recorded, by stage/reason: nothing is lost silently.
            extra_manifest={"rejections_by_reason": rejection_counts(lake)},
        )
    except ReleaseError as exc:
        if "already exists" in str(exc):
            # The release was committed but the run died before its marker: the work is done.
            manifest = read_manifest(lake, spec.version)
            outcome = {
                "version": spec.version,
                "path": lake.url("releases", spec.version),
                "rows": manifest["rows"],
                "published_latest": None,
                "note": "already committed",
            }
            ledger.mark_done(lake, spec.run_key, "release", spec.version, detail=json.dumps(outcome))
            return outcome
        raise
    outcome = {
        "version": result.version,
        "path": result.path,
        "rows": result.rows,
        "dropped": result.dropped,
        "published_latest": result.published_latest,
        "latest_reason": result.latest_reason,
        "report": f"{result.path}/report.html" if "report.html" in result.manifest["files"] else None,
        "audit": result.manifest.get("audit"),
        "evaluation": result.manifest.get("evaluation"),
    }
    ledger.mark_done(lake, spec.run_key, "release", spec.version, detail=json.dumps(outcome, default=str))
    return outcome


def _make_spec(
    flow_name: str,
    settings: Settings,
    home: str | None,
    config_path: str | None,
    as_of: dt.datetime,
    version: str,
    start: dt.datetime | None,
    end: dt.datetime | None,
    store_url: str | None,
) -> RunSpec:
    return RunSpec(
        flow=flow_name,
        home=Lake(home or settings.lake.home).home,
        config_path=config_path,
        as_of=as_of.isoformat(),
        version=version,
        window_start=start.isoformat() if start else None,
        window_end=end.isoformat() if end else None,
        sample_store_url=store_url,
    )


def _execute(
    flow_name: str,
    spec_args: dict[str, Any],
    settings: Settings,
    selected: Sequence[str],
    replace: bool,
    port: int,
) -> dict[str, Any]:
    lake = Lake(spec_args["home"] or settings.lake.home)
    with lake.writer_lock("flow"):
        # Only one flow writes at a time; what a killed run left half-written is swept first.
        lake.reconcile()
        with stages.serve_sample_store(settings, port, spec_args["as_of"]) as store_url:
            spec = _make_spec(flow_name, settings, store_url=store_url, **spec_args)
            summary = run_pipeline(spec, settings, selected, replace=replace)
    summary["markdown"] = markdown_summary(Lake(spec.home), summary)
    publish_artifact(summary["markdown"], key=f"{flow_name}-summary")
    return summary


@flow(name="lookbench-refresh")
def refresh_flow(
    config_path: str | None = None,
    home: str | None = None,
    as_of: str | None = None,
    window_start: str | None = None,
    version: str | None = None,
    replace: bool = False,
    sample_store_port: int = 48721,
) -> dict[str, Any]:
    """The monthly refresh: crawl, ingest, dedup, annotate, generate, audit, release, evaluate, report.

    The window is [previous release's end, end of the `as_of` day); the version is the `as_of` date.
    """
    settings = load_settings(config_path)
    moment = parse_moment(as_of) or default_as_of()
    version = version or version_for(moment.date())
    lake = Lake(home or settings.lake.home)
    start = parse_moment(window_start) or previous_window_end(lake, version)
    end = dt.datetime(moment.year, moment.month, moment.day, tzinfo=dt.UTC) + dt.timedelta(days=1)
    args = {
        "home": lake.home,
        "config_path": config_path,
        "as_of": moment,
        "version": version,
        "start": start,
        "end": end,
    }
    return _execute("refresh", args, settings, ALL_STAGES, replace, sample_store_port)


@flow(name="lookbench-backfill")
def backfill_flow(
    start: str,
    end: str,
    stages_: list[str] | None = None,
    config_path: str | None = None,
    home: str | None = None,
    version: str | None = None,
    replace: bool = False,
    sample_store_port: int = 48721,
) -> dict[str, Any]:
    """Rerun the chosen stages over items first seen in [start, end) and build that window's release."""
    settings = load_settings(config_path)
    begin, finish = parse_moment(start), parse_moment(end)
    if begin is None or finish is None or begin >= finish:
        raise ValueError(f"backfill window {start}..{end} is empty: start must be before end")
    selected = tuple(stages_ or BACKFILL_STAGES)
    unknown = set(selected) - set(ALL_STAGES)
    if unknown:
        raise ValueError(f"unknown stages {sorted(unknown)}; stages are {list(ALL_STAGES)}")
    version = version or version_for((finish - dt.timedelta(microseconds=1)).date())
    args = {
        "home": home,
        "config_path": config_path,
        "as_of": begin,
        "version": version,
        "start": begin,
        "end": finish,
    }
    return _execute("backfill", args, settings, selected, replace, sample_store_port)


def with_runner(settings: Settings, chosen: Any) -> Any:
    """The flow with the task runner of the config (threads, Dask or Ray)."""
    return chosen.with_options(task_runner=task_runner(settings.flows))
