"""The one configuration file (TOML), validated with pydantic.

Everything has a default that runs offline on the embedded default (the sample store,
the tiny local diffusion pipeline, metadata annotation, a local lake). Secrets never
live in the file: a setting names the environment variable that holds them (for
example `api_key_env = "VLLM_API_KEY"`), and the value is read only when used.

A wrong or unknown setting fails at load with its dotted name, before any work.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from lookbench_live.network import limits


class ConfigError(ValueError):
    """The configuration is wrong; the message names the file and the setting."""


class Section(BaseModel):
    # hide_input_in_errors: a validation error never carries the value it refused (pydantic's
    # `input_value=`), so a secret pasted into the wrong setting is not echoed by a traceback
    # (LOOKBENCH_DEBUG=1) or a log either (X11).
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)


ENV_VAR_NAME = re.compile(r"[A-Z_][A-Z0-9_]{0,127}")


def _env_var_name(value: str) -> str:
    # The message never repeats the value: what was pasted here may be the secret itself.
    if not ENV_VAR_NAME.fullmatch(value):
        raise ValueError(
            "must be the NAME of an environment variable (capital letters, digits and '_', e.g. "
            "OPENAI_API_KEY), never the secret itself; the value given is not shown"
        )
    return value


# Every `*_env` setting: the name of the environment variable that holds a secret (X11).
EnvVarName = Annotated[str, AfterValidator(_env_var_name)]


class LakeSettings(Section):
    home: str | None = None  # None: $LOOKBENCH_HOME or ./lookbench-data; or an fsspec URL (s3://…)


class SiteSettings(Section):
    name: str
    platform: Literal["shopify", "woocommerce", "schema_org", "playwright", "looks"]
    base_url: str
    start_paths: list[str] = Field(default_factory=list)
    collections: list[str] = Field(default_factory=list)
    look_paths: list[str] = Field(default_factory=list)
    concurrency: int = Field(default=4, ge=1, le=64)
    download_delay: float = Field(default=0.5, ge=0)
    # Budgets per run: at either the crawl stops cleanly, records the requests it did not
    # reach (the site's frontier, in the lake's crawl-state) and the next run starts there.
    max_pages: int = Field(default=200, ge=1)  # follow-up requests scheduled per run
    max_duration: float | None = Field(default=None, gt=0)  # seconds per run; None: no limit
    allow_private_addresses: bool = False
    # With allow_private_addresses: other hosts whose images this site's products may be
    # fetched from at private addresses ("host": the base_url's scheme and port, "host:port"
    # or "scheme://host[:port]"); its own base_url origin (scheme, host, port) always may.
    image_hosts: list[str] = Field(default_factory=list)
    looks: bool = True  # also extract looks from the pages this site's spider visits

    @field_validator("name")
    @classmethod
    def _safe_name(cls, value: str) -> str:
        if not value or not all(c.isalnum() or c in "-_." for c in value):
            raise ValueError("site names use letters, digits, '-', '_' and '.' only")
        return value

    @field_validator("base_url")
    @classmethod
    def _site_url(cls, value: str, info: ValidationInfo) -> str:
        # Checked at load, not at crawl (a `file://` base_url used to fail there with a traceback).
        site = info.data.get("name", "?")
        problem = _url_problem(value)
        if problem:
            raise ValueError(f"site {site!r}: base_url {problem}")
        return value


DEFAULT_CONTACT_URL = "https://github.com/lookbench-live/lookbench-live"


def agent_string(template: str, contact: str) -> str:
    """A user agent template with `{contact}` filled in; the one rule for crawl and image fetches."""
    return template.replace("{contact}", contact)


class CrawlSettings(Section):
    user_agent: str = limits.USER_AGENT
    contact_url: str = DEFAULT_CONTACT_URL
    obey_robots: bool = True
    autothrottle: bool = True
    download_timeout: float = Field(default=limits.DOWNLOAD_TIMEOUT_S, gt=0)
    download_maxsize: int = Field(default=limits.PAGE_MAX_BYTES, gt=0)
    retry_times: int = Field(default=2, ge=0, le=10)
    max_crawl_delay: float = Field(default=limits.MAX_CRAWL_DELAY_S, ge=0)
    sites: list[SiteSettings] = Field(default_factory=list)  # empty: the sample store
    max_retry_after: float = Field(
        default=300.0, ge=0
    )  # longer Retry-After: the request is given up, recorded
    # RFC 9309: parse at least 500 KiB
    robots_max_bytes: int = Field(default=limits.ROBOTS_MAX_BYTES, ge=limits.ROBOTS_MAX_BYTES)
    # a failed robots.txt disallows its host this long
    robots_error_ttl: float = Field(default=limits.ROBOTS_ERROR_TTL_S, ge=0)
    # Consecutive failed attempts (5xx, 429, network errors) after which a host is parked for the
    # rest of the run: its remaining requests are recorded `host_parked`, not sent (C10).
    max_host_failures: int = Field(default=10, ge=1)
    max_sitemap_urls: int = Field(default=50_000, ge=1)  # per sitemap file (the protocol's limit)
    batch_size: int = Field(default=200, ge=1)  # rows per lake commit
    playwright: bool = True  # False: JavaScript sites are skipped with a recorded reason
    state_dir: str | None = None  # crawl journals; None: <lake>/crawl-state (required for s3:// lakes)
    # Seconds one site's crawl subprocess may run per call; None: from the site's budgets
    # (`max_duration`, `max_pages` x the slowest pacing it may be asked for), see `crawl_time_limit`.
    time_limit: float | None = Field(default=None, gt=0)
    # The embedded default (no `sites`): the living sample store's weekly arrivals (benchmarks).
    # Under the freshness rules only products dated in the window are new (the core catalogue
    # is older), so a month's real subsets are its arrivals less the products that looks and
    # generations reserve: 8 a week keeps studio queries and noise in every month.
    sample_products_per_week: int = Field(default=8, ge=0, le=100_000)


class IngestSettings(Section):
    max_bytes: int = Field(default=limits.IMAGE_MAX_BYTES, gt=0)
    # Capped at Pillow's MAX_IMAGE_PIXELS (89,478,485) so its bomb warning can never be the only guard.
    max_pixels: int = Field(default=40_000_000, gt=0, le=89_478_485)
    min_side: int = Field(default=64, ge=1)
    max_aspect_ratio: float = Field(default=6.0, gt=1)
    allowed_formats: list[str] = Field(default_factory=lambda: ["JPEG", "PNG", "WEBP", "GIF"])
    # total deadline per attempt (all hops), not per read
    timeout: float = Field(default=limits.DOWNLOAD_TIMEOUT_S, gt=0)
    concurrency: int = Field(default=32, ge=1, le=512)
    allow_private_addresses: bool = False
    retries: int = Field(default=2, ge=0, le=5)  # extra attempts on timeouts, 429, 5xx, connection errors
    retry_backoff: float = Field(default=0.5, ge=0)  # seconds, doubled per attempt, full jitter (retry.py)
    max_redirects: int = Field(default=limits.MAX_REDIRECTS, ge=0, le=10)
    # "{contact}" is `crawl.contact_url` (as in the crawler's user agent, `agent_string`).
    user_agent: str = limits.USER_AGENT
    # Requests in flight to one host (name and port) at once; Scrapy's per-domain default is 8.
    per_host_concurrency: int = Field(default=8, ge=1, le=512)
    obey_robots: bool = True
    robots_timeout: float = Field(default=limits.ROBOTS_TIMEOUT_S, gt=0)
    # how long a failed robots.txt disallows a host
    robots_error_ttl: float = Field(default=limits.ROBOTS_ERROR_TTL_S, ge=0)
    workers: int = Field(default=2, ge=0, le=64)  # decode processes (crash isolation); 0: threads here
    shard_size: int = Field(default=512, ge=1)  # outcomes per lake commit
    # an image host's robots Crawl-delay above: disallowed
    max_crawl_delay: float = Field(default=limits.MAX_CRAWL_DELAY_S, ge=0)
    max_retry_after: float = Field(default=120.0, ge=0)  # a longer Retry-After ends the URL, parks the host
    host_park_after: int = Field(default=8, ge=1)  # failed attempts in a row that park a host for the run
    decode_timeout: float = Field(default=10.0, gt=0)  # seconds per image in a decode worker (I7)
    decode_memory_mb: int = Field(default=1024, ge=64)  # address space a decode worker may add (I7)


class DedupSettings(Section):
    radius: int = Field(default=4, ge=0, le=32)  # pHash bits; chosen from the curve in docs/dedup.md
    # Two images of one owner (a product's photos) also need their 256-bit pHashes within this
    # many bits: copies are, distinct near-identical views (front/back) mostly are not.
    same_owner_fine_radius: int = Field(default=6, ge=0, le=128)
    known_dataset_hashes: list[str] = Field(default_factory=list)  # Parquet files from `lookbench-live hash`
    # What `lookbench-live hash` decodes of a public dataset: external files are untrusted input,
    # so a format allowlist and a pixel cap as ingestion has (BMP and TIFF too: datasets ship them).
    known_dataset_formats: list[str] = Field(
        default_factory=lambda: ["JPEG", "PNG", "WEBP", "GIF", "BMP", "TIFF"], min_length=1
    )
    # Capped at Pillow's MAX_IMAGE_PIXELS (89,478,485) so its bomb warning can never be the only guard.
    known_dataset_max_pixels: int = Field(default=40_000_000, gt=0, le=89_478_485)
    opt_out_sources: list[str] = Field(default_factory=list)  # site names whose images are never released
    opt_out_owners: list[str] = Field(default_factory=list)  # owner ids (product keys, source:look_id, …)
    opt_out_sha256: list[str] = Field(default_factory=list)
    embedding_model: str | None = None  # optional second stage; off by default
    embedding_threshold: float = Field(default=0.95, gt=0, le=1)
    embedding_batch_size: int = Field(default=16, ge=1)
    # The near-duplicate search as this many tasks on the flow's task runner, split by hash-prefix
    # buckets of multi-index parts (dedup/shards.py); the decisions stay in the flow, the same as
    # unsharded. 1: the search runs in the flow process.
    shards: int = Field(default=1, ge=1, le=256)


class GenerationSettings(Section):
    model: str | None = None  # None: a tiny local pipeline built offline (the embedded default)
    device: str | None = None  # None: cuda when present, else cpu
    dtype: Literal["float32", "float16", "bfloat16"] = "float32"
    steps: int = Field(default=10, ge=1, le=200)
    guidance: float = Field(default=5.0, ge=0)
    width: int = Field(default=64, ge=8)
    height: int = Field(default=64, ge=8)
    batch_size: int = Field(default=4, ge=1)
    studio_items: int = Field(default=8, ge=0)
    street_looks: int = Field(default=4, ge=0)
    gallery_per_item: int = Field(default=2, ge=1, le=4)
    seed: int = 0
    attention_slicing: bool = False
    cpu_offload: bool = False
    conditioned_share: float = Field(default=0.5, ge=0, le=1)
    scheduler: str | None = None  # a diffusers scheduler class name; None: the pipeline's own
    strength: float = Field(default=0.6, gt=0, le=1)  # img2img: how far from the product photo
    attributes_per_item: int = Field(default=3, ge=1, le=12)  # attribute values named per garment
    templates: str | None = None  # prompt templates JSON; None: the packaged generation/templates.json
    cpu_threads: int | None = Field(default=None, ge=1)  # torch CPU threads, None: 1 (bits depend on it)
    # The planned requests as this many tasks on a Dask or Ray runner (whole batches, dealt in plan
    # order), each on a worker of its own (`resources={"GPU": 1}` when the device is cuda). 1, or
    # the thread runner (torch's thread count is per process): generation runs in the flow process.
    shards: int = Field(default=1, ge=1, le=256)
    # How queries are conditioned on real products' photos (docs/generation.md):
    # "ip_adapter": text-to-image with an IP-Adapter fed one photo per product garment (AIGen-Studio
    # conditioned queries and street looks with products); "img2img": AIGen-Studio queries start
    # from the product photo, street looks name their products in the prompt only.
    conditioning: Literal["ip_adapter", "img2img"] = "ip_adapter"
    # The IP-Adapter, as `pipe.load_ip_adapter(ip_adapter, subfolder=, weight_name=,
    # image_encoder_folder=)` takes it: a hub id (in the pre-pulled cache) or a local folder.
    # None with `model` unset: the tiny local adapter built beside the tiny pipeline; None with a
    # `model`: required when conditioned requests are planned (the run stops before any row).
    ip_adapter: str | None = None
    ip_adapter_subfolder: str = "models"  # h94/IP-Adapter: "models" (SD 1.5), "sdxl_models" (SDXL)
    ip_adapter_weight: str = "ip-adapter_sd15.safetensors"  # SDXL: "ip-adapter_sdxl.safetensors"
    # The CLIP image encoder: a folder name inside the subfolder, or a path with "/" from the root.
    ip_adapter_image_encoder: str = "image_encoder"
    ip_adapter_scale: float = Field(default=0.6, ge=0, le=2)  # how strongly the photos steer the image
    products_per_look: int = Field(default=1, ge=1, le=4)  # real products a conditioned street look wears

    @field_validator("ip_adapter_weight")
    @classmethod
    def _weight_file(cls, value: str) -> str:
        if not value.endswith((".safetensors", ".bin")) or "/" in value:
            raise ValueError("ip_adapter_weight is a file name ending in .safetensors or .bin (no folder)")
        return value

    @field_validator("ip_adapter_subfolder", "ip_adapter_image_encoder")
    @classmethod
    def _relative(cls, value: str) -> str:
        if value.startswith("/") or ".." in value.split("/"):
            raise ValueError("must be a folder inside the IP-Adapter repository (relative, no '..')")
        return value


def _url_problem(url: str) -> str | None:
    """Why `url` is not a usable http(s) URL with a host, or None. The reason never repeats the
    URL: one that carries credentials (`user:password@`) would put them in logs and manifests."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError:
        return "is not a valid URL"
    if parts.scheme not in ("http", "https"):
        return "is not an http(s) URL (http:// or https:// only)"
    if not parts.hostname:
        return "is not an http(s) URL with a host (http(s)://host/...)"
    if parts.username is not None or parts.password is not None:
        return "must not carry credentials (user:password@); the value given is not shown"
    return None


