"""The lake read model: products ⋈ images ⋈ dedup decisions ⋈ annotations, in one place.

Every stage that needs "which images of which owner are usable, with which labels" reads it
from here (the release assembler, annotation's unit planner, generation's conditioning
products); nobody joins the tables by hand. Two rules live here and nowhere else:
- a product's current content is its newest row (`latest_products`);
- a look's `product_refs` are stated either as product keys (`source:product_id`) or as the
  product page URLs the crawler found; both resolve to product keys (`resolve_refs`), so a
  look's linked products are known by key whatever the page gave.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

from lookbench_live.schema.records import TABLES, Annotation, Generation, Look, Product, product_key
from lookbench_live.warehouse.lake import Lake

IMAGE_COLUMNS = (
    "owner_kind",
    "owner_id",
    "source",
    "source_url",
    "position",
    "status",
    "sha256",
    "width",
    "height",
    "format",
    "phash",
    "phash_mirror",
    "dhash",
    "hash_method",
    "first_seen_at",
    "published_at",
)


@dataclass(frozen=True, slots=True)
class Window:
    """Items whose `first_seen_at` lies in [start, end) — closed start, open end."""

    start: dt.datetime | None = None
    end: dt.datetime | None = None

    def contains(self, moment: dt.datetime) -> bool:
        return (self.start is None or moment >= self.start) and (self.end is None or moment < self.end)

    def as_json(self) -> dict[str, str | None]:
        return {
            "start": self.start.isoformat() if self.start else None,
            "end": self.end.isoformat() if self.end else None,
            "rule": "start <= first_seen_at < end",
        }

    def expression(self) -> pads.Expression | None:
        """The window as a dataset filter on `first_seen_at` (None when unbounded)."""
        parts = []
        if self.start is not None:
            parts.append(pc.field("first_seen_at") >= pa.scalar(self.start, pa.timestamp("us", tz="UTC")))
        if self.end is not None:
            parts.append(pc.field("first_seen_at") < pa.scalar(self.end, pa.timestamp("us", tz="UTC")))
        if not parts:
            return None
        return parts[0] & parts[1] if len(parts) == 2 else parts[0]


def _read(lake: Lake, table: str, columns: list[str] | None, where: pads.Expression | None) -> pa.Table:
    """A table's rows matching `where`; fragments whose statistics exclude it are skipped."""
    return lake.read(table, columns=columns, where=where)


def latest_products(lake: Lake) -> dict[str, Product]:
    """The current row of every product, by product key.

    A changed product is a new row (new `content_hash`) carrying the product's original
    `first_seen_at`; the newest row is its current content. Ties break on the content hash,
    so the choice is the same on every machine.
    """
    return latest_of(lake.records("products"))  # type: ignore[arg-type]


def latest_of(records: Iterable[Product]) -> dict[str, Product]:
    """The newest row of each product among `records`, by product key (see `latest_products`)."""
    latest: dict[str, Product] = {}
    for record in records:
        assert isinstance(record, Product)
        key = product_key(record.source, record.product_id)
        current = latest.get(key)
        if current is None or (record.created_at, record.content_hash) > (
            current.created_at,
            current.content_hash,
        ):
            latest[key] = record
    return latest


def url_index(products: dict[str, Product]) -> dict[str, str]:
    """Product page URL -> product key (with and without a trailing slash)."""
    index: dict[str, str] = {}
    for key in sorted(products):
        url = products[key].url
        if url:
            index.setdefault(url, key)
            index.setdefault(url.rstrip("/"), key)
    return index


def resolve_refs(
    refs: Iterable[str], products: dict[str, Product], urls: dict[str, str]
) -> dict[str, str | None]:
    """Each stated ref -> the product key it names, or None when the lake has no such product."""
    out: dict[str, str | None] = {}
    for ref in refs:
        if ref in products:
            out[ref] = ref
        else:
            out[ref] = urls.get(ref) or urls.get(ref.rstrip("/"))
    return out


def choose_annotations(annotations: Iterable[Annotation]) -> dict[tuple[str, str], Annotation]:
    """One attributes annotation per (image, crop): VLM over prior, then the newest."""
    chosen: dict[tuple[str, str], Annotation] = {}
    for ann in annotations:
        if ann.task != "attributes" or ann.status != "ok" or not ann.category:
            continue
        key = (ann.sha256, ann.bbox)
        rank = (ann.source == "vlm", ann.created_at, ann.taxonomy_version, ann.prompt_version, ann.model)
        current = chosen.get(key)
        if current is None or rank > (
            current.source == "vlm",
            current.created_at,
            current.taxonomy_version,
            current.prompt_version,
            current.model,
        ):
            chosen[key] = ann
    return chosen


