"""The flows users run: the monthly refresh and a backfill over a date window.

`flows/` alone orders the stages. A run is a list of steps (datatrove's idiom), each one
function taking the run's state and returning it:

    crawl -> ingest -> dedup -> annotate -> generate -> dedup -> annotate
          -> evidence -> stage -> check -> audit -> labels -> evaluate -> report -> commit -> summary

Real products are deduplicated and annotated before generation so that image-conditioned
AIGen queries start from annotated gallery products; the second dedup and annotate passes
take only what generation added (every stage skips what the lake already holds). `stage`
writes the release to a staging folder; `check` holds back a release with an empty subset or
far fewer queries than the last one (X8); audit reads that folder, then `labels` stages again
with the label rules (the judge's verdicts and the `evidence` step's checks act on what is
published; `warehouse/labels.py`)
and checks again; evaluate and report read the new folder (the
evaluation runs once; the report is given its results); `commit` writes the manifest and
makes the release visible, `LATEST` last.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.exceptions import CancelledRun
from prefect.utilities.annotations import quote

from lookbench_live import interrupt
from lookbench_live.config import Settings, load_settings
from lookbench_live.flows import ledger, notify, shards, stages
from lookbench_live.flows.progress import format_counts, stage_counts, stage_progress
from lookbench_live.flows.runtime import (
    RunSpec,
    default_as_of,
    parse_moment,
    route_run_logs,
    scheduled_day,
    stoppable,
    task_runner,
)
from lookbench_live.flows.summary import markdown_summary, publish_artifact, rejection_counts
from lookbench_live.schema.records import Rejection
from lookbench_live.schema.release import SUBSETS
from lookbench_live.warehouse.assemble import Window
from lookbench_live.warehouse.freshness import default_window, upgrade_lake
from lookbench_live.warehouse.labels import LabelRules
from lookbench_live.warehouse.lake import Lake, LakeError
from lookbench_live.warehouse.photo_type import PhotoTypeRule
from lookbench_live.warehouse.release import (
    BuildResult,
    ReleaseError,
    ReleaseExists,
    StagedRelease,
    check_earlier_releases,
    commit_release,
    previous_published,
    read_manifest,
    stage_release,
    version_for,
)


class ReleaseHeldBack(ReleaseError):
    """The staged release fails the content check (an empty subset, far fewer queries) and the
    config says to stop (`release.on_shortfall = "fail"`); the message is the one line users see."""


ALL_STAGES = ("crawl", "ingest", "dedup", "annotate", "generate", "audit", "release", "evaluate")
BACKFILL_STAGES = ("dedup", "annotate", "audit", "release", "evaluate")


def previous_window_end(lake: Lake, before: str) -> dt.datetime | None:
    """Where the newest published release before `before` stopped: the refresh's default start."""
    found = previous_published(lake, before)
    return found[1] if found else None


# ---------------------------------------------------------------------- the run's state
@dataclass(slots=True)
class Run:
    """What flows from step to step: the run's inputs, then each step's output."""

    spec: RunSpec
    settings: Settings
    lake: Lake
    selected: tuple[str, ...]
    replace: bool
    summary: dict[str, Any] = field(default_factory=dict)
    sites: list[dict[str, Any]] = field(default_factory=list)
    staged: StagedRelease | None = None
    audit: dict[str, Any] = field(default_factory=dict)
    gate: dict[str, Any] | None = None
    evaluation_runs: list[Any] = field(default_factory=list)  # EvaluationRun, baseline first
    evaluations: list[dict[str, Any]] = field(default_factory=list)
    evaluation_failures: list[dict[str, str]] = field(default_factory=list)  # a model that could not run
    held: str | None = None  # why the content check stops this release (on_shortfall = "fail")
    report: str | None = None
    result: BuildResult | None = None

    def stage_summary(self, name: str) -> list[Any]:
        return self.summary["stages"].setdefault(name, [])


Step = Callable[[Run], Run]


# ---------------------------------------------------------------------- steps before the release
def crawl(run: Run) -> Run:
    run.sites = stages.crawl_all(run.spec, run.settings)
    run.stage_summary("crawl").extend(run.sites)
    return run