def _check_url(url: str) -> None:
    problem = _url_problem(url)
    if problem:
        raise ValueError(f"the URL {problem}")


class ChatEndpointSettings(Section):
    """An OpenAI-compatible chat endpoint and the caps of one run against it: the one settings type
    of annotation's VLM and the judge (`ChatEndpoint.from_settings` reads it)."""

    base_url: str | None = None
    model: str
    api_key_env: EnvVarName
    concurrency: int = Field(default=8, ge=1, le=1024)
    timeout: float = Field(default=120.0, gt=0)
    max_retries: int = Field(default=4, ge=0, le=10)
    max_tokens: int = Field(default=1024, ge=16)
    max_pixels: int = Field(default=1024 * 28 * 28, gt=0)
    max_payload_bytes: int = Field(default=8 * 1024 * 1024, ge=1024)  # base64 image cap per request (L10)
    max_cost_usd: float | None = None
    prompt_price_per_mtok: float = 0.0
    completion_price_per_mtok: float = 0.0
    # Backoff between attempts: full jitter (`lookbench_live.retry`), base doubled per attempt up to
    # the max; a server's Retry-After is waited instead when longer, up to `max_retry_after`.
    retry_base_delay: float = Field(default=0.5, ge=0)
    retry_max_delay: float = Field(default=30.0, ge=0)
    max_retry_after: float = Field(default=60.0, ge=0)  # longest Retry-After we honour

    @field_validator("base_url")
    @classmethod
    def _one_url(cls, value: str | None) -> str | None:
        if value is not None:
            _check_url(value)
        return value


