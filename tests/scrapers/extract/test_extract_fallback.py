"""The fallbacks of issue 27 on real payloads (tests/corpus): a page with no structured data is
read from what it shows, each fact names its source, and a page that is not a product gives none."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from lookbench_live.scrapers.extract import decode_body, extract_document
from lookbench_live.scrapers.extract.html_fallback import currency_of, marketplace_currency

CORPUS = Path(__file__).parents[2] / "corpus"


def _extract(name: str):
    case = json.loads((CORPUS / "expected" / f"{name}.json").read_text(encoding="utf-8"))
    payload = next((CORPUS / "payloads").glob(name + ".*"))
    return extract_document(decode_body(payload.read_bytes()), case["url"])


def test_a_page_without_structured_data_is_read_from_what_it_shows():
    """Amazon.de's Echo Input page: no JSON-LD, microdata or product OpenGraph; a "bought
    together" widget with other prices comes before the buy box."""
    product = _extract("shassi_amazon-echo").products[0]
    assert product.platform == "html"
    assert (product.price, product.currency) == (Decimal("39.99"), "EUR")
    assert product.title.startswith("Echo Input (Schwarz)")
    assert (product.brand, product.product_id, product.availability) == ("Amazon", "B07C76F3P2", "InStock")
    assert product.sources["price"] == "html:price-element span#priceblock_ourprice"
    assert product.sources["product_id"] == "url:asin"
    assert product.sources["title"] == "html:title-element"


def test_every_fact_of_a_structured_product_names_its_source():
    product = _extract("page_greendb_otto-damen-shirt").products[0]
    assert {product.sources[f] for f in ("title", "price", "currency", "image", "product_id")} == {"jsonld"}
    # Farah's microdata offer writes "£40.00" and no priceCurrency: the currency is the pound sign's.
    farah = _extract("bijou_polo-shirt").products[0]
    assert (farah.currency, farah.sources["currency"], farah.sources["price"]) == (
        "GBP",
        "offer price text",
        "microdata",
    )


@pytest.mark.parametrize(
    "name",
    ["mli_smitten-kitchen", "mli_belfusto", "bestellbar_product_page", "shassi_stories-not-in-catalog"],
)
def test_a_page_that_is_not_a_product_gives_none(name):
    """A recipe, a brand article, a stock tracker's log of prices, and a removed product's page
    (OpenGraph `product` with title "PDP", price "null" and the home page as og:url)."""
    assert _extract(name).products == []


@pytest.mark.parametrize(
    ("text", "lang", "iso"),
    [("£49.00", "en", "GBP"), ("EUR 12,99", "de-de", "EUR"), ("209,00€", "fr", "EUR"), ("$8.99", "en-us", "USD"),
     ("$8.99", "en-gb", None), ("$8.99", "es-mx", "MXN"), ("US$ 5", "es", "USD"), ("12.00", "en-us", None),
     ("R$ 31,99", None, "BRL"), ("₹649", None, "INR"), ("CA$12", "en", "CAD"), ("249 kronor", "sv", "SEK"),
     ("31 850 грн", "uk", "UAH"), ("¥1200", "ja", "JPY"), ("99 kr", "sv", "SEK"), ("$8.99", "en", None),
     ("LE 34", "en-EG", "EGP"), ("LE 34", "en", None), ("99 kr", "sv_SE", "SEK"), ("99 kr", "en-US", None),
     ("¥1200", "ja-JP", "JPY"), ("$8.99 USD", "en-CA", "USD"), ("R 199", "en-ZA", "ZAR")],
)  # fmt: skip
def test_a_price_texts_currency_is_named_only_when_unambiguous(text, lang, iso):
    """A sign several currencies write ("$", "kr", "¥", "LE") names one only where the page's
    language tag names the market, and only that market's own sign. Since issue 27's twelfth
    round a bare tag of a language one nation speaks names it too (`ja`, `sv`: `market_region`)."""
    assert currency_of(text, lang) == iso


@pytest.mark.parametrize(
    ("url", "iso"),
    [("https://shop.example.se/p/1", "SEK"), ("https://www.example.ca/p/1", "CAD"),
     ("https://www.example.com/p/1", None), ("https://example.co/p/1", None),
     ("https://www.example.de/p/1", None)],
)  # fmt: skip
def test_a_bare_sign_takes_the_currency_of_the_hosts_country_domain(url, iso):
    """Without a region in the language tag, a country-code domain names the market; `.com`
    and `.co` (sold as a generic domain) name none, and "$" is no `.de` shop's own sign."""
    text = "99 kr" if url.endswith((".se/p/1",)) else "$8.99"
    assert currency_of(text, "en", url) == iso