def ingest(run: Run) -> Run:
    shards = stages.pending_shards(run.spec)
    futures = [stages.ingest_shard.submit(run.spec, shard, str(i)) for i, shard in enumerate(shards)]
    run.stage_summary("ingest").extend(f.result() for f in futures)
    return run


def dedup_pass(run: Run, label: str) -> None:
    """One dedup pass: in the flow process, or with its pair searches as `dedup.shards` tasks."""
    if shards.dedup_shards(run.settings) == 1:
        run.stage_summary("dedup").append(stages.dedup(run.spec, label))
    else:
        run.stage_summary("dedup").append(shards.dedup_in_shards(run.spec, run.settings, label))


def dedup_real(run: Run) -> Run:
    dedup_pass(run, "real")
    return run


def annotate_pass(run: Run, label: str) -> None:
    """One annotation pass: in the flow process, or as `annotation.shards` tasks on the runner."""
    count = stages.annotation_shards(run.spec)
    if count == 1:
        run.stage_summary("annotate").append(stages.annotate(run.spec, label))
        return
    futures = [stages.annotate_shard.submit(run.spec, label, i, count) for i in range(count)]
    run.stage_summary("annotate").extend(f.result() for f in futures)


def annotate_real(run: Run) -> Run:
    annotate_pass(run, "real")
    return run


def generate(run: Run) -> Run:
    """Generation in the flow process, or as `generation.shards` tasks on Dask/Ray workers."""
    count = shards.generation_shards(run.settings)
    if count == 1:
        run.summary["stages"]["generate"] = stages.generate(run.spec)
    else:
        run.summary["stages"]["generate"] = shards.generate_in_shards(run.spec, run.settings, count)
    return run


def dedup_aigen(run: Run) -> Run:
    dedup_pass(run, "aigen")
    return run


def annotate_aigen(run: Run) -> Run:
    annotate_pass(run, "aigen")
    return run


def evidence(run: Run) -> Run:
    """Check what generated rows will claim: the VLM's category, the conditioned look's product."""
    run.summary["stages"]["evidence"] = stages.evidence(run.spec)
    return run


# ---------------------------------------------------------------------- the release
def stage(run: Run, labels: LabelRules | None = None) -> Run:
    """Assemble the window's release into a staging folder; a finished release skips the rest."""
    spec, lake = run.spec, run.lake
    if ledger.is_done(lake, spec.run_key, "release", spec.version) and not run.replace:
        run.summary["release"] = json.loads(ledger.details(lake, spec.run_key)[("release", spec.version)])
        return run
    settings = run.settings
    try:
        run.staged = stage_release(
            lake,
            labels=labels,
            version=spec.version,
            window=Window(parse_moment(spec.window_start), parse_moment(spec.window_end)),
            replace=run.replace,
            query_share=settings.release.query_share,
            max_gallery=settings.release.max_gallery_per_item,
            seed=settings.release.seed,
            run_id=spec.run_key,
            radius=settings.dedup.radius,
            contact=settings.contact,
            photo_type=PhotoTypeRule(settings.evidence.studio_min_flat_border),
        )
    except ReleaseExists:
        # Committed, but the run died before its ledger marker: the work is done.
        run.summary["release"] = _already_committed(run)
    return run


def content_shortfall(
    rows: dict[str, int], previous_queries: int | None, *, min_share_of_previous: float
) -> str | None:
    """Why a release's content is not fit to publish, or None (X8, issue 13 §2).

    `rows` maps release files (`<subset>/<split>.parquet`) to row counts. Every subset needs
    queries and gallery rows; the queries may not fall below `min_share_of_previous` of the
    last counted release's (a crawl that silently lost most of a site looks like that).
    """
    empty = [
        f"{subset}/{split}"
        for subset in SUBSETS
        for split in ("query", "gallery")
        if not rows.get(f"{subset}/{split}.parquet")
    ]
    if empty:
        return f"empty subset split(s): {', '.join(empty)}"
    queries = sum(rows.get(f"{subset}/query.parquet", 0) for subset in SUBSETS)
    if previous_queries and queries < min_share_of_previous * previous_queries:
        return (
            f"{queries} queries, under {min_share_of_previous:.0%} of the previous release's "
            f"{previous_queries}"
        )
    return None