class AnnotationSettings(ChatEndpointSettings):
    base_url: str | None = None  # None (and no base_urls): no VLM; the metadata prior is the annotation
    # Several vLLM servers of the same model: one pool, balanced by load, a dead one drained
    # (annotation/pool.py). base_url, when also set, is the pool's first endpoint.
    base_urls: list[str] = Field(default_factory=list)
    endpoint_cooloff: float = Field(default=30.0, gt=0)  # seconds a drained endpoint gets no requests
    endpoint_drain_after: int = Field(default=3, ge=1)  # 5xx/timeouts in a row that drain an endpoint
    # VLM annotation as this many tasks on the flow's task runner (Dask workers), images split by
    # hash; each shard has its own endpoint pool and 1/shards of the request and spend caps.
    # 1: annotation runs in the flow process.
    shards: int = Field(default=1, ge=1, le=256)
    model: str = "Qwen/Qwen2.5-VL-72B-Instruct"
    api_key_env: EnvVarName = "VLLM_API_KEY"
    concurrency: int = Field(default=16, ge=1, le=1024)
    max_requests_per_run: int = Field(default=100_000, ge=1)
    flush_rows: int = Field(default=64, ge=1)  # results written to the lake at least this often …
    flush_seconds: float = Field(default=5.0, gt=0)  # … or this often, whichever comes first
    max_consecutive_failures: int = Field(default=50, ge=1)  # transient failures in a row that stop the run
    page_text_in_prompt: bool = False  # put the (fenced, sanitized) product title into VLM prompts
    # Product photos (VLM mode): ground first and annotate the product's own item, its box going
    # to the release's `bbox` (docs/annotation.md "Product photos"); false: whole image, one request.
    product_boxes: bool = True

    @field_validator("base_urls")
    @classmethod
    def _urls(cls, value: list[str]) -> list[str]:
        for url in value:
            _check_url(url)
        if len(set(value)) != len(value):
            raise ValueError("base_urls lists an endpoint twice")
        return value

    @property
    def endpoints(self) -> list[str]:
        """Every VLM endpoint: base_url first, then base_urls; empty means no VLM."""
        first = [self.base_url] if self.base_url else []
        return first + [u for u in self.base_urls if u not in first]


