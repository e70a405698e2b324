"""One typed record per lake table, and the Arrow schema derived from it.

A record class names its table (`__table__`) and its key (`__key__`): the lake
refuses to store two rows with the same key, which is what makes every stage's
writes idempotent. The Arrow schema is derived from the annotations, so a table
is defined exactly once.

Conventions:
- timestamps are timezone-aware UTC (`timestamp[us, tz=UTC]` in Arrow);
- `dict[str, str]` fields are stored as `list<struct<key, value>>` (Hugging Face
  `datasets` cannot load Arrow maps);
- free-form payloads (raw API responses, request parameters) are JSON text.
"""

from __future__ import annotations

import datetime as dt
import json
import types
import typing
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar, Literal

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, field_validator


def utcnow() -> dt.datetime:
    """The current time, UTC, truncated to microseconds (Arrow's unit)."""
    return dt.datetime.now(dt.UTC)


KV_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.string())]))


class Record(BaseModel):
    """A row of a lake table."""

    model_config = ConfigDict(extra="forbid", validate_assignment=False)

    __table__: ClassVar[str]
    __key__: ClassVar[tuple[str, ...]]

    created_at: dt.datetime = Field(default_factory=utcnow)

    @field_validator("*", mode="after")
    @classmethod
    def _utc(cls, value: Any) -> Any:
        # Naive datetimes are refused rather than guessed: a wrong zone shifts
        # `first_seen_at` windows silently.
        if isinstance(value, dt.datetime):
            if value.tzinfo is None:
                raise ValueError("datetime must be timezone-aware (UTC)")
            return value.astimezone(dt.UTC)
        return value

    def key(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__key__)

    @classmethod
    def arrow_schema(cls) -> pa.Schema:
        return arrow_schema_of(cls)

    def to_row(self) -> dict[str, Any]:
        """The row as Arrow wants it (dicts become key/value lists)."""
        row: dict[str, Any] = {}
        for name in type(self).model_fields:
            value = getattr(self, name)
            if isinstance(value, dict):
                value = [{"key": k, "value": v} for k, v in value.items()]
            row[name] = value
        return row

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Record:
        """Inverse of `to_row` for rows read back from Arrow."""
        values = dict(row)
        for name, field in cls.model_fields.items():
            if _is_str_dict(field.annotation) and isinstance(values.get(name), list):
                values[name] = {kv["key"]: kv["value"] for kv in values[name]}
        return cls(**{k: v for k, v in values.items() if k in cls.model_fields})


def _is_str_dict(annotation: Any) -> bool:
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return any(_is_str_dict(a) for a in args)
    return typing.get_origin(annotation) is dict


def _arrow_type(annotation: Any) -> tuple[pa.DataType, bool]:
    """Arrow type of a field annotation, and whether it is nullable."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        if len(inner) != 1:
            raise TypeError(f"unsupported union {annotation!r}")
        return _arrow_type(inner[0])[0], True
    if origin is Literal:
        return pa.string(), False
    if origin in (list, tuple, Sequence):
        return pa.list_(_arrow_type(args[0])[0]), False
    if origin is dict:
        return KV_TYPE, False
    simple = {
        str: pa.string(),
        int: pa.int64(),
        float: pa.float64(),
        bool: pa.bool_(),
        bytes: pa.binary(),
        dt.datetime: pa.timestamp("us", tz="UTC"),
        dt.date: pa.date32(),
    }
    if annotation in simple:
        return simple[annotation], False
    raise TypeError(f"unsupported field type {annotation!r}")


_SCHEMAS: dict[type, pa.Schema] = {}


def arrow_schema_of(cls: type[Record]) -> pa.Schema:
    if cls not in _SCHEMAS:
        fields = []
        hints = typing.get_type_hints(cls)
        # created_at is declared on the base class but reads best as the last column.
        names = [n for n in cls.model_fields if n != "created_at"] + ["created_at"]
        for name in names:
            arrow_type, nullable = _arrow_type(hints[name])
            fields.append(pa.field(name, arrow_type, nullable=nullable))
        _SCHEMAS[cls] = pa.schema(fields, metadata={b"table": cls.__table__.encode()})
    return _SCHEMAS[cls]


def to_arrow(records: Iterable[Record], cls: type[Record]) -> pa.Table:
    rows = [r.to_row() for r in records]
    return pa.Table.from_pylist(rows, schema=arrow_schema_of(cls))


def dumps(payload: Any) -> str:
    """Canonical JSON text for payload columns (sorted keys, no spaces)."""
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def product_key(source: str, product_id: str) -> str:
    """The identity of a product across the lake; it becomes the release's `item_ID`."""
    return f"{source}:{product_id}"