def test_a_price_block_with_a_gallery_and_no_buy_control_is_a_product():
    """datart.cz's reduced page: a title `<h1>`, a price block also showing the 30-day lowest and a
    coupon price, and a lightGallery of `data-src` items, but no buy button. The block's own
    `data-price-value` says which amount is the price; the gallery makes it a product page."""
    product = _extract("datart_samsung-tv-mre65r85h").products[0]
    assert (product.title, product.price, product.currency) == (
        "Televize Samsung MRE65R85H",
        Decimal("32990"),
        "CZK",
    )
    assert product.sources["price"] == "html:price-element div.product-price"
    assert product.images == ["https://image.datart.cz/foto/500/2/5/6/product_8309652.jpg"]
    assert product.sources["image"] == "html:gallery"


def test_a_heading_and_price_without_gallery_or_buy_control_is_no_product():
    """The same page without its gallery: a heading and a price alone do not make a product page
    (an article or a price tracker shows those too)."""
    text = decode_body((CORPUS / "payloads" / "datart_samsung-tv-mre65r85h.html").read_bytes())
    start = text.index('<div id="lightgallery">')
    end = text.index("</div></div></div>", start) + len("</div></div></div>")
    assert extract_document(text, "https://www.datart.cz/tv").products  # the gallery is what decides
    assert extract_document(text[:start] + text[end:], "https://www.datart.cz/tv").products == []


def test_a_markup_products_missing_picture_and_currency_come_from_what_the_page_shows():
    """uniqz.de's microdata product names no image and the page no `og:image`: its gallery's
    lightbox link holds the full-size picture (the `<img>` is a lazy `data:` placeholder).
    oriflame.eg writes "LE 34" on an `en-EG` page: the Egyptian pound. IKEA's "MOSHULT Foam
    mattress, firm, white": the colour is the title's last comma part."""
    uniqz = _extract("traf_uniqz-katzendecke").products[0]
    assert (
        uniqz.images[0]
        == "https://uniqz.de/wp-content/uploads/wpsg_produktbilder/520//Katzendecke.MainCoon.jpg"
    )
    assert uniqz.sources["image"] == "html:gallery"
    oriflame = _extract("portia_oriflame-eg-activelle-31270").products[0]
    assert (oriflame.price, oriflame.currency, oriflame.sources["currency"]) == (
        Decimal("34"),
        "EGP",
        "offer price text",
    )
    # Its code, shown in `<span class="code">` and keying the URL (`?code=31270`); the URL key stays an alias.
    assert (oriflame.product_id, oriflame.sources["product_id"]) == ("31270", "html:code")
    assert oriflame.id_aliases
    assert _extract("portia_ikea-eg-moshult").products[0].color == "white"


def test_a_listing_gives_no_product_and_a_product_page_skips_its_recommendation_cards():
    """books.toscrape.com (portia's saved pages): the listing's prices and buttons are all in
    product cards; the product page shows no buy button of its own, only in "recently viewed"."""
    assert _extract("portia_books-toscrape-listing").products == []
    product = _extract("portia_books-toscrape-product").products[0]
    assert (product.title, product.price, product.currency) == ("Sharp Objects", Decimal("47.82"), "GBP")
    assert (product.product_id, product.availability) == ("e00eb4fd7b871a48", "InStock")  # UPC row
    assert product.images == [
        "http://books.toscrape.com/media/cache/c0/59/c05972805aa7201171b8fc71a5b00292.jpg"
    ]
    assert product.sources["image"] == "html:image-alt"


def test_other_currencies_and_languages_read_from_what_the_page_shows():
    """amazon.in (₹, a -91% banner, the byline's "Visit the Dubstep Store") and a VTEX store
    (R$, "Código:" on the line before the code), neither with structured data."""
    india = _extract("amzin_dubstep-speaker").products[0]
    assert (india.price, india.currency, india.brand) == (Decimal("649"), "INR", "Dubstep")
    assert (india.product_id, india.availability) == ("B0FHHQQNZY", "InStock")
    assert india.sources["currency"].startswith("html:price-element")
    vtex = _extract("vtex_meuamigopet-racao").products[0]
    assert (vtex.price, vtex.currency, vtex.product_id) == (Decimal("31.99"), "BRL", "7797453062251")
    assert vtex.sources["product_id"] == "html:label"  # a labelled line, after markup ids and the URL's ASIN


def test_a_markup_product_without_a_name_takes_the_pages_heading():
    """goldapple.ru: its microdata Product states sku, offer and image but no name or brand; the
    page's <h1> holds the brand link and the name, read as two phrases."""
    product = _extract("ga_goldapple-gentle-fluidity-gold").products[0]
    assert product.title == "Maison Francis Kurkdjian Gentle Fluidity Gold"
    assert product.brand == "Maison Francis Kurkdjian"
    assert (product.sources["title"], product.sources["brand"]) == ("html:heading", "html:heading-brand")
    assert (product.price, product.currency, product.sources["price"]) == (
        Decimal("22510"),
        "RUB",
        "microdata",
    )
    assert product.color is None  # "Gold" is the fragrance's name, not a colour the page states


def test_a_listing_in_a_javascript_state_gives_no_product():
    """hotline.ua's search page: its products exist only in `window.__NUXT__`, none is the page's."""
    assert _extract("hotline_search-listing").products == []