class JudgeSettings(ChatEndpointSettings):
    base_url: str | None = None  # None with no key: the audit is skipped and the manifest says so
    model: str = "gpt-5.1"
    api_key_env: EnvVarName = "OPENAI_API_KEY"
    ci_half_width: float = Field(default=0.03, gt=0, lt=0.5)
    min_accuracy: float = Field(default=0.90, ge=0, le=1)
    max_items: int = Field(default=500, ge=1)
    confidence: float = Field(default=0.95, gt=0, lt=1)  # of the Wilson intervals and the sample size
    # A main attribute the judge marks wrong: the row is held back, or the judge's right value
    # is published instead (`warehouse/labels.py`; the dataset card states which).
    on_wrong_main_attribute: Literal["hold_back", "correct"] = "hold_back"


class ReleaseSettings(Section):
    query_share: float = Field(default=0.5, gt=0, lt=1)  # share of eligible products that become queries
    max_gallery_per_item: int = Field(default=4, ge=1, le=4)
    seed: int = 0
    # The first release's window starts this many days before its as-of day (never at the
    # beginning of time: the freshness rules, docs/release.md); later ones at the previous end.
    cadence_days: int = Field(default=30, ge=1, le=366)
    # The content check (X8): a release with an empty subset split, or with fewer queries than this
    # share of the last counted release's, is not published silently. "fail" stops the run with one
    # line (the report is kept under reports/); "hold" commits it unpublished (LATEST stays, its
    # images stay eligible, the manifest's gate says why).
    min_share_of_previous: float = Field(default=0.25, ge=0, le=1)
    on_shortfall: Literal["fail", "hold"] = "fail"
    # Where an owner asks for an item's removal, printed in the dataset card and Croissant terms: an
    # e-mail address or an http(s) URL. None: the crawler's `crawl.contact_url` (`Settings.contact`).
    contact: str | None = None

    @field_validator("contact")
    @classmethod
    def _contact(cls, value: str | None) -> str | None:
        if value is None:
            return None
        value = value.strip()
        # It is rendered into Markdown, YAML front matter and JSON-LD: one plain line only.
        if not value or any(c in value for c in '\r\n\t<>`"') or any(ord(c) < 32 for c in value):
            raise ValueError("contact must be one line without <, >, backquotes or quotes")
        if not (
            value.startswith(("https://", "http://", "mailto:"))
            or re.fullmatch(r"[^@\s]+@[^@\s]+\.[^@\s]+", value)
        ):
            raise ValueError("contact must be an e-mail address or an http(s) / mailto: URL")
        return value