def check(run: Run) -> Run:
    """Hold back a release whose content a user would not accept (X8): it is never published silently."""
    if run.staged is None:
        return run
    rows = {rel: int(entry.get("rows", 0)) for rel, entry in run.staged.files.items() if "rows" in entry}
    previous = previous_published(run.lake, run.spec.version)
    previous_queries = None
    if previous is not None:
        counts = read_manifest(run.lake, previous[0]).get("rows", {})
        previous_queries = sum(int(counts.get(f"{s}/query.parquet", 0)) for s in SUBSETS)
    policy = run.settings.release
    reason = content_shortfall(rows, previous_queries, min_share_of_previous=policy.min_share_of_previous)
    if reason is None:
        return run
    run.gate = {"passed": False, "reason": f"content check: {reason}"}
    run.lake.append(
        [Rejection(stage="release", item=run.spec.version, reason="content_shortfall", detail=reason,
                   run_id=run.spec.run_key)]
    )  # fmt: skip
    if policy.on_shortfall == "fail":
        run.held = reason
    return run


def audit(run: Run) -> Run:
    """Send a stratified sample of the staged rows to the judge; its verdict is the gate."""
    if run.staged is None or run.held:
        return run
    run.audit = audit_staging(run.lake, run.settings, run.staged.path, run.spec.run_key)
    if run.audit.get("status") == "ok":
        verdict = {"passed": bool(run.audit.get("gate_passed")), "reason": run.audit.get("gate_reason", "")}
        if run.gate and run.gate.get("passed") is False:  # the content check failed already: keep it
            verdict = {"passed": False, "reason": f"{run.gate['reason']}; audit: {verdict['reason']}"}
        run.gate = verdict
    return run


def relabel(run: Run) -> Run:
    """Stage again with the label rules, so the judge's verdicts act on what is published.

    The first staging publishes the annotations as they are, so the audit can sample every
    row (disputed ones first); this one holds back or corrects rows as `warehouse/labels.py`
    says, and the content check runs again on the result.
    """
    if run.staged is None or run.held:
        return run
    first = run.staged
    judge = run.settings.judge
    vlm_checks = bool(run.settings.annotation.endpoints) and run.settings.evidence.generated_category_check
    rules = LabelRules.from_lake(
        run.lake,
        on_wrong_main_attribute=judge.on_wrong_main_attribute,
        judge_model=judge.model,
        require_generated_category=vlm_checks,
        generated_category_note=None if vlm_checks else _category_check_note(run.settings),
    )
    stage(run, rules)
    if run.staged is not first and run.lake.fs.exists(first.path):
        run.lake.fs.rm(first.path, recursive=True)
    before = run.gate
    run = check(run)
    if before and run.gate is not before:
        # The content check failed again, or anew (held rows emptied a subset): keep the
        # audit's verdict beside it, once.
        earlier = str(before.get("reason", ""))
        reason = earlier if run.gate["reason"] in earlier else f"{run.gate['reason']}; {earlier}"
        run.gate = {"passed": False, "reason": reason}
    return run


def _category_check_note(settings: Settings) -> str:
    if not settings.annotation.endpoints:
        return "no VLM configured (prior mode)"
    return "evidence.generated_category_check is off"


