"""The generation stage: plan the run's requests, make what is missing, store it in the lake.

`run_generation` reads the `generations` table (to skip finished requests) and lake
images (conditioning photos); it writes image bytes, `images` rows (owner_kind
"generation", so generated images enter dedup and annotation like crawled ones) and
`generations` rows.

Guarantees:
- Resumable: a request whose `generation_id` already has a `generations` row is never
  made again. Rows are written per batch, image bytes first, then `images` rows, then
  `generations` rows (the commit), so a run killed at any point, rerun, makes exactly
  the missing images and writes no duplicates.
- Bounded failure: an image that fails (exception, out of memory, NaN output, missing
  or unreadable conditioning photo) becomes a `generations` row with status "failed"
  and a reason; the run goes on. A failed request is final for its id: change the
  seed or the parameters to try again.
- Setup problems (unloadable model, unknown scheduler, bad templates, or one identical
  error for every image of the first batch, such as a size the model refuses) raise
  `GenerationSetupError`/`PromptError` before any row is written.
"""

from __future__ import annotations

import datetime as dt
import io
import logging
import os
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from PIL import Image

from lookbench_live import activity, interrupt
from lookbench_live.config import GenerationSettings
from lookbench_live.generation.compose import COMPOSED_PIPELINE, Garment, compose_scene
from lookbench_live.generation.plan import ConditioningProduct, GenerationRequest, RequestPlanner
from lookbench_live.generation.prompts import PromptTemplates, TaxonomyLike, load_templates
from lookbench_live.generation.runner import (
    Conditioning,
    GenerationSetupError,
    ImageGenerator,
    ImageOutcome,
    IPAdapterSpec,
    batch_identity,
    batched,
)
from lookbench_live.generation.tiny import (
    TINY_IMAGE_ENCODER,
    TINY_IP_ADAPTER_SUBFOLDER,
    TINY_IP_ADAPTER_WEIGHT,
    ensure_tiny_ip_adapter,
    ensure_tiny_pipeline,
    tiny_ip_adapter_name,
    tiny_model_name,
    tiny_words,
)
from lookbench_live.schema.hashing import hash_image
from lookbench_live.schema.records import Generation, ImageRecord, dumps, utcnow
from lookbench_live.schema.taxonomy import Taxonomy
from lookbench_live.warehouse.lake import Lake, LakeError

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]


@dataclass(slots=True)
class GenerationResult:
    """What one call of `run_generation` did (counts are requests unless named otherwise)."""

    run_id: str
    model: str
    model_is_tiny_local: bool
    planned: int = 0
    skipped_existing: int = 0
    generated: int = 0
    failed: int = 0
    seconds: float = 0.0
    generation_ids: list[str] = field(default_factory=list)  # made ok in this call
    failures: dict[str, str] = field(default_factory=dict)  # generation_id -> reason


@dataclass(frozen=True, slots=True)
class ModelChoice:
    name: str  # recorded in `generations.model` and part of every generation_id
    is_tiny_local: bool
    words: tuple[str, ...] = ()  # the tiny tokenizer's vocabulary


def tiny_cache_dir(lake: Lake) -> Path:
    """`<lake root>/models` for local lakes; a local cache for object-store lakes
    (from_pretrained needs a local folder)."""
    if lake.local:
        return Path(lake.path("models"))
    return Path(os.environ.get("LOOKBENCH_CACHE", Path.home() / ".cache" / "lookbench-live")) / "models"


def choose_model(
    settings: GenerationSettings, taxonomy: TaxonomyLike, templates: PromptTemplates
) -> ModelChoice:
    """The configured model, or the tiny local pipeline (named without building it)."""
    if settings.model:
        return ModelChoice(settings.model, False)
    words = tiny_words([*templates.words(), *_taxonomy_text(taxonomy)])
    return ModelChoice(tiny_model_name(words), True, tuple(words))


def choose_adapter(settings: GenerationSettings, choice: ModelChoice) -> str | None:
    """The IP-Adapter's recorded id: the configured one ("<source>:<subfolder>/<weight>"), the
    tiny local adapter beside the tiny pipeline, or None (no adapter for a configured model)."""
    if settings.ip_adapter:
        return f"{settings.ip_adapter}:{settings.ip_adapter_subfolder}/{settings.ip_adapter_weight}"
    return tiny_ip_adapter_name() if choice.is_tiny_local else None