def test_amazon_layouts_from_2013_to_2024_are_read_from_what_they_show():
    """Amazon's visible-page signals across layouts (discourse/onebox's saved pages): the title
    inside a title group, the author who is not a brand, the Kindle price and not the print list
    price, the ASIN before the print edition's ISBN, the gallery's `data-a-dynamic-image`, the
    marketplace's currency where "$" is all the price says."""
    book = _extract("onebox_amazon-book-2018").products[0]
    assert book.title.startswith("Seven Languages in Seven Weeks") and book.title.endswith("Programmers)")
    assert book.brand is None  # "Bruce Tate" links to his author page
    assert (book.currency, book.sources["currency"]) == ("USD", "url:marketplace")
    kindle = _extract("onebox_amazon-kindle-2018").products[0]
    assert (kindle.price, kindle.product_id) == (Decimal("25.00"), "B00AYQNR46")
    mobile = _extract("onebox_amazon-mobile-2014").products[0]
    assert mobile.images[0] == "http://ecx.images-amazon.com/images/I/61mI3YmHVnL._SL500_.jpg"  # largest
    assert mobile.product_id == "193609620X"  # /gp/aw/d/<ASIN>
    old = _extract("onebox_amazon-book-2013").products[0]
    assert old.availability == "InStock"  # span.availGreen


def test_colour_material_and_category_from_the_pages_fields_never_its_prose():
    """amazon.de fashion pages: colour and material from a labelled field or a detail-table cell,
    category from the breadcrumb; a title's "Schwarz" is not the selected "Blau", a "Material"
    cell reading "Bikini Bademoden" is no material, "‹ Zurück zu den Suchergebnissen" no path."""
    jacket = _extract("gdb_amazon-jacket-table").products[0]
    assert (jacket.color, jacket.material) == ("Backsteinrot", "100% polyester")
    assert jacket.category_path[-2:] == ["Jackets", "Fleece Jackets"]
    assert jacket.sources["category_path"] == "html:breadcrumb"
    swimsuit = _extract("gdb_amazon-swimsuit").products[0]
    assert (swimsuit.color, swimsuit.material) == ("Blau", None)
    shorts = _extract("gdb_amazon-swimshorts").products[0]
    assert (shorts.material, shorts.category_path) == ("100% Polyester", [])
    dress = _extract("gdb_amazon-dress").products[0]
    assert (dress.material, dress.sources["material"]) == ("100% polyester", "html:composition")
    chair = _extract("aap_amazon-de-chaircover").products[0]  # "Wei&#xc3;&#x9f; + Schwarz" as served
    assert chair.color == "Weiß + Schwarz"
    watch = _extract("lcpp_amazon-es-pt-smartwatch").products[0]  # Portuguese: "Cor" | "Preto", "Em stock."
    assert (watch.color, watch.availability) == ("Preto", "InStock")
    cd = _extract("aap_amazon-fr-cd").products[0]  # the "More Buying Choices" box's EUR 16,40 comes first
    assert (cd.price, cd.currency, cd.brand) == (Decimal("9.99"), "EUR", None)


@pytest.mark.parametrize(
    ("url", "text", "iso"),
    [
        ("https://www.amazon.com/dp/B0057OC5O8", "$8.99", "USD"),
        ("https://www.amazon.co.uk/dp/B0057OC5O8", "£8.99", "GBP"),
        ("https://www.amazon.co.jp/dp/B0057OC5O8", "￥ 1,280", "JPY"),
        ("https://www.amazon.com/dp/B0057OC5O8", "8.99", None),  # a dollar marketplace needs "$"
        ("https://www.amazon.de/dp/B0057OC5O8", "$8.99 USD", None),  # the text names another
        ("https://www.example.com/p/1", "$8.99", None),
    ],
)
def test_an_amazon_marketplace_names_its_currency_only_when_the_price_agrees(url, text, iso):
    assert marketplace_currency(url, text) == iso


def test_a_structured_products_gaps_are_filled_only_from_what_the_page_states():
    """Pages with markup (platforms' dev pages): a variant <select>'s options and its "Clear" link
    are choices, not the product's colour or material; a brand named "Cream Co." gives no colour;
    a composition outranks a bare labelled name; a brand given as a link is the link's text; a
    missing brand comes from a "Marke" field."""
    bean_bag = _extract("portia_ariika-willow-bean-bag").products[0]
    assert (bean_bag.color, bean_bag.material) == (None, None)
    assert _extract("trendyol_cream-co-moisturizer").products[0].color is None
    assert _extract("portia_ikea-eg-moshult").products[0].material == "64% cotton, 36% polyester"
    assert _extract("portia_oriflame-eg-activelle-31270").products[0].brand == "Activelle"
    grease = _extract("traf_toralin-xado-schmierfett").products[0]
    assert (grease.brand, grease.sources["brand"]) == ("XADO", "html:field")
