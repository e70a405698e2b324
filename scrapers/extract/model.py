"""The one normalized product and look, whatever the platform, and their lake records."""

from __future__ import annotations

import copy
import datetime as dt
import hashlib
import json
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from lookbench_live.schema.moments import parse_moment
from lookbench_live.scrapers.extract.values import decimal_text

if TYPE_CHECKING:
    from lookbench_live.schema.records import Look, Product


def dumps(payload: Any) -> str:
    """Canonical JSON, the same text as `schema.records.dumps` (a test holds them equal): the
    records module imports pyarrow (about 0.3 s), which `extract` and the hash never use."""
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


# Fields that identify the content of a product; timestamps and the raw payload are left out,
# so a product that only got a new `updated_at` is not a change.
HASHED_FIELDS = (
    "product_id", "url", "title", "brand", "price", "price_max", "compare_at_price", "currency",
    "availability", "category_path", "color", "material", "description", "tags", "images", "variants",
)  # fmt: skip


@dataclass(slots=True)
class NormalizedProduct:
    """One product as §1 of the issue defines it; prices are Decimals, images absolute."""

    product_id: str
    url: str
    platform: str
    title: str | None = None
    brand: str | None = None
    price: Decimal | None = None
    price_max: Decimal | None = None
    compare_at_price: Decimal | None = None
    currency: str | None = None
    availability: str | None = None
    category_path: list[str] = field(default_factory=list)
    color: str | None = None
    material: str | None = None
    description: str | None = None
    tags: list[str] = field(default_factory=list)
    images: list[str] = field(default_factory=list)
    variants: list[dict[str, Any]] = field(default_factory=list)
    published_at: dt.datetime | None = None
    updated_at: dt.datetime | None = None
    raw: Any = None
    # Keys this product had under earlier identifier rules (issue 27: offers' sku, blank skus).
    # Not content: the pipeline keeps the lake's key when it holds the product under one.
    id_aliases: list[str] = field(default_factory=list)
    # Where each extracted fact came from ("jsonld", "microdata", "opengraph", "html:h1"…).
    sources: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """JSON-safe dict: decimals as strings, datetimes ISO 8601, `raw` kept as is (the same
        object, not a copy: `dataclasses.asdict` deep-copied the page's whole JSON-LD for every
        item, the crawl's largest per-item cost). Lists are copied, so editing them is safe."""
        out: dict[str, Any] = {key: getattr(self, key) for key in self.__slots__}
        for key in ("price", "price_max", "compare_at_price"):
            out[key] = decimal_text(out[key])
        for key in ("published_at", "updated_at"):
            out[key] = out[key].isoformat() if out[key] else None
        for key in ("category_path", "tags", "images", "id_aliases"):
            out[key] = list(out[key])
        out["sources"] = dict(self.sources)
        out["variants"] = copy.deepcopy(self.variants)
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> NormalizedProduct:
        values = dict(data)
        for key in ("price", "price_max", "compare_at_price"):
            values[key] = Decimal(values[key]) if values.get(key) is not None else None
        for key in ("published_at", "updated_at"):
            values[key] = dt.datetime.fromisoformat(values[key]) if values.get(key) else None
        return cls(**{k: v for k, v in values.items() if k in cls.__slots__})

    def content_hash(self) -> str:
        """sha256 of the canonical normalized content (no timestamps, no raw payload)."""
        data = self.to_json()
        canonical = {key: data[key] for key in HASHED_FIELDS}
        return hashlib.sha256(dumps(canonical).encode()).hexdigest()

    def to_record(self, source: str, first_seen_at: dt.datetime) -> Product:
        from lookbench_live.schema.records import Product

        data = self.to_json()
        raw = self.raw
        return Product(
            product_id=self.product_id,
            source=source,
            platform=self.platform,
            url=self.url,
            title=self.title,
            brand=self.brand,
            price=data["price"],
            price_max=data["price_max"],
            compare_at_price=data["compare_at_price"],
            currency=self.currency,
            availability=self.availability,
            category_path=list(self.category_path),
            color=self.color,
            material=self.material,
            description=self.description,
            tags=list(self.tags),
            images=list(self.images),
            variants_json=dumps(self.variants) if self.variants else None,
            published_at=self.published_at,
            updated_at=self.updated_at,
            first_seen_at=first_seen_at,
            content_hash=self.content_hash(),
            raw_json=raw if isinstance(raw, str) else (dumps(raw) if raw is not None else None),
        )

    def cli_json(self) -> str:
        """The `extract` command's JSON line (the §1 fields, raw payload included)."""
        data = self.to_json()
        data["variants"] = self.variants
        return json.dumps(data, ensure_ascii=False, sort_keys=False, default=str)


@dataclass(slots=True)
class LookData:
    """An editorial / "shop the look" photo and the products it links to."""

    look_id: str
    url: str
    photo_url: str
    title: str | None = None
    product_refs: list[str] = field(default_factory=list)
    boxes: list[dict[str, Any]] = field(default_factory=list)
    published_at: dt.datetime | None = None

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["published_at"] = self.published_at.isoformat() if self.published_at else None
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LookData:
        values = dict(data)
        values["published_at"] = (
            dt.datetime.fromisoformat(values["published_at"]) if values.get("published_at") else None
        )
        return cls(**{k: v for k, v in values.items() if k in cls.__slots__})

    def to_record(self, source: str, first_seen_at: dt.datetime) -> Look:
        from lookbench_live.schema.records import Look

        return Look(
            look_id=self.look_id,
            source=source,
            url=self.url,
            photo_url=self.photo_url,
            title=self.title,
            product_refs=list(self.product_refs),
            boxes_json=dumps(self.boxes) if self.boxes else None,
            published_at=self.published_at,
            first_seen_at=first_seen_at,
        )


@dataclass(slots=True)
class Problem:
    """Something an extractor skipped, with a machine-readable reason (becomes a `Rejection`)."""

    reason: str
    detail: str = ""


@dataclass(slots=True)
class Extraction:
    """What one page or API response gave: products, looks, and counted problems."""

    products: list[NormalizedProduct] = field(default_factory=list)
    looks: list[LookData] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    platform: str | None = None
    next_page: bool = False  # a JSON listing that was non-empty (paginate on)


def parse_datetime(value: Any) -> dt.datetime | None:
    """ISO 8601 / schema.org dates as aware UTC datetimes (naive values are taken as UTC)."""
    if not value or not isinstance(value, str):
        return None
    text = value.strip()
    try:
        parsed = parse_moment(text)
    except ValueError:
        try:  # a page's date with trailing text ("2026-05-01 at noon"): its day
            parsed = parse_moment(dt.date.fromisoformat(text[:10]))
        except ValueError:
            return None
    return parsed.astimezone(dt.UTC) if parsed is not None else None
