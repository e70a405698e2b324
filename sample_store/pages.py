"""What the sample store publishes for each product, in each platform's shape.

Pure functions of the catalogue and the store's base URL: JSON for the Shopify and
WooCommerce APIs, HTML with JSON-LD / microdata / OpenGraph for schema.org pages, a page
built by JavaScript, look pages with hotspots, sitemaps and robots.txt.
"""

from __future__ import annotations

import base64
import html
import json
from decimal import Decimal
from typing import Any

from lookbench_live.sample_store.catalog import LookSpec, ProductSpec

SHOP_PATHS = {"shopify": "/shopify", "woocommerce": "/woo", "schema_org": "/schema", "playwright": "/js"}


def product_path(p: ProductSpec) -> str:
    return {
        "shopify": f"/shopify/products/{p.slug}",
        "woocommerce": f"/woo/product/{p.slug}/",
        "schema_org": f"/schema/p/{p.slug}",
        "playwright": f"/js/p/{p.slug}",
    }[p.shape]


def image_paths(p: ProductSpec) -> list[str]:
    """Photo URLs (paths); replaced photos get new names, as shops' CDNs do."""
    prefix = f"r{p.photo_round}-" if p.photo_round else ""
    return [f"/img/p/{p.product_id}/{prefix}{n}.jpg" for n in range(p.photos)] + list(p.broken_images)


def expected_price(p: ProductSpec) -> Decimal:
    """The price the page states, as extraction should read it (the COP page states pesos)."""
    if p.shape == "schema_org" and p.index == 5:
        return Decimal(p.price_cents)
    return Decimal(p.price_cents).scaleb(-2)


def _money(cents: int) -> str:
    return f"{cents // 100}.{cents % 100:02d}"


def _iso(value: Any) -> str:
    return value.isoformat().replace("+00:00", "Z")


# --------------------------------------------------------------------------- Shopify


def shopify_product(p: ProductSpec, base: str) -> dict[str, Any]:
    images = [
        {
            "id": int(p.product_id) * 10 + n,
            "position": n + 1,
            "src": f"{base}{path}",
            "width": 320,
            "height": 400,
        }
        for n, path in enumerate(image_paths(p))
    ]
    variants = [
        {
            "id": int(p.product_id) * 100 + i,
            "title": f"{p.color.title()} / {size}",
            "option1": p.color.title(),
            "option2": size,
            "option3": None,
            "sku": f"{p.slug}-{size}".upper(),
            "price": _money(p.price_cents),
            "compare_at_price": _money(p.compare_cents) if p.compare_cents else None,
            "available": p.in_stock and i != 2,
            "featured_image": None,
        }
        for i, size in enumerate(p.sizes)
    ]
    if p.index == 3:
        # A placeholder variant priced 0 (gift wrap option shops add); not a purchasable price.
        variants.append(
            {
                "id": int(p.product_id) * 100 + 9,
                "title": "Gift wrap",
                "option1": p.color.title(),
                "option2": "Gift",
                "option3": None,
                "sku": None,
                "price": "0.00",
                "compare_at_price": None,
                "available": True,
                "featured_image": None,
            }
        )
    return {
        "id": int(p.product_id),
        "title": p.title.replace("  ", " ") if p.index != 4 else p.title.replace(" ", "  ", 1) + " &amp; Co",
        "handle": p.slug,
        "body_html": f"<p>{html.escape(p.description)}</p>",
        "published_at": _iso(p.published_at),
        "created_at": _iso(p.published_at),
        "updated_at": _iso(p.updated_at),
        "vendor": p.brand,
        "product_type": p.category.title(),
        "tags": [p.category, p.color, p.pattern],
        "variants": variants,
        "images": images,
        "options": [
            {"name": "Color", "position": 1, "values": [p.color.title()]},
            {"name": "Size", "position": 2, "values": p.sizes},
        ],
    }


# --------------------------------------------------------------------------- WooCommerce