@dataclass(slots=True)
class LakeView:
    """The joined lake, already filtered to usable rows."""

    products: dict[str, Product]  # product key -> latest row
    looks: dict[str, Look]  # source:look_id -> row
    generations: dict[str, Generation]
    owner_images: dict[tuple[str, str], list[dict[str, Any]]]  # (kind, owner) -> ok image rows by position
    kept: dict[str, tuple[str, str] | None]  # sha256 -> canonical (owner_kind, owner_id), None if unstated
    annotations: dict[tuple[str, str], Annotation]  # (sha256, bbox) -> chosen attributes annotation
    released: set[str] = field(default_factory=set)  # sha256 published by an earlier (gate-passed) release
    look_products: dict[str, list[str]] = field(default_factory=dict)  # look key -> linked product keys
    unresolved_refs: dict[str, list[str]] = field(default_factory=dict)  # look key -> refs naming no product

    def linked_products(self) -> set[str]:
        """Every product any look links to (by key): kept out of studio queries and noise."""
        return {key for keys in self.look_products.values() for key in keys}


def ok_images(lake: Lake, window: Window | None = None) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """`ok` image rows with bytes, by (owner kind, owner), in page order; `window`: first seen in it."""
    owner_images: dict[tuple[str, str], list[dict[str, Any]]] = {}
    where = window.expression() if window is not None else None
    rows = _read(lake, "images", list(IMAGE_COLUMNS), where).to_pylist()
    for row in sorted(
        rows, key=lambda r: (r["owner_kind"], r["owner_id"], r["position"] or 0, r["source_url"])
    ):
        if row["status"] == "ok" and row["sha256"]:
            owner_images.setdefault((row["owner_kind"], row["owner_id"]), []).append(row)
    return owner_images


def _among(shas: set[str] | None) -> pads.Expression | None:
    return None if shas is None else pc.field("sha256").isin(pa.array(sorted(shas), pa.string()))


def kept_images(lake: Lake, among: set[str] | None = None) -> dict[str, tuple[str, str] | None]:
    """sha256 of every image dedup kept -> its canonical owner (None if the decision names none).

    `among`: only these sha256 (the window's images).
    """
    kept: dict[str, tuple[str, str] | None] = {}
    columns = ["sha256", "decision", "canonical_owner_kind", "canonical_owner_id"]
    for row in _read(lake, "dedup_decisions", columns, _among(among)).to_pylist():
        if row["decision"] == "kept":
            owner = row["canonical_owner_kind"], row["canonical_owner_id"]
            kept[row["sha256"]] = owner if all(owner) else None
    return kept


def looks_by_key(lake: Lake) -> dict[str, Look]:
    looks: dict[str, Look] = {}
    for look in lake.records("looks"):
        assert isinstance(look, Look)
        looks[product_key(look.source, look.look_id)] = look
    return looks


def generations_by_id(lake: Lake, *, ok_only: bool = False) -> dict[str, Generation]:
    generations: dict[str, Generation] = {}
    for gen in lake.records("generations"):
        assert isinstance(gen, Generation)
        if not ok_only or gen.status == "ok":
            generations[gen.generation_id] = gen
    return generations


def annotations_of(lake: Lake, among: set[str] | None = None) -> dict[tuple[str, str], Annotation]:
    """The chosen attributes annotation per (sha256, bbox), of the images `among` (None: all)."""
    cls = TABLES["annotations"]
    rows = _read(lake, "annotations", None, _among(among)).to_pylist()
    return choose_annotations(a for a in (cls.from_row(r) for r in rows) if isinstance(a, Annotation))


def lake_view(lake: Lake, *, window: Window | None = None) -> LakeView:
    """The read model. With `window`, only images first seen in it (and their decisions and
    annotations) are read: a month's release reads the month, not the lake's whole history.
    Products, looks and generations are read whole (a look may link an older product)."""
    products = latest_products(lake)
    looks = looks_by_key(lake)
    urls = url_index(products)
    look_products: dict[str, list[str]] = {}
    unresolved: dict[str, list[str]] = {}
    for key, look in looks.items():
        resolved = resolve_refs(look.product_refs, products, urls)
        look_products[key] = sorted({k for k in resolved.values() if k})
        missing = [ref for ref, k in resolved.items() if k is None]
        if missing:
            unresolved[key] = missing
    owner_images = ok_images(lake, window)
    among = {row["sha256"] for rows in owner_images.values() for row in rows} if window is not None else None
    return LakeView(
        products=products,
        looks=looks,
        generations=generations_by_id(lake),
        owner_images=owner_images,
        kept=kept_images(lake, among),
        annotations=annotations_of(lake, among),
        look_products=look_products,
        unresolved_refs=unresolved,
    )