def bbox_text(bbox: Sequence[int] | None) -> str:
    """Crop boxes as key text: "" for the whole image, else "x0,y0,x1,y1" in pixels."""
    return "" if bbox is None else ",".join(str(int(v)) for v in bbox)


# --------------------------------------------------------------------------- tables


class Product(Record):
    """A product as a retailer published it; a changed product is a new row (new content_hash)."""

    __table__ = "products"
    __key__ = ("source", "product_id", "content_hash")

    product_id: str
    source: str  # the configured site name
    platform: str  # shopify | woocommerce | schema_org | playwright
    url: str
    title: str | None = None
    brand: str | None = None
    price: str | None = None  # decimal text, lowest purchasable price
    price_max: str | None = None
    compare_at_price: str | None = None
    currency: str | None = None  # ISO 4217 or null, never invented
    availability: str | None = None  # InStock | OutOfStock | null
    category_path: list[str] = Field(default_factory=list)
    color: str | None = None
    material: str | None = None
    description: str | None = None
    tags: list[str] = Field(default_factory=list)
    images: list[str] = Field(default_factory=list)
    variants_json: str | None = None
    published_at: dt.datetime | None = None
    updated_at: dt.datetime | None = None
    first_seen_at: dt.datetime
    content_hash: str
    raw_json: str | None = None


class Look(Record):
    """An editorial or "shop the look" photo and the products it shows."""

    __table__ = "looks"
    __key__ = ("source", "look_id")

    look_id: str
    source: str
    url: str
    photo_url: str
    title: str | None = None
    product_refs: list[str] = Field(default_factory=list)  # product keys (source:product_id) or URLs
    boxes_json: str | None = None  # hotspots: [{"ref": …, "bbox": [x0,y0,x1,y1] | "point": [x,y]}] as stated
    published_at: dt.datetime | None = None
    first_seen_at: dt.datetime


class ImageRecord(Record):
    """One outcome per (owner, image URL): stored with its hashes, or rejected with a reason."""

    __table__ = "images"
    __key__ = ("owner_kind", "owner_id", "source_url")

    source_url: str
    owner_kind: Literal["product", "look", "generation"]
    owner_id: str  # product key, source:look_id, or generation_id
    source: str
    position: int = 0  # order on the page
    status: Literal["ok", "rejected"]
    rejection_reason: str | None = None
    detail: str | None = None
    sha256: str | None = None
    width: int | None = None
    height: int | None = None
    format: str | None = None
    byte_size: int | None = None
    phash: str | None = None  # 16 lowercase hex digits
    phash_mirror: str | None = None
    dhash: str | None = None
    hash_method: str | None = None
    fetched_at: dt.datetime
    first_seen_at: dt.datetime
    published_at: dt.datetime | None = None
    final_url: str | None = None  # after redirects, when it differs from source_url
    run_id: str | None = None  # the ingestion run that wrote the row