def woo_product(p: ProductSpec, base: str) -> dict[str, Any]:
    return {
        "id": int(p.product_id),
        "name": p.title,
        "slug": p.slug,
        "permalink": f"{base}{product_path(p)}",
        "sku": p.slug.upper(),
        "description": f"<p>{html.escape(p.description)}</p>",
        "short_description": "",
        "prices": {
            "price": str(p.price_cents),
            "regular_price": str(p.compare_cents or p.price_cents),
            "sale_price": str(p.price_cents),
            "price_range": None,
            "currency_code": "EUR",
            "currency_symbol": "€",
            "currency_minor_unit": 2,
            "currency_decimal_separator": ",",
            "currency_thousand_separator": ".",
        },
        "images": [
            {"id": n, "src": f"{base}{path}", "thumbnail": f"{base}{path}", "alt": ""}
            for n, path in enumerate(image_paths(p))
        ],
        "categories": [{"id": 1, "name": p.category.title(), "slug": p.category}],
        "tags": [{"id": 2, "name": p.pattern, "slug": p.pattern}],
        "brands": [{"id": 3, "name": p.brand, "slug": p.brand.lower().replace(" ", "-")}],
        "attributes": [
            {
                "id": 1,
                "name": "Color",
                "taxonomy": "pa_color",
                "has_variations": False,
                "terms": [{"id": 1, "name": p.color.title(), "slug": p.color}],
            },
            {
                "id": 2,
                "name": "Material",
                "taxonomy": "pa_material",
                "has_variations": False,
                "terms": [{"id": 2, "name": p.material.title(), "slug": p.material}],
            },
        ],
        "variations": [],
        # The Store API omits dates; shops expose them through a plugin or the REST API shape.
        "date_created_gmt": _iso(p.published_at).removesuffix("Z"),
        "date_modified_gmt": _iso(p.updated_at).removesuffix("Z"),
        "is_purchasable": True,
        "is_in_stock": p.in_stock,
    }


# --------------------------------------------------------------------------- schema.org pages


def _jsonld_offer(p: ProductSpec, base: str, size: str | None = None, price: Any = None) -> dict[str, Any]:
    offer: dict[str, Any] = {
        "@type": "Offer",
        "price": price if price is not None else _money(p.price_cents),
        "priceCurrency": "EUR",
        "availability": "https://schema.org/InStock" if p.in_stock else "https://schema.org/OutOfStock",
        "url": f"{base}{product_path(p)}",
    }
    if p.compare_cents:
        offer["priceSpecification"] = [
            {
                "@type": "UnitPriceSpecification",
                "priceType": "https://schema.org/ListPrice",
                "price": _money(p.compare_cents),
                "priceCurrency": "EUR",
            }
        ]
    return offer


