"""The sample store's catalogue: products of known category and attributes (the ground truth),
which platform shape publishes each, the look pages, and the broken things it serves.

The store lives on a fixed timeline, so its catalogue is a pure function of its clock:

- the *core*: 46 evergreen products (the broken links and odd pages hang off these), published
  in the 59 days before `CORE_ANCHOR`, never removed, a ninth of them on sale each month;
- *weekly drops* from `EPOCH` on: `products_per_week` new products every Monday, in every
  platform shape when there are at least four; each is listed for `LISTED_WEEKS` weeks, and
  some change price, get new photos, sell out or are removed early (see `ARRIVAL_EVENTS`);
- some drops reuse an older product's photo as a new product's last photo, re-encoded,
  resized, mirrored or cropped by 1% (near copies dedup must catch across releases);
- *looks*: `looks_per_month` "shop the look" pages every month, each wearing new arrivals
  and one older product; the index lists the looks of the last `LOOKS_LISTED_DAYS` days.

Two stores built with the same clock and size publish byte-identical data.
"""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import dataclass, field
from typing import Any

SEED = 20260115
CORE_ANCHOR = dt.datetime(2026, 1, 15, tzinfo=dt.UTC)  # the core's dates lie just before it
EPOCH = dt.datetime(2026, 1, 19, 9, tzinfo=dt.UTC)  # the first weekly drop (a Monday, 09:00 UTC)
DEFAULT_NOW = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)  # the default clock: the first monthly refresh
DEFAULT_PRODUCTS_PER_WEEK = 4
LISTED_WEEKS = 8  # a drop's products leave the listings (404) this long after their arrival
LOOKS_LISTED_DAYS = 62
CORE_LOOKS_DAYS = 40  # the five core looks are listed this long after CORE_ANCHOR
# Weekly drops cycle through the shapes so every week brings each (with >= 4 products a week).
DROP_SHAPES = ("shopify", "woocommerce", "schema_org", "playwright", "shopify", "schema_org", "woocommerce")
NEAR_COPY_TRANSFORMS = ("reencode", "resize", "mirror", "crop")

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
    arrival: int | None = None  # index of a weekly-drop product (None: core)
    photo_round: int = 0  # > 0: the product's photos were replaced (new URLs, new pictures)
    near_copy: tuple[str, int, str] | None = None  # its last photo: (older product id, view, transform)
    removed_at: dt.datetime | None = None  # when it leaves the listings

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


def build_catalog(now: dt.datetime = CORE_ANCHOR, revision: int = 0) -> list[ProductSpec]:
    """The core products, deterministic for a given anchor `now` and `revision` (each revision
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


# --------------------------------------------------------------------------- the living store

# What happens to a weekly-drop product after it arrives (deterministic by arrival index n):
# (days after arrival, rule on n, event). Every event moves `updated_at`, as a real shop does.
# The draw is hashed per (event, n), so events do not follow the weekly shape rotation.
ARRIVAL_EVENTS = (
    (10, 1 / 3, "price"),  # marked down
    (17, 1 / 4, "photos"),  # new photos (new URLs and pictures)
    (21, 1 / 5, "sold_out"),  # stays listed, out of stock
)


def _happens(event: str, n: int, share: float) -> bool:
    return random.Random(f"{SEED}:{event}:{n}").random() < share


EARLY_REMOVAL_DAYS = 12  # one in seven: taken down early (a monthly crawl may never see it)


def _spec_values(counter: int, index: int) -> dict[str, Any]:
    categories = list(CATEGORIES)
    category = categories[counter % len(categories)]
    _, has_sleeves, _ = CATEGORIES[category]
    long_only = category in ("coat", "jacket", "sweater")
    return {
        "category": category,
        "color": list(COLORS)[(counter * 7) % len(COLORS)],
        "pattern": PATTERNS[(counter // 3 + index) % len(PATTERNS)],
        "sleeve_length": ("long sleeve" if long_only else SLEEVES[counter % 3]) if has_sleeves else None,
        "neckline": NECKLINES[(counter // 2) % 2] if category in ("dress", "t-shirt", "sweater") else None,
        "material": MATERIALS[category][counter % len(MATERIALS[category])],
    }


def apply_sales(core: list[ProductSpec], clock: dt.datetime) -> None:
    """The monthly sale on the core (in place): from the 1st at 08:00 UTC, one core product in
    nine is 20% off for the month; it and last month's sale items state the change in `updated_at`."""
    start = dt.datetime(clock.year, clock.month, 1, 8, tzinfo=dt.UTC)
    if clock < start:
        start = (start - dt.timedelta(days=1)).replace(day=1)
    if start <= CORE_ANCHOR:
        return
    month = start.year * 12 + start.month
    for product in core:
        counter = int(product.product_id) - 1000
        on_sale = (counter + month) % 9 == 0
        if on_sale:
            product.price_cents = product.price_cents * 8 // 10
        if on_sale or (counter + month - 1) % 9 == 0:
            product.updated_at = max(product.updated_at, start)


