"""Shopify's public product JSON (`/products.json`, `/collections/<h>/products.json`,
`/products/<handle>.json`) as normalized products.

Shopify states neither the currency nor the store domain in this JSON: `currency` stays
None (never invented) and URLs are built from the URL the JSON was fetched from.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

from lookbench_live.scrapers.extract.model import Extraction, NormalizedProduct, Problem, parse_datetime
from lookbench_live.scrapers.extract.values import (
    clean_text,
    clean_title,
    color_from_url,
    find_color,
    find_material,
    image_urls,
    known_brand,
    parse_price,
    title_color,
)

COLOR_OPTION_NAMES = frozenset({"color", "colour", "farbe", "couleur", "colore", "kleur", "färg"})


def is_shopify_product_js(data: Any) -> bool:
    """A bare `/products/<handle>.js` product: prices in cents, images as strings."""
    return (
        isinstance(data, dict)
        and "handle" in data
        and isinstance(data.get("variants"), list)
        and ("price" in data or "featured_image" in data)
    )


def is_shopify_payload(data: Any) -> bool:
    if is_shopify_product_js(data):
        return True
    if isinstance(data, dict) and isinstance(data.get("product_listings"), list):
        return all(isinstance(p, dict) and "handle" in p for p in data["product_listings"][:3])
    if isinstance(data, dict):
        if isinstance(data.get("products"), list):
            return all(
                isinstance(p, dict) and "handle" in p and "variants" in p for p in data["products"][:3]
            )
        product = data.get("product")
        return isinstance(product, dict) and "handle" in product and "variants" in product
    return False


def store_root(url: str) -> str:
    """The shop's root URL for building product URLs: everything before `/products.json`,
    `/collections/…` or `/products/…` (a store can live under a path prefix)."""
    parts = urlsplit(url)
    path = parts.path
    for marker in ("/collections/", "/products.json", "/products/"):
        if marker in path:
            path = path[: path.index(marker)]
            break
    else:
        path = path.rsplit("/", 1)[0] if path.endswith(".json") else path.rstrip("/")
    return f"{parts.scheme}://{parts.netloc}{path.rstrip('/')}"


def extract_shopify(data: Any, url: str) -> Extraction:
    """Products of one Shopify JSON response; `next_page` is True when the page was non-empty."""
    out = Extraction(platform="shopify")
    if is_shopify_product_js(data):
        items: list[Any] = [_from_product_js(data)]
    elif isinstance(data, dict) and isinstance(data.get("product"), dict):
        items = [data["product"]]
    elif isinstance(data, dict) and isinstance(data.get("product_listings"), list):
        items = [_from_listing(p) for p in data["product_listings"]]
        out.next_page = bool(items)
    elif isinstance(data, dict) and isinstance(data.get("products"), list):
        items = data["products"]
        out.next_page = bool(items)
    else:
        out.problems.append(Problem("not_shopify_json", "no 'products' list or 'product' object"))
        return out
    root = store_root(url)
    for item in items:
        try:
            product = shopify_product(item, root, url)
        except Exception as exc:  # one odd product never loses the page
            out.problems.append(Problem("bad_product", f"{type(exc).__name__}: {exc}"[:300]))
            continue
        if product is None:
            out.problems.append(Problem("bad_product", "product without id or handle"))
        else:
            out.products.append(product)
    return out


def shopify_product(item: dict[str, Any], root: str, page_url: str | None = None) -> NormalizedProduct | None:
    if not isinstance(item, dict) or item.get("id") is None or not item.get("handle"):
        return None
    options = [o if isinstance(o, dict) else {"name": o} for o in item.get("options") or []]
    color_index = next(
        (i for i, o in enumerate(options) if str(o.get("name", "")).strip().lower() in COLOR_OPTION_NAMES),
        None,
    )
    variants: list[dict[str, Any]] = []
    for raw in item.get("variants") or []:
        if not isinstance(raw, dict):
            continue
        price = parse_price(raw.get("price"))
        compare = parse_price(raw.get("compare_at_price"))
        option_values = [raw.get(f"option{i}") for i in (1, 2, 3) if raw.get(f"option{i}") is not None]
        variants.append(
            {
                "id": str(raw.get("id")) if raw.get("id") is not None else None,
                "title": clean_title(raw.get("title")),
                "sku": raw.get("sku") or None,
                "price": str(price) if price is not None else None,
                "compare_at_price": str(compare) if compare is not None else None,
                "available": raw.get("available"),
                "options": option_values,
                "color": clean_title(option_values[color_index])
                if color_index is not None and color_index < len(option_values)
                else None,
                "image_id": raw.get("featured_image", {}).get("id")
                if isinstance(raw.get("featured_image"), dict)
                else raw.get("image_id"),
            }
        )
    # Placeholder variants priced 0 are not purchasable prices.
    priced = [v for v in variants if v["price"] is not None and Decimal(v["price"]) > 0]
    buyable = [v for v in priced if v.get("available") is not False]
    selected = _shown_variant(variants, page_url)
    shown = selected or (buyable or priced or [None])[0]
    pool = buyable or priced
    prices = [Decimal(v["price"]) for v in pool]
    price = Decimal(shown["price"]) if shown and shown.get("price") and Decimal(shown["price"]) > 0 else None
    if price is None and prices:
        price = min(prices)
    price_max = max(prices) if prices else None
    compare = Decimal(shown["compare_at_price"]) if shown and shown.get("compare_at_price") else None
    if compare is not None and (price is None or compare <= price):
        compare = None  # a list price equal to the price is not a sale
    if any(v.get("available") is True for v in variants):
        availability: str | None = "InStock"
    elif variants and all(v.get("available") is False for v in variants):
        availability = "OutOfStock"
    elif variants and all(v.get("available") is None for v in variants):
        # The Admin API's products.json states stock, not `available`: a variant with stock on
        # hand, or sold when out of stock (`inventory_policy` "continue"), can be bought.
        stock = [r for r in item.get("variants") or [] if isinstance(r, dict)]
        counted = [r for r in stock if isinstance(r.get("inventory_quantity"), int)]
        if any(r["inventory_quantity"] > 0 or r.get("inventory_policy") == "continue" for r in counted):
            availability = "InStock"
        elif (
            counted
            and len(counted) == len(stock)
            and all(r.get("inventory_policy") == "deny" for r in counted)
        ):
            availability = "OutOfStock"
        else:
            availability = None
    else:
        availability = None
    images_raw = sorted(
        (i for i in item.get("images") or [] if isinstance(i, dict)), key=lambda i: i.get("position") or 0
    )
    images = image_urls([i.get("src") for i in images_raw], root + "/")
    if selected and selected.get("image_id") is not None:
        # A variant the URL selects shows its own photo first; otherwise the product's main
        # image (position 1) stays first, as the storefront shows it.
        for image in images_raw:
            if image.get("id") == selected["image_id"]:
                first = image_urls(image.get("src"), root + "/")
                images = first + [u for u in images if u not in first]
                break
    description = clean_text(item.get("body_html"))
    title = clean_title(item.get("title"))
    tags = item.get("tags") or []
    if isinstance(tags, str):
        tags = [t.strip() for t in tags.split(",")]
    # Only a colour the product states: its Color/Farbe/Couleur option, the URL's selection,
    # a "Color:" field in the description, or the title (never a word of marketing prose).
    color = (
        (shown or {}).get("color")
        or next((v["color"] for v in (buyable or priced or variants) if v.get("color")), None)
        or color_from_url(page_url)
        or find_color(description)
        or title_color(title)
    )
    product_type = clean_title(item.get("product_type"))
    return NormalizedProduct(
        product_id=str(item["id"]),
        url=f"{root}/products/{item['handle']}",
        platform="shopify",
        title=title,
        brand=known_brand(clean_title(item.get("vendor"))),
        price=price,
        price_max=price_max,
        compare_at_price=compare,
        currency=_presentment_currency(item),
        availability=availability,
        category_path=[product_type] if product_type else [],
        color=color,
        material=find_material(description),
        description=description,
        tags=[t for t in (clean_title(t) for t in tags) if t],
        images=images,
        variants=variants,
        published_at=parse_datetime(item.get("published_at")) or parse_datetime(item.get("created_at")),
        updated_at=parse_datetime(item.get("updated_at")),
        raw=item,
    )


def _shown_variant(variants: list[dict[str, Any]], page_url: str | None) -> dict[str, Any] | None:
    if not page_url or "variant=" not in page_url:
        return None
    from urllib.parse import parse_qs

    wanted = parse_qs(urlsplit(page_url).query).get("variant", [None])[0]
    return next((v for v in variants if v["id"] == wanted), None)


def _from_product_js(data: dict[str, Any]) -> dict[str, Any]:
    """A `/products/<handle>.js` product in the shape of `/products.json` (cents to units,
    image strings to objects, `type` and `description` renamed)."""
    item = dict(data)
    item.setdefault("body_html", data.get("description"))
    item.setdefault("product_type", data.get("type"))
    variants = []
    for raw in data.get("variants") or []:
        if not isinstance(raw, dict):
            continue
        variant = dict(raw)
        for key in ("price", "compare_at_price"):
            if isinstance(raw.get(key), int):
                variant[key] = str(parse_price(raw[key], minor_unit=2))
        variants.append(variant)
    item["variants"] = variants
    images = [data.get("featured_image"), *(data.get("images") or [])]
    seen: list[str] = []
    for image in images:
        src = image.get("src") if isinstance(image, dict) else image
        if isinstance(src, str) and src not in seen:
            seen.append(src)
    item["images"] = [{"src": src, "position": i} for i, src in enumerate(seen, 1)]
    return item


def _from_listing(listing: Any) -> Any:
    """A Product Listings API item (`product_id`, per-variant `option_values`) in the shape
    of `/products.json`."""
    if not isinstance(listing, dict):
        return listing
    item = dict(listing)
    item.setdefault("id", listing.get("product_id"))
    names = [o.get("name") for o in listing.get("options") or [] if isinstance(o, dict)]
    variants = []
    for raw in listing.get("variants") or []:
        if not isinstance(raw, dict):
            continue
        variant = dict(raw)
        values = {
            v.get("name"): v.get("value") for v in raw.get("option_values") or [] if isinstance(v, dict)
        }
        for i, name in enumerate(names[:3], 1):
            variant.setdefault(f"option{i}", values.get(name))
        variants.append(variant)
    item["variants"] = variants
    return item


def _presentment_currency(item: dict[str, Any]) -> str | None:
    """The currency the Admin API states in `presentment_prices` when every variant states one
    and the same; the storefront JSON states none, and none is invented."""
    found = set()
    for variant in item.get("variants") or []:
        prices = variant.get("presentment_prices") if isinstance(variant, dict) else None
        if not isinstance(prices, list) or not prices:
            return None
        price = prices[0].get("price") if isinstance(prices[0], dict) else None
        code = price.get("currency_code") if isinstance(price, dict) else None
        if not isinstance(code, str) or len(code.strip()) != 3:
            return None
        found.add(code.strip().upper())
    return found.pop() if len(found) == 1 else None
