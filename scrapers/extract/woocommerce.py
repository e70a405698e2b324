"""WooCommerce Store API products (`/wp-json/wc/store/v1/products`, and the older unversioned
`/wp-json/wc/store/products`) as normalized products.

Prices come in minor units: "2600" with `currency_minor_unit: 2` is 26.00.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from lookbench_live.scrapers.extract.model import Extraction, NormalizedProduct, Problem, parse_datetime
from lookbench_live.scrapers.extract.values import (
    absolute_url,
    clean_text,
    clean_title,
    find_color,
    find_material,
    image_urls,
    known_brand,
    normalize_brand,
    parse_price,
    title_color,
)

COLOR_ATTRIBUTE_NAMES = frozenset({"color", "colour", "pa_color", "pa_colour", "farbe", "couleur"})
MATERIAL_ATTRIBUTE_NAMES = frozenset({"material", "pa_material", "fabric", "composition"})


def is_woocommerce_payload(data: Any) -> bool:
    items = data if isinstance(data, list) else [data]
    return bool(items) and all(
        isinstance(i, dict) and "id" in i and ("prices" in i or _is_legacy(i)) for i in items[:3]
    )


def _is_legacy(item: dict[str, Any]) -> bool:
    """A product of the authenticated `wc/v3` REST API: `price` as a decimal string, no `prices`."""
    return "permalink" in item and "regular_price" in item and "price" in item


def extract_woocommerce(data: Any, url: str) -> Extraction:
    out = Extraction(platform="woocommerce")
    if isinstance(data, dict) and ("prices" in data or _is_legacy(data)):
        items: list[Any] = [data]
    elif isinstance(data, list):
        items = data
        out.next_page = bool(items)
    else:
        out.problems.append(Problem("not_woocommerce_json", "expected a list of Store API products"))
        return out
    for item in items:
        try:
            product = woocommerce_product(item, url)
        except Exception as exc:
            out.problems.append(Problem("bad_product", f"{type(exc).__name__}: {exc}"[:300]))
            continue
        if product is None:
            out.problems.append(Problem("bad_product", "product without id or permalink"))
        else:
            out.products.append(product)
    return out


def _attribute(item: dict[str, Any], names: frozenset[str]) -> list[str]:
    for attribute in item.get("attributes") or []:
        if not isinstance(attribute, dict):
            continue
        name = str(attribute.get("taxonomy") or attribute.get("name") or "").strip().lower()
        if name in names or str(attribute.get("name", "")).strip().lower() in names:
            terms = attribute.get("terms") or attribute.get("options") or []  # v3: "options"
            names = (t.get("name") if isinstance(t, dict) else t for t in terms)
            return [t for t in (clean_title(n) for n in names) if t]
    return []


def woocommerce_product(item: dict[str, Any], url: str) -> NormalizedProduct | None:
    if not isinstance(item, dict) or item.get("id") is None:
        return None
    permalink = absolute_url(item.get("permalink"), url)
    if not permalink:
        return None
    if "prices" not in item and _is_legacy(item):
        # wc/v3 states decimal strings and no currency (never invented).
        item = {
            **item,
            "prices": {
                "price": item.get("price"),
                "regular_price": item.get("regular_price"),
                "currency_minor_unit": 0,
                "legacy": True,
            },
        }
        item.setdefault(
            "is_in_stock", item.get("stock_status") == "instock" if "stock_status" in item else None
        )
    prices = item.get("prices") or {}
    minor = prices.get("currency_minor_unit")
    minor = int(minor) if isinstance(minor, int | str) and str(minor).isdigit() else 2
    scale = None if prices.get("legacy") else minor
    price = parse_price(prices.get("price"), minor_unit=scale)
    regular = parse_price(prices.get("regular_price"), minor_unit=scale)
    price_range = prices.get("price_range") if isinstance(prices.get("price_range"), dict) else None
    price_max = price
    if price_range:
        low = parse_price(price_range.get("min_amount"), minor_unit=minor)
        high = parse_price(price_range.get("max_amount"), minor_unit=minor)
        price = low if low else price
        price_max = high if high else price_max
    if price is not None and price <= Decimal(0):
        price, price_max = None, None  # a placeholder price, not a purchasable one
    compare = regular if regular is not None and price is not None and regular > price else None
    if item.get("is_in_stock") is True and item.get("is_purchasable", True) is not False:
        availability: str | None = "InStock"
    elif item.get("is_in_stock") is False:
        availability = "OutOfStock"
    else:
        availability = None
    description = clean_text(item.get("description")) or clean_text(item.get("short_description"))
    title = clean_title(item.get("name"))
    colors = _attribute(item, COLOR_ATTRIBUTE_NAMES)
    materials = _attribute(item, MATERIAL_ATTRIBUTE_NAMES)
    categories = [
        c
        for c in (clean_title(c.get("name")) for c in item.get("categories") or [] if isinstance(c, dict))
        if c
    ]
    brand = known_brand(normalize_brand(item.get("brands"))) if item.get("brands") else None
    variants = [
        {"id": str(v.get("id")), "attributes": v.get("attributes")}
        for v in item.get("variations") or []
        if isinstance(v, dict)
    ]
    currency = prices.get("currency_code")
    return NormalizedProduct(
        product_id=str(item["id"]),
        url=permalink,
        platform="woocommerce",
        title=title,
        brand=brand,
        price=price,
        price_max=price_max if price is not None else None,
        compare_at_price=compare,
        currency=currency.upper() if isinstance(currency, str) and len(currency) == 3 else None,
        availability=availability,
        category_path=categories,
        color=colors[0] if colors else (find_color(description) or title_color(title)),
        material=materials[0] if materials else find_material(description),
        description=description,
        tags=[
            t
            for t in (clean_title(t.get("name")) for t in item.get("tags") or [] if isinstance(t, dict))
            if t
        ],
        images=image_urls([i.get("src") for i in item.get("images") or [] if isinstance(i, dict)], url),
        variants=variants,
        published_at=parse_datetime(item.get("date_created_gmt") or item.get("date_created")),
        updated_at=parse_datetime(item.get("date_modified_gmt") or item.get("date_modified")),
        raw=item,
    )