def adapter_spec(lake: Lake, settings: GenerationSettings, choice: ModelChoice) -> IPAdapterSpec | None:
    """What `ImageGenerator` loads for `choose_adapter` (building the tiny adapter once if needed)."""
    name = choose_adapter(settings, choice)
    if name is None:
        return None
    if settings.ip_adapter:
        return IPAdapterSpec(
            settings.ip_adapter,
            settings.ip_adapter_subfolder,
            settings.ip_adapter_weight,
            settings.ip_adapter_image_encoder,
            name,
        )
    path, _ = ensure_tiny_ip_adapter(tiny_cache_dir(lake))
    return IPAdapterSpec(
        str(path), TINY_IP_ADAPTER_SUBFOLDER, TINY_IP_ADAPTER_WEIGHT, TINY_IMAGE_ENCODER, name
    )


def _taxonomy_text(taxonomy: TaxonomyLike) -> list[str]:
    texts: list[str] = []
    for category in taxonomy.category_names():
        texts.append(category)
        for group in taxonomy.groups_for(category):
            texts.extend(taxonomy.values(group))
    return texts


def load_generator(
    lake: Lake, settings: GenerationSettings, choice: ModelChoice, *, with_adapter: bool = True
) -> ImageGenerator:
    """An `ImageGenerator` for the chosen model (building the tiny pipeline once if needed);
    `with_adapter`: also its IP-Adapter (built once if tiny), for runs with conditioned requests."""
    if choice.is_tiny_local:
        path, _ = ensure_tiny_pipeline(tiny_cache_dir(lake), choice.words)
        model = str(path)
    else:
        model = str(settings.model)
    return ImageGenerator(
        model,
        device=settings.device,
        dtype=settings.dtype,
        scheduler=settings.scheduler,
        attention_slicing=settings.attention_slicing,
        cpu_offload=settings.cpu_offload,
        cpu_threads=settings.cpu_threads,
        ip_adapter=adapter_spec(lake, settings, choice) if with_adapter else None,
    )


def plan_generation(
    settings: GenerationSettings,
    taxonomy: TaxonomyLike,
    products: Sequence[ConditioningProduct] = (),
    cycle: str = "",
) -> tuple[ModelChoice, list[GenerationRequest]]:
    """The model and the ordered requests a run would make (no model is loaded); `cycle`
    (a release version) gives each release its own seeds (see `plan.cycle_seed`)."""
    templates = load_templates(settings.templates)
    choice = choose_model(settings, taxonomy, templates)
    adapter = choose_adapter(settings, choice)
    # No street-scene model (the tiny pipeline depicts nothing): street queries are composed from
    # garments placed at known positions (generation/compose.py), so their boxes are true.
    planner = RequestPlanner(
        settings, taxonomy, templates, choice.name, cycle, adapter, compose_street=choice.is_tiny_local
    )
    requests = planner.plan(products)
    if adapter is None and any(r.mode == "ip_adapter" for r in requests):
        raise GenerationSetupError(
            f"generation.model = {settings.model!r} with conditioning = 'ip_adapter' needs generation.ip_adapter "
            "(for SDXL: ip_adapter = 'h94/IP-Adapter', ip_adapter_subfolder = 'sdxl_models', ip_adapter_weight = "
            "'ip-adapter_sdxl.safetensors'), or conditioning = 'img2img', or conditioned_share = 0"
        )
    return choice, requests


