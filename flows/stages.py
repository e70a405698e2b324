"""The pipeline's stages as Prefect tasks over shards (a site, a batch of images).

Each task rebuilds its context from a `RunSpec` (plain data, no secrets), so it runs the same
on threads, Dask or Ray workers. Each is idempotent twice over: it skips a shard whose
completion marker exists, and the stage itself skips items whose lake key exists. A task
returns a small summary dict; the lake holds the results.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from prefect import task

from lookbench_live.config import Settings, SiteSettings, load_settings
from lookbench_live.flows import ledger
from lookbench_live.flows.run_state import dump_record, load_record
from lookbench_live.flows.runtime import RunSpec, stoppable
from lookbench_live.schema.moments import parse_moment
from lookbench_live.schema.reasons import CrawlReason
from lookbench_live.warehouse.freshness import record_baseline, recorded_baselines
from lookbench_live.warehouse.lake import Lake

INGEST_SHARD = 400  # images per task: Prefect costs ~11 ms a task, so shards, not single images


def _context(spec: RunSpec) -> tuple[Settings, Lake]:
    return load_settings(spec.config_path), Lake(spec.home)


def _summary(result: Any) -> dict[str, Any]:
    if dataclasses.is_dataclass(result) and not isinstance(result, type):
        return {k: v for k, v in dataclasses.asdict(result).items() if not k.startswith("_")}
    return dict(result) if isinstance(result, dict) else {"result": str(result)}


class AsOfError(ValueError):
    """A run would date what real sites show today as if it had been seen in the past."""


class CrawlError(RuntimeError):
    """No site yielded anything: the one line names every site and its reason."""


@contextlib.contextmanager
def serve_sample_store(
    settings: Settings, port: int, clock: dt.datetime, *, serve: bool = True
) -> Iterator[str | None]:
    """Serve the living sample store on loopback, showing the moment `clock` (the run's as-of),
    when no site is configured (the embedded default) and `serve` (the run crawls or ingests);
    yields its URL, else None."""
    if settings.crawl.sites or not serve:
        yield None
        return
    from lookbench_live.sample_store.server import SampleStore

    per_week = settings.crawl.sample_products_per_week
    with SampleStore(port=port, clock=clock, products_per_week=per_week) as store:
        yield store.base_url


def check_as_of(settings: Settings, as_of: dt.datetime, now: dt.datetime | None = None) -> None:
    """Refuse to crawl configured (real) sites as of a past day.

    A real site shows today's catalogue: stamping it `first_seen_at = as_of` in the past
    would claim the pipeline saw those items then. The living sample store is the exception
    (no `crawl.sites`): its clock is the as-of, so it shows exactly what it had then. A past
    window over what the lake already holds is a backfill (no crawl)."""
    if not settings.crawl.sites:
        return
    today = (now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC).date()
    day = as_of.astimezone(dt.UTC).date() if as_of.tzinfo else as_of.date()
    if day < today:
        names = ", ".join(site.name for site in settings.crawl.sites)
        raise AsOfError(
            f"refusing to crawl {names} as of {day}: a real site shows today's ({today}) catalogue, "
            f"so its items cannot be dated {day}; run with --as-of {today} (or without --as-of), "
            "or backfill that window from what the lake already holds"
        )


def sites_for(spec: RunSpec, settings: Settings) -> list[SiteSettings]:
    """The configured sites, or the sample store's when none is configured (the embedded default)."""
    if settings.crawl.sites:
        return list(settings.crawl.sites)
    if spec.sample_store_url is None:
        raise RuntimeError("no crawl.sites configured and no sample store running")
    from lookbench_live.sample_store.sites import sample_sites

    return sample_sites(spec.sample_store_url, settings.crawl.sample_products_per_week)


# The crawl looks back one day before the window start: the previous release's window ends
# at the end of its as-of day, but its crawl ran at the as-of moment, so what a site published
# later that day would otherwise fall between two crawls. Items seen before are unchanged
# and write nothing (the lake keys products by content hash), and keep their first_seen_at.
CRAWL_OVERLAP = dt.timedelta(days=1)


def crawl_since(window_start: dt.datetime | str | None) -> dt.datetime | None:
    """The crawl's `since` cursor for a window starting at `window_start` (None: crawl all)."""
    start = parse_moment(window_start)
    return None if start is None else start - CRAWL_OVERLAP


@dataclass(frozen=True, slots=True)
class SiteOutcome:
    """One site's crawl in this run: what the summary, the manifest's `sites`, the report and the
    notification read, and what a finished site's completion marker holds (`record`)."""

    site: str
    status: str  # "ok" | "failed" | "over_budget"
    reason: str = ""
    products: int = 0  # new or changed
    looks: int = 0
    since: str | None = None  # the crawl's cursor (ISO), None: a whole crawl
    flag: str | None = None  # answered, but yielded far less than its earlier months (site_yield.py)
    baseline: bool = False  # this whole crawl is the site's baseline (warehouse/freshness.py)
    skipped: str | None = None  # "done earlier": finished by an earlier attempt of the run
    crawl: dict[str, Any] = field(default_factory=dict)  # the crawler's own counts (CrawlResult)

    def as_dict(self) -> dict[str, Any]:
        """The flat dict the summary and notifications have always shown."""
        out: dict[str, Any] = {
            "site": self.site,
            "status": self.status,
            "reason": self.reason,
            "products": self.products,
            "looks": self.looks,
            "since": self.since,
        }
        out.update((k, v) for k, v in self.crawl.items() if k not in out)
        if self.flag:
            out["flag"] = self.flag
        if self.baseline:
            out["baseline"] = True
        if self.skipped:
            out["skipped"] = self.skipped
        return out

    def manifest_entry(self) -> dict[str, Any]:
        """The manifest's `sites` entry: site, status, reason, and a yield flag when raised."""
        entry: dict[str, Any] = {"site": self.site, "status": self.status, "reason": self.reason}
        if self.flag:
            entry["flag"] = self.flag
        return entry

    def record(self) -> str:
        return dump_record("site", {f.name: getattr(self, f.name) for f in fields(self)})

    @classmethod
    def from_record(cls, detail: str) -> SiteOutcome:
        return cls(**load_record("site", detail, frozenset(f.name for f in fields(cls))))


@task(name="crawl-site", task_run_name="crawl-{site.name}")
@stoppable
def crawl_site(spec: RunSpec, site: SiteSettings) -> SiteOutcome:
    """One site's crawl of the run's window; never raises for the site's own failure.

    A failed or over-budget site is also recorded as `Rejection(stage="crawl",
    item="site:<name>", reason="site_failed" | "over_budget")`. A finished outcome is marked
    done with its record; a rerun returns it (`skipped`), read strictly (`SiteOutcome.from_record`)."""
    settings, lake = _context(spec)
    if ledger.is_done(lake, spec.run_key, "crawl", site.name):
        stored = ledger.details(lake, spec.run_key)[("crawl", site.name)]
        return dataclasses.replace(SiteOutcome.from_record(stored), skipped="done earlier")
    from lookbench_live.scrapers.crawl import CrawlError as SubprocessError
    from lookbench_live.scrapers.crawl import run_crawl

    # A site's first crawl is its baseline (warehouse/freshness.py): it crawls everything, and
    # its undated items are never released as new; later crawls look back from the window.
    first_crawl = site.name not in recorded_baselines(lake)
    since = None if first_crawl else crawl_since(spec.window_start)
    cursor = since.isoformat() if since else None
    try:
        result = run_crawl(site, settings.crawl, spec.home, spec.run_key, since=since, seen_at=spec.as_of)
    except (SubprocessError, OSError) as exc:
        # Not marked done: a rerun of the run tries (and resumes) this site again.
        reason = str(exc).splitlines()[0][:300]
        _record_site(lake, spec, site.name, CrawlReason.SITE_FAILED, reason)
        return SiteOutcome(site.name, "failed", reason, since=cursor)
    outcome = SiteOutcome(
        site.name,
        result.status,
        since=cursor,
        products=result.products_new + result.products_changed,
        looks=result.looks_new,
        crawl=_summary(result),
    )
    reasons = ", ".join(f"{k}: {v}" for k, v in sorted(result.rejections_by_reason.items()))
    if result.status == "unreachable":
        # Not marked done: the host was not reached, so the rerun crawls this site again.
        reason = f"no page fetched ({reasons}); host unreachable, the rerun retries it"
        _record_site(lake, spec, site.name, CrawlReason.SITE_FAILED, reason)
        return dataclasses.replace(outcome, status="failed", reason=reason)
    if result.pages == 0 and not (result.products_new or result.products_changed or result.looks_new):
        outcome = dataclasses.replace(
            outcome, status="failed", reason=f"no page fetched ({reasons or 'no response'})"
        )
        _record_site(lake, spec, site.name, CrawlReason.SITE_FAILED, outcome.reason)
    elif result.status == "over_budget":
        outcome = dataclasses.replace(
            outcome,
            reason=f"budget reached (max_pages={site.max_pages}, max_duration={site.max_duration}, finish_reason={result.finish_reason}); {result.unreached} requests left for the next run",
        )
        _record_site(lake, spec, site.name, CrawlReason.OVER_BUDGET, outcome.reason)
    if first_crawl and outcome.status == "ok":
        # Only a whole crawl is a baseline: after an over-budget one the rest of the catalogue
        # is still to come, so the next crawl is the baseline (and all it saw before is older).
        record_baseline(lake, site.name, spec.as_of, spec.run_key)
        outcome = dataclasses.replace(outcome, baseline=True)
    if outcome.status != "failed":
        from lookbench_live.flows.site_yield import previous_products, yield_flag

        flag = yield_flag(
            previous_products(lake, site.name, spec.run_key), products=outcome.products, pages=result.pages
        )
        if flag:  # finished, so marked done; the flag goes into the outcome, the summary, the manifest
            outcome = dataclasses.replace(outcome, flag=flag)
            _record_site(lake, spec, site.name, CrawlReason.YIELD_DROP, flag)
    ledger.mark_done(lake, spec.run_key, "crawl", site.name, detail=outcome.record())
    return outcome


def _record_site(lake: Lake, spec: RunSpec, site: str, reason: CrawlReason, detail: str) -> None:
    from lookbench_live.schema.records import Rejection

    lake.append(
        [
            Rejection(
                stage="crawl",
                item=f"site:{site}",
                reason=reason.value,
                detail=detail[:1000],
                source=site,
                run_id=spec.run_key,
            )
        ]
    )


def crawl_all(spec: RunSpec, settings: Settings) -> list[SiteOutcome]:
    """Crawl every site of the run side by side; one `SiteOutcome` per site, in site order.

    A failing or over-budget site is recorded and the others go on. Raises `CrawlError`
    (one line) only when no site yielded anything, and `AsOfError` for real sites crawled as
    of a past day (`check_as_of`)."""
    check_as_of(settings, spec.as_of, spec.clock)
    sites = sites_for(spec, settings)
    futures = [crawl_site.submit(spec, site) for site in sites]
    outcomes = [future.result() for future in futures]
    if outcomes and all(o.status == "failed" for o in outcomes):
        detail = "; ".join(f"{o.site}: {o.reason}" for o in outcomes)
        raise CrawlError(f"no site yielded anything: {detail}")
    return outcomes


@task(name="ingest-images", task_run_name="ingest-images-{shard}")
@stoppable
def ingest_shard(spec: RunSpec, requests: Sequence[Any], shard: str) -> dict[str, Any]:
    settings, lake = _context(spec)
    from lookbench_live.ingest import ingest_images, site_download_delays, site_private_hosts

    # A site configured with allow_private_addresses gets its images on the same terms
    # (its own origin and its listed image_hosts); nothing else private is allowed. The
    # sample store's sites are such sites (no global allowance for the embedded default).
    # Images are paced by their site's download_delay and carry the crawl's contact in the agent.
    sites = sites_for(spec, settings)
    result = ingest_images(
        lake, settings.ingest, list(requests), spec.run_key, private_hosts=site_private_hosts(sites),
        site_delays=site_download_delays(sites), contact=settings.crawl.contact_url,
    )  # fmt: skip
    return {"shard": shard, **_summary(result)}


def pending_shards(spec: RunSpec) -> list[list[Any]]:
    from lookbench_live.ingest import pending_image_requests

    pending = pending_image_requests(Lake(spec.home))
    return [pending[i : i + INGEST_SHARD] for i in range(0, len(pending), INGEST_SHARD)]


@task(name="dedup", task_run_name="dedup-{label}")
@stoppable
def dedup(spec: RunSpec, label: str) -> dict[str, Any]:
    settings, lake = _context(spec)
    from lookbench_live.dedup import run_dedup

    return {"pass": label, **_summary(run_dedup(lake, settings.dedup, spec.run_key))}


@task(name="annotate", task_run_name="annotate-{label}")
@stoppable
def annotate(spec: RunSpec, label: str) -> dict[str, Any]:
    settings, lake = _context(spec)
    from lookbench_live.annotation import run_annotation
    from lookbench_live.schema.taxonomy import default_taxonomy

    return {
        "pass": label,
        **_summary(run_annotation(lake, settings.annotation, default_taxonomy(), spec.run_key)),
    }


@task(name="annotate-shard", task_run_name="annotate-{label}-{index}-of-{count}")
@stoppable
def annotate_shard(spec: RunSpec, label: str, index: int, count: int) -> dict[str, Any]:
    """One of `count` annotation shards (run_annotation's `shard`), with its share of the caps."""
    settings, lake = _context(spec)
    from lookbench_live.annotation import run_annotation
    from lookbench_live.schema.taxonomy import default_taxonomy

    config = settings.annotation
    share = config.model_copy(
        update={
            "max_requests_per_run": -(-config.max_requests_per_run // count),
            "max_cost_usd": None if config.max_cost_usd is None else config.max_cost_usd / count,
        }
    )
    result = run_annotation(lake, share, default_taxonomy(), spec.run_key, shard=(index, count))
    return {"pass": label, "shard": f"{index}/{count}", **_summary(result)}


@task(name="evidence", task_run_name="evidence")
@stoppable
def evidence(spec: RunSpec) -> dict[str, Any]:
    """The evidence checks on generated images (issue 22 §4 phase B): the VLM's category check
    (with a VLM configured) and the conditioned-look embedding check; the label rules act on them."""
    settings, lake = _context(spec)
    from lookbench_live.annotation.category_check import run_category_check
    from lookbench_live.evaluation.look_check import run_look_check
    from lookbench_live.schema.taxonomy import default_taxonomy

    category = run_category_check(
        lake,
        settings.annotation,
        default_taxonomy(),
        spec.run_key,
        enabled=settings.evidence.generated_category_check,
        window=spec.window,
    )
    # The window's generations only: no other one can be published by this run's release.
    look = run_look_check(lake, settings.evidence, spec.run_key, window=spec.window)
    return {"generated_category": _summary(category), "conditioned_look": _summary(look)}


def annotation_shards(spec: RunSpec) -> int:
    """How many annotation tasks a pass submits: `annotation.shards` with a VLM, else 1 (the
    metadata prior is a few ms an image; a task each would cost more than it saves)."""
    settings, _ = _context(spec)
    return settings.annotation.shards if settings.annotation.endpoints else 1


@task(name="generate", task_run_name="generate")
@stoppable
def generate(spec: RunSpec) -> dict[str, Any]:
    settings, lake = _context(spec)
    if ledger.is_done(lake, spec.run_key, "generate"):
        return {"skipped": "done earlier"}
    from lookbench_live.generation import run_generation
    from lookbench_live.schema.taxonomy import default_taxonomy

    # This release's plan: its own seeds (the version), conditioned on this window's arrivals.
    products = conditioning_products(lake, spec.window)
    result = run_generation(
        lake,
        settings.generation,
        default_taxonomy(),
        spec.run_key,
        products=products,
        now=spec.as_of,
        cycle=spec.version,
    )
    summary = _summary(result)
    ledger.mark_done(lake, spec.run_key, "generate", detail=dump_record("generate", summary))
    return summary


def conditioning_products(lake: Lake, window: Any = None) -> list[Any]:
    """Real products with a kept, annotated first photo: what image-conditioned generation
    starts from. With a `Window`, only products first seen in it (this release's arrivals)."""
    from lookbench_live.generation import ConditioningProduct
    from lookbench_live.warehouse.views import lake_view

    view = lake_view(lake, window=window)  # only the window's images, when given
    products = []
    for key in sorted(view.products):
        if window is not None and not window.contains(view.products[key].first_seen_at):
            continue
        for img in view.owner_images.get(("product", key), []):
            ann = view.annotations.get((img["sha256"], ""))
            if img["sha256"] in view.kept and ann is not None and ann.category:
                products.append(ConditioningProduct(key, img["sha256"], ann.category, dict(ann.attributes)))
                break
    return products
