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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TextIO, TypedDict, cast

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.exceptions import CancelledRun
from prefect.utilities.annotations import quote

from lookbench_live import interrupt
from lookbench_live.config import Settings, load_settings
from lookbench_live.flows import ledger, notify, shards, stages
from lookbench_live.flows.progress import format_counts, stage_counts, stage_progress
from lookbench_live.flows.run_state import Gate, ReleaseOutcome, StepResults, Verdict, plain
from lookbench_live.flows.runtime import (
    RunSpec,
    default_as_of,
    route_run_logs,
    scheduled_day,
    stoppable,
    task_runner,
)
from lookbench_live.flows.stages import SiteOutcome
from lookbench_live.flows.summary import markdown_summary, publish_artifact, rejection_counts
from lookbench_live.schema.committed import release_dir
from lookbench_live.schema.moments import parse_moment
from lookbench_live.schema.reasons import EvaluateReason, ReleaseReason
from lookbench_live.schema.records import Rejection
from lookbench_live.schema.release import MANIFEST, SUBSETS
from lookbench_live.warehouse.freshness import default_window, upgrade_lake
from lookbench_live.warehouse.labels import LabelRules
from lookbench_live.warehouse.lake import Lake, LakeError
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
from lookbench_live.warehouse.release.stage import stage_options

if TYPE_CHECKING:
    from lookbench_live.annotation.judge import AuditSummary


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
class EvaluationFailure(TypedDict):
    """A model that could not be scored (missing weights, no GPU): the manifest's and report's entry."""

    model: str
    error: str


@dataclass(slots=True)
class Run:
    """What flows from step to step: the run's inputs, then each step's typed output."""

    spec: RunSpec
    settings: Settings
    lake: Lake
    selected: tuple[str, ...]
    replace: bool
    # Whether a release already committed under this version is a finished step (a resumed run)
    # or a refusal (`release build`, which never resumes: `ReleaseExists`).
    resume: bool = True
    results: StepResults = field(default_factory=StepResults)
    label: str = ""  # the running step instance's label: where its results go
    sites: list[SiteOutcome] = field(default_factory=list)
    staged: StagedRelease | None = None
    # A committed release that audit/evaluate/report read when the run does not build one.
    reviewed: str | None = None
    audit: AuditSummary | None = None
    gate: Gate = field(default_factory=Gate)
    evaluation_runs: list[Any] = field(default_factory=list)  # EvaluationRun, baseline first
    evaluations: list[dict[str, Any]] = field(default_factory=list)
    evaluation_failures: list[EvaluationFailure] = field(default_factory=list)
    held: str | None = None  # why the content check stops this release (on_shortfall = "fail")
    report: str | None = None
    result: BuildResult | None = None
    release: ReleaseOutcome | None = None

    def record(self, *results: Any) -> None:
        """Results of the running step instance (one per shard), kept apart from other instances."""
        self.results.add(self.label, *results)

    @property
    def release_path(self) -> str | None:
        """The release folder audit, evaluate and report read: staged by this run, else committed."""
        if self.staged is not None:
            return self.staged.path
        return self.reviewed


Step = Callable[[Run], Run]


# ---------------------------------------------------------------------- steps before the release
def crawl(run: Run) -> Run:
    run.sites = stages.crawl_all(run.spec, run.settings)
    run.record(*run.sites)
    return run


def ingest(run: Run) -> Run:
    shards = stages.pending_shards(run.spec)
    futures = [stages.ingest_shard.submit(run.spec, shard, str(i)) for i, shard in enumerate(shards)]
    run.record(*(f.result() for f in futures))
    return run


def dedup_pass(run: Run, label: str) -> None:
    """One dedup pass: in the flow process, or with its pair searches as `dedup.shards` tasks."""
    if shards.dedup_shards(run.settings) == 1:
        run.record(stages.dedup(run.spec, label))
    else:
        run.record(shards.dedup_in_shards(run.spec, run.settings, label))


def dedup_real(run: Run) -> Run:
    dedup_pass(run, "real")
    return run


