"""The work list of an annotation run: one `Unit` per kept image that needs annotating, with
what the lake states about what it shows (its product's prior, a look's hotspots and linked
products, a generation's requested items or composed layout)."""

from __future__ import annotations

import collections
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lookbench_live.annotation.annotator import GroundedItem
from lookbench_live.annotation.hotspots import parse_hotspots
from lookbench_live.annotation.prior import Prior, generation_priors, product_prior
from lookbench_live.schema.records import Generation, Look, Product, product_key
from lookbench_live.schema.taxonomy import Taxonomy
from lookbench_live.warehouse import views
from lookbench_live.warehouse.lake import Lake

KIND_ORDER = {"generation": 0, "look": 1, "product": 2}


@dataclass(slots=True)
class Unit:
    """One kept image and what is known about what it shows."""

    sha256: str
    kind: str
    owner_id: str
    width: int | None
    height: int | None
    multi: bool = False
    category: str | None = None  # single-item: the known category
    item_ref: str | None = None
    prior: Prior | None = None
    refs: dict[str, str | None] = field(default_factory=dict)  # multi: category -> unique item
    ref_priors: dict[str, Prior] = field(default_factory=dict)  # multi: item -> its prior
    hotspots: list[tuple[str | None, tuple[int, int, int, int]]] = field(default_factory=list)
    layout: list[GroundedItem] = field(default_factory=list)  # a composed scene: where each garment is
    title: str | None = None
    problem: tuple[str, str] | None = None  # (reason, detail) when the unit cannot be annotated


def _unique_refs(categories: dict[str, str | None]) -> dict[str, str | None]:
    """category -> the one ref of that category, or None when two refs share it."""
    by_category: dict[str, list[str]] = collections.defaultdict(list)
    for ref, category in categories.items():
        if category:
            by_category[category].append(ref)
    return {c: (refs[0] if len(refs) == 1 else None) for c, refs in by_category.items()}


def plan_units(
    lake: Lake,
    taxonomy: Taxonomy,
    *,
    lacking: tuple[str, str, str] | None = None,
    also: Iterable[str] = (),
) -> Iterator[Unit]:
    """The kept images in a stable order (owner kind, owner, position), each sha256 once.

    `lacking=(taxonomy_version, prompt_version, model)`: only the kept images that have no
    `annotations` row of these versions, plus the sha256 in `also`. The anti-join runs in
    DuckDB over the lake's Parquet (only the columns it names are scanned); only the images it
    returns, and the products, looks and generations that own or are linked by them, are read
    into Python: a month's planning holds the month's work, not the lake's history.
    """
    rows = _candidate_images(lake, lacking, sorted(set(also)))
    rows.sort(
        key=lambda r: (
            KIND_ORDER.get(r["owner_kind"], 9),
            r["owner_id"],
            r["position"] or 0,
            r["sha256"],
            r["source_url"],
        )
    )
    owners: dict[str, set[str]] = collections.defaultdict(set)
    for row in rows:
        owners[row["owner_kind"]].add(row["owner_id"])
    looks = _looks(lake, owners["look"])
    refs = {ref for look in looks.values() for ref in look.product_refs}
    products = _products(lake, owners["product"], refs)
    urls = views.url_index(products)
    generations = _generations(lake, owners["generation"])
    priors: dict[str, Prior] = {}

    def prior_of(key: str) -> Prior:
        if key not in priors:
            priors[key] = product_prior(taxonomy, products[key])
        return priors[key]

    seen: set[str] = set()
    for row in rows:
        sha = row["sha256"]
        if sha in seen:
            continue
        seen.add(sha)
        unit = Unit(sha, row["owner_kind"], row["owner_id"], row["width"], row["height"])
        if unit.kind == "product":
            product = products.get(unit.owner_id)
            if product is None:
                unit.problem = ("owner_missing", f"no products row for {unit.owner_id}")
            else:
                unit.prior = prior_of(unit.owner_id)
                unit.category, unit.item_ref, unit.title = unit.prior.category, unit.owner_id, product.title
        elif unit.kind == "look":
            look = looks.get(unit.owner_id)
            if look is None:
                unit.problem = ("owner_missing", f"no looks row for {unit.owner_id}")
            else:
                unit.multi = True
                resolved = views.resolve_refs(look.product_refs, products, urls)
                linked = [key for key in resolved.values() if key]
                unit.ref_priors = {key: prior_of(key) for key in linked}
                unit.refs = _unique_refs({key: unit.ref_priors[key].category for key in linked})
                spots, problems = parse_hotspots(look.boxes_json, unit.width, unit.height)
                unit.hotspots = [(resolved.get(ref, ref) if ref else None, box) for ref, box in spots]
                if problems:
                    unit.problem = ("hotspot_unusable", "; ".join(problems)[:1000])
        elif unit.kind == "generation":
            generation = generations.get(unit.owner_id)
            if generation is None:
                unit.problem = ("owner_missing", f"no ok generations row for {unit.owner_id}")
            else:
                items = generation_priors(taxonomy, generation)
                unit.ref_priors = {i.item_id: i.prior for i in items if i.item_id}
                street = generation.subset == "aigen_streetlook" and generation.role == "query"
                if street or len(items) > 1:
                    unit.multi = True
                    unit.refs = _unique_refs({i.item_id: i.prior.category for i in items if i.item_id})
                    unit.layout = layout_items(generation.layout_json)
                elif items:
                    unit.prior = items[0].prior
                    unit.category = items[0].prior.category
                    unit.item_ref = items[0].item_id or (
                        generation.item_ids[0] if generation.item_ids else None
                    )
                else:
                    unit.problem = (
                        "prior_no_request",
                        f"generation {unit.owner_id} states no requested item",
                    )
        else:
            unit.problem = ("owner_kind_unknown", f"owner kind {unit.kind!r}")
        yield unit


