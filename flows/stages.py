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
from typing import Any

from prefect import task

from lookbench_live.config import Settings, SiteSettings, load_settings
from lookbench_live.flows import ledger
from lookbench_live.flows.runtime import RunSpec
from lookbench_live.warehouse.lake import Lake

INGEST_SHARD = 400  # images per task: Prefect costs ~11 ms a task, so shards, not single images


def _context(spec: RunSpec) -> tuple[Settings, Lake]:
    return load_settings(spec.config_path), Lake(spec.home)


def _summary(result: Any) -> dict[str, Any]:
    if dataclasses.is_dataclass(result) and not isinstance(result, type):
        return {k: v for k, v in dataclasses.asdict(result).items() if not k.startswith("_")}
    return dict(result) if isinstance(result, dict) else {"result": str(result)}


def _stamp(summary: dict[str, Any]) -> str:
    import json

    return json.dumps(summary, sort_keys=True, default=str)[:4000]


def sites_for(spec: RunSpec, settings: Settings) -> list[SiteSettings]:
    """The configured sites, or the sample store's when none is configured (the embedded default)."""
    if settings.crawl.sites:
        return list(settings.crawl.sites)
    if spec.sample_store_url is None:
        raise RuntimeError("no crawl.sites configured and no sample store running")
    from lookbench_live.scrapers.sample_store import sample_sites

    return sample_sites(spec.sample_store_url)


@task(name="crawl-site", retries=1, retry_delay_seconds=5)
def crawl_site(spec: RunSpec, site: SiteSettings) -> dict[str, Any]:
    settings, lake = _context(spec)
    if ledger.is_done(lake, spec.run_key, "crawl", site.name):
        return {"site": site.name, "skipped": "done earlier"}
    from lookbench_live.scrapers.crawl import run_crawl

    result = run_crawl(site, settings.crawl, spec.home, spec.run_key, seen_at=spec.as_of_dt)
    summary = {"site": site.name, **_summary(result)}
    ledger.mark_done(lake, spec.run_key, "crawl", site.name, detail=_stamp(summary))
    return summary


class NothingCrawled(RuntimeError):
    """No site yielded anything: the run cannot go on."""


def crawl_all(spec: RunSpec, settings: Settings) -> list[dict[str, Any]]:
    """Crawl every site; one dict per site with `site`, `status` ("ok"/"failed") and `reason`.

    One failing site is recorded and the run goes on; only when no site yields anything does
    this raise `NothingCrawled`, with one line naming each site's reason.
    """
    sites = sites_for(spec, settings)
    futures = [(site, crawl_site.submit(spec, site)) for site in sites]
    outcomes: list[dict[str, Any]] = []
    for site, future in futures:
        try:
            outcome = {"status": "ok", "reason": "", **future.result()}
        except Exception as exc:  # a site's failure is its outcome, not the run's
            outcome = {"site": site.name, "status": "failed", "reason": f"{type(exc).__name__}: {exc}"[:500]}
        outcomes.append(outcome)
    if outcomes and not any(o["status"] == "ok" for o in outcomes):
        reasons = "; ".join(f"{o['site']}: {o['reason']}" for o in outcomes)
        raise NothingCrawled(f"no site yielded anything ({reasons})")
    return outcomes


@contextlib.contextmanager
def serve_sample_store(
    settings: Settings, port: int, clock: dt.datetime | None = None
) -> Iterator[str | None]:
    """Serve the sample store on loopback when no site is configured (the embedded default).

    `clock`: the moment the store shows (its catalogue at the run's as-of).
    """
    if settings.crawl.sites:
        yield None
        return
    from lookbench_live.scrapers.sample_store import SampleStore

    with SampleStore(port=port) as store:
        yield store.base_url


@task(name="ingest-images")
def ingest_shard(spec: RunSpec, requests: Sequence[Any], shard: str, allow_private: bool) -> dict[str, Any]:
    settings, lake = _context(spec)
    from lookbench_live.scrapers.ingest import ingest_images

    ingest = (
        settings.ingest.model_copy(update={"allow_private_addresses": True})
        if allow_private
        else settings.ingest
    )
    result = ingest_images(lake, ingest, list(requests), spec.run_key)
    return {"shard": shard, **_summary(result)}


def pending_shards(spec: RunSpec) -> list[list[Any]]:
    from lookbench_live.scrapers.ingest import pending_image_requests

    pending = pending_image_requests(Lake(spec.home))
    return [pending[i : i + INGEST_SHARD] for i in range(0, len(pending), INGEST_SHARD)]


@task(name="dedup")
def dedup(spec: RunSpec, label: str) -> dict[str, Any]:
    settings, lake = _context(spec)
    from lookbench_live.dedup import run_dedup

    return {"pass": label, **_summary(run_dedup(lake, settings.dedup, spec.run_key))}


@task(name="annotate")
def annotate(spec: RunSpec, label: str) -> dict[str, Any]:
    settings, lake = _context(spec)
    from lookbench_live.annotation import run_annotation
    from lookbench_live.schema.taxonomy import default_taxonomy

    return {
        "pass": label,
        **_summary(run_annotation(lake, settings.annotation, default_taxonomy(), spec.run_key)),
    }


@task(name="generate")
def generate(spec: RunSpec) -> dict[str, Any]:
    settings, lake = _context(spec)
    if ledger.is_done(lake, spec.run_key, "generate"):
        return {"skipped": "done earlier"}
    from lookbench_live.generation import run_generation
    from lookbench_live.schema.taxonomy import default_taxonomy

    products = conditioning_products(lake)
    result = run_generation(
        lake, settings.generation, default_taxonomy(), spec.run_key, products=products, now=spec.as_of_dt
    )
    summary = _summary(result)
    ledger.mark_done(lake, spec.run_key, "generate", detail=_stamp(summary))
    return summary


def conditioning_products(lake: Lake) -> list[Any]:
    """Real products with a kept, annotated first photo: what image-conditioned generation starts from."""
    from lookbench_live.generation import ConditioningProduct
    from lookbench_live.warehouse.views import lake_view

    view = lake_view(lake)
    products = []
    for key in sorted(view.products):
        for img in view.owner_images.get(("product", key), []):
            ann = view.annotations.get((img["sha256"], ""))
            if img["sha256"] in view.kept and ann is not None and ann.category:
                products.append(ConditioningProduct(key, img["sha256"], ann.category, dict(ann.attributes)))
                break
    return products
