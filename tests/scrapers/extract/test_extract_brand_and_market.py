"""Issue 27, ninth round: a brand named only by a link to its own listing, and the dollar of a
shop that states no market but shows its US address. Each rule on real dev payloads of
tests/corpus, on a small page that shows it alone, and on the cases where it must NOT fire (a
missing fact is better than an invented one)."""

from __future__ import annotations

from pathlib import Path

import pytest
from corpus_pages import corpus_page, corpus_product, only_product, page_products

from lookbench_live.scrapers.extract.values import url_key

URL = "https://shop.example.com/catalog/linen-shirt.html"
HEAD = '<h1>{title}</h1><span class="price">{price}</span>{buy}'
BUY = "<button>Add to cart</button>"


def _page(
    body: str, title: str = "Acme Linen Shirt", price: str = "$25.00", lang: str = "en", buy: str = BUY
) -> str:
    heading = HEAD.format(title=title, price=price, buy=buy)
    return f'<html lang="{lang}"><head><title>{title} - Example Shop</title></head><body>{heading}{body}</body></html>'


def _one(text: str, url: str = URL):
    return only_product(text, url)


# --------------------------------------------------------------------------- brand links


def test_a_link_to_the_brands_listing_names_the_brand():
    # jr.com's "See all Sony …" (`/brand/sony/n/56363/`), ecost.com's "Other products by Samsung"
    # (`/manufacturer/Samsung/smsc.aspx`), onsale.com's `/s?cc=LAKB&man=Nikon`: 2010 shops
    # whose only statement of the brand is that link.
    for name, brand in (
        ("swde_jr-sony-dsc-w330-black", "Sony"),
        ("swde_ecost-samsung-tl205-dark-blue", "Samsung"),
        ("swde_onsale-nikon-coolpix-s70-red", "Nikon"),
        # 2010 Amazon: "by <a href=…&field-brandtextbin=Canon>Canon</a>" under the heading.
        ("swde_amazon-canon-powershot-sd1300-is-silver", "Canon"),
    ):
        product = corpus_product(name)
        assert (product.brand, product.sources["brand"]) == (brand, "html:brand-link"), name
    # As the title writes it, however the URL does; a brand of several words; a query key.
    for link, title, brand in (
        ('<a href="/brands/acme-co/">More from this maker</a>', "ACME Co Linen Shirt", "ACME Co"),
        ('<a href="/designer/Acme.html">Acme</a>', "Acme Linen Shirt", "Acme"),
        ('<a href="/search?q=&brand=La+Crosse">La Crosse</a>', "La Crosse Atomic Clock", "La Crosse"),
        ('<a href="/s?node=1&filter_brand=Acme">Acme</a>', "Acme Linen Shirt", "Acme"),
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
        ('<div><a href="/list?brand_id=38">Acme</a></div>', "Acme Linen Shirt"),
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
    product = corpus_product("fathom_campusbikeshop-kryptolok-series-2")
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
        product = corpus_product(name)
        assert (product.currency, product.sources["currency"]) == ("USD", "html:us-address"), name
    # A structured product with no currency, its shown "$" price read from the page (CVS).
    assert corpus_product("fathom_cvs-ihome-compact-wall-charger").currency == "USD"
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


# --------------------------------------------------------------------------- dispatch time


def test_an_element_named_for_the_dispatch_time_states_the_stock():
    # bookdepository.com: `<span class="dispatchMessage">Usually dispatched within 48 hours</span>`.
    assert corpus_product("swde_bookdepository-sarahs-key").availability == "InStock"
    for message in (
        '<span class="dispatchMessage">Usually dispatched within 48 hours</span>',
        '<p class="shipping-time">Ships in 2-3 business days</p>',
    ):
        assert _one(_page(message, buy="")).availability == "InStock", message
    for message in (
        # Not a dispatch time within days: a word that is no stock, a later dispatch.
        '<span class="dispatchMessage">Dispatch available to the UK only</span>',
        '<span class="dispatchMessage">Usually dispatched within 3 weeks</span>',
        '<span class="dispatchMessage">Dispatched within 48 hours of release</span>',
    ):
        assert _one(_page(message)).sources["availability"] == "html:buy-control", message
        assert page_products(_page(message, buy=""), URL) == [], message  # nor a product page


# --------------------------------------------------------------------------- book shops, 2010


def test_a_headings_byline_is_no_part_of_the_name():
    # Barnes & Noble: `<h1>One Day <em class="nl">by <a href=…ATH=David+Nicholls>David Nicholls</a></em></h1>`.
    book = corpus_product("swde_barnesandnoble-one-day")
    assert (book.title, book.availability, book.category_path) == (
        "One Day",
        "InStock",  # "Usually ships within 2-3 days", a link to the shipping help
        [
            "Books",
            "Motivations - Fiction",
        ],  # not the bar's "Add To List", "E-mail a Friend", "Print This Page"
    )
    for heading, name in (
        ('One Day <span class="author">by David Nicholls</span>', "One Day"),
        ('One Day <em>by <a href="/a/david-nicholls">David Nicholls</a></em>', "One Day"),
        ("Stand <em>by Me</em>", "Stand by Me"),  # the name's own words link nowhere
    ):
        assert _one(_page("", title=heading)).title == name, heading


def test_usually_ships_within_days_alone_is_in_stock_and_a_banner_is_not():
    assert (
        _one(_page('<a href="/help/shipping">Usually ships within 2-3 days</a>', buy="")).availability
        == "InStock"
    )
    for banner in (
        "<p>Most orders ship within 24 hours of payment.</p>",
        "<p>Usually ships within 2-3 days when ordered before noon on a weekday, from our warehouse.</p>",
        "<p>Usually ships within 4 weeks</p>",
    ):
        assert page_products(_page(banner, buy=""), URL) == [], banner


def test_trail_bar_tools_are_no_categories():
    trail = (
        '<div id="header-breadcrumbs"><p><a href="/">Home</a> <a href="/books">Books</a> '
        '<a href="/fiction">Fiction</a></p><ul class="print-email"><li><a href="/list">Add To List</a></li>'
        '<li><a href="/mail" class="emailAFriend">E-mail a Friend</a></li></ul></div>'
    )
    assert _one(_page(trail)).category_path == ["Books", "Fiction"]


def test_a_number_in_the_h1_is_no_name_and_a_whole_part_of_the_page_title_is():
    # AbeBooks: `<h1 class="isbn">9780805087444</h1>` over `<h2 class="plptitle">` with the
    # book's name, titled "9780805087444: A People's History of American Empire - AbeBooks -
    # Zinn, Howard;Buhle, Paul;…". Its page lists ten sellers' offers with a buy button each:
    # no one product's price, so no product rather than the ISBN as a name.
    assert page_products(*corpus_page("swde_abebooks-peoples-history-american-empire")) == []
    title = "9780805087444: Linen Shirt Blue - Example Shop - Zinn, Howard; Buhle, Paul"
    body = (
        "<h1>9780805087444</h1><h2>Linen Shirt Blue</h2><p>Our Price: $25.00</p><button>Add to cart</button>"
    )
    text = f"<html><head><title>{title}</title></head><body>{body}</body></html>"
    (product,) = page_products(text, URL)
    assert (product.title, str(product.price)) == ("Linen Shirt Blue", "25.00")
    # Not a few of the title's words in a heading that is none of its parts.
    text = text.replace("<h2>Linen Shirt Blue</h2>", "<h2>Linen Blue</h2>")
    assert page_products(text, URL) == []


def test_the_sites_branding_block_is_no_brand():
    logo = '<div id="branding"><a href="https://shop.example.com/"><img src="/logo.gif" alt="Example Passion"></a></div>'
    assert _one(_page(logo)).brand is None


# --------------------------------------------------------------------------- camera shops, 2010


def test_a_block_named_for_the_price_and_the_offers_link_holds_the_price():
    # 2010 Amazon: "Price: $129.00" inside `#price-and-olp-condition-link-outer`; the picture in
    # `div#prodImageCell > a > img`.
    camera = corpus_product("swde_amazon-canon-powershot-sd1300-is-silver")
    assert (str(camera.price), camera.currency, camera.product_id) == ("129.00", "USD", "B0035FZJKI")
    assert camera.images[0].startswith("http://ecx.images-amazon.com/images/I/41eDq%2BYYvyL.")
    head = "<h1>Linen Shirt</h1><button>Add to cart</button>"
    # Other sellers' offers before it stay other prices: `olp_feature_div`, `mbc`.
    own = '<div id="price-and-olp-condition-link-outer"><b class="priceLarge">$25.00</b></div>'
    for holder in ('<div id="olp_feature_div">', '<div class="mbc">'):
        offers = f'{holder}<span class="price">$19.00</span></div>'
        assert str(_one(f"<html><body>{head}{offers}{own}</body></html>").price) == "25.00", holder


def test_the_first_picture_in_a_holder_named_for_the_main_image():
    holder = '<div id="prodImageCell"><a href="/images/big"><img src="/i/shirt.jpg" alt="x"></a></div>'
    assert _one(_page(holder)).images == ["https://shop.example.com/i/shirt.jpg"]
    thumbs = '<div id="prodImageCell" class="thumbs"><img src="/i/a.jpg"><img src="/i/b.jpg"></div>'
    assert _one(_page(thumbs)).images == []


def test_a_crumbs_title_when_its_text_adds_no_word():
    # Newegg: `<a title="Cameras &amp; Camcorders">Cameras &amp; Camcorders<span>0_.</span></a>`.
    assert corpus_product("swde_newegg-canon-powershot-s90-black").category_path == [
        "Cameras & Camcorders",
        "Point & Shoot Cameras",
        "Canon USA",
    ]
    trail = (
        '<div class="breadcrumb"><a href="/">Home</a> <a href="/shirts" title="Shirts">Shirts<span>1_.</span></a> '
        '<a href="/linen" title="Linen">Linen shirts for summer</a></div>'
    )
    assert _one(_page(trail)).category_path == ["Shirts", "Linen shirts for summer"]


def test_an_item_query_keys_a_script_pages_product():
    # PCNation: `details.asp?item=1732AA`; before, every item of the site had the key
    # "/web/details.asp" (so no alias is kept: that key named no one product).
    assert corpus_product("swde_pcnation-panasonic-lumix-dmc-fx37-black").product_id == "1732AA"
    assert url_key("http://www.pcnation.com/web/details.asp?item=1732AA") == "1732AA"
    assert url_key("https://shop.example.com/list.asp?item=shirts") == "/list.asp"  # no number: no item


# --------------------------------------------------------------------------- the review's pages

PAGES = Path(__file__).parent / "brand_market_pages"


def _review(name: str):
    text = (PAGES / f"{name}.html").read_text(encoding="utf-8")
    url = text.split("\n", 1)[0].removeprefix("<!-- ").removesuffix(" -->").strip()
    return page_products(text, url)


# A review of the round's rules wrote these pages to make them state a wrong fact or lose a
# right one (each first line is the page's URL); each case below failed on the rules as first
# written and is what the narrowed rule gives (the fact, or no product where the page gives none).
@pytest.mark.parametrize(
    ("name", "fact", "value"),
    [
        # A dispatch time is no stock on a page that says the item is sold out.
        ("r4a_soldout_usually_ships", None, None),
        ("r4b_dispatch_banner_soldout", None, None),
        ("r4f_soldout_dispatch_info", None, None),
        ("r4g_plain_out_usually", None, None),
        ("r4e_status_sold_usually", "availability", "OutOfStock"),
        ("r4d_usually_ships_plain", "availability", "InStock"),
        # A US address on a Canadian, Australian or Mexican shop's page is no dollar of theirs.
        ("r3a_canadian_blaine", "currency", None),
        ("r3b_australian_us_office", "currency", None),
        ("r3e_mx_border", "currency", None),
        ("r3c_review_city", "currency", "CAD"),
        ("r3d_canadian_shipfrom_usd_correct", "currency", "USD"),
        # A short number is a name ("1984", "1917"); only a long code is none.
        ("r6a_book_1984", "title", "1984 by George Orwell"),
        ("r6e_film_1917", "title", "1917"),
        # No brand from what the product fits, a brand list, or a word inside a name.
        ("r1a_compatible_brand_sidebar", "brand", None),
        ("r1b_shop_by_brand_sidebar", "brand", None),
        ("r1c_compatible_query", "brand", None),
        ("r1d_brands_all", "brand", None),
        ("r1e_by_terry_correct", "brand", "By Terry"),
        # A brand or a name that starts with "By" is no byline.
        ("r5a_by_terry_h1", "title", "By Terry Hyaluronic Hydra-Powder"),
        ("r5b_by_far_whole_link", "title", "By Far Rachel Leather Shoulder Bag"),
        ("r5d_book_byline_ok", "title", "One Day"),
        # The main picture's holder: not its badge or the brand's logo.
        ("r10a_badge_first", "image", "https://www.shoeplace.com/media/catalog/trail-runner-gtx-side.jpg"),
        ("r10b_brand_logo_first", "image", "https://www.audiostore.com/media/x1-600.jpg"),
        # A category in the tabs is no name: only the longest part before the last.
        ("r6c_part_sale", None, None),
        # Other sellers' price alone is no price of the product's.
        ("r9b_olp_only", None, None),
        ("r9a_olp_price_block", "price", "24.99"),
        # Crumbs whose class says "print" or "email", a crumb's model number.
        ("r8a_printers_crumb", "category", ["Printers", "Laser Printers"]),
        ("r8b_social_crumb", "category", ["Cards", "Wedding"]),
        ("r8c_crumb_title_number", "category", ["PlayStation 5", "Controllers"]),
        ("r8d_bn_tools_ok", "category", ["Books", "Fiction"]),
        # A product's own "branding" block is its brand; the site's `#branding` is not.
        ("r7a_product_branding", "brand", "Makita"),
        # A brand field that says the item has none is no brand (eBay, Mercado Libre).
        ("r2a_unbranded", "brand", None),
        ("r2b_does_not_apply", "brand", None),
        ("r2c_generic_es", "brand", None),
        ("r2d_field_unbranded_baseline", "brand", None),
        ("r11a_item_qty", "product_id", "/catalog.php"),
        ("r11c_item_ok", "product_id", "1732AA"),
    ],
)
def test_the_reviews_pages(name, fact, value):
    products = _review(name)
    if fact is None:
        assert products == []
        return
    (product,) = products
    got = {
        "image": (product.images or [None])[0],
        "category": product.category_path,
        "price": str(product.price),
    }.get(fact, getattr(product, fact, None))
    assert got == value


def test_a_brand_field_saying_there_is_none_on_every_platform():
    from lookbench_live.scrapers.extract import extract_shopify, extract_woocommerce
    from lookbench_live.scrapers.extract.values import known_brand

    for value in ("Unbranded", "Does not apply", "Generic", "Genérico", "N/A", "sin marca", "-"):
        assert known_brand(value) is None, value
    # Real brands: E-Mart's "No Brand", Loblaw's "No Name", words that start like one.
    for value in ("No Brand", "No Name", "Nonesuch", "Generics Lab", "Acme"):
        assert known_brand(value) == value
    shop = {"products": [{"id": 1, "title": "Tee", "handle": "tee", "vendor": "Unbranded",
                          "variants": [{"id": 2, "price": "10.00", "available": True}]}]}  # fmt: skip
    assert extract_shopify(shop, "https://shop.example.com/products.json").products[0].brand is None
    woo = [{"id": 3, "name": "Mug", "permalink": "https://shop.example.com/product/mug/",
            "prices": {"price": "1000", "currency_code": "USD", "currency_minor_unit": 2},
            "brands": [{"name": "Generic"}]}]  # fmt: skip
    products = extract_woocommerce(woo, "https://shop.example.com/wp-json/wc/store/v1/products").products
    assert [p.brand for p in products] == [None]
