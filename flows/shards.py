"""The heavy stages as shards on the flow's task runner: generation, evaluation embedding, dedup search.

Each is a Prefect task that rebuilds its context from the `RunSpec` (like flows/stages.py), so it
runs the same on a Dask worker of another machine. What a shard commits is its own: generation
rows per batch, an embedding part file, or nothing (the dedup search returns pairs). The flow
plans the shards, submits them, waits, and does the one step that must see everything (the
dedup decisions, the evaluation's merge and scoring).

Shards run where each task has a process of its own (Dask, Ray): torch's thread count and a
loaded pipeline are per process, so on the thread runner generation and embedding stay in the
flow process, whatever `shards` says. Tasks that need a GPU (device "cuda") carry
`resources={"GPU": 1}` on Dask (`runtime.submit_sharded`).
"""

from __future__ import annotations

import logging
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from lookbench_live.config import Settings
from lookbench_live.flows import ledger
from lookbench_live.flows.run_state import dump_record
from lookbench_live.flows.runtime import (
    RunSpec,
    runs_in_worker_processes,
    stoppable,
    submit_sharded,
    uses_gpu,
)
from lookbench_live.flows.stages import _context, _summary, conditioning_products
from lookbench_live.warehouse.lake import Lake

log = logging.getLogger(__name__)


def _shard_count(settings: Settings, stage: str, configured: int) -> int:
    if runs_in_worker_processes(settings.flows):
        return configured
    if configured > 1:
        # Said once per step so a user who set `shards` sees why nothing spread out.
        log.info(
            "%s.shards = %d ignored: the %s task runner shares one process; %s runs in the flow",
            stage,
            configured,
            settings.flows.task_runner,
            stage,
        )
    return 1


# ---------------------------------------------------------------------- generation
def generation_shards(settings: Settings) -> int:
    """How many generation tasks the generate step submits (1: it runs in the flow process)."""
    return _shard_count(settings, "generation", settings.generation.shards)


@task(name="generate-shard")
@stoppable
def generate_shard(spec: RunSpec, ids: list[str], products: list[Any], label: str) -> dict[str, Any]:
    """Make the planned requests `ids` (whole batches of the plan) that are not in the lake yet."""
    settings, lake = _context(spec)
    from lookbench_live.generation import run_generation
    from lookbench_live.schema.taxonomy import default_taxonomy

    result = run_generation(
        lake,
        settings.generation,
        default_taxonomy(),
        spec.run_key,
        products=products,
        now=spec.as_of,
        cycle=spec.version,
        only_ids=ids,
    )
    summary = _summary(result)
    summary.pop("generation_ids", None)  # the lake has them; the summary stays small
    return {"shard": label, **summary}


def plan_generation_shards(
    spec: RunSpec, settings: Settings, count: int
) -> tuple[list[Any], list[list[str]], int]:
    """(conditioning products, generation_ids per shard, requests planned) of the run.

    The missing requests are cut into batches exactly as `run_generation` cuts them
    (`runner.batched`), and whole batches are dealt to the shards in plan order: a shard's
    `run_generation(only_ids=...)` then forms the same batches, so every image has the same
    `batch_id` and the same bits as in the unsharded run."""
    from lookbench_live.generation.synthesis import plan_generation
    from lookbench_live.schema.records import Generation
    from lookbench_live.schema.taxonomy import default_taxonomy

    lake = Lake(spec.home)
    window = spec.window
    products = conditioning_products(lake, window)
    choice, requests = plan_generation(settings.generation, default_taxonomy(), products, spec.version)
    done = {key[0] for key in lake.keys(Generation.__table__)}
    shards = deal_batches(requests, done, settings.generation.batch_size, count)
    if choice.is_tiny_local and shards:
        # Built once here, not by every worker at once (each would build and race to rename).
        from lookbench_live.generation.synthesis import adapter_spec, tiny_cache_dir
        from lookbench_live.generation.tiny import ensure_tiny_pipeline

        ensure_tiny_pipeline(tiny_cache_dir(lake), choice.words)
        if any(getattr(r, "conditioning", ()) for r in requests):
            adapter_spec(lake, settings.generation, choice)  # the tiny IP-Adapter, likewise once
    return products, shards, len(requests)


def deal_batches(requests: list[Any], done: set[str], batch_size: int, count: int) -> list[list[str]]:
    """The missing requests' generation_ids in up to `count` shards of whole batches: the batches
    `run_generation` would form (`runner.batched`), dealt in plan order (batch i to shard i % count)."""
    from lookbench_live.generation.runner import batched

    batches = batched([r for r in requests if r.generation_id not in done], batch_size)
    shards = [[r.generation_id for batch in batches[i::count] for r in batch] for i in range(count)]
    return [ids for ids in shards if ids]