# The evidence checks' calibrated thresholds (`bench/evidence_thresholds.py`, docs/release.md "Label
# rules"): chosen on the calibration split of `lookbench_live.testing.evidence_calibration`.
STUDIO_MIN_FLAT_BORDER = 0.7836
BASELINE_LOOK_MIN_SIMILARITY = 0.8187


class EvidenceSettings(Section):
    """What a release row must be shown to be (issue 22 §4 phase B; docs/release.md "Label rules")."""

    # A RealStudioFlat query must be a studio or flat-lay photo: this share of its border ring
    # locally flat at least (`warehouse/photo_type.py`); a photo under it stays a gallery photo.
    studio_min_flat_border: float = Field(default=STUDIO_MIN_FLAT_BORDER, ge=0, le=1)
    # Each generated image (and composed garment crop) is asked of the annotation VLM: which
    # category does it show? Runs only when a VLM is configured (`annotation.base_url(s)`).
    generated_category_check: bool = True
    # A conditioned look is compared with its product's photos by this embedder (an
    # `evaluation.models` spec, or "baseline", the weight-free one) ...
    conditioned_embedder: str = "baseline"
    # ... and held back under this cosine. None: the baseline's calibrated value; another embedder
    # needs its own, calibrated with `bench/evidence_thresholds.py --embedder MODEL`.
    conditioned_min_similarity: float | None = Field(default=None, ge=-1, le=1)

    @model_validator(mode="after")
    def _threshold_for_embedder(self) -> EvidenceSettings:
        if self.conditioned_min_similarity is None and self.conditioned_embedder not in (
            "baseline",
            "baseline:hsv-hog-v1",
        ):
            raise ValueError(
                "evidence.conditioned_min_similarity is required with an embedder other than the baseline "
                "(calibrate it with bench/evidence_thresholds.py --embedder MODEL)"
            )
        return self

    @property
    def look_threshold(self) -> float:
        if self.conditioned_min_similarity is not None:
            return self.conditioned_min_similarity
        return BASELINE_LOOK_MIN_SIMILARITY