def audit_staging(lake: Lake, settings: Settings, staging: str, run_key: str) -> dict[str, Any]:
    """The judge's audit of the release rows in the staging folder `staging`."""
    import pyarrow.parquet as pq

    from lookbench_live.annotation.judge import AuditItem, run_audit
    from lookbench_live.schema.taxonomy import default_taxonomy

    items = []
    # No image bytes here: the judge sees a sample, whose images are loaded when sent (see
    # `_release_image`), so a large release is never read into memory whole.
    columns = [
        "sha256", "raw_sha256", "bbox", "taxonomy_category", "attributes", "main_attribute", "annotation_model",
        "label_disputes",
    ]  # fmt: skip
    for subset in SUBSETS:
        for split in ("query", "gallery"):
            path = f"{staging}/{subset}/{split}.parquet"
            with lake.fs.open(path, "rb") as handle:
                rows = pq.read_table(handle, columns=columns).to_pylist()
            for row in rows:
                items.append(
                    AuditItem(
                        sha256=row["raw_sha256"],
                        bbox=",".join(str(v) for v in row["bbox"]) if row["bbox"] else "",
                        subset=subset,
                        # Ours, not the published name: the judge gets the category's own schema.
                        category=row["taxonomy_category"],
                        attributes={kv["key"]: kv["value"] for kv in row["attributes"]},
                        main_attribute=row["main_attribute"],
                        annotation_model=row["annotation_model"],
                        disputes=tuple(row["label_disputes"] or ()),
                        image=_release_image(lake, path, row["sha256"], row["raw_sha256"], row["bbox"]),
                    )
                )
    return stages._summary(run_audit(lake, settings.judge, default_taxonomy(), items, run_key))


def _release_image(
    lake: Lake, path: str, sha: str, raw_sha: str, bbox: list[int] | None
) -> Callable[[], bytes]:
    """Loads a release row's `image` when the judge needs it: the lake's photo (cropped to
    `bbox` as the release writer does), or, if that does not reproduce `sha`, the row's bytes
    from the release file `path`."""

    def load() -> bytes:
        import hashlib

        import pyarrow.parquet as pq

        from lookbench_live.warehouse.assemble import _crop

        try:
            photo = lake.get_image(raw_sha)
            data = _crop(photo, (bbox[0], bbox[1], bbox[2], bbox[3])) if bbox else photo
            if hashlib.sha256(data).hexdigest() == sha:
                return data
        except (LakeError, OSError, ValueError):  # gone from the lake, or not a decodable photo
            pass
        with lake.fs.open(path, "rb") as handle:
            for batch in pq.ParquetFile(handle).iter_batches(batch_size=128, columns=["sha256", "image"]):
                for found, image in zip(
                    batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True
                ):
                    if found == sha:
                        return bytes(image["bytes"])
        raise FileNotFoundError(f"image {sha} is in neither the lake nor {path}")

    return load


def evaluate(run: Run) -> Run:
    """Score the staged release once per configured model (the baseline first)."""
    if run.staged is None or run.held:
        return run
    from lookbench_live.evaluation.evaluate import evaluation_records, run_evaluation

    settings = run.settings.evaluation
    models: list[str | None] = [None, *settings.models]
    # With `evaluation.shards` on Dask/Ray, every model's images are embedded as tasks first (all
    # models at once); each model's parts are merged into its cache, then scored here as usual.
    embedding = (
        shards.submit_embedding(run.spec, run.settings, run.staged.path, models)
        if shards.embedding_shards(run.settings) > 1
        else {}
    )
    for model in models:
        try:
            if model in embedding:
                run.stage_summary("evaluate").extend(shards.merge_embedding(run.spec, embedding[model]))
            result = run_evaluation(
                run.lake,
                run.spec.version,
                model=model,
                release_path=run.staged.path,
                batch_size=settings.batch_size,
                chunk_size=settings.chunk_size,
                device=settings.device,
                trust_remote_code=settings.trust_remote_code,
            )
        except Exception as exc:
            if model is None:  # the weight-free baseline has no outside part that may fail
                raise
            # One model that cannot load or run (missing weights, no GPU) never aborts the release:
            # it is recorded in the lake, the manifest and the report.
            error = " ".join(f"{type(exc).__name__}: {exc}".split())[:500]
            run.evaluation_failures.append({"model": model, "error": error})
            run.lake.append(
                [Rejection(stage="evaluate", item=f"{run.spec.version}:{model}", reason="model_failed",
                           detail=error, run_id=run.spec.run_key)]
            )  # fmt: skip
            continue
        run.evaluation_runs.append(result)
        run.evaluations.append(result.result())
        run.lake.append(evaluation_records(run.evaluations[-1]))
    return run