def run_generation(
    lake: Lake,
    settings: GenerationSettings,
    taxonomy: Taxonomy,
    run_id: str,
    *,
    products: Sequence[ConditioningProduct] = (),
    progress: Progress | None = None,
    image_generator: ImageGenerator | None = None,
    now: dt.datetime | None = None,
    cycle: str = "",
    only_ids: Collection[str] | None = None,
) -> GenerationResult:
    """Make the AIGen-Studio and AIGen-StreetLook images of this run that are not in the lake yet.

    `products`: annotated real gallery products; up to `settings.conditioned_share` of them
    get an image-conditioned query (item_ids = [product key]) and may be worn in street
    looks, which are then conditioned on the photo of every product they wear (IP-Adapter). `progress(done, total)` is called after each batch. `image_generator` reuses an
    already loaded pipeline (it must be the model `settings` names). `now` (timezone-aware)
    stamps `first_seen_at`/`fetched_at` of new rows, so a run "as of" a date lands in that
    date's release window; default: the current time. `cycle` (the release version) derives
    this release's seeds: a new cycle plans new ids, the same cycle the same ids.
    `only_ids` restricts the call to those planned generation_ids (one shard of the flow's; the
    counts are of that subset): whole batches of the full plan's `batched(...)` give the same
    batches, hence the same bits, as the unsharded call.
    """
    if now is not None and now.tzinfo is None:
        raise ValueError("run_generation(now=...) must be timezone-aware (UTC)")
    started = time.perf_counter()
    choice, requests = plan_generation(settings, taxonomy, products, cycle)
    if only_ids is not None:
        wanted = set(only_ids)
        requests = [r for r in requests if r.generation_id in wanted]
    result = GenerationResult(run_id=run_id, model=choice.name, model_is_tiny_local=choice.is_tiny_local)
    result.planned = len(requests)
    done = {key[0] for key in lake.keys(Generation.__table__)}
    missing = [r for r in requests if r.generation_id not in done]
    result.skipped_existing = len(requests) - len(missing)
    processed = result.skipped_existing
    if progress:
        progress(processed, len(requests))
    generator = image_generator
    # The plan's own batches, also on a resume: an image's bits depend on its batch-mates
    # (runner: batched matrix products round differently), so what is missing is never
    # regrouped. A batch a kill left half committed is generated whole again and only its
    # missing images are committed: the same bits as an uninterrupted run.
    for planned in batched(requests, settings.batch_size):
        batch = [r for r in planned if r.generation_id not in done]
        if not batch:
            continue
        interrupt.check("generate")  # a safe point: between batches, each committed whole
        if generator is None:
            conditioned = any(r.mode == "ip_adapter" for r in missing)
            generator = load_generator(lake, settings, choice, with_adapter=conditioned)
        if planned[0].garments:
            outcomes = _compose_batch(lake, generator, planned, settings.batch_size)
        else:
            outcomes = _generate_batch(lake, generator, planned)
        if len(batch) < len(planned):
            outcomes = [o for o in outcomes if o.request.generation_id not in done]
        if not result.generated:
            _refuse_systematic_failure(outcomes)
        _commit(lake, outcomes, choice, generator, run_id, result, now or utcnow())
        processed += len(batch)
        activity.count("images generated", len(batch))
        if progress:
            progress(processed, len(requests))
    result.seconds = time.perf_counter() - started
    log.info(
        "generation %s: %d planned, %d already stored, %d made, %d failed (%s)",
        run_id,
        result.planned,
        result.skipped_existing,
        result.generated,
        result.failed,
        choice.name,
    )
    return result


def _refuse_systematic_failure(outcomes: list[ImageOutcome]) -> None:
    """Before the first success: one identical error for every image (two or more) of a batch
    is a setup problem (size not divisible by 8, a model too large for the device, an fp16
    VAE that overflows to NaN), not bad requests. Raise instead of recording each request as
    failed (failed ids are final). A lone failing image is recorded: it cannot be told apart."""
    judged = [o for o in outcomes if not (o.error or "").startswith("conditioning_image")]
    errors = {o.error for o in judged}
    if len(judged) >= 2 and not any(o.ok for o in judged) and len(errors) == 1 and None not in errors:
        raise GenerationSetupError(
            f"every image of the first batch failed with the same error, so nothing was recorded: {errors.pop()}"
        )


def _generate_batch(
    lake: Lake, generator: ImageGenerator, batch: list[GenerationRequest]
) -> list[ImageOutcome]:
    """Conditioning photos are read first; a request with an unusable photo fails alone."""
    ready: list[GenerationRequest] = []
    images: list[Conditioning] = []
    failed: list[ImageOutcome] = []
    for request in batch:
        try:
            if request.mode == "img2img":
                image: Conditioning = _conditioning_image(lake, request.conditioned_on_sha256)
            elif request.mode == "ip_adapter":
                image = [_conditioning_image(lake, sha, key) for key, sha in request.conditioning]
            else:
                image = None
        except (LakeError, OSError, ValueError, Image.DecompressionBombError) as exc:
            failed.append(ImageOutcome(request, error=str(exc)))
            continue
        ready.append(request)
        images.append(image)
    return [*generator.generate(ready, images), *failed] if ready else failed


def _compose_batch(
    lake: Lake, generator: ImageGenerator, batch: list[GenerationRequest], batch_size: int
) -> list[ImageOutcome]:
    """Composed street scenes: each scene's garments are generated (in their own batches, always
    the same ones, so the same bits), stored in the lake as the layout's source images, and
    pasted at the layout's boxes. A scene with a failed garment fails with that garment's reason."""
    outcomes: list[ImageOutcome] = []
    for request in batch:
        made: dict[str, ImageOutcome] = {}
        for group in batched(list(request.garments), batch_size):
            made.update((o.request.generation_id, o) for o in _generate_batch(lake, generator, group))
        parts = [made[g.generation_id] for g in request.garments]
        failed = [o for o in parts if not o.ok or o.png is None]
        if failed:
            # The garment's own reason first (machine-readable), then which garment it was.
            reason = f"{failed[0].error or 'unknown'} (garment {failed[0].request.item_ids[0]})"
            outcomes.append(ImageOutcome(request, error=reason))
            continue
        garments = [
            Garment(
                o.request.item_ids[0],
                o.request.requested[0].category,
                Image.open(io.BytesIO(o.png)),
                lake.put_image(o.png),
            )
            for o in parts
            if o.png is not None
        ]
        scene = compose_scene(garments, request.width, request.height, request.seed)
        outcomes.append(
            ImageOutcome(
                request,
                png=scene.png,
                width=scene.width,
                height=scene.height,
                seconds=sum(o.seconds for o in parts),
                batch_id=batch_identity(list(request.garments)),
                pipeline_class=f"{COMPOSED_PIPELINE}({parts[0].pipeline_class})",
                layout_json=dumps(scene.layout),
            )
        )
    return outcomes