def drop_time(week: int) -> dt.datetime:
    return EPOCH + dt.timedelta(weeks=week)


def arrival(
    n: int, per_week: int, clock: dt.datetime, core: list[ProductSpec], revision: int = 0
) -> ProductSpec:
    """Weekly-drop product number `n` as the store shows it at `clock` (it must have arrived)."""
    week, slot = divmod(n, per_week)
    rng = random.Random(f"{SEED}:arrival:{n}")
    counter = len(core) + n
    index = 100 + n  # past the core's special indexes (gift-wrap variant, peso page, …)
    shape = DROP_SHAPES[slot % len(DROP_SHAPES)]
    spec = _spec_values(counter, index)
    published = drop_time(week) + dt.timedelta(minutes=slot * 37 + rng.randrange(30))
    updated = published + dt.timedelta(hours=rng.randrange(1, 48))
    price = rng.choice([1990, 2600, 3499, 4500, 5900, 7900, 12900, 18900])
    if revision and n % 5 == 0:  # product ids ending in 0 or 5, as in the core
        price += 100 * revision
    in_stock, photo_round = True, 0
    for days, share, event in ARRIVAL_EVENTS:
        moment = published + dt.timedelta(days=days)
        if _happens(event, n, share) and moment <= clock:
            updated = max(updated, moment)
            if event == "price":
                price = price * 7 // 10
            elif event == "photos":
                photo_round = 1
            else:
                in_stock = False
    updated = min(updated, max(published, clock - dt.timedelta(minutes=5)))
    early = _happens("removed", n, 1 / 7)
    removed = published + dt.timedelta(days=EARLY_REMOVAL_DAYS if early else 7 * LISTED_WEEKS)
    near_copy = None
    if n % 9 == 5:
        # A "new" product whose last photo is an older product's first photo, altered: from a
        # drop at least five weeks earlier (an earlier monthly release), else a core product.
        older = n - 5 * per_week
        # One a monthly crawl has seen: not taken down early, not itself a copy.
        while older >= 0 and (_happens("removed", older, 1 / 7) or older % 9 == 5):
            older -= 1
        older_id = f"{2000 + older}" if older >= 0 else core[n % len(core)].product_id
        near_copy = (older_id, 0, NEAR_COPY_TRANSFORMS[(n // 9) % len(NEAR_COPY_TRANSFORMS)])
    slug = f"{shape.replace('_', '-')}-w{week:03d}-{slot:02d}-{spec['color']}-{spec['category']}"
    return ProductSpec(
        shape=shape,
        index=index,
        product_id=f"{2000 + n}",
        slug=slug,
        title=_title(rng, spec),
        description=_description(spec),
        brand=BRANDS[counter % len(BRANDS)],
        category=spec["category"],
        color=spec["color"],
        pattern=spec["pattern"],
        sleeve_length=spec["sleeve_length"],
        neckline=spec["neckline"],
        material=spec["material"],
        price_cents=price,
        compare_cents=price + 1000 if counter % 4 == 0 else None,
        sizes=["S", "M", "L"] if spec["category"] not in ("skirt", "pants", "shorts") else ["34", "36", "38"],
        photos=3 if near_copy else 2 + n % 3,
        published_at=published,
        updated_at=updated,
        in_stock=in_stock,
        arrival=n,
        photo_round=photo_round,
        near_copy=near_copy,
        removed_at=removed,
    )


def arrivals_until(clock: dt.datetime, per_week: int) -> int:
    """How many weekly-drop products have been published by `clock`."""
    if per_week <= 0 or clock < EPOCH:
        return 0
    weeks = int((clock - EPOCH) / dt.timedelta(weeks=1))
    count = weeks * per_week
    # The current week's drop: products whose publication time has passed.
    for slot in range(per_week):
        if arrival_time(weeks * per_week + slot, per_week) <= clock:
            count += 1
    return count


def arrival_time(n: int, per_week: int) -> dt.datetime:
    week, slot = divmod(n, per_week)
    rng = random.Random(f"{SEED}:arrival:{n}")
    return drop_time(week) + dt.timedelta(minutes=slot * 37 + rng.randrange(30))


def first_arrival_listed(clock: dt.datetime, per_week: int) -> int:
    """The lowest arrival index that may still be listed at `clock` (older drops are gone)."""
    weeks = int((clock - EPOCH) / dt.timedelta(weeks=1)) - LISTED_WEEKS - 1
    return max(0, weeks * per_week)


def monthly_looks(
    clock: dt.datetime, per_month: int, history: dict[str, ProductSpec], core: list[ProductSpec],
) -> list[LookSpec]:  # fmt: skip
    """The monthly looks published in the `LOOKS_LISTED_DAYS` before `clock`, oldest first.

    Look k of a month is published on day 9 + 14k/per_month at 10:00 and wears one or two
    products that arrived since the 1st of its month and one older product (a core product
    or a drop at least five weeks old), all still listed three weeks later."""
    looks: list[LookSpec] = []
    start = clock - dt.timedelta(days=LOOKS_LISTED_DAYS)
    year, month = start.year, start.month
    # Looks of a month share a handful of publication days: their candidate pools are built
    # once per day, not once per look (a 700x store has 5,600 looks over 50,000 products).
    pools: dict[dt.datetime, _Pools] = {}
    while dt.datetime(year, month, 1, tzinfo=dt.UTC) <= clock:
        for k in range(per_month):
            moment = dt.datetime(year, month, 9 + (14 * k) // per_month, 10, tzinfo=dt.UTC)
            if start <= moment <= clock and moment >= EPOCH:
                if moment not in pools:
                    pools[moment] = _Pools(moment, history, core)
                look = _look_at(f"look-{year}-{month:02d}-{k + 1:02d}", moment, k, pools[moment])
                if look is not None:
                    looks.append(look)
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    return looks


class _Pools:
    """What a look published at `moment` may wear, in history order: `recent` (arrived this
    month) and `older` (drops at least five weeks old, then the core), each filtered by kinds
    on first use."""

    def __init__(self, moment: dt.datetime, history: dict[str, ProductSpec], core: list[ProductSpec]):
        live = [
            p
            for p in history.values()
            if p.arrival is not None
            and p.published_at <= moment
            # still listed three weeks later: the next monthly crawl finds the products a look links
            and (p.removed_at is None or p.removed_at > moment + dt.timedelta(days=21))
            and p.near_copy is None
        ]
        # New: arrived this month, after a crawl on the 1st could have seen it, so a look and its
        # new products are first seen together (an older product is only what it links besides).
        month_start = moment.replace(day=1, hour=0)
        self.lists = {
            "recent": [p for p in live if p.published_at > month_start],
            "older": [p for p in live if p.published_at <= moment - dt.timedelta(days=35)] + core,
        }
        self._by_kinds: dict[tuple[str, tuple[str, ...]], tuple[list[ProductSpec], dict[int, int]]] = {}

    def of(self, which: str, kinds: tuple[str, ...]) -> tuple[list[ProductSpec], dict[int, int]]:
        """The pool's products of `kinds`, and each one's position (by identity)."""
        key = (which, kinds)
        if key not in self._by_kinds:
            chosen = [p for p in self.lists[which] if _kind_of(p) in kinds]
            self._by_kinds[key] = (chosen, {id(p): i for i, p in enumerate(chosen)})
        return self._by_kinds[key]


def _kind_of(p: ProductSpec) -> str:
    return CATEGORIES[p.category][0]


def _look_at(look_id: str, moment: dt.datetime, k: int, pools: _Pools) -> LookSpec | None:
    rng = random.Random(f"{SEED}:{look_id}")
    kind_of = _kind_of

    def pick(which: str, kinds: tuple[str, ...], taken: list[ProductSpec]) -> ProductSpec | None:
        # The same draw as choosing from [p for p in pool if kind_of(p) in kinds and p not in
        # taken]: the index skips the (at most three) taken products' positions.
        options, position = pools.of(which, kinds)
        skipped = sorted(position[id(p)] for p in taken if id(p) in position)
        count = len(options) - len(skipped)
        if count <= 0:
            return None
        index = rng.randrange(count)
        for pos in skipped:
            if pos <= index:
                index += 1
        return options[index]

    bottoms = ("skirt", "trousers", "shorts")
    plans = [
        [("recent", ("top",)), ("recent", bottoms), ("older", ("outer",))],
        [("recent", ("dress",)), ("older", ("outer",))],
        [("older", ("top",)), ("recent", bottoms), ("recent", ("outer",))],
        [("older", ("dress",)), ("recent", ("outer",))],
    ]

    def fill(plan: list[tuple[str, tuple[str, ...]]], strict: bool) -> list[ProductSpec] | None:
        chosen: list[ProductSpec] = []
        for which, kinds in plan:
            if kinds == ("outer",) and any(kind_of(p) == "outer" for p in chosen):
                continue  # one coat per look
            found = pick(which, kinds, chosen)
            if found is None and not strict:
                found = pick("older", kinds, chosen)
            if found is None:
                return None
            chosen.append(found)
        return chosen

    # The look's own plan if this month's arrivals can fill its new slots, else the next that
    # can (so every look wears something new), else its own with older stand-ins.
    order = [plans[(k + i) % len(plans)] for i in range(len(plans))]
    chosen = next((c for c in (fill(plan, True) for plan in order) if c), None) or fill(order[0], False)
    if not chosen:
        return None
    return LookSpec(
        look_id=look_id,
        title=f"{moment:%B %Y} look {k + 1}: " + " + ".join(p.category for p in chosen),
        products=chosen,
        published_at=moment,
    )