# A DuckDB size: a number and a unit (`2GiB`, `512MB`), handed to DuckDB as a setting, never as SQL.
_SIZE = re.compile(r"\d+(\.\d+)?\s*(B|[KMGT]i?B)", re.IGNORECASE)


class QuerySettings(Section):
    """`lookbench-live query`: a statement still running after `timeout` seconds is stopped; memory,
    spill to disk and threads are bounded (docs/release.md, "Query"). None: the defaults computed
    from the machine (a quarter of RAM, at most 4 GiB; a quarter of the free temp space, at most
    8 GiB; at most 4 threads)."""

    timeout: float = Field(default=300.0, gt=0)
    memory_limit: str | None = None
    temp_limit: str | None = None  # DuckDB's `max_temp_directory_size`
    threads: int | None = Field(default=None, ge=1, le=256)

    @field_validator("memory_limit", "temp_limit")
    @classmethod
    def _size(cls, value: str | None) -> str | None:
        if value is not None and not _SIZE.fullmatch(value.strip()):
            raise ValueError("must be a size such as '2GiB' or '512MB'")
        return value.strip() if value is not None else None


class EvaluationSettings(Section):
    models: list[str] = Field(default_factory=list)  # besides the baseline; specs: evaluation/model_spec.py
    batch_size: int = Field(default=32, ge=1)
    chunk_size: int = Field(default=65536, ge=1024)  # corpus rows per similarity chunk (bounded memory)
    trust_remote_code: bool = False  # models that ship code (InternViT's repos; a pickle-only GR-Lite folder)
    device: str = "cpu"
    report_samples: int = Field(default=4, ge=0, le=50)  # sample queries per subset in the report grids
    # Embedding the release's images per model as this many tasks on a Dask or Ray runner (images
    # split by sha256), merged into the model's embedding cache before scoring in the flow.
    # 1, or the thread runner: embedding runs in the flow process.
    shards: int = Field(default=1, ge=1, le=256)


