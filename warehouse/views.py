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

    def expression(self, column: str = "first_seen_at") -> pads.Expression | None:
        """The window as a dataset filter on `column` (None when unbounded); a null never matches."""
        parts = []
        if self.start is not None:
            parts.append(pc.field(column) >= pa.scalar(self.start, pa.timestamp("us", tz="UTC")))
        if self.end is not None:
            parts.append(pc.field(column) < pa.scalar(self.end, pa.timestamp("us", tz="UTC")))
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
    """The read model. With a bounded `window`, a month's release reads the month, not the lake's
    history (`_window_view`); without one, every table is read whole."""
    if window is not None and window.expression() is not None:
        return _window_view(lake, window)
    products = latest_products(lake)
    looks = looks_by_key(lake)
    look_products, unresolved = _link(looks, products)
    return LakeView(
        products=products,
        looks=looks,
        generations=generations_by_id(lake),
        owner_images=ok_images(lake),
        kept=kept_images(lake),
        annotations=annotations_of(lake),
        look_products=look_products,
        unresolved_refs=unresolved,
    )


def _link(
    looks: dict[str, Look], products: dict[str, Product]
) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Each look's linked product keys, and the refs of each look that name no product."""
    urls = url_index(products)
    look_products: dict[str, list[str]] = {}
    unresolved: dict[str, list[str]] = {}
    for key, look in looks.items():
        resolved = resolve_refs(look.product_refs, products, urls)
        look_products[key] = sorted({k for k in resolved.values() if k})
        missing = [ref for ref, k in resolved.items() if k is None]
        if missing:
            unresolved[key] = missing
    return look_products, unresolved


def _text(values: Iterable[str]) -> pa.Array:
    return pa.array(sorted(set(values)), pa.string())


def _key_of(id_column: str) -> pc.Expression:
    """`source:<id>` (`product_key`) as a dataset expression, so a key filter reaches the scan."""
    return pc.binary_join_element_wise(pc.field("source"), pc.field(id_column), ":")


def _dated_in(window: Window) -> pads.Expression:
    """Rows first seen, or published by their platform, in the window: the only ones freshness
    (`warehouse/freshness.py`) can call new in it, or count as held back in it."""
    first_seen, published = window.expression(), window.expression("published_at")
    assert first_seen is not None and published is not None
    return first_seen | published


def products_named(lake: Lake, keys: Iterable[str], refs: Iterable[str] = ()) -> dict[str, Product]:
    """The latest row of the products with these keys and of those `refs` name by key or by page
    URL (with or without a trailing slash): exactly the products `url_index` and `resolve_refs`
    over the whole table would pick for these refs, since every product whose URL matches a ref
    is read (`url_index` keeps the smallest key of each URL)."""
    refs = set(refs)
    names = set(keys) | refs
    if not names:
        return {}
    urls = refs | {ref.rstrip("/") for ref in refs}
    url = pc.field("url")
    where = _key_of("product_id").isin(_text(names))
    if urls:
        where = where | url.isin(_text(urls)) | pc.utf8_rtrim(url, characters="/").isin(_text(urls))
    found = lake.read("products", columns=["source", "product_id"], where=where)
    wanted = {
        product_key(s, p)
        for s, p in zip(*(found.column(c).to_pylist() for c in ("source", "product_id")), strict=True)
    }
    return _latest(lake, wanted)


def _latest(lake: Lake, keys: set[str]) -> dict[str, Product]:
    """The latest row of each of these products: every row of each is read, the newest decides
    its content (and its URL)."""
    if not keys:
        return {}
    rows = lake.read("products", where=_key_of("product_id").isin(_text(keys)))
    records = (TABLES["products"].from_row(r) for r in rows.to_pylist())
    return latest_of(p for p in records if isinstance(p, Product))


_LINKING_LOOKS = """
SELECT source, look_id FROM looks
WHERE list_has_any(list_transform(product_refs, lambda r: rtrim(r, '/')), ?::VARCHAR[])
"""
_CONDITIONED_GENERATIONS = """
SELECT generation_id FROM generations
WHERE coalesce(conditioned_on IN (SELECT unnest(?::VARCHAR[])), false)
   OR coalesce(list_has_any(
        json_extract_string(nullif(conditioning_json, ''), '$[*].product_key'), ?::VARCHAR[]), false)
"""


def _window_view(lake: Lake, window: Window) -> LakeView:
    """The read model of one window, from the window's rows and what they name, never the whole
    history, with the same release as the whole read model (`lake_view` without a window) gives:

    - images first seen in the window, and their decisions and annotations;
    - candidate products: those any row of which was first seen or published in the window
      (no other product can be new in it, nor be held back in it), read with all their rows;
    - looks dated in the window, and older looks whose refs may name a candidate (by key or URL,
      trailing slashes aside): a look of any age keeps a candidate out of queries and noise;
    - generations first seen in the window, and older ones conditioned on a candidate (they
      reserve it too);
    - the products these looks' refs, the window's annotations (`item_ref`) and these
      generations (`item_ids`) name, so a ref resolves, and a gallery is looked up, as before.
    A product, look or generation read here that is not dated in the window gives no row and
    records nothing (its freshness decision is "first seen outside the window")."""
    owner_images = ok_images(lake, window)
    among = {row["sha256"] for rows in owner_images.values() for row in rows}
    annotations = annotations_of(lake, among)
    found = lake.read("products", columns=["source", "product_id"], where=_dated_in(window))
    candidates = _latest(
        lake,
        {
            product_key(s, p)
            for s, p in zip(*(found.column(c).to_pylist() for c in ("source", "product_id")), strict=True)
        },
    )
    linking: set[str] = set()
    conditioned: set[str] = set()
    if candidates:
        names = {key.rstrip("/") for key in candidates}
        names |= {p.url.rstrip("/") for p in candidates.values() if p.url}
        rows = lake.sql(_LINKING_LOOKS, ["looks"], [sorted(names)]).to_pylist()
        linking = {product_key(r["source"], r["look_id"]) for r in rows}
        keys = sorted(candidates)
        rows = lake.sql(_CONDITIONED_GENERATIONS, ["generations"], [keys, keys]).to_pylist()
        conditioned = {r["generation_id"] for r in rows}
    looks: dict[str, Look] = {}
    where = _dated_in(window)
    if linking:
        where = where | _key_of("look_id").isin(_text(linking))
    for row in lake.read("looks", where=where).to_pylist():
        look = TABLES["looks"].from_row(row)
        assert isinstance(look, Look)
        looks[product_key(look.source, look.look_id)] = look
    generations: dict[str, Generation] = {}
    first_seen = window.expression()
    assert first_seen is not None
    if conditioned:
        first_seen = first_seen | pc.field("generation_id").isin(_text(conditioned))
    for row in lake.read("generations", where=first_seen).to_pylist():
        gen = TABLES["generations"].from_row(row)
        assert isinstance(gen, Generation)
        generations[gen.generation_id] = gen
    named = {ann.item_ref for ann in annotations.values() if ann.item_ref}
    named |= {item for gen in generations.values() for item in gen.item_ids}
    refs = {ref for look in looks.values() for ref in look.product_refs}
    products = {**products_named(lake, named - set(candidates), refs), **candidates}
    look_products, unresolved = _link(looks, products)
    return LakeView(
        products=products,
        looks=looks,
        generations=generations,
        owner_images=owner_images,
        kept=kept_images(lake, among),
        annotations=annotations,
        look_products=look_products,
        unresolved_refs=unresolved,
    )