def report(run: Run) -> Run:
    """The report, written into the staging folder so the manifest lists it."""
    if run.staged is None:
        return run
    from lookbench_live.evaluation import report as report_mod

    previous = previous_published(run.lake, run.spec.version)
    context = {
        "sites": run.sites,
        "gate": run.gate,
        "previous_version": previous[0] if previous else None,
        "baseline_run": run.evaluation_runs[0] if run.evaluation_runs else None,
        "evaluation_failures": run.evaluation_failures,
        "files": dict(run.staged.files),  # the checksums commit will list (the manifest is not written yet)
    }
    audit = run.audit or {"status": "skipped", "reason": "audit stage not selected"}
    run.report = report_mod.write_report(
        run.lake,
        run.spec.version,
        f"{run.staged.path}/report.html",
        release_path=run.staged.path,
        # The runs, not only their results: the report's per-category recall needs each query's hits.
        evaluations=run.evaluation_runs or run.evaluations,
        audit=audit,
        context=context,
    )
    return run


def commit(run: Run) -> Run:
    """Manifest, verify, atomic commit; `LATEST` moves last (not when the gate failed)."""
    if run.staged is None:
        return run
    if run.held:
        # Not published: the staging folder goes, its report is kept where `report` finds it.
        kept = run.lake.path("reports", run.spec.version, "report.html")
        if run.report and run.lake.fs.exists(run.report):
            run.lake.fs.makedirs(kept.rsplit("/", 1)[0], exist_ok=True)
            run.lake.fs.copy(run.report, kept)
        run.lake.fs.rm(run.staged.path, recursive=True)
        raise ReleaseHeldBack(
            f"release {run.spec.version} held back, not published: {run.held} "
            f'(report: {kept}; set release.on_shortfall = "hold" to commit it unpublished)'
        )
    extra: dict[str, Any] = {
        # Every drop the lake has recorded, by stage/reason: nothing is lost silently.
        "rejections_by_reason": rejection_counts(run.lake),
        "sites": [_site_entry(o) for o in run.sites],
        "gate": run.gate or {"passed": None, "reason": "no audit gate"},
    }
    if run.audit:
        extra["audit"] = run.audit
    if run.evaluations:
        extra["evaluation"] = [{"model": e["model"], "overall": e["overall"]} for e in run.evaluations]
    if run.evaluation_failures:
        extra["evaluation_failures"] = run.evaluation_failures
    # The last safe point: a commit begun completes (its renames are atomic), none begins after
    # a signal.
    interrupt.check("commit")
    try:
        result = commit_release(run.lake, run.staged, extra)
    except ReleaseExists:
        run.summary["release"] = _already_committed(run)
        return run
    run.result = result
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
        "gate": result.manifest.get("gate"),
        "sites": result.manifest.get("sites"),
    }
    ledger.mark_done(
        run.lake, run.spec.run_key, "release", run.spec.version, detail=json.dumps(outcome, default=str)
    )
    run.summary["release"] = outcome
    return run


def summarize(run: Run) -> Run:
    if run.summary.get("release"):
        get_run_logger().info("release %s: %s", run.spec.version, run.summary["release"].get("path"))
    return run


def _site_entry(outcome: dict[str, Any]) -> dict[str, Any]:
    entry = {
        "site": outcome.get("site"),
        "status": outcome.get("status"),
        "reason": outcome.get("reason", ""),
    }
    if outcome.get("flag"):  # answered but yielded far less than its earlier months (site_yield.py)
        entry["flag"] = outcome["flag"]
    return entry


def _already_committed(run: Run) -> dict[str, Any]:
    manifest = read_manifest(run.lake, run.spec.version)
    outcome = {
        "version": run.spec.version,
        "path": run.lake.url("releases", run.spec.version),
        "rows": manifest["rows"],
        "published_latest": None,
        "note": "already committed",
        "gate": manifest.get("gate"),
    }
    ledger.mark_done(run.lake, run.spec.run_key, "release", run.spec.version, detail=json.dumps(outcome))
    return outcome