def generate_in_shards(spec: RunSpec, settings: Settings, count: int) -> list[dict[str, Any]]:
    """The generate step as `count` tasks; marked done when every shard has finished."""
    lake = Lake(spec.home)
    if ledger.is_done(lake, spec.run_key, "generate"):
        return [{"skipped": "done earlier"}]
    products, shards, planned = plan_generation_shards(spec, settings, count)
    args = [(spec, ids, products, f"{i}/{len(shards)}") for i, ids in enumerate(shards)]
    futures = submit_sharded(
        generate_shard, args, gpu=uses_gpu(settings.generation.device), flows=settings.flows
    )
    outcomes = [future.result() for future in futures]
    made = sum(o.get("generated", 0) for o in outcomes)
    total = {"planned": planned, "shards": len(shards), "generated": made}
    ledger.mark_done(lake, spec.run_key, "generate", detail=dump_record("generate", total))
    return outcomes or [{"planned": planned, "skipped_existing": planned}]


# ---------------------------------------------------------------------- evaluation embedding
def embedding_shards(settings: Settings) -> int:
    """How many embedding tasks per model the evaluate step submits (1: none, it embeds itself)."""
    return _shard_count(settings, "evaluation", settings.evaluation.shards)


@task(name="embed-shard")
@stoppable
def embed_shard(
    spec: RunSpec, release_path: str, model: str | None, index: int, count: int
) -> dict[str, Any]:
    """Embed shard `index` of `count` of the staged release's images with `model` (None: baseline)."""
    settings, lake = _context(spec)
    from lookbench_live.evaluation.shards import embed_shard as embed

    config = settings.evaluation
    result = embed(
        lake,
        spec.version,
        model,
        index=index,
        count=count,
        release_path=release_path,
        trust_remote_code=config.trust_remote_code,
        batch_size=config.batch_size,
        device=config.device,
    )
    return _summary(result)


def submit_embedding(
    spec: RunSpec, settings: Settings, release_path: str, models: list[str | None]
) -> dict[str | None, list[Any] | Exception]:
    """Submit every model's embedding shards at once (the baseline needs no GPU); model -> its
    futures, or the error that kept them from being submitted (raised at its turn, per model)."""
    count = embedding_shards(settings)
    futures: dict[str | None, list[Any] | Exception] = {}
    for model in models:
        gpu = model is not None and uses_gpu(settings.evaluation.device)
        args = [(spec, release_path, model, i, count) for i in range(count)]
        try:
            futures[model] = submit_sharded(embed_shard, args, gpu=gpu, flows=settings.flows)
        except RuntimeError as exc:  # no GPU worker: that model fails, as it would in the flow process
            futures[model] = exc
    return futures


def merge_embedding(spec: RunSpec, futures: list[Any] | Exception) -> list[dict[str, Any]]:
    """Wait for one model's shards (a failed one raises) and fold their parts into its cache."""
    from lookbench_live.evaluation.shards import merge_shards

    if isinstance(futures, Exception):
        raise futures
    outcomes = [future.result() for future in futures]
    if outcomes:
        merge_shards(Lake(spec.home), spec.version, outcomes[0]["model"], len(outcomes))
    return outcomes


# ---------------------------------------------------------------------- dedup search
def dedup_shards(settings: Settings) -> int:
    """How many tasks each dedup range search is split into (1: it runs in the flow process)."""
    return settings.dedup.shards


# Arrays of hashes as inputs: not hashed into a cache key (nothing is cached across runs anyway).
@task(name="dedup-search-shard", cache_policy=NO_CACHE)
@stoppable
def dedup_search_shard(args: tuple[Any, ...]) -> Any:
    from lookbench_live.dedup.shards import shard_pairs

    return shard_pairs(*args)


def dedup_in_shards(spec: RunSpec, settings: Settings, label: str) -> dict[str, Any]:
    """One dedup pass whose pair searches run as `dedup.shards` tasks; decisions here, as unsharded."""
    from lookbench_live.dedup import run_dedup
    from lookbench_live.dedup.shards import searcher

    count = dedup_shards(settings)
    searches: list[int] = []

    def run(inputs: list[tuple[Any, ...]]) -> list[Any]:
        searches.append(len(inputs))
        futures = submit_sharded(
            dedup_search_shard, [(args,) for args in inputs], gpu=False, flows=settings.flows
        )
        return [future.result() for future in futures]

    result = run_dedup(Lake(spec.home), settings.dedup, spec.run_key, search=searcher(count, run))
    return {"pass": label, "search_shards": sum(searches), **_summary(result)}