class FlowSettings(Section):
    task_runner: Literal["thread", "dask", "ray"] = "thread"
    dask_address: str | None = None
    dask_workers: int = Field(default=2, ge=1)
    # Resources each worker of the temporary local cluster advertises, e.g. {GPU = 1} on a one-GPU
    # machine; a remote cluster's workers declare theirs (`dask worker --resources GPU=1`).
    dask_worker_resources: dict[str, float] = Field(default_factory=dict)
    schedule_cron: str = "0 3 1 * *"
    timezone: str = "UTC"
    # The environment variable holding a webhook URL (Slack, Teams, any JSON endpoint) told when a
    # run fails or crashes, or finishes with a flag (flows/notify.py). Unset: no notification.
    notify_url_env: EnvVarName | None = None


class Settings(Section):
    """The whole configuration; every section optional."""

    lake: LakeSettings = LakeSettings()
    crawl: CrawlSettings = CrawlSettings()
    ingest: IngestSettings = IngestSettings()
    dedup: DedupSettings = DedupSettings()
    generation: GenerationSettings = GenerationSettings()
    annotation: AnnotationSettings = AnnotationSettings()
    judge: JudgeSettings = JudgeSettings()
    release: ReleaseSettings = ReleaseSettings()
    evidence: EvidenceSettings = EvidenceSettings()
    query: QuerySettings = QuerySettings()
    evaluation: EvaluationSettings = EvaluationSettings()
    flows: FlowSettings = FlowSettings()

    @property
    def contact(self) -> str:
        """The takedown contact a release's card and Croissant file print (docs/takedown.md)."""
        return self.release.contact or self.crawl.contact_url


def load_settings(path: str | os.PathLike[str] | None = None) -> Settings:
    """Load and validate a TOML file; None (and no `LOOKBENCH_CONFIG`) gives the embedded defaults."""
    if path is None:
        path = os.environ.get("LOOKBENCH_CONFIG") or None
    if path is None:
        return Settings()
    file = Path(path)
    try:
        data: dict[str, Any] = tomllib.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"config file {file} does not exist") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {file} is not valid TOML: {exc}") from exc
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ConfigError(f"config file {file}: setting '{where}': {first['msg']}") from exc


def secret(env_var: str) -> str | None:
    """Read a secret from the environment at the moment of use (never stored or logged)."""
    value = os.environ.get(env_var)
    return value or None