class Generation(Record):
    """A synthesized image and everything needed to make it again."""

    __table__ = "generations"
    __key__ = ("generation_id",)

    generation_id: str  # sha256 of the canonical request
    subset: Literal["aigen_studio", "aigen_streetlook"]
    role: Literal["query", "gallery"]
    item_ids: list[str]  # the item_IDs shown, in prompt order
    model: str
    model_is_tiny_local: bool = False
    pipeline_class: str
    prompt: str
    negative_prompt: str
    template_version: str
    seed: int
    steps: int
    guidance: float
    width: int
    height: int
    scheduler: str
    device: str
    dtype: str
    requested_attributes_json: str  # [{"item_id", "category", "attributes": {group: value}}]
    conditioned_on: str | None = None  # product key of a conditioned AIGen-Studio query (one product)
    conditioned_on_sha256: str | None = None
    strength: float | None = None  # img2img only
    # Every conditioning photo, in prompt order: [{"product_key", "sha256"}] (None: unconditioned,
    # or an img2img row written before this column, whose conditioned_on* say it all).
    conditioning_json: str | None = None
    ip_adapter: str | None = None  # the IP-Adapter's id ("<repo or folder>:<subfolder>/<weight>")
    ip_adapter_scale: float | None = None
    # A composed street scene (generation/compose.py): where each garment was pasted,
    # [{"item_id", "category", "bbox": [x0,y0,x1,y1], "sha256" (the garment image)}]; None otherwise.
    layout_json: str | None = None
    status: Literal["ok", "failed"]
    error: str | None = None
    sha256: str | None = None
    first_seen_at: dt.datetime
    run_id: str | None = None
    batch_id: str | None = None  # sha256 of the batch's generation_ids: bit-identity holds per batch
    batch_position: int | None = None
    seconds: float | None = None  # wall time of the batch, divided by its size
    cpu_threads: int | None = None  # torch threads when device is cpu (CPU results depend on it)

    def conditioning(self) -> list[dict[str, Any]]:
        """Every conditioning photo, [{"product_key", "sha256"}] in prompt order. Rows written before
        `conditioning_json` existed (img2img only) name their one product in `conditioned_on*`."""
        if self.conditioning_json:
            return list(json.loads(self.conditioning_json))
        if self.conditioned_on:
            return [{"product_key": self.conditioned_on, "sha256": self.conditioned_on_sha256}]
        return []


class DedupDecision(Record):
    """Kept, or dropped with the reason, the image it matched and the Hamming distance."""

    __table__ = "dedup_decisions"
    __key__ = ("sha256",)

    sha256: str
    hash_method: str
    decision: Literal["kept", "dropped"]
    reason: str | None = None  # exact | near_in_run | near_earlier_release | known_dataset | opt_out
    matched_sha256: str | None = None
    matched_ref: str | None = None  # e.g. the known-dataset path or the earlier release
    distance: int | None = None
    run_id: str
    # The owner the image belongs to in a release; every other owner of the same bytes is an
    # exact duplicate ("kind:id" in `duplicate_owners`) and must not publish it.
    canonical_owner_kind: str | None = None
    canonical_owner_id: str | None = None
    duplicate_owners: list[str] = Field(default_factory=list)
    dhash_distance: int | None = None  # tie-breaker between matches at the same pHash distance
    similarity: float | None = None  # cosine, when the embedding stage made the decision


# What located a published box (docs/release.md, "Boxes"), and the reason an item that nothing
# located is held back instead of given a guessed box.
BoxSource = Literal["hotspot", "vlm", "layout", "product_photo"]
BOX_NOT_LOCATED = "box_not_located"


