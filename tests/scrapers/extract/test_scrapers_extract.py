"""Extraction of messy real-world product data (fixtures written for these tests)."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from lookbench_live.scrapers.extract import decode_body, detect_platform, extract_document
from lookbench_live.scrapers.extract.looks import extract_looks
from lookbench_live.scrapers.extract.shopify import extract_shopify
from lookbench_live.scrapers.extract.values import (
    clean_title,
    find_material,
    image_urls,
    normalize_availability,
    normalize_brand,
    parse_price,
)
from lookbench_live.scrapers.extract.woocommerce import extract_woocommerce

URL = "https://shop.example.com/p/wrap-dress"


def page(*scripts: str, lang: str = "en", head: str = "", body: str = "") -> str:
    tags = "".join(f'<script type="application/ld+json">{s}</script>' for s in scripts)
    return f'<html lang="{lang}"><head>{head}{tags}</head><body>{body}</body></html>'


def one(text: str, url: str = URL):
    result = extract_document(text, url)
    assert len(result.products) == 1, result
    return result.products[0], result


# --------------------------------------------------------------------------- prices


@pytest.mark.parametrize(
    ("value", "kwargs", "expected"),
    [
        ("26,00 €", {}, "26.00"),
        ("$3.499", {"lang": "es-CO"}, "3499"),
        ("3.499", {}, "3.499"),
        ("1.234,56 kr", {}, "1234.56"),
        ("$1,299.50", {}, "1299.50"),
        ("1,299", {}, "1299"),
        ("EUR 26,5", {}, "26.5"),
        (2600, {"minor_unit": 2}, "26.00"),
        ("2600", {"minor_unit": 2}, "26.00"),
        ("1500", {"minor_unit": 0}, "1500"),
        (19.9, {}, "19.9"),
        ({"@value": "12,50"}, {}, "12.50"),
    ],
)
def test_prices_in_every_shape(value, kwargs, expected):
    assert parse_price(value, **kwargs) == Decimal(expected)


@pytest.mark.parametrize("value", [None, "", "free", "n/a", True, float("nan"), [], {}])
def test_non_prices_are_none(value):
    assert parse_price(value) is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("http://schema.org/InStock", "InStock"),
        ("https://schema.org/OutOfStock", "OutOfStock"),
        ("InStock", "InStock"),
        ("instock", "InStock"),
        ("in stock", "InStock"),
        ("schema:SoldOut", "OutOfStock"),
        ("PreOrder", "InStock"),
        ("whatever", None),
        (None, None),
    ],
)
def test_availability_with_or_without_prefix(value, expected):
    assert normalize_availability(value) == expected


def test_brand_string_object_thing_reference_and_list():
    index = {"#b": {"@id": "#b", "@type": "Thing", "name": "North Loom"}}
    assert normalize_brand("Aurelle") == "Aurelle"
    assert normalize_brand({"@type": "Brand", "name": "Aurelle"}) == "Aurelle"
    assert normalize_brand({"@type": "Thing", "name": ["Casa Verde"]}) == "Casa Verde"
    assert normalize_brand({"@id": "#b"}, index) == "North Loom"
    assert normalize_brand([None, {"name": ""}, "Studio Kin"]) == "Studio Kin"


def test_image_entries_objects_lists_null_relative_and_duplicates():
    value = [
        {"@type": "ImageObject", "url": "/img/a.jpg"},
        ["img/b.jpg", None, {"contentUrl": "//cdn.example.com/c.jpg"}],
        None,
        "/img/a.jpg",
        "data:image/png;base64,AAAA",
        "",
    ]
    assert image_urls(value, URL) == [
        "https://shop.example.com/img/a.jpg",
        "https://shop.example.com/p/img/b.jpg",
        "https://cdn.example.com/c.jpg",
    ]


def test_titles_lose_entities_and_doubled_spaces():
    assert clean_title("Caf&eacute;  Wrap   Dress &amp;amp; Co ") == "Café Wrap Dress & Co"


def test_material_from_composition_line_section_or_word():
    assert find_material("Shell: 50% Viscose, 27% Nylon, 23% Polyester. Lining: cotton") == (
        "50% Viscose, 27% Nylon, 23% Polyester"
    )
    assert find_material("Zusammensetzung: 100% Baumwolle") == "100% Baumwolle"
    assert find_material("Material & care: organic linen blend\nWash cold") == "organic linen blend"
    assert find_material("A soft merino jumper") is None  # prose is not a stated material
    assert find_material("Nothing to see") is None


@pytest.mark.parametrize(
    "text",
    [
        "Pay in 3 instalments with 0% interest. Free returns.",  # financing offer
        "Sign up and get 10% off your first order",
        "UP TO 70% OFF",
        "Our 100% polyester jersey keeps you dry on every run, sizes XS-XXL",  # sport blurb
        "45% Exclusive members discount",
    ],
)
def test_marketing_percentages_are_never_a_material(text):
    assert find_material(text) is None


def test_material_from_a_composition_field_any_language():
    assert find_material("Material: 100% polyester") == "100% polyester"  # a field states it
    assert find_material("Zusammensetzung\nBaumwolle 60%; Polyester 40%") == "Baumwolle 60%; Polyester 40%"
    assert find_material("Composition : 80% laine, 20% polyamide") == "80% laine, 20% polyamide"
    assert find_material("Composición: 100% algodón") == "100% algodón"
    assert find_material("Details\nShell: Calf Leather 100% Lining: Cotton 100%") == "Calf Leather 100%"
    # unlabelled: a composition adding up to 100% with a known fibre, in any language
    assert find_material("Weiche Qualität. 100% Baumwolle") == "100% Baumwolle"


def test_colour_from_stated_fields_and_titles_only():
    from lookbench_live.scrapers.extract.values import find_color, title_color

    assert find_color("Facts\nFarbe: multicolor/multicolor\nKategorie: Leggings") == "multicolor/multicolor"
    assert find_color("Couleur : Bleu marine") == "Bleu marine"
    assert find_color("Pairs well with black jeans and a red scarf") is None
    assert title_color("Spit Velvet Shirt - Red - Shirts - Weekday DE") == "Red"
    assert title_color("RIBBED T-SHIRT - White / black - Tops - COS") == "White / black"
    assert title_color("Eye Webbing Key Ring") is None


# --------------------------------------------------------------------------- JSON-LD


def test_graph_product_group_merges_variants_and_resolves_brand():
    graph = {
        "@context": "https://schema.org",
        "@graph": [
            {"@id": "#brand", "@type": "Thing", "name": "Aurelle"},
            {
                "@type": "ProductGroup",
                "productGroupID": "WD-1",
                "name": "Wrap Dress",
                "brand": {"@id": "#brand"},
                "category": "Women > Dresses",
                "hasVariant": [
                    {"@type": "Product", "sku": "WD-1-S", "color": "Navy", "size": "S", "image": "/navy.jpg",
                     "offers": {"@type": "Offer", "price": "59.00", "priceCurrency": "EUR",
                                "availability": "https://schema.org/OutOfStock", "url": URL + "?color=navy"}},
                    {"@type": "Product", "sku": "WD-1-M", "color": "Red", "size": "M", "image": "/red.jpg",
                     "offers": {"@type": "Offer", "price": "79.00", "priceCurrency": "EUR",
                                "availability": "https://schema.org/InStock", "url": URL + "?color=red"}},
                ],
            },
        ],
    }  # fmt: skip
    product, _ = one(page(json.dumps(graph)), URL + "?color=red")
    assert product.product_id == "WD-1"
    assert product.brand == "Aurelle"
    assert product.category_path == ["Women", "Dresses"]
    assert product.color == "Red"  # the variant the page shows, not the first node
    assert product.images[0] == "https://shop.example.com/red.jpg"
    assert product.price == Decimal("79.00")
    assert product.availability == "InStock"  # one variant can be bought
    assert len(product.variants) == 2


def test_several_product_nodes_for_one_item_pick_the_shown_one():
    nodes = [
        {"@type": "Product", "name": "Linen Shirt", "sku": "LS-BLUE", "color": "Blue", "image": ["/blue.jpg"],
         "offers": {"price": "45.00", "priceCurrency": "USD", "url": "/p/linen-shirt?variant=LS-BLUE"}},
        {"@type": "Product", "name": "Linen Shirt", "sku": "LS-WHITE", "color": "White", "image": ["/white.jpg"],
         "offers": {"price": "49.00", "priceCurrency": "USD", "url": "/p/linen-shirt?variant=LS-WHITE"}},
    ]  # fmt: skip
    url = "https://shop.example.com/p/linen-shirt?variant=LS-WHITE"
    product, _ = one(page(json.dumps(nodes)), url)
    assert product.color == "White"
    assert product.images == ["https://shop.example.com/white.jpg"]
    assert product.price == Decimal("49.00")
    assert product.price_max == Decimal("49.00")
    assert product.currency == "USD"


def test_cdata_wrapped_jsonld_next_to_invalid_and_empty_scripts_is_still_read():
    good = json.dumps({"@context": "https://schema.org", "@type": "product", "name": "Silk Top", "sku": "ST1",
                       "offers": {"price": "26,00 €", "priceCurrency": "eur", "availability": "InStock"}})  # fmt: skip
    text = page('{"@type": "Organization", "name": "x",,}', f"/*<![CDATA[*/{good}/*]]>*/", "   ", lang="de")
    product, result = one(text)
    assert (product.title, product.price, product.currency, product.availability) == (
        "Silk Top",
        Decimal("26.00"),
        "EUR",
        "InStock",
    )
    assert [p.reason for p in result.problems] == ["invalid_jsonld"]


def test_deeply_nested_jsonld_is_counted_not_fatal():
    good = json.dumps({"@type": "Product", "name": "Coat", "sku": "C1", "offers": {"price": "99"}})
    product, result = one(page("[" * 10000 + "]" * 10000, good))
    assert product.title == "Coat"
    assert [p.reason for p in result.problems] == ["jsonld_too_deep"]


def test_html_entities_in_jsonld_and_trailing_semicolon():
    text = page(
        '{"@type": "Product", "name": "Tee &quot;Classic&quot;", "sku": "T1", "offers": {"price": "10"}};'
    )
    product, _ = one(text)
    assert product.title == 'Tee "Classic"'


def test_broken_aggregate_offer_falls_back_to_nested_offers_and_skips_placeholder_zero():
    node = {"@type": "Product", "name": "Skirt", "sku": "SK", "offers": {
        "@type": "AggregateOffer", "lowPrice": "", "highPrice": {"@value": "oops"}, "priceCurrency": "GBP",
        "offers": [{"@type": "Offer", "price": "0.00"}, {"@type": "Offer", "price": "35.00"},
                   {"@type": "Offer", "price": "42.50", "availability": "OutOfStock"}]}}  # fmt: skip
    product, _ = one(page(json.dumps(node)))
    assert product.price == Decimal("35.00")  # 0 is a placeholder, not the lowest price
    assert product.price_max == Decimal("35.00")  # only purchasable offers count
    assert product.currency == "GBP"


def test_list_price_equal_to_price_is_not_a_sale():
    def node(list_price):
        return {"@type": "Product", "name": "Jeans", "sku": "J", "offers": {"price": "60.00", "priceSpecification": [
            {"@type": "UnitPriceSpecification", "priceType": "https://schema.org/ListPrice", "price": list_price}]}}  # fmt: skip

    assert one(page(json.dumps(node("60.00"))))[0].compare_at_price is None
    assert one(page(json.dumps(node("80.00"))))[0].compare_at_price == Decimal("80.00")


def test_currency_is_never_invented():
    product, _ = one(
        page(json.dumps({"@type": "Product", "name": "Hat", "sku": "H", "offers": {"price": "$20"}}))
    )
    assert product.price == Decimal("20") and product.currency is None


def test_any_language_and_material_from_page_text():
    node = {
        "@type": "Product",
        "name": "ワンピース 花柄",
        "sku": "JP1",
        "offers": {"price": "5990", "priceCurrency": "JPY"},
    }
    body = "<div><h2>Material &amp; care</h2><p>Composition: 70% Viscose, 30% Polyester</p></div>"
    product, _ = one(page(json.dumps(node), lang="ja", body=body))
    assert product.title == "ワンピース 花柄"
    assert product.material == "70% Viscose, 30% Polyester"
    assert product.price == Decimal("5990") and product.currency == "JPY"


def test_relative_urls_become_absolute_with_canonical():
    node = {"@type": "Product", "name": "Bag", "image": "../img/bag.jpg", "offers": {"price": "10"}}
    product, _ = one(page(json.dumps(node), head='<link rel="canonical" href="/p/bag">'), URL)
    assert product.url == "https://shop.example.com/p/bag"
    assert product.images == ["https://shop.example.com/img/bag.jpg"]
    assert product.product_id == "/p/bag"


def test_microdata_and_opengraph_fallbacks():
    microdata = (
        '<div itemscope itemtype="https://schema.org/Product"><meta itemprop="sku" content="M1">'
        '<h1 itemprop="name">Blue Cotton Shorts</h1><img itemprop="image" src="/m1.jpg">'
        '<div itemprop="offers" itemscope itemtype="https://schema.org/Offer"><meta itemprop="price" content="30.00">'
        '<meta itemprop="priceCurrency" content="EUR"></div></div>'
    )
    product, _ = one(page(body=microdata))
    assert (product.product_id, product.title, product.price, product.color) == (
        "M1",
        "Blue Cotton Shorts",
        Decimal("30.00"),
        "blue",
    )
    og = (
        '<meta property="og:type" content="product"><meta property="og:title" content="Wool Coat">'
        '<meta property="og:image" content="/c1.jpg"><meta property="product:price:amount" content="199.00">'
        '<meta property="product:price:currency" content="EUR"><meta property="product:availability" content="in stock">'
    )
    product, _ = one(page(head=og, body="<p>Material: 80% Wool, 20% Nylon</p>"))
    assert (product.title, product.price, product.availability) == ("Wool Coat", Decimal("199.00"), "InStock")
    assert product.material == "80% Wool, 20% Nylon"
    assert product.images == ["https://shop.example.com/c1.jpg"]


def test_page_without_product_data_gives_nothing_and_no_crash():
    assert extract_document("<html><body>About us</body></html>", URL).products == []
    assert extract_document("", URL).products == []
    assert extract_document("<<<>>>\x00", URL).products == []


def test_content_hash_ignores_timestamps_but_not_content():
    from lookbench_live.scrapers.extract.model import parse_datetime

    text = page(json.dumps({"@type": "Product", "name": "Dress", "sku": "D", "offers": {"price": "10"}}))
    a = one(text)[0]
    b = one(text)[0]
    b.updated_at = parse_datetime("2026-01-01T00:00:00Z")
    assert a.content_hash() == b.content_hash()
    b.price = Decimal("11")
    assert a.content_hash() != b.content_hash()


# --------------------------------------------------------------------------- APIs


def shopify_payload():
    return {"products": [{
        "id": 42, "title": "Striped  Tee &amp; Co", "handle": "striped-tee", "vendor": "North Loom",
        "product_type": "T-Shirt", "body_html": "<p>Soft tee.</p><p>100% Cotton</p>", "tags": "summer, tee",
        "published_at": "2026-01-10T10:00:00-05:00", "updated_at": "2026-01-11T10:00:00Z",
        "options": [{"name": "Size"}, {"name": "Colour"}],
        "variants": [
            {"id": 1, "option1": "Gift", "option2": "Red", "price": "0.00", "available": True},
            {"id": 2, "option1": "S", "option2": "Red", "price": "25.00", "compare_at_price": "25.00", "available": False},
            {"id": 3, "option1": "M", "option2": "Blue", "price": "29.00", "compare_at_price": "39.00", "available": True},
        ],
        "images": [{"id": 9, "position": 2, "src": "//cdn.shop.example.com/b.jpg"},
                   {"id": 8, "position": 1, "src": "https://cdn.shop.example.com/a.jpg"}, None],
    }]}  # fmt: skip


def test_shopify_products_json():
    result = extract_shopify(shopify_payload(), "https://shop.example.com/products.json?limit=250&page=1")
    assert result.next_page
    product = result.products[0]
    assert product.url == "https://shop.example.com/products/striped-tee"
    assert product.title == "Striped Tee & Co"
    assert product.brand == "North Loom"
    assert product.currency is None  # Shopify's JSON does not state it
    assert product.price == Decimal("29.00")  # the placeholder 0 and the sold-out variant are not prices
    assert product.compare_at_price == Decimal("39.00")
    assert product.color == "Blue"
    assert product.availability == "InStock"
    assert product.material == "100% Cotton"
    assert product.images == ["https://cdn.shop.example.com/a.jpg", "https://cdn.shop.example.com/b.jpg"]
    assert product.published_at.isoformat() == "2026-01-10T15:00:00+00:00"
    assert extract_shopify({"products": []}, "https://s/products.json").next_page is False


def test_shopify_under_a_path_prefix_and_collections():
    result = extract_shopify(
        shopify_payload(), "http://127.0.0.1:9/shopify/collections/women/products.json?page=1"
    )
    assert result.products[0].url == "http://127.0.0.1:9/shopify/products/striped-tee"


def test_woocommerce_store_api_minor_units():
    payload = [
        {"id": 7, "name": "Linen Trousers", "permalink": "/product/linen-trousers/",
         "prices": {"price": "4500", "regular_price": "6000", "currency_code": "EUR", "currency_minor_unit": 2},
         "images": [{"src": "/wp-content/a.jpg"}, {"src": None}], "is_in_stock": True,
         "categories": [{"name": "Trousers"}], "attributes": [{"name": "Color", "terms": [{"name": "Beige"}]}],
         "brands": [{"name": "Casa Verde"}], "description": "<p>Light linen.</p>"},
        {"id": 8, "name": "Yen Tee", "permalink": "https://shop.example.jp/p/8",
         "prices": {"price": "1500", "currency_code": "JPY", "currency_minor_unit": 0}, "is_in_stock": False},
    ]  # fmt: skip
    result = extract_woocommerce(payload, "https://shop.example.com/wp-json/wc/store/v1/products?page=1")
    first, second = result.products
    assert (first.price, first.compare_at_price, first.currency) == (
        Decimal("45.00"),
        Decimal("60.00"),
        "EUR",
    )
    assert first.url == "https://shop.example.com/product/linen-trousers/"
    assert first.images == ["https://shop.example.com/wp-content/a.jpg"]
    assert (first.color, first.brand, first.material, first.category_path) == (
        "Beige",
        "Casa Verde",
        None,  # "Light linen." is prose, not a stated material (issue 13: never guessed)
        ["Trousers"],
    )
    assert (second.price, second.availability) == (Decimal("1500"), "OutOfStock")


def test_platform_detected_from_content():
    assert detect_platform(json.dumps(shopify_payload())) == "shopify"
    assert detect_platform(json.dumps([{"id": 1, "prices": {}}])) == "woocommerce"
    assert detect_platform("<html></html>") == "html"
    assert detect_platform('{"other": 1}') == "json"
    assert extract_document('{"other": 1}', URL).problems[0].reason == "unknown_json"


def test_bad_product_in_api_payload_is_counted_not_fatal():
    payload = shopify_payload()
    payload["products"].append({"id": None})
    payload["products"].append("garbage")
    result = extract_shopify(payload, "https://shop.example.com/products.json")
    assert len(result.products) == 1
    assert [p.reason for p in result.problems] == ["bad_product", "bad_product"]


def test_charset_follows_bom_before_header():
    body = b"\xef\xbb\xbf" + "<html><title>Crêpe</title></html>".encode()
    assert "Crêpe" in decode_body(body, "text/html; charset=iso-8859-1")
    assert "Crêpe" in decode_body("<html>Crêpe</html>".encode(), "text/html; charset=bogus-name")


# --------------------------------------------------------------------------- looks


def test_look_with_pixel_boxes_percent_points_and_product_links():
    html = (
        '<html><head><meta property="article:published_time" content="2026-01-05T00:00:00Z"></head><body>'
        '<section class="shop-the-look"><img class="look-photo" src="/looks/1.jpg" alt="Weekend">'
        '<a class="hotspot" href="/p/tee" data-bbox="10,20,110,220">Tee</a>'
        '<span class="pin" style="left: 40%; top: 70%"><a href="/p/skirt">Skirt</a></span>'
        '<button data-product-id="SKU-9" data-x="12" data-y="30">+</button></section>'
        '<div class="look"><img src="/looks/2.jpg"></div>'  # no products: not a look
        "</body></html>"
    )
    result = extract_looks(html, "https://shop.example.com/journal/weekend")
    assert len(result.looks) == 1
    look = result.looks[0]
    assert look.photo_url == "https://shop.example.com/looks/1.jpg"
    assert look.product_refs == [
        "https://shop.example.com/p/tee",
        "https://shop.example.com/p/skirt",
        "SKU-9",
    ]
    assert look.boxes == [
        {"ref": "https://shop.example.com/p/tee", "bbox": [10, 20, 110, 220], "unit": "px"},
        {"ref": "https://shop.example.com/p/skirt", "point": [40, 70], "unit": "percent"},
        {"ref": "SKU-9", "point": [12, 30], "unit": "px"},
    ]
    assert look.published_at.isoformat() == "2026-01-05T00:00:00+00:00"


def test_look_from_jsonld_image_object_mentions():
    node = {"@type": "ImageObject", "contentUrl": "/l.jpg", "name": "Street look",
            "mentions": [{"@type": "Product", "url": "/p/a"}, {"@type": "Product", "sku": "B"}]}  # fmt: skip
    look = extract_looks(page(json.dumps(node)), URL).looks[0]
    assert look.product_refs == ["https://shop.example.com/p/a", "B"]
    assert look.boxes == []


# --------------------------------------------------------------------------- real-page miss classes


def test_malformed_jsonld_offer_falls_back_to_opengraph_price_and_image():
    node = {"@type": "Product", "name": "Linen Shirt", "offers": {"@type": "Offer", "price": "n/a"}}
    head = (
        '<meta property="og:image" content="/main.jpg"><meta property="og:image" content="/back.jpg">'
        '<meta property="product:price:amount" content="49.90"><meta property="product:price:currency" content="EUR">'
    )
    product, _ = one(page(json.dumps(node), head=head))
    assert (product.price, product.currency) == (Decimal("49.90"), "EUR")
    assert product.images[0] == "https://shop.example.com/main.jpg"  # the page's main image first


def test_structured_colour_fields_of_every_platform():
    shop = {"id": 1, "handle": "tee", "title": "Tee", "options": ["Farbe", "Größe"], "price": 2500,
            "variants": [{"id": 2, "option1": "Schwarz", "option2": "M", "price": 2500, "available": True}],
            "images": ["//cdn.example.com/t.jpg"], "description": "Weiches Shirt"}  # fmt: skip
    product = extract_document(json.dumps(shop), "https://s.example/products/tee.js").products[0]
    assert (product.color, product.price, product.images) == (
        "Schwarz", Decimal("25.00"), ["https://cdn.example.com/t.jpg"])  # fmt: skip
    v3 = [{"id": 7, "name": "Polo", "permalink": "https://w.example/p/polo", "price": "20", "regular_price": "20",
           "images": [{"src": "https://w.example/polo.jpg"}],
           "attributes": [{"name": "Color", "options": ["Blue"]}]}]  # fmt: skip
    product = extract_document(json.dumps(v3), "https://w.example/wp-json/wc/v3/products").products[0]
    assert (product.color, product.price, product.currency) == ("Blue", Decimal("20"), None)
    micro = (
        '<div itemscope itemtype="https://schema.org/Product"><h1 itemprop="name">Tee</h1>'
        '<meta itemprop="color" content="Navy"><div itemprop="offers" itemscope itemtype="https://schema.org/Offer">'
        '<meta itemprop="price" content="10"></div></div>'
    )
    assert one(page(body=micro))[0].color == "Navy"


def test_price_from_embedded_state_only_when_unambiguous():
    node = {"@type": "Product", "name": "Knit Vest", "image": "/v.jpg"}
    state = (
        '{"props": {"product": {"name": "Knit Vest", "price": {"amount": "59.95", "currencyCode": "EUR"}}}}'
    )
    body = f'<script id="__NEXT_DATA__" type="application/json">{state}</script>'
    product, _ = one(page(json.dumps(node), body=body))
    assert (product.price, product.currency) == (Decimal("59.95"), "EUR")
    two = '{"items": [{"price": "59.95", "currency": "EUR"}, {"price": "19.00", "currency": "EUR"}]}'
    product, _ = one(page(json.dumps(node), body=f'<script type="application/json">{two}</script>'))
    assert product.price is None and product.currency is None  # which one is this product's? unknown
