"""Issue 27, ninth round: a brand named only by a link to its own listing, and the dollar of a
shop that states no market but shows its US address. Each rule on real dev payloads of
tests/corpus, on a small page that shows it alone, and on the cases where it must NOT fire (a
missing fact is better than an invented one)."""

from __future__ import annotations

import pytest
from corpus_pages import corpus_page, page_products

URL = "https://shop.example.com/catalog/linen-shirt.html"
HEAD = '<h1>{title}</h1><span class="price">{price}</span><button>Add to cart</button>'


def _page(body: str, title: str = "Acme Linen Shirt", price: str = "$25.00", lang: str = "en") -> str:
    heading = HEAD.format(title=title, price=price)
    return f'<html lang="{lang}"><head><title>{title} - Example Shop</title></head><body>{heading}{body}</body></html>'


def _one(text: str, url: str = URL):
    (product,) = page_products(text, url)
    return product


def _shown(name: str):
    (product,) = page_products(*corpus_page(name))
    return product


# --------------------------------------------------------------------------- brand links


def test_a_link_to_the_brands_listing_names_the_brand():
    # jr.com's "See all Sony …" (`/brand/sony/n/56363/`), ecost.com's "Other products by Samsung"
    # (`/manufacturer/Samsung/smsc.aspx`), onsale.com's `/s?cc=LAKB&man=Nikon`: 2010 shops
    # whose only statement of the brand is that link.
    for name, brand in (
        ("swde_jr-sony-dsc-w330-black", "Sony"),
        ("swde_ecost-samsung-tl205-dark-blue", "Samsung"),
        ("swde_onsale-nikon-coolpix-s70-red", "Nikon"),
    ):
        product = _shown(name)
        assert (product.brand, product.sources["brand"]) == (brand, "html:brand-link"), name
    # As the title writes it, however the URL does; a brand of several words; a query key.
    for link, title, brand in (
        ('<a href="/brands/acme-co/">More from this maker</a>', "ACME Co Linen Shirt", "ACME Co"),
        ('<a href="/designer/Acme.html">Acme</a>', "Acme Linen Shirt", "Acme"),
        ('<a href="/search?q=&brand=La+Crosse">La Crosse</a>', "La Crosse Atomic Clock", "La Crosse"),
    ):
        assert _one(_page(f"<div>{link}</div>", title=title)).brand == brand, link


@pytest.mark.parametrize(
    ("body", "title"),
    [
        # A menu, header or footer lists every brand the shop sells.
        ('<nav><a href="/brand/acme/">Acme</a></nav>', "Acme Linen Shirt"),
        ('<div class="main-menu"><a href="/brand/acme/">Acme</a></div>', "Acme Linen Shirt"),
        ('<div id="footer"><a href="/brand/acme/">Acme</a></div>', "Acme Linen Shirt"),
        # A brand the title does not start with: a compatible device, a line, a word inside.
        ('<div><a href="/brand/apple/">Apple</a></div>', "Leather Case for Apple iPhone"),
        ('<div><a href="/brand/acme/">Acme</a></div>', "Acmeware Linen Shirt"),
        # A title that is only the brand's name; a numeric brand id; the brands page itself.
        ('<div><a href="/brand/acme/">Acme</a></div>', "Acme"),
        ('<div><a href="/brand/38/">Acme</a></div>', "Acme Linen Shirt"),
        ('<div><a href="/brands/">All brands</a></div>', "Acme Linen Shirt"),
    ],
)
def test_no_brand_from_a_menus_link_or_one_the_title_does_not_start_with(body, title):
    assert _one(_page(body, title=title)).brand is None


def test_no_brand_from_the_links_of_recommended_products():
    cards = "".join(
        f'<li class="item"><img src="/i/{i}.jpg"><a href="/brand/acme/">Acme</a> <span>$1{i}.00</span></li>'
        for i in range(3)
    )
    assert _one(_page(f"<ul>{cards}</ul>")).brand is None


def test_a_meta_description_that_leads_with_the_brand_field():
    # SmartEtailing's bike shops: "Brand: Kryptonite, Product: KryptoLok Series 2 w/ Key".
    product = _shown("fathom_campusbikeshop-kryptolok-series-2")
    assert (product.brand, product.sources["brand"]) == ("Kryptonite", "meta:description")
    for description, brand in (
        ("Brand: Acme, Product: Linen Shirt", "Acme"),
        ("Our brand: Acme, loved by all", None),  # not a leading field
        ("Shop Acme linen. Brand new season", None),
    ):
        text = _page("").replace("</head>", f'<meta name="description" content="{description}"></head>')
        assert _one(text).brand == brand, description


# --------------------------------------------------------------------------- a US address


def test_a_shop_showing_its_us_address_sells_in_dollars():
    # 2010 shops with lang="en" at a .com host: "$" alone could be five currencies; the address
    # in the footer (J&R's "New York, NY 10038", onsale's "Torrance, CA 90504") says which.
    for name in ("swde_jr-sony-dsc-w330-black", "swde_onsale-nikon-coolpix-s70-red"):
        product = _shown(name)
        assert (product.currency, product.sources["currency"]) == ("USD", "html:us-address"), name
    # A structured product with no currency, its shown "$" price read from the page (CVS).
    assert _shown("fathom_cvs-ihome-compact-wall-charger").currency == "USD"
    footer = "<footer>Example Shop, 1 Main St., Mountain View, CA 94041-1234</footer>"
    assert _one(_page(footer)).currency == "USD"


@pytest.mark.parametrize(
    ("body", "price", "lang", "currency"),
    [
        ("<p>No address at all.</p>", "$25.00", "en", None),
        # Canada's, Australia's and Mexico's addresses; a ZIP with no state; a state code in prose.
        ("<footer>Toronto, ON M5V 2T6</footer>", "$25.00", "en", None),
        ("<footer>Sydney NSW 2000</footer>", "$25.00", "en", None),
        ("<footer>Monterrey, NL 64000</footer>", "$25.00", "en", None),
        ("<footer>Order 12345 shipped</footer>", "$25.00", "en", None),
        # A page that states its market: its own currency, never the address's.
        ("<footer>Blaine, WA 98230</footer>", "$25.00", "en-CA", "CAD"),
        ("<footer>Blaine, WA 98230</footer>", "$25.00", "en-GB", None),
        # A price that names another currency.
        ("<footer>Blaine, WA 98230</footer>", "C$25.00", "en", "CAD"),
        ("<footer>Blaine, WA 98230</footer>", "AU$25.00", "en", "AUD"),
    ],
)
def test_no_dollar_from_an_address_that_is_not_a_us_one_or_a_page_with_its_market(
    body, price, lang, currency
):
    assert _one(_page(body, price=price, lang=lang)).currency == currency