def annotate_pass(run: Run, label: str) -> None:
    """One annotation pass: in the flow process, or as `annotation.shards` tasks on the runner."""
    count = stages.annotation_shards(run.spec)
    if count == 1:
        run.record(stages.annotate(run.spec, label))
        return
    futures = [stages.annotate_shard.submit(run.spec, label, i, count) for i in range(count)]
    run.record(*(f.result() for f in futures))


def annotate_real(run: Run) -> Run:
    annotate_pass(run, "real")
    return run


def generate(run: Run) -> Run:
    """Generation in the flow process, or as `generation.shards` tasks on Dask/Ray workers."""
    count = shards.generation_shards(run.settings)
    if count == 1:
        run.record(stages.generate(run.spec))
    else:
        run.record(shards.generate_in_shards(run.spec, run.settings, count))
    return run


def dedup_aigen(run: Run) -> Run:
    dedup_pass(run, "aigen")
    return run


def annotate_aigen(run: Run) -> Run:
    annotate_pass(run, "aigen")
    return run


def evidence(run: Run) -> Run:
    """Check what generated rows will claim: the VLM's category, the conditioned look's product."""
    run.record(stages.evidence(run.spec))
    return run


# ---------------------------------------------------------------------- the release
def stage(run: Run, labels: LabelRules | None = None) -> Run:
    """Assemble the window's release into a staging folder; a finished release skips the rest."""
    spec, lake = run.spec, run.lake
    if run.resume and ledger.is_done(lake, spec.run_key, "release", spec.version) and not run.replace:
        detail = ledger.details(lake, spec.run_key)[("release", spec.version)]
        run.release = ReleaseOutcome.from_record(detail)
        return run
    try:
        run.staged = stage_release(lake, **stage_options(run.settings), labels=labels, version=spec.version,
                                   window=spec.window, replace=run.replace, run_id=spec.run_key)  # fmt: skip
    except ReleaseExists:
        _already_committed(run)
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
    run.gate = run.gate.with_verdict(Verdict("content", False, reason))
    run.lake.append(
        [Rejection(stage="release", item=run.spec.version, reason=ReleaseReason.CONTENT_SHORTFALL.value,
                   detail=reason, run_id=run.spec.run_key)]
    )  # fmt: skip
    if policy.on_shortfall == "fail":
        run.held = reason
    return run


def audit(run: Run) -> Run:
    """Send a stratified sample of the release's rows to the judge; its verdict is the gate."""
    path = run.release_path
    if path is None or run.held:
        return run
    run.audit = audit_staging(run.lake, run.settings, path, run.spec.run_key)
    run.record(run.audit.summary())
    if run.audit.status == "ok":
        run.gate = run.gate.with_verdict(Verdict("audit", bool(run.audit.gate_passed), run.audit.gate_reason))
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
        window=run.spec.window,  # the window's verdicts and outcomes only: its rows show its images
    )
    stage(run, rules)
    if run.staged is not first and run.lake.fs.exists(first.path):
        run.lake.fs.rm(first.path, recursive=True)
    # The content check again, on what is published; its verdict replaces the first staging's,
    # beside the audit's (`Gate.with_verdict`).
    return check(run)


def _category_check_note(settings: Settings) -> str:
    if not settings.annotation.endpoints:
        return "no VLM configured (prior mode)"
    return "evidence.generated_category_check is off"