def schema_page(p: ProductSpec, base: str) -> str:
    url = f"{base}{product_path(p)}"
    images = [f"{base}{path}" for path in image_paths(p)]
    # Weekly drops never use variant 1 (the page with a broken sibling script): the store's
    # broken pages stay the core's, so their count does not grow with time.
    variant = p.index % 4 if p.arrival is None else (0, 2, 3)[p.arrival % 3]
    lang = "en"
    head: list[str] = [f'<link rel="canonical" href="{product_path(p)}">']
    body = f"<h1>{html.escape(p.title)}</h1><p class='desc'>{html.escape(p.description)}</p>"
    if variant == 0:
        # @graph with a ProductGroup and one Product per size; the brand is a Thing by @id.
        nodes = [
            {"@id": "#brand", "@type": "Thing", "name": p.brand},
            {
                "@type": "ProductGroup",
                "productGroupID": p.product_id,
                "name": p.title,
                "description": p.description,
                "brand": {"@id": "#brand"},
                "category": f"Women > {p.category.title()}",
                "image": [{"@type": "ImageObject", "url": images[0]}, images[1:], None],
                "datePublished": _iso(p.published_at),
                "hasVariant": [
                    {
                        "@type": "Product",
                        "sku": f"{p.product_id}-{s}",
                        "name": f"{p.title} {s}",
                        "size": s,
                        "color": p.color.title(),
                        "image": images[0],
                        "offers": _jsonld_offer(p, base, s),
                    }
                    for s in p.sizes
                ],
            },
            {
                "@type": "BreadcrumbList",
                "itemListElement": [
                    {"@type": "ListItem", "position": 1, "name": "Home"},
                    {"@type": "ListItem", "position": 2, "name": p.category.title()},
                ],
            },
        ]
        head.append(
            f'<script type="application/ld+json">{json.dumps({"@context": "https://schema.org", "@graph": nodes})}</script>'
        )
    elif variant == 1:
        # CDATA-wrapped JSON-LD, a locale price string, prefix-less availability, an invalid
        # sibling script, and a brand object.
        lang = "de"
        node = {
            "@context": "https://schema.org/",
            "@type": "Product",
            "sku": p.product_id,
            "name": p.title,
            "description": p.description,
            "brand": {"@type": "Brand", "name": p.brand},
            "image": images,
            "color": p.color.title(),
            "datePublished": _iso(p.published_at),  # dated: the freshness rules need a date
            "offers": {
                "@type": "Offer",
                "price": f"{p.price_cents // 100},{p.price_cents % 100:02d} €",
                "priceCurrency": "EUR",
                "availability": "InStock" if p.in_stock else "OutOfStock",
            },
        }
        head.append(
            '<script type="application/ld+json">{"@context": "https://schema.org", "@type": "Organization", "name": "Broken" ,,}</script>'
        )
        head.append(f'<script type="application/ld+json">/*<![CDATA[*/{json.dumps(node)}/*]]>*/</script>')
        head.append('<script type="application/ld+json">   </script>')
    elif variant == 2:
        # Microdata only.
        offers = (
            f'<div itemprop="offers" itemscope itemtype="https://schema.org/Offer"><meta itemprop="price" content="{_money(p.price_cents)}">'
            f'<meta itemprop="priceCurrency" content="EUR"><link itemprop="availability" href="https://schema.org/{"InStock" if p.in_stock else "OutOfStock"}"></div>'
        )
        imgs = "".join(f'<img itemprop="image" src="{path}">' for path in image_paths(p))
        body = (
            f'<div itemscope itemtype="https://schema.org/Product"><meta itemprop="sku" content="{p.product_id}">'
            f'<meta itemprop="datePublished" content="{_iso(p.published_at)}">'
            f'<h1 itemprop="name">{html.escape(p.title)}</h1><span itemprop="brand">{html.escape(p.brand)}</span>'
            f'<p itemprop="description">{html.escape(p.description)}</p>{imgs}{offers}</div>'
        )
    else:
        # OpenGraph only; material only in the page text. No publication date: an undated item,
        # released once a crawl after the site's baseline first sees it (the freshness rules).
        head += [
            '<meta property="og:type" content="product">',
            f'<meta property="og:title" content="{html.escape(p.title)}">',
            f'<meta property="og:url" content="{url}">',
            f'<meta property="og:description" content="{html.escape(p.description.split(" Material")[0])}">',
            *[f'<meta property="og:image" content="{path}">' for path in image_paths(p)],
            f'<meta property="product:price:amount" content="{_money(p.price_cents)}">',
            '<meta property="product:price:currency" content="EUR">',
            f'<meta property="product:brand" content="{html.escape(p.brand)}">',
            f'<meta property="product:availability" content="{"in stock" if p.in_stock else "out of stock"}">',
            f'<meta property="product:retailer_item_id" content="{p.product_id}">',
        ]
    if p.index == 5:
        # A Colombian page: "$3.499" means three thousand four hundred ninety-nine pesos.
        lang = "es-CO"
        node = {
            "@context": "https://schema.org",
            "@type": "Product",
            "sku": p.product_id,
            "name": p.title,
            "brand": p.brand,
            "description": p.description,
            "image": images,
            "offers": {
                "@type": "AggregateOffer",
                "lowPrice": {"@value": f"${p.price_cents // 1000}.{p.price_cents % 1000:03d}"},
                "highPrice": "",
                "priceCurrency": "COP",
                "offers": [{"@type": "Offer", "price": None}],
            },
        }
        head = [
            f'<link rel="canonical" href="{product_path(p)}">',
            f'<script type="application/ld+json">{json.dumps(node)}</script>',
        ]
        # JSON-LD nested 10,000 levels deep beside it (S8): counted, not fatal.
        head.append('<script type="application/ld+json">' + "[" * 10000 + "]" * 10000 + "</script>")
    return (
        f'<!DOCTYPE html><html lang="{lang}"><head><meta charset="utf-8"><title>{html.escape(p.title)}</title>'
        f"{''.join(head)}</head><body>{body}</body></html>"
    )