# ---------------------------------------------------------------------- the pipeline
# (step name, function, stages of which any selects it)
PIPELINE: tuple[tuple[str, Step, frozenset[str]], ...] = (
    ("crawl", crawl, frozenset({"crawl"})),
    ("ingest", ingest, frozenset({"ingest"})),
    ("dedup", dedup_real, frozenset({"dedup"})),
    ("annotate", annotate_real, frozenset({"annotate"})),
    ("generate", generate, frozenset({"generate"})),
    ("dedup", dedup_aigen, frozenset({"generate"})),
    ("annotate", annotate_aigen, frozenset({"generate"})),
    ("evidence", evidence, frozenset({"release"})),
    ("stage", stage, frozenset({"release"})),
    ("check", check, frozenset({"release"})),
    ("audit", audit, frozenset({"audit"})),
    ("labels", relabel, frozenset({"release"})),
    ("evaluate", evaluate, frozenset({"evaluate"})),
    ("report", report, frozenset({"evaluate"})),
    ("commit", commit, frozenset({"release"})),
    ("summary", summarize, frozenset(ALL_STAGES)),
)


# The steps that work on the run itself (the staged release) rather than submit stage tasks of their
# own: each runs as one Prefect task named after it, so a server's timeline shows every step.
RELEASE_STEPS = frozenset({"stage", "check", "audit", "labels", "evaluate", "report", "commit"})


@task(name="release-step", task_run_name="{name}", cache_policy=NO_CACHE)
@stoppable
def release_step(name: str, step: Step, run: Run) -> Run:
    """One release step as a task run. Called in the flow's thread (never submitted), so it sees
    the same run object; a step that submits tasks (evaluation shards) still submits them to the
    flow's task runner."""
    return step(run)


def _run_step(name: str, step: Step, run: Run) -> Run:
    if name in RELEASE_STEPS:
        # quote(): Prefect would otherwise walk the whole run state looking for futures.
        return release_step(name, step, quote(run))
    return step(run)


def steps_for(selected: Sequence[str]) -> list[tuple[str, Step]]:
    """The pipeline's steps that the selected stages ask for, in order."""
    chosen = set(selected)
    steps = [(name, fn) for name, fn, when in PIPELINE if when & chosen]
    if "release" not in chosen:
        # Audit, evaluation and report read the staged release: without it they have no input.
        steps = [(n, f) for n, f in steps if n not in ("audit", "evaluate", "report")]
    return steps


def run_pipeline(
    spec: RunSpec, settings: Settings, selected: Sequence[str], *, replace: bool
) -> dict[str, Any]:
    """Run the selected steps in order; returns the summary the CLI prints and the artifact shows."""
    run = Run(
        spec=spec,
        settings=settings,
        lake=Lake(spec.home),
        selected=tuple(selected),
        replace=replace,
        summary={"run_key": spec.run_key, "version": spec.version, "stages": {}},
    )
    steps = steps_for(selected)
    with stage_progress([name for name, _ in steps]) as progress:
        for name, step in steps:
            interrupt.check(name)  # a safe point between steps
            progress.start(name)
            try:
                run = _run_step(name, step, run)
            except CancelledRun:
                interrupt.check(name)  # a task stopped on the signal: say so once, naming the step
                raise
            # A task called in the flow's thread returns its Cancelled state rather than raising:
            # a step that saw the signal ends here, naming itself.
            interrupt.check(name)
            counts = stage_counts(run.summary["stages"].get(name))
            elapsed = progress.done(counts)
            # The step's line on the run's page of a Prefect server (the console has its own).
            _run_logger().info(
                "%s %s: %s (%.1f s)", progress.position, name, format_counts(counts) or "done", elapsed
            )
    run.summary["timings"] = progress.timings
    run.summary["stage_counts"] = progress.counts
    return run.summary


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
    clock: str | None = None,
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
        clock=clock,
    )


def _execute(
    flow_name: str,
    spec_args: dict[str, Any],
    settings: Settings,
    selected: Sequence[str],
    replace: bool,
    port: int,
) -> Any:
    """The flow's work with SIGINT/SIGTERM as stop requests (Prefect's own SIGTERM handler would
    raise wherever the flow is, a commit included): an interrupted run ends Cancelled, naming
    the signal and the step, with nothing begun after the signal."""
    from prefect.states import Cancelled

    route_run_logs()
    with interrupt.guard():
        try:
            interrupt.check("start")
            return _work(flow_name, spec_args, settings, selected, replace, port)
        except interrupt.Interrupted as exc:
            return Cancelled(message=str(exc))