def _conditioning_image(lake: Lake, sha256: str | None, product_key: str | None = None) -> Image.Image:
    of = f" of {product_key}" if product_key else ""
    if not sha256:
        raise ValueError(f"conditioning_image_missing: the product{of} has no image sha256")
    try:
        data = lake.get_image(sha256)
    except LakeError as exc:
        raise ValueError(f"conditioning_image_missing: photo {sha256}{of}: {exc}") from exc
    try:
        image = Image.open(io.BytesIO(data))
        image.load()
    except Exception as exc:  # Pillow raises many types for bad bytes
        raise ValueError(
            f"conditioning_image_unreadable: image {sha256}{of}: {type(exc).__name__}: {exc}"
        ) from exc
    return image.convert("RGB")


def _commit(
    lake: Lake,
    outcomes: list[ImageOutcome],
    choice: ModelChoice,
    generator: ImageGenerator,
    run_id: str,
    result: GenerationResult,
    now: dt.datetime,
) -> None:
    image_rows: list[ImageRecord] = []
    generation_rows: list[Generation] = []
    for outcome in outcomes:
        request = outcome.request
        sha = None
        if outcome.ok and outcome.png is not None:
            sha = lake.put_image(outcome.png)
            hashes = hash_image(Image.open(io.BytesIO(outcome.png)))
            image_rows.append(
                ImageRecord(
                    source_url=f"generated://{request.generation_id}",
                    owner_kind="generation",
                    owner_id=request.generation_id,
                    source="generation",
                    status="ok",
                    sha256=sha,
                    width=outcome.width,
                    height=outcome.height,
                    format="PNG",
                    byte_size=len(outcome.png),
                    phash=hashes.phash,
                    phash_mirror=hashes.phash_mirror,
                    dhash=hashes.dhash,
                    hash_method=hashes.method,
                    fetched_at=now,
                    first_seen_at=now,
                )
            )
            result.generated += 1
            result.generation_ids.append(request.generation_id)
        else:
            result.failed += 1
            result.failures[request.generation_id] = outcome.error or "unknown"
        generation_rows.append(
            Generation(
                generation_id=request.generation_id,
                subset=request.subset,
                role=request.role,
                item_ids=list(request.item_ids),
                model=choice.name,
                model_is_tiny_local=choice.is_tiny_local,
                pipeline_class=outcome.pipeline_class or _pipeline_class_name(generator, request),
                prompt=request.prompt,
                negative_prompt=request.negative_prompt,
                template_version=request.template_version,
                seed=request.seed,
                steps=request.steps,
                guidance=request.guidance,
                width=request.width,
                height=request.height,
                scheduler=_scheduler_name(generator, request),
                device=generator.device,
                dtype=request.dtype,
                requested_attributes_json=request.requested_attributes_json,
                conditioned_on=request.conditioned_on,
                conditioned_on_sha256=request.conditioned_on_sha256,
                strength=request.strength,
                conditioning_json=request.conditioning_json,
                ip_adapter=request.adapter,
                ip_adapter_scale=request.adapter_scale,
                layout_json=outcome.layout_json if sha else None,
                status="ok" if sha else "failed",
                error=None if sha else (outcome.error or "unknown"),
                sha256=sha,
                first_seen_at=now,
                run_id=run_id,
                batch_id=outcome.batch_id or None,
                batch_position=outcome.batch_position if outcome.batch_id else None,
                seconds=round(outcome.seconds, 4) if outcome.ok else None,
                cpu_threads=generator.threads_used,
            )
        )
    # images before generations: the generations row is the commit of the request.
    lake.append(image_rows)
    lake.append(generation_rows)


def _pipeline_class_name(generator: ImageGenerator, request: GenerationRequest) -> str:
    loaded = generator._img2img if request.mode == "img2img" else generator._text2img
    return type(loaded).__name__ if loaded is not None else "unloaded"


def _scheduler_name(generator: ImageGenerator, request: GenerationRequest) -> str:
    loaded = generator._text2img
    return type(loaded.scheduler).__name__ if loaded is not None else request.scheduler