class Annotation(Record):
    """A category and attribute values for an image or a crop, or a failure with the raw text."""

    __table__ = "annotations"
    __key__ = ("sha256", "bbox", "task", "taxonomy_version", "prompt_version", "model")

    sha256: str
    bbox: str  # "" = whole image, else "x0,y0,x1,y1" pixels (see bbox_text)
    task: Literal["attributes", "grounding"]
    taxonomy_version: str
    prompt_version: str
    model: str  # served model name, or "metadata-prior"
    source: Literal["vlm", "metadata_prior"]
    status: Literal["ok", "failed"]
    category: str | None = None
    main_attribute: str | None = None
    attributes: dict[str, str] = Field(default_factory=dict)
    items_json: str | None = None  # grounding: [{"category", "bbox": [x0,y0,x1,y1], "ref": item key | null}]
    item_ref: str | None = None  # a crop's item: the product key or aigen item id it shows, when known
    # What located `bbox` (docs/release.md, "Boxes"): a look page's hotspot, the VLM's grounding,
    # a composed scene's layout, or a product photo's own item; None for a whole image.
    bbox_source: BoxSource | None = None
    prior_agreement: dict[str, str] = Field(default_factory=dict)  # group -> agree | disagree | prior_missing
    error: str | None = None
    raw_response: str | None = None
    latency_ms: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    attempts: int = 1
    error_detail: str | None = (
        None  # human-readable detail of `error` (which stays a machine-readable reason)
    )
    run_id: str | None = None


class Audit(Record):
    """A judge model's verdict on one annotation, per attribute group."""

    __table__ = "audits"
    # `attempt` lets a failed judgement be retried by a later run (X5): the retry is a new row,
    # the row with the highest attempt is the item's current outcome.
    __key__ = ("sha256", "bbox", "taxonomy_version", "annotation_model", "judge_model", "attempt")

    sha256: str
    bbox: str
    taxonomy_version: str
    annotation_model: str
    judge_model: str
    subset: str
    category: str
    verdicts: dict[str, str] = Field(default_factory=dict)  # group -> correct | wrong | cannot_tell
    corrections: dict[str, str] = Field(
        default_factory=dict
    )  # group -> the right value, when wrong ("red|white": sorted)
    status: Literal["ok", "failed"]
    error: str | None = None
    raw_response: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    run_id: str | None = None
    attempt: int = 0


# Reason codes of the evidence checks (issue 22 §4 phase B; docs/release.md, "Label rules"): a
# generated image that does not show the requested category, a conditioned look that does not show
# its product, a RealStudioFlat candidate query that is not a studio or flat-lay photo.
GENERATED_CATEGORY_MISMATCH = "generated_category_mismatch"
GENERATED_CATEGORY_UNCHECKED = "generated_category_unchecked"
CONDITIONED_LOOK_MISMATCH = "conditioned_look_mismatch"
NOT_STUDIO_PHOTO = "not_studio_photo"


class EvidenceCheck(Record):
    """One check that an image (or a crop of it) shows what its row will claim.

    `check`: `generated_category` (the VLM names the category a generated image or garment crop
    shows; `expected` is the requested category, `answer` the VLM's), `conditioned_look` (the
    embedding cosine of a conditioned look against its product's photos; `expected` the product
    key, `score` the best cosine, `threshold` the one in force). `method` names what decided
    (`vlm:<model>:<prompt version>`, `<embedder>@<threshold>`), so a new model or threshold checks
    again; the newest row per (sha256, bbox, check) is the image's outcome. `status="error"` (an
    invalid answer, a request that failed) is checked again by the next run.
    """

    __table__ = "evidence_checks"
    __key__ = ("sha256", "bbox", "check", "method", "attempt")

    sha256: str
    bbox: str  # "" = whole image, else "x0,y0,x1,y1" (the release row's box)
    check: Literal["generated_category", "conditioned_look"]
    method: str
    status: Literal["pass", "fail", "error"]
    generation_id: str | None = None
    expected: str | None = None
    answer: str | None = None
    score: float | None = None
    threshold: float | None = None
    detail: str | None = None
    run_id: str | None = None
    attempt: int = 0  # an `error` is checked again by a later run, as attempt + 1


def evidence_outcomes(records: Iterable[Record]) -> dict[tuple[str, str, str], EvidenceCheck]:
    """The current outcome per (sha256, bbox, check): the newest row (then the highest attempt)."""
    best: dict[tuple[str, str, str], EvidenceCheck] = {}
    for record in records:
        assert isinstance(record, EvidenceCheck)
        key = (record.sha256, record.bbox, record.check)
        if key not in best or (record.created_at, record.attempt) > (best[key].created_at, best[key].attempt):
            best[key] = record
    return best