def _work(
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
        if "release" in selected:  # a damaged earlier release or LATEST: refused before any work (X14)
            check_earlier_releases(lake, spec_args["version"])
        # A lake written before the freshness rules records its sites' baselines first (their
        # first crawl, as its rows show it): nothing is re-dated or re-keyed (docs/release.md).
        upgrade_lake(lake)
        with stages.serve_sample_store(settings, port, spec_args["as_of"]) as store_url:
            spec = _make_spec(flow_name, settings, store_url=store_url, **spec_args)
            summary = run_pipeline(spec, settings, selected, replace=replace)
    summary["markdown"] = markdown_summary(Lake(spec.home), summary)
    interrupt.check("summary")
    publish_artifact(summary["markdown"], key=f"{flow_name}-summary")
    notify.flagged(f"lookbench-{flow_name}", summary, spec.config_path)  # a site's yield drop, …
    return summary


def _run_logger() -> Any:
    """The flow run's logger (its lines reach Prefect's API), or this module's outside a run."""
    import logging

    from prefect.context import FlowRunContext

    return get_run_logger() if FlowRunContext.get() else logging.getLogger(__name__)


def refresh_version(
    settings: Settings, as_of: str | None, version: str | None, clock: str | None, schedule: str | None
) -> str:
    """The refresh's release version: `--version`, else the `as_of` date, else (a scheduled run)
    the day of the schedule's last tick, else today."""
    if version:
        return version
    moment = parse_moment(as_of)
    if moment is None and schedule:
        now = parse_moment(clock) or dt.datetime.now(dt.UTC)
        return version_for(scheduled_day(schedule, settings.flows.timezone, now))
    return version_for((moment or default_as_of(parse_moment(clock))).date())


def _refresh_run_name() -> str:
    """`refresh-<version>`: the run is found on a Prefect server by the release it builds."""
    from prefect.runtime import flow_run

    p = flow_run.parameters
    settings = load_settings(p.get("config_path"))
    version = refresh_version(settings, p.get("as_of"), p.get("version"), p.get("clock"), p.get("schedule"))
    return f"refresh-{version}"


@flow(
    name="lookbench-refresh",
    flow_run_name=_refresh_run_name,
    on_failure=[notify.on_failure],
    on_crashed=[notify.on_failure],
)
def refresh_flow(
    config_path: str | None = None,
    home: str | None = None,
    as_of: str | None = None,
    window_start: str | None = None,
    version: str | None = None,
    replace: bool = False,
    sample_store_port: int = 48721,
    clock: str | None = None,
    schedule: str | None = None,
) -> dict[str, Any]:
    """The monthly refresh: crawl, ingest, dedup, annotate, generate, audit, release, evaluate, report.

    The window is [previous release's end, end of the `as_of` day); the first release's starts
    `release.cadence_days` before the as-of day (`default_window`). The version is the `as_of`
    date. `clock`: the run's "today" (ISO; None is the real clock), for tests of several months.
    `schedule` (the deployment's cron): with no `as_of` and no `version`, the version is the day
    of the schedule's last tick, so a month's run retried later in the month keeps its version;
    the as-of (and so `first_seen_at`) stays the day it runs.
    """
    settings = load_settings(config_path)
    moment = parse_moment(as_of) or default_as_of(parse_moment(clock))
    version = refresh_version(settings, as_of, version, clock, schedule)
    lake = Lake(home or settings.lake.home)
    window = default_window(
        moment, settings.release.cadence_days, previous_end=previous_window_end(lake, version)
    )
    start = parse_moment(window_start) or window.start
    end = window.end
    args = {
        "home": lake.home,
        "config_path": config_path,
        "as_of": moment,
        "version": version,
        "start": start,
        "end": end,
        "clock": clock,
    }
    return _execute("refresh", args, settings, ALL_STAGES, replace, sample_store_port)


@flow(
    name="lookbench-backfill",
    flow_run_name="backfill-{start}-{end}",
    on_failure=[notify.on_failure],
    on_crashed=[notify.on_failure],
)
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