def audit_staging(lake: Lake, settings: Settings, staging: str, run_key: str) -> AuditSummary:
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
    return run_audit(lake, settings.judge, default_taxonomy(), items, run_key)


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
    """Score the release once per configured model (the baseline first)."""
    path = run.release_path
    if path is None or run.held:
        return run
    from lookbench_live.evaluation.evaluate import evaluation_records, run_evaluation

    settings = run.settings.evaluation
    models: list[str | None] = [None, *settings.models]
    # With `evaluation.shards` on Dask/Ray, every model's images are embedded as tasks first (all
    # models at once); each model's parts are merged into its cache, then scored here as usual.
    embedding = (
        shards.submit_embedding(run.spec, run.settings, path, models)
        if shards.embedding_shards(run.settings) > 1
        else {}
    )
    for model in models:
        try:
            if model in embedding:
                run.record(*shards.merge_embedding(run.spec, embedding[model]))
            result = run_evaluation(
                run.lake,
                run.spec.version,
                model=model,
                release_path=path,
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
            run.evaluation_failures.append(EvaluationFailure(model=model, error=error))
            run.lake.append(
                [Rejection(stage="evaluate", item=f"{run.spec.version}:{model}", reason=EvaluateReason.MODEL_FAILED.value,
                           detail=error, run_id=run.spec.run_key)]
            )  # fmt: skip
            continue
        run.evaluation_runs.append(result)
        run.evaluations.append(result.result())
        run.lake.append(evaluation_records(run.evaluations[-1]))
    return run


def report(run: Run) -> Run:
    """The report: written into the staging folder so the manifest lists it; for a committed
    release (an evaluate-only run) beside it, in `reports/<version>/`, never into its files."""
    path = run.release_path
    if path is None:
        return run
    from lookbench_live.evaluation import report as report_mod

    previous = previous_published(run.lake, run.spec.version)
    files = (
        dict(run.staged.files)
        if run.staged is not None
        else read_manifest(run.lake, run.spec.version)["files"]
    )
    context = {
        "sites": [o.as_dict() for o in run.sites],
        "gate": run.gate.as_json() if run.gate.verdicts else None,
        "previous_version": previous[0] if previous else None,
        "baseline_run": run.evaluation_runs[0] if run.evaluation_runs else None,
        "evaluation_failures": run.evaluation_failures,
        "files": files,  # the checksums commit will list (the manifest is not written yet)
    }
    audit = (
        stages._summary(run.audit)
        if run.audit
        else {"status": "skipped", "reason": "audit stage not selected"}
    )
    if run.staged is not None:
        target = f"{run.staged.path}/report.html"
    else:
        target = run.lake.path("reports", run.spec.version, "report.html")
        run.lake.fs.makedirs(target.rsplit("/", 1)[0], exist_ok=True)
    run.report = report_mod.write_report(
        run.lake,
        run.spec.version,
        target,
        release_path=path,
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
        "sites": [o.manifest_entry() for o in run.sites],
        "gate": run.gate.as_json(),
    }
    if run.audit is not None:
        extra["audit"] = stages._summary(run.audit)
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
        _already_committed(run)
        return run
    run.result = result
    manifest = result.manifest
    run.release = ReleaseOutcome(
        version=result.version,
        path=result.path,
        rows=result.rows,
        dropped=result.dropped,
        published_latest=result.published_latest,
        latest_reason=result.latest_reason,
        report=f"{result.path}/report.html" if "report.html" in manifest["files"] else None,
        audit=manifest.get("audit"),
        evaluation=manifest.get("evaluation"),
        gate=manifest.get("gate"),
        sites=manifest.get("sites"),
    )
    ledger.mark_done(run.lake, run.spec.run_key, "release", run.spec.version, detail=run.release.record())
    return run


def discard(run: Run) -> Run:
    """A run that staged a release only to audit or evaluate it (no `release` stage) removes the
    staging folder: nothing of it is committed."""
    if run.staged is not None and run.lake.fs.exists(run.staged.path):
        run.lake.fs.rm(run.staged.path, recursive=True)
    run.staged = None
    return run


def summarize(run: Run) -> Run:
    if run.release is not None:
        get_run_logger().info("release %s: %s", run.spec.version, run.release.path)
    return run


def _already_committed(run: Run) -> None:
    """The version is committed already: the one place this is decided. A resumable run (the
    refresh, a backfill) died after its commit and before its marker, so the work is done and
    marked now; `release build` (`resume=False`) refuses (`ReleaseExists`)."""
    if not run.resume:
        raise ReleaseExists(run.lake, run.spec.version)
    manifest = read_manifest(run.lake, run.spec.version)
    run.release = ReleaseOutcome(
        version=run.spec.version,
        path=run.lake.url("releases", run.spec.version),
        rows=manifest["rows"],
        published_latest=None,
        note="already committed",
        gate=manifest.get("gate"),
    )
    run.staged = None
    ledger.mark_done(run.lake, run.spec.run_key, "release", run.spec.version, detail=run.release.record())


def review_committed(run: Run) -> Run:
    """Audit or evaluate without building (no `release` stage): the version's committed release
    is what is read, or, when the version is not committed yet, the window's release is staged
    for them and discarded afterwards."""
    if run.lake.fs.exists(f"{run.lake.path('releases', run.spec.version)}/{MANIFEST}"):
        run.reviewed = release_dir(run.lake, run.spec.version)
        return run
    try:
        run.staged = stage_release(run.lake, **stage_options(run.settings), version=run.spec.version,
                                   window=run.spec.window, run_id=run.spec.run_key)  # fmt: skip
    except ReleaseExists:  # committed meanwhile
        run.reviewed = release_dir(run.lake, run.spec.version)
    return run


# ---------------------------------------------------------------------- the pipeline
# What a step needs from the run before it, and the steps that provide it.
Need = Literal["release_folder", "staged"]


@dataclass(frozen=True, slots=True)
class PipelineStep:
    """One step instance of the pipeline: its name, its pass (`dedup` runs twice: `real`, then
    `aigen`), the stages that select it, and what it needs and gives."""

    name: str
    fn: Step
    selected_by: frozenset[str]
    variant: str = ""
    needs: frozenset[Need] = frozenset()
    gives: frozenset[Need] = frozenset()
    # Runs only as a provider of what a selected step needs (never selected itself).
    provider_only: bool = False

    @property
    def label(self) -> str:
        """The instance's name in the progress lines, the summary and `stage_counts`."""
        return f"{self.name} {self.variant}" if self.variant else self.name


RELEASE = frozenset({"release"})
PIPELINE: tuple[PipelineStep, ...] = (
    PipelineStep("crawl", crawl, frozenset({"crawl"})),
    PipelineStep("ingest", ingest, frozenset({"ingest"})),
    PipelineStep("dedup", dedup_real, frozenset({"dedup"}), "real"),
    PipelineStep("annotate", annotate_real, frozenset({"annotate"}), "real"),
    PipelineStep("generate", generate, frozenset({"generate"})),
    PipelineStep("dedup", dedup_aigen, frozenset({"generate"}), "aigen"),
    PipelineStep("annotate", annotate_aigen, frozenset({"generate"}), "aigen"),
    PipelineStep("evidence", evidence, RELEASE),
    PipelineStep("stage", stage, RELEASE, gives=frozenset({"release_folder", "staged"})),
    PipelineStep("check", check, RELEASE, needs=frozenset({"staged"})),
    # Without `release`: the committed release of the version, else the window's staged for review.
    PipelineStep("review", review_committed, frozenset(), gives=frozenset({"release_folder"}), provider_only=True),
    PipelineStep("audit", audit, frozenset({"audit"}), needs=frozenset({"release_folder"})),
    PipelineStep("labels", relabel, RELEASE, needs=frozenset({"staged"})),
    PipelineStep("evaluate", evaluate, frozenset({"evaluate"}), needs=frozenset({"release_folder"})),
    PipelineStep("report", report, frozenset({"evaluate"}), needs=frozenset({"release_folder"})),
    PipelineStep("commit", commit, RELEASE, needs=frozenset({"staged"})),
    PipelineStep("discard", discard, frozenset(), provider_only=True),
    PipelineStep("summary", summarize, frozenset(ALL_STAGES)),
)  # fmt: skip


# The steps that work on the run itself (the staged release) rather than submit stage tasks of their
# own: each runs as one Prefect task named after it, so a server's timeline shows every step.
RELEASE_STEPS = frozenset(
    {"stage", "check", "review", "audit", "labels", "evaluate", "report", "commit", "discard"}
)


@task(name="release-step", task_run_name="{name}", cache_policy=NO_CACHE)
@stoppable
def release_step(name: str, step: Step, run: Run) -> Run:
    """One release step as a task run. Called in the flow's thread (never submitted), so it sees
    the same run object; a step that submits tasks (evaluation shards) still submits them to the
    flow's task runner."""
    return step(run)


def _run_step(step: PipelineStep, run: Run, as_task: bool = True) -> Run:
    run.label = step.label
    if as_task and step.name in RELEASE_STEPS:
        # quote(): Prefect would otherwise walk the whole run state looking for futures.
        # Called in the flow's thread, the task returns the step's `Run` (its annotation allows a
        # coroutine, for async tasks).
        return cast(Run, release_step(step.name, step.fn, quote(run)))
    return step.fn(run)


def steps_for(selected: Sequence[str], pipeline: Sequence[PipelineStep] | None = None) -> list[PipelineStep]:
    """The pipeline's steps that the selected stages ask for, in order, with what they need.

    A selected step's needs are met by the steps that give them: with `release` selected, `stage`
    gives the release folder that audit, evaluate and report read; without it, `review` gives
    the version's committed release (or stages the window's, which `discard` removes after).
    """
    pipeline = PIPELINE if pipeline is None else pipeline  # looked up per call, not at import
    chosen = set(selected)
    steps = [s for s in pipeline if s.selected_by & chosen]
    needs = {need for s in steps for need in s.needs}
    given = {gift for s in steps for gift in s.gives}
    missing = needs - given
    if "staged" in missing:
        raise ValueError("a step needs a staged release but the `release` stage is not selected")
    if "release_folder" in missing:
        extra = {"review", "discard"}
        steps = [s for s in pipeline if s in steps or s.name in extra]
    return steps


def run_pipeline(
    spec: RunSpec,
    settings: Settings,
    selected: Sequence[str],
    *,
    replace: bool,
    pipeline: Sequence[PipelineStep] | None = None,
) -> dict[str, Any]:
    """Run the selected steps in order; returns the summary the CLI prints and the artifact shows."""
    run = Run(spec=spec, settings=settings, lake=Lake(spec.home), selected=tuple(selected), replace=replace)
    run = run_steps(run, steps_for(selected, pipeline))
    return summary_of(run)


def run_steps(
    run: Run, steps: Sequence[PipelineStep], *, as_tasks: bool = True, stream: TextIO | None = None
) -> Run:
    """Each step in order, with its progress line and its counts (its own instance's, never summed
    with another pass of the same stage); `run.results` holds the timings and counts by step
    instance. `as_tasks=False` (outside a flow, `release build`): the release steps run as plain
    calls, not Prefect task runs. `stream`: where the progress lines go (default stderr)."""
    with stage_progress([s.label for s in steps], stream=stream) as progress:
        for step in steps:
            interrupt.check(step.name)  # a safe point between steps
            progress.start(step.label)
            try:
                run = _run_step(step, run, as_tasks)
            except CancelledRun:
                interrupt.check(step.name)  # a task stopped on the signal: say so once, naming the step
                raise
            # A task called in the flow's thread returns its Cancelled state rather than raising:
            # a step that saw the signal ends here, naming itself.
            interrupt.check(step.name)
            counts = stage_counts([plain(r) for r in run.results.get(step.label)])
            elapsed = progress.done(counts)
            # The step's line on the run's page of a Prefect server (the console has its own).
            _run_logger().info(
                "%s %s: %s (%.1f s)", progress.position, step.label, format_counts(counts) or "done", elapsed
            )
    run.results.timings = dict(progress.timings)
    run.results.counts = dict(progress.counts)
    return run


def summary_of(run: Run) -> dict[str, Any]:
    """The run's summary as plain data: what the CLI prints, the artifact shows and notify reads."""
    summary: dict[str, Any] = {
        "run_key": run.spec.run_key,
        "version": run.spec.version,
        "stages": run.results.as_json(),
        "timings": run.results.timings,
        "stage_counts": run.results.counts,
    }
    if run.release is not None:
        summary["release"] = run.release.as_dict()
    return summary


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
    clock: dt.datetime | None = None,
) -> RunSpec:
    return RunSpec(
        flow=flow_name,
        home=Lake(home or settings.lake.home).home,
        config_path=config_path,
        as_of=as_of,
        version=version,
        window_start=start,
        window_end=end,
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
        # Only crawl and ingest reach the sites: a backfill of later stages serves no sample store
        # (and needs no free port for it).
        fetches = bool({"crawl", "ingest"} & set(selected))
        with stages.serve_sample_store(settings, port, spec_args["as_of"], serve=fetches) as store_url:
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
        "clock": parse_moment(clock),
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
