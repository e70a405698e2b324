"""The sample store's catalogue: products of known category and attributes (the ground truth),
which platform shape publishes each, the look pages, and the broken things it serves.

Everything derives from a fixed seed and a reference time `now`, so two stores built with the
same `now` publish byte-identical data.
"""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import dataclass, field
from typing import Any

DEFAULT_NOW = dt.datetime(2026, 1, 15, tzinfo=dt.UTC)
SEED = 20260115

# category -> (kind of garment drawn, has sleeves, has neckline)
CATEGORIES: dict[str, tuple[str, bool, bool]] = {
    "dress": ("dress", True, True),
    "t-shirt": ("top", True, True),
    "shirt": ("top", True, True),
    "sweater": ("top", True, True),
    "jacket": ("outer", True, True),
    "coat": ("outer", True, True),
    "skirt": ("skirt", False, False),
    "pants": ("trousers", False, False),
    "shorts": ("shorts", False, False),
}
COLORS: dict[str, tuple[int, int, int]] = {
    "red": (200, 30, 40),
    "blue": (40, 80, 190),
    "green": (40, 140, 70),
    "black": (25, 25, 28),
    "white": (245, 245, 240),
    "yellow": (235, 200, 40),
    "pink": (235, 140, 180),
    "gray": (130, 130, 135),
    "beige": (215, 195, 160),
    "brown": (120, 75, 40),
    "purple": (120, 60, 150),
    "orange": (235, 120, 30),
}
# Values are the taxonomy's (`schema/taxonomy.json`), so the ground truth compares directly.
PATTERNS = ("solid", "stripe", "check", "polka dot")
SLEEVES = ("sleeveless", "short sleeve", "long sleeve")
NECKLINES = ("crew neck", "v-neck")
MATERIALS = {
    "dress": ["silk", "cotton", "linen", "satin", "chiffon"],
    "t-shirt": ["cotton", "knit"],
    "shirt": ["cotton", "linen", "denim"],
    "sweater": ["wool", "cashmere", "knit"],
    "jacket": ["denim", "leather", "cotton"],
    "coat": ["wool", "tweed"],
    "skirt": ["cotton", "denim", "satin"],
    "pants": ["cotton", "wool", "linen", "denim"],
    "shorts": ["cotton", "denim", "linen"],
}
BRANDS = ["Aurelle", "North Loom", "Casa Verde", "Studio Kin", "Maison Oval"]
# How many products each platform shape publishes.
SHAPES = (("shopify", 14), ("woocommerce", 12), ("schema_org", 14), ("playwright", 6))

# Broken images the store serves (reliability.md I1–I11) and the outcome an ingester should record.
BROKEN_IMAGES: dict[str, str] = {
    "/img/broken/truncated.jpg": "truncated JPEG (I4)",
    "/img/broken/empty.jpg": "zero bytes (I4)",
    "/img/broken/page.jpg": "HTML served as image/jpeg (I5)",
    "/img/broken/bomb.png": "PNG header claiming 100000x100000 (I1)",
    "/img/broken/noai.jpg": "valid JPEG with X-Robots-Tag: noai (I11)",
    "/img/broken/wide.jpg": "4000x10 JPEG, extreme aspect ratio (I9)",
    "/img/broken/loop.jpg": "redirect loop",
    "/img/broken/slow.jpg": "slow drip: one byte a second (served, linked by no product)",
}
# Which product (shape, index) lists which broken image after its real photos.
BROKEN_LINKS: dict[tuple[str, int], list[str]] = {
    ("shopify", 1): ["/img/broken/truncated.jpg"],
    ("shopify", 2): ["/img/broken/noai.jpg"],
    ("woocommerce", 1): ["/img/broken/empty.jpg", "/img/broken/page.jpg"],
    ("schema_org", 1): ["/img/broken/bomb.png"],
    ("schema_org", 2): ["/img/broken/wide.jpg", "/img/broken/loop.jpg"],
}


@dataclass(slots=True)
class ProductSpec:
    """One product of the store and its ground truth."""

    shape: str  # shopify | woocommerce | schema_org | playwright
    index: int
    product_id: str
    slug: str
    title: str
    description: str
    brand: str
    category: str
    color: str
    pattern: str
    sleeve_length: str | None
    neckline: str | None
    material: str
    price_cents: int
    compare_cents: int | None
    sizes: list[str]
    photos: int
    published_at: dt.datetime
    updated_at: dt.datetime
    in_stock: bool = True
    broken_images: list[str] = field(default_factory=list)

    @property
    def attributes(self) -> dict[str, str]:
        out = {"color": self.color, "pattern": self.pattern, "material": self.material}
        if self.sleeve_length:
            out["sleeve_length"] = self.sleeve_length
        if self.neckline:
            out["neckline"] = self.neckline
        return out


@dataclass(slots=True)
class LookSpec:
    look_id: str
    title: str
    products: list[ProductSpec]
    published_at: dt.datetime