def layout_items(layout_json: str | None) -> list[GroundedItem]:
    """A composed scene's garments as grounded items (`Generation.layout_json`; generation/compose.py)."""
    if not layout_json:
        return []
    return [
        GroundedItem(str(entry["category"]), tuple(int(v) for v in entry["bbox"]), str(entry["item_id"]))  # type: ignore[arg-type]
        for entry in json.loads(layout_json)
    ]


_CANDIDATES = """
SELECT i.owner_kind, i.owner_id, i.position, i.sha256, i.width, i.height, i.source_url
FROM images AS i
WHERE i.status = 'ok' AND i.sha256 IS NOT NULL
  AND i.sha256 IN (SELECT d.sha256 FROM dedup_decisions AS d WHERE d.decision = 'kept')
"""
_LACKING = """
  AND (NOT EXISTS (
        SELECT 1 FROM annotations AS a
        WHERE a.sha256 = i.sha256 AND a.taxonomy_version = ? AND a.prompt_version = ? AND a.model = ?)
       OR i.sha256 IN (SELECT unnest(?::VARCHAR[])))
"""


def _candidate_images(
    lake: Lake, lacking: tuple[str, str, str] | None, also: list[str]
) -> list[dict[str, Any]]:
    if lacking is None:
        table = lake.sql(_CANDIDATES, ["images", "dedup_decisions"])
    else:
        table = lake.sql(
            _CANDIDATES + _LACKING, ["images", "dedup_decisions", "annotations"], [*lacking, also]
        )
    return table.to_pylist()


def _sql_text(values: Iterable[str]) -> pa.Array:
    return pa.array(sorted(values), pa.string())


def _products(lake: Lake, keys: set[str], refs: set[str]) -> dict[str, Product]:
    """The latest row of each product that owns a planned image or that a planned look's refs
    name, by key or by page URL (with or without a trailing slash), as `views.latest_products`
    and `views.url_index` over the whole table would resolve them."""
    if not keys and not refs:
        return {}
    names = keys | refs
    urls = refs | {ref.rstrip("/") for ref in refs}
    key = pc.binary_join_element_wise(pc.field("source"), pc.field("product_id"), ":")
    url = pc.field("url")
    trimmed = pc.utf8_rtrim(url, characters="/")
    where = key.isin(_sql_text(names)) | url.isin(_sql_text(urls)) | trimmed.isin(_sql_text(urls))
    found = lake.read("products", columns=["source", "product_id"], where=where)
    wanted = {
        product_key(s, p)
        for s, p in zip(*(found.column(c).to_pylist() for c in ("source", "product_id")), strict=True)
    }
    if not wanted:
        return {}
    # Every row of those products: the newest decides its content (and its URL).
    rows = lake.read("products", where=key.isin(_sql_text(wanted)))
    records = (Product.from_row(r) for r in rows.to_pylist())
    return views.latest_of(p for p in records if isinstance(p, Product))


def _looks(lake: Lake, keys: set[str]) -> dict[str, Look]:
    if not keys:
        return {}
    key = pc.binary_join_element_wise(pc.field("source"), pc.field("look_id"), ":")
    out: dict[str, Look] = {}
    for row in lake.read("looks", where=key.isin(_sql_text(keys))).to_pylist():
        look = Look.from_row(row)
        assert isinstance(look, Look)
        out[product_key(look.source, look.look_id)] = look
    return out


def _generations(lake: Lake, ids: set[str]) -> dict[str, Generation]:
    if not ids:
        return {}
    where = pc.field("generation_id").isin(_sql_text(ids)) & (pc.field("status") == "ok")
    out: dict[str, Generation] = {}
    for row in lake.read("generations", where=where).to_pylist():
        generation = Generation.from_row(row)
        assert isinstance(generation, Generation)
        out[generation.generation_id] = generation
    return out