def js_page(p: ProductSpec, base: str) -> str:
    """A product page whose data exists only after its script runs."""
    node = {
        "@context": "https://schema.org",
        "@type": "Product",
        "sku": p.product_id,
        "name": p.title,
        "brand": {"@type": "Brand", "name": p.brand},
        "description": p.description,
        "color": p.color.title(),
        "image": [f"{base}{path}" for path in image_paths(p)],
        "datePublished": _iso(p.published_at),
        "offers": _jsonld_offer(p, base),
    }
    payload = base64.b64encode(json.dumps(node).encode()).decode()
    script = (
        "const d=JSON.parse(atob('" + payload + "'));"
        "const s=document.createElement('script');s.type='application/ld+json';s.textContent=JSON.stringify(d);"
        "document.head.appendChild(s);document.getElementById('app').innerHTML='<h1>'+d.name+'</h1>';"
    )
    return f'<!DOCTYPE html><html lang="en"><head><title>loading</title></head><body><div id="app"></div><script>{script}</script></body></html>'


def js_listing(products: list[ProductSpec]) -> str:
    links = base64.b64encode(json.dumps([product_path(p) for p in products]).encode()).decode()
    script = (
        f"for(const h of JSON.parse(atob('{links}'))){{const a=document.createElement('a');a.href=h;a.className='product';"
        "a.textContent=h;document.getElementById('list').appendChild(a);}"
    )
    return f'<!DOCTYPE html><html><head><title>JS shop</title></head><body><div id="list"></div><script>{script}</script></body></html>'


def look_page(look: LookSpec, base: str, boxes: list[tuple[int, int, int, int]]) -> str:
    spots = "".join(
        f'<a class="hotspot" href="{product_path(p)}" data-bbox="{",".join(map(str, box))}">{html.escape(p.title)}</a>'
        for p, box in zip(look.products, boxes, strict=True)
    )
    return (
        f'<!DOCTYPE html><html lang="en"><head><title>{html.escape(look.title)}</title>'
        f'<meta property="article:published_time" content="{_iso(look.published_at)}"></head><body>'
        f'<div class="shop-the-look" data-look-id="{look.look_id}"><img class="look-photo" src="/img/looks/{look.look_id}.jpg" alt="{html.escape(look.title)}">'
        f"{spots}</div></body></html>"
    )


def simple_product_page(p: ProductSpec, base: str) -> str:
    """The storefront page of a Shopify or WooCommerce product (linked from looks)."""
    node = {
        "@context": "https://schema.org",
        "@type": "Product",
        "sku": p.product_id,
        "name": p.title,
        "brand": p.brand,
        "image": [f"{base}{path}" for path in image_paths(p)],
        "offers": _jsonld_offer(p, base),
    }
    return (
        f'<!DOCTYPE html><html><head><title>{html.escape(p.title)}</title><script type="application/ld+json">{json.dumps(node)}</script>'
        f"</head><body><h1>{html.escape(p.title)}</h1></body></html>"
    )


def urlset(entries: list[tuple[str, str | None]]) -> str:
    rows = "".join(
        f"<url><loc>{html.escape(loc)}</loc>{f'<lastmod>{lm}</lastmod>' if lm else ''}</url>"
        for loc, lm in entries
    )
    return f'<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{rows}</urlset>'


def sitemap_index(entries: list[tuple[str, str | None]]) -> str:
    rows = "".join(
        f"<sitemap><loc>{html.escape(loc)}</loc>{f'<lastmod>{lm}</lastmod>' if lm else ''}</sitemap>"
        for loc, lm in entries
    )
    return f'<?xml version="1.0" encoding="UTF-8"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{rows}</sitemapindex>'