def _title(rng: random.Random, spec: dict[str, Any]) -> str:
    pattern = {"solid": "", "stripe": "Striped ", "check": "Checked ", "polka dot": "Polka-Dot "}[
        spec["pattern"]
    ]
    neck = {"crew neck": "Crew-Neck ", "v-neck": "V-Neck "}.get(spec["neckline"] or "", "")
    sleeve = {
        "sleeveless": "Sleeveless ",
        "short sleeve": "Short-Sleeve ",
        "long sleeve": "Long-Sleeve ",
    }.get(spec["sleeve_length"] or "", "")
    name = {"t-shirt": "T-Shirt", "pants": "Trousers"}.get(spec["category"], spec["category"].title())
    return f"{spec['color'].title()} {pattern}{sleeve}{neck}{spec['material'].title()} {name}"


def _description(spec: dict[str, Any]) -> str:
    parts = [f"A {spec['color']} {spec['category']} in {spec['pattern']} {spec['material']}."]
    if spec["sleeve_length"]:
        parts.append(
            f"{spec['sleeve_length'].capitalize()}s."
            if spec["sleeve_length"] != "sleeveless"
            else "Sleeveless."
        )
    if spec["neckline"]:
        parts.append(f"{spec['neckline'].capitalize()} neckline.")
    blend = {"wool": "80% Wool, 20% Nylon", "cotton": "100% Cotton", "knit": "60% Cotton, 40% Nylon"}
    composition = blend.get(spec["material"], "100% " + spec["material"].title())
    parts.append(f"Material & care: {composition}. Machine wash cold.")
    return " ".join(parts)


def build_catalog(now: dt.datetime = DEFAULT_NOW, revision: int = 0) -> list[ProductSpec]:
    """All products of the store, deterministic for a given `now` and `revision` (each revision
    changes the price of every fifth product: a "changed product" for the crawl)."""
    rng = random.Random(SEED)
    categories = list(CATEGORIES)
    products: list[ProductSpec] = []
    counter = 0
    for shape, count in SHAPES:
        for index in range(count):
            category = categories[counter % len(categories)]
            _, has_sleeves, _ = CATEGORIES[category]
            long_only = category in ("coat", "jacket", "sweater")
            spec: dict[str, Any] = {
                "category": category,
                "color": list(COLORS)[(counter * 7) % len(COLORS)],
                "pattern": PATTERNS[(counter // 3 + index) % len(PATTERNS)],
                "sleeve_length": ("long sleeve" if long_only else SLEEVES[counter % 3])
                if has_sleeves
                else None,
                "neckline": NECKLINES[(counter // 2) % 2]
                if category in ("dress", "t-shirt", "sweater")
                else None,
                "material": MATERIALS[category][counter % len(MATERIALS[category])],
            }
            published = now - dt.timedelta(days=1 + (counter * 7) % 59, hours=rng.randrange(24))
            updated = published + dt.timedelta(hours=rng.randrange(1, 72))
            updated = min(updated, now - dt.timedelta(minutes=5))
            price = rng.choice([1990, 2600, 3499, 4500, 5900, 7900, 12900, 18900])
            if revision and counter % 5 == 0:
                price += 100 * revision
            slug = f"{shape.replace('_', '-')}-{index:02d}-{spec['color']}-{category}"
            products.append(
                ProductSpec(
                    shape=shape,
                    index=index,
                    product_id=f"{1000 + counter}",
                    slug=slug,
                    title=_title(rng, spec),
                    description=_description(spec),
                    brand=BRANDS[counter % len(BRANDS)],
                    category=category,
                    color=spec["color"],
                    pattern=spec["pattern"],
                    sleeve_length=spec["sleeve_length"],
                    neckline=spec["neckline"],
                    material=spec["material"],
                    price_cents=price,
                    compare_cents=price + 1000 if counter % 4 == 0 else None,
                    sizes=["S", "M", "L"]
                    if category not in ("skirt", "trousers", "shorts")
                    else ["34", "36", "38"],
                    photos=2 + counter % 3,
                    published_at=published,
                    updated_at=updated,
                    in_stock=counter % 9 != 4,
                    broken_images=list(BROKEN_LINKS.get((shape, index), [])),
                )
            )
            counter += 1
    return products


def build_looks(products: list[ProductSpec], now: dt.datetime = DEFAULT_NOW) -> list[LookSpec]:
    """Five look pages, each wearing a top or dress, maybe a bottom, and maybe outerwear."""
    by_kind: dict[str, list[ProductSpec]] = {}
    for product in products:
        by_kind.setdefault(CATEGORIES[product.category][0], []).append(product)
    bottoms = by_kind["skirt"] + by_kind["trousers"] + by_kind["shorts"]
    looks = []
    for i in range(5):
        chosen = [by_kind["top"][i], bottoms[i]] if i % 2 == 0 else [by_kind["dress"][i]]
        if i % 3 != 2:
            chosen.append(by_kind["outer"][i])
        looks.append(
            LookSpec(
                look_id=f"look-{i + 1:02d}",
                title=f"Look {i + 1}: " + " + ".join(p.category for p in chosen),
                products=chosen,
                published_at=now - dt.timedelta(days=2 + 5 * i),
            )
        )
    return looks