def evidence_todo(
    records: Iterable[Record], check: str, method: str
) -> tuple[set[tuple[str, str]], dict[tuple[str, str], int]]:
    """For one check and method: the (sha256, bbox) already decided (pass or fail), and the next
    attempt number of those whose last row was an error."""
    decided: set[tuple[str, str]] = set()
    retry: dict[tuple[str, str], int] = {}
    for record in records:
        assert isinstance(record, EvidenceCheck)
        if record.check != check or record.method != method:
            continue
        key = (record.sha256, record.bbox)
        if record.status == "error":
            retry[key] = max(retry.get(key, 0), record.attempt + 1)
        else:
            decided.add(key)
    return decided, {k: v for k, v in retry.items() if k not in decided}


class Evaluation(Record):
    """One model's scores on one subset of one release."""

    __table__ = "evaluations"
    __key__ = ("release", "model", "subset", "after")

    release: str
    model: str
    subset: str  # a subset name, or "overall"
    after: str  # "" or the ISO date of --after
    queries: int
    corpus: int
    metrics: dict[str, str] = Field(default_factory=dict)  # metric name -> value (percent, as text)


class Rejection(Record):
    """Anything a stage dropped that has no table of its own, with a machine-readable reason."""

    __table__ = "rejections"
    __key__ = ("stage", "item", "reason")

    stage: str  # crawl | extract | ingest | generate | annotate | release | …
    item: str  # URL or key of what was dropped
    reason: str
    detail: str | None = None
    source: str | None = None
    run_id: str | None = None


class Completion(Record):
    """A completion marker: this stage finished this shard for this run key (datatrove-style)."""

    __table__ = "completions"
    __key__ = ("run_key", "stage", "shard")

    run_key: str
    stage: str
    shard: str
    rows: int = 0
    detail: str | None = None


class Takedown(Record):
    """An item its owner asked to remove: kept out of every later release and every export.

    `kind` says what `value` holds: a page or image URL (normalized), a source (site) name, the
    sha256 of image bytes, or a 64-bit pHash (16 hex digits; `phash_mirror` is its mirror, and
    `radius` the Hamming distance within which an image counts as the same).
    """

    __table__ = "takedowns"
    __key__ = ("kind", "value")

    kind: Literal["url", "source", "sha256", "phash"]
    value: str
    phash_mirror: str | None = None
    radius: int | None = None
    reason: str | None = None  # the owner's request, a ticket id...
    requested_by: str | None = None


class SiteBaseline(Record):
    """A site's baseline: its first crawl (freshness rules, warehouse/freshness.py). Undated
    items present then are never released as new; `origin` is `first_crawl`, or `upgrade` for
    a lake written before the rules (the baseline derived from the earliest `first_seen_at`)."""

    __table__ = "site_baselines"
    __key__ = ("source",)

    source: str
    baseline_at: dt.datetime
    run_key: str | None = None
    origin: Literal["first_crawl", "upgrade"] = "first_crawl"
    rules: str = ""


TABLES: dict[str, type[Record]] = {
    cls.__table__: cls
    for cls in (
        Product,
        Look,
        ImageRecord,
        Generation,
        DedupDecision,
        Annotation,
        Audit,
        EvidenceCheck,
        Evaluation,
        Rejection,
        Completion,
        Takedown,
        SiteBaseline,
    )
}
# Compliance tables fail closed (X10): a fragment of one that cannot be read stops every step
# that reads the table (`warehouse.lake.FragmentError`), where other tables skip and report it.
# Takedowns are the one such table: the opt-outs are settings (`dedup.opt_out_*`), and a page's
# or image's opt-out is a rejection or dedup decision whose loss drops the image, never
# releases it.
COMPLIANCE_TABLES: frozenset[str] = frozenset({Takedown.__table__})
