"""Issue 27, eighth round: older shops' pages with no product markup (2004-2007 table layouts:
cduniverse.com, moviesunlimited.com, nolo.com, markcarey.com, saved in the CleanEval set) and
pages that are not a product (a price-comparison guide, news articles marked up as a Product).
Each rule on a real dev payload of tests/corpus, on a small hand-written page that shows it alone,
and on a case where it must NOT fire (a missing fact is better than an invented one). A key
changed by a rule keeps the old one as an alias, tested on a lake written before."""

from __future__ import annotations

from pathlib import Path

from corpus_pages import FIRST_SEEN, corpus_page, page_products, rekeyed_lake
from lxml import html as lxml_html

from lookbench_live.scrapers.extract import extract_document
from lookbench_live.scrapers.extract.conventions import button_picture, control_name
from lookbench_live.scrapers.extract.values import url_key

URL = "https://shop.example.com/catalog/linen-shirt.html"


def _page(body: str, title: str = "Linen Shirt Blue - Example Shop", head: str = "") -> str:
    return f"<html><head><title>{title}</title>{head}</head><body>{body}</body></html>"


def _products(text: str, url: str = URL):
    return page_products(text, url)


def _shown(name: str):
    (product,) = page_products(*corpus_page(name))
    return product


def _element(markup: str):
    return lxml_html.fragment_fromstring(markup)


# --------------------------------------------------------------------------- the old shops


def test_older_shops_pages_give_their_product():
    # Title in bold under no <h1>, the price after it in a plain cell, the buy button a picture.
    cd = _shown("cleaneval_cduniverse-richard-marx-greatest-hits")
    assert (cd.title, str(cd.price), cd.product_id, cd.availability) == (
        "Greatest Hits CD",
        "9.65",
        "1107874",
        "InStock",
    )
    assert cd.images == ["http://cover6.cduniverse.com/MuzeAudioArt/260/265038.jpg"]
    dvd = _shown("cleaneval_moviesunlimited-city-by-the-sea-dvd")
    assert (dvd.title, str(dvd.price), dvd.product_id) == (
        "City By The Sea (Widescreen Version) [DVD]",
        "13.49",  # not the struck "Was $14.99" before it
        "D37860",
    )
    assert dvd.images == ["http://www.moviesunlimited.com/boxcovers/100_Wide/D37860.jpg"]
    book = _shown("cleaneval_nolo-student-tourist-visas")
    assert (book.title, str(book.price), book.availability) == (
        "Student & Tourist Visas: How to Come to the U.S.",
        "25.49",
        "InStock",
    )
    assert book.images == ["http://www.nolo.com/graphics/covers/ISTU_icon.gif"]


def test_pages_that_are_not_a_product_give_none():
    # A price-comparison guide (rows of other shops' offers), news articles that mark themselves
    # up as a Product for a paywall or a rating.
    for name in (
        "cleaneval_dealtime-weight-lifting-guide",
        "dragnet_engadget-slackware-arch-article",
        "readability_nytimes-winter-weather-article",
    ):
        assert page_products(*corpus_page(name)) == [], name


# --------------------------------------------------------------------------- buy controls


def test_a_controls_name_is_what_a_browser_reads():
    assert (
        control_name(_element('<input type="image" src="/i/b.gif" alt="Add to Basket">')) == "Add to Basket"
    )
    assert (
        control_name(_element('<a href="/cart"><img src="/i/b.gif" alt="Add to Cart"></a>')) == "Add to Cart"
    )
    assert control_name(_element('<button aria-label="Add to bag"><svg></svg></button>')) == "Add to bag"
    assert control_name(_element("<button>Add <b>to</b> cart</button>")) == "Add to cart"
    assert (
        control_name(_element('<input type="submit" value="Add to Shopping Cart">')) == "Add to Shopping Cart"
    )
    assert control_name(_element('<a href="/x" title="Wish list"><img src="/i/w.gif"></a>')) == "Wish list"


def test_a_buttons_picture_names_what_it_does():
    assert (
        button_picture(_element('<input type="image" src="/images/btn_addtocart.gif">'))
        == "btn_addtocart.gif"
    )
    assert (
        button_picture(_element('<a href="/o"><img src="/assets/add_to_order_btn2.gif?v=2"></a>'))
        == "add_to_order_btn2.gif"
    )
    assert button_picture(_element('<a href="/cart"><img src="/images/view_cart.gif"></a>')) == ""
    assert button_picture(_element('<a href="/p"><img src="/images/addtocart-banner/sale.jpg"></a>')) == ""


def test_a_picture_button_or_its_alt_makes_a_product_page():
    price = '<h1>Linen Shirt Blue</h1><span class="price">$25.00</span>'
    for button in (
        '<form action="/shop.cfm"><input type="image" name="task_add_LS1" src="/images/btn_addtocart.gif"></form>',
        '<a href="/checkout/cart.asp?pid=1"><img src="/images/b1.gif" alt="Add to Cart"></a>',
    ):
        (product,) = _products(_page(price + button))
        assert (product.title, str(product.price)) == ("Linen Shirt Blue", "25.00")
    # A picture link to the cart or a wish list is no buy control.
    assert (
        _products(_page(price + '<a href="/cart"><img src="/images/view_cart.gif" alt="View Cart"></a>'))
        == []
    )


def test_add_to_cart_in_the_platforms_languages():
    price = '<h1>Koszula lniana</h1><span class="price">€ 25,00</span>'
    for words in (
        "Dodaj do koszyka",
        "Agregar al carrito",
        "Sepete ekle",
        "Adicionar ao carrinho",
        "Læg i kurv",
    ):
        assert len(_products(_page(f"{price}<button>{words}</button>"))) == 1, words
    # The words that lead to the cart are no buy control.
    for words in ("Przejdź do koszyka", "Zum Warenkorb", "Ver carrito", "Go to cart"):
        assert _products(_page(f"{price}<button>{words}</button>")) == [], words


# --------------------------------------------------------------------------- title, price, stock


def test_the_element_the_page_title_repeats_is_the_title_when_there_is_no_h1():
    body = (
        '<table><tr><td><font size="4"><b>Linen Shirt Blue</b></font></td></tr>'
        "<tr><td><i>Was $29.00</i> <font><b>$25.00</b></font></td></tr></table>"
        '<a href="/basket.asp?add=LS1"><img src="/img/add_to_basket.gif"></a>'
    )
    (product,) = _products(_page(body, title="Linen Shirt Blue at Example Shop"))
    assert (product.title, str(product.price)) == ("Linen Shirt Blue", "25.00")
    assert product.sources["title"] == "html:page-title-element"


def test_the_page_title_rule_needs_most_of_the_title_and_no_h1():
    button = '<a href="/basket.asp?add=1"><img src="/img/add_to_basket.gif"></a><b>$25.00</b>'
    # A word or two of a long title (a menu's "Shirts") names no product.
    assert (
        _products(_page(f"<b>Shirts</b>{button}", title="Linen Shirt Blue with Shell Buttons - Shirts")) == []
    )
    # The shop's own name never: the title's last part, the host's words, a logo linking home.
    for url, logo in (
        ("https://shop.example.com/p/1", "<div>Example Shop</div>"),
        ("https://www.exampleshop.com/p/1", "<div>Example Shop</div>"),
        ("https://www.jeans.example/p/1", '<div><a href="/">Example Shop</a></div>'),
    ):
        (product,) = _products(
            _page(f"{logo}<b>Linen Shirt</b>{button}", title="Linen Shirt - Example Shop"), url
        )
        assert product.title == "Linen Shirt", logo
        # The title's last part is read as the shop's: "Linen Shirt" is left out too, never the
        # shop's name taken for it.
        page = _page(f"{logo}<b>Linen Shirt</b>{button}", title="Example Shop | Linen Shirt")
        assert [p.title for p in _products(page, url)] == [], logo
    # With an <h1>, the heading rules decide (here: the one <h1>).
    (product,) = _products(_page(f"<h1>Linen Shirt</h1><b>Linen Shirt Blue</b>{button}"))
    assert product.title == "Linen Shirt"


def test_usually_ships_within_days_is_in_stock():
    def stock(field: str) -> str | None:
        body = f'<h1>Linen Shirt Blue</h1><span class="price">$25.00</span><b>Availability:</b> {field}'
        (product,) = _products(_page(body, head='<meta property="og:type" content="product">'))
        return product.availability

    assert stock("<span>Usually ships in 1-2 days</span>") == "InStock"
    assert stock("<span>Usually ships within 24 hours</span>") == "InStock"
    # Weeks or months is a back order.
    assert stock("<span>Usually ships in 2-3 weeks</span>") is None


# --------------------------------------------------------------------------- pictures


def test_a_picture_named_for_the_product():
    price = '<h1>Greatest Hits CD</h1><span class="price">$9.65</span><button>Add to cart</button>'
    (product,) = _products(_page(f'{price}<img src="/c/265038.jpg" alt="Marx, Richard - Greatest Hits CD">'))
    assert product.images == ["https://shop.example.com/c/265038.jpg"]
    (product,) = _products(_page(f'{price}<img src="/c/cover.gif" alt="Greatest Hits CD">'))
    assert product.images == ["https://shop.example.com/c/cover.gif"]
    # A spacer GIF, or an alt that only holds the name inside other words, is not the picture.
    (product,) = _products(
        _page(f'{price}<img src="/i/spacer.gif"><img src="/c/x.jpg" alt="More Greatest Hits CD deals">')
    )
    assert product.images == []


def test_a_picture_filed_under_the_products_id():
    body = (
        "<h1>City By The Sea</h1><b>$13.49</b><span>#D37860</span>"
        '<a href="/additem.asp?sku=D37860"><img src="/b/add_to_order.gif"></a>'
        '<img src="/boxcovers/D37861.jpg"><img src="/boxcovers/100_Wide/D37860.jpg">'
    )
    (product,) = _products(_page(body), "https://shop.example.com/product.asp?sku=D37860")
    assert product.product_id == "D37860"
    assert product.images == ["https://shop.example.com/boxcovers/100_Wide/D37860.jpg"]


# --------------------------------------------------------------------------- ids and keys


def test_a_padded_query_value_keys_the_item():
    assert url_key("http://www.moviesunlimited.com/musite/product.asp?sku=D37860++") == "D37860"
    assert url_key("https://shop.example.com/product.asp?sku=D37860") == "D37860"


def test_a_part_number_is_the_id_and_the_lake_keeps_the_path_key(tmp_path):
    text, url = corpus_page("cleaneval_cduniverse-richard-marx-greatest-hits")
    (product,) = page_products(text, url)
    old_id = "/search/xx/music/pid/1107874/a/Greatest+Hits.htm"  # the page's URL key
    assert (product.product_id, product.id_aliases) == ("1107874", [old_id])
    rows = rekeyed_lake(tmp_path, product, old_id, "cduniverse")
    assert {r["product_id"] for r in rows} == {old_id}
    assert {r["first_seen_at"] for r in rows} == {FIRST_SEEN}


# --------------------------------------------------------------------------- not a product


def test_an_article_marked_up_as_a_product_with_no_price_is_no_product():
    item = (
        '<div itemscope itemtype="http://schema.org/Product"><span itemprop="name">Arch Linux</span>'
        '<div itemprop="aggregateRating" itemscope itemtype="http://schema.org/AggregateRating">'
        '<span itemprop="ratingValue">4</span></div></div>'
    )
    article = '<meta property="og:type" content="article">'
    extraction = extract_document(_page(item, head=article), URL)
    assert extraction.products == []
    assert [p.reason for p in extraction.problems] == ["article_not_product"]
    # The same item with its price is a product, article or not; without og:type it stays too.
    offer = '<div itemprop="offers" itemscope itemtype="http://schema.org/Offer"><span itemprop="price">9.99</span></div>'
    priced = item.replace("</div></div>", f"</div>{offer}</div>")
    assert len(_products(_page(priced, head=article))) == 1
    assert len(_products(_page(item))) == 1


def test_rows_of_named_cells_are_cards_and_unnamed_rows_are_not():
    row = '<tr{cls}><td class="pic"><img src="/p{i}.jpg"></td><td class="desc"><a href="/offer/{i}">Bench {i}</a></td><td><div class="price">${i}9.99</div></td></tr>'
    rows = "".join(row.format(i=i, cls=' class="first"' if i == 1 else "") for i in range(1, 5))
    guide = (
        f'<h1>Weight Benches Guide</h1><div class="stock">In stock at 12 stores</div><table>{rows}</table>'
    )
    assert _products(_page(guide, title="Weight Benches Guide")) == []
    # An older shop's own page laid out in rows of unnamed cells, each with a picture and a price.
    own = (
        '<table><tr><td><img src="/c/1.jpg" alt="Greatest Hits CD"></td><td><b>Greatest Hits CD</b> '
        'Our Price: <font>$9.65</font> <a href="/cart.asp?pid=1"><img src="/b-addtocart.gif" alt="Add to Cart"></a></td></tr>'
        '<tr><td><img src="/i/f.gif"></td><td>Other formats: Cassette $7.99</td></tr>'
        '<tr><td><img src="/i/l.gif"></td><td>List Price $11.98</td></tr></table>'
    )
    (product,) = _products(_page(own, title="Greatest Hits by Richard Marx CD"))
    assert (product.title, str(product.price)) == ("Greatest Hits CD", "9.65")


# --------------------------------------------------------------------------- must not fire (review)


def _review_page(name: str) -> str:
    return (REVIEW / f"{name}.html").read_text(encoding="utf-8")


REVIEW = Path(__file__).parent / "old_shop_pages"


def test_no_product_from_a_page_that_sells_many_or_none():
    # An older shop's category page: its name in bold, a buy button per row (no item URL).
    assert _products(_review_page("category"), "http://www.moviesgalore.com/category.asp?cat=action") == []
    # A blog review with no <h1>: "Buy now" links to another shop.
    assert _products(_review_page("review"), "http://www.gadgetblog.net/2009/06/sx200-review.html") == []
    # A wish list's "Add to Cart" buttons and no price: no product (a price is still needed).
    assert _products(_review_page("wish_list"), "https://shop.example.com/wishlist") == []
    # A header's "0 artikelen in de winkelwagen" link is no buy control.
    assert _products(_review_page("cart_count_nl"), "https://www.tuincentrum.example/aanbiedingen") == []


def test_the_page_title_element_is_never_the_shops_or_a_trails_name():
    # "Sarah's Key - The Book Shop Ltd": the shop's name is the title's last part, never the name;
    # the book's own name is a whole part before it (read since the ninth round).
    products = _products(
        _review_page("shop_name"), "http://www.bookshopltd.co.uk/book.php?isbn=9780312370848"
    )
    assert [(p.title, str(p.price)) for p in products] == [("Sarah's Key", "9.99")]
    # "Nikon D90 | Digital SLR Cameras": the trail's link is no title.
    products = _products(_review_page("trail_link"), "http://www.cameraworld.example/product.asp?id=4432")
    assert [p.title for p in products] in ([], ["Nikon D90"])


def test_the_bold_names_price_is_its_own_blocks():
    # "Our Price: $299.00" as text between tags; the accessories' table after the block is not it.
    (product,) = _products(_review_page("accessories"), "http://www.cameraworld.example/p/1")
    assert str(product.price) == "299.00"


def test_no_picture_from_a_banner_another_items_cover_or_an_accessory():
    for name in ("promo_banner", "other_cover"):
        (product,) = _products(_review_page(name), "https://www.cdplanet.example/queen/greatest-hits")
        assert product.images == [], name
    (product,) = _products(_review_page("accessory_picture"), "https://www.cameraworld.example/p/4432")
    assert (product.product_id, product.images) == ("SX200IS", [])


def test_no_part_number_from_a_sentence_and_no_stock_from_a_long_or_later_shipping():
    (product,) = _products(
        _review_page("replaced_parts"), "https://www.parts.example/everydrop-filter-1.html"
    )
    assert product.product_id == "/everydrop-filter-1.html"
    for note in (
        "Made to order: ships in 45 business days",
        "Release date: Sept 25. Ships within 24 hours of release",
    ):
        page = _review_page("made_to_order").replace("NOTE", note)
        (product,) = _products(page, "https://www.oakandco.example/products/walnut-dining-table")
        assert product.availability is None, note


def test_older_rules_keep_their_right_facts():
    # A brand's RDFa name inside the <h1> is not the title; a current price beside its struck
    # former one is the price; a book page's or a plugin-typed "article" page's Product with an
    # offer stays; a variant table's and a layout table's rows are the page's own, not cards.
    (product,) = _products(_review_page("rdfa_brand"), "https://www.sneakerhub.example/nike-air-max-90")
    assert product.title == "Nike Air Max 90 Essential"
    (product,) = _products(_review_page("struck_former"), "https://shop.example.com/p/linen-shirt")
    assert str(product.price) == "45.00"
    for og_type in ("book", "article"):
        page = _review_page("book_out_of_stock").replace("OGTYPE", og_type)
        (product,) = _products(page, "https://www.hive.example/book/the-overstory")
        assert (product.title, product.availability) == ("The Overstory", "OutOfStock"), og_type
    (product,) = _products(_review_page("variant_table"), "https://www.sewing.example/p/sew-all")
    assert (str(product.price), product.currency) == ("2.45", "GBP")
    (product,) = _products(_review_page("layout_table"), "https://www.hardwarebarn.example/p/brass-tap")
    assert (product.title, str(product.price)) == ("Brass Garden Tap", "12.95")


# --------------------------------------------------------------------------- third batch (SWDE cameras)


def test_the_heading_whose_words_the_page_title_holds():
    # onsale.com: "Nikon COOLPIX S70 … - Red and Red (26189)" beside an <h1> "Most Recent Reviews",
    # titled "onSale | Nikon COOLPIX S70 … - Red and Red 26189" (no brackets: no exact repeat).
    dvd = _shown("swde_onsale-nikon-coolpix-s70-red")
    assert (dvd.title, str(dvd.price)) == (
        "Nikon COOLPIX S70 12.1 Megapixel Digital Camera - Red and Red (26189)",
        "299.99",
    )
    # Its picture's alt is the name without the code in brackets.
    assert dvd.images == ["http://i2.cc-inc.com/prod/7887000/7887495_lg.jpg"]
    page = _page(
        '<h1>Linen Shirt (LS-1)</h1><h1>Most Recent Reviews</h1><span class="price">$25.00</span>'
        "<button>Add to cart</button>",
        title="Shop | Linen Shirt LS-1",
    )
    assert [p.title for p in _products(page)] == ["Linen Shirt (LS-1)"]
    # Neither heading's words all in the title: no title from them.
    page = page.replace("Shop | Linen Shirt LS-1", "Shop | Shirts")
    assert [p.title for p in _products(page)] == []


def test_a_struck_amount_inside_a_bold_cell_is_no_price():
    # compsource.com: "Regular Price: <b><s>$499.95</s></b>" before "Our Price: <b class="red">$415.00</b>".
    assert str(_shown("swde_compsource-panasonic-lumix-lx3").price) == "415.00"
    page = _page("<h1>Linen Shirt</h1><b><s>$29.00</s></b><b>$25.00</b><button>Add to cart</button>")
    assert [str(p.price) for p in _products(page)] == ["25.00"]


def test_brands_the_page_names_and_the_ones_it_lists():
    # A menu's "Brands" button is no brand (compsource.com's `<img id="brands" alt="Brands">`).
    assert _shown("swde_compsource-panasonic-lumix-lx3").brand == "Panasonic"
    head = '<h1>Linen Shirt</h1><span class="price">$25.00</span><button>Add to cart</button>'
    for menu in (
        '<a href="/brands"><img id="brands" alt="Brands"></a>',
        '<div class="brand-menu">Shop by brand</div>',
    ):
        assert [p.brand for p in _products(_page(head + menu))] == [None], menu
    # A "Manufacturer" field is no brand (a licensed brand's maker is another company): the
    # "Brand Name" row is read, ecost.com's "Manufacturer: Samsung" is not (its brand comes from
    # the link to Samsung's listing: test_extract_brand_and_market.py).
    ecost = _shown("swde_ecost-samsung-tl205-dark-blue")
    assert (ecost.brand, ecost.sources["brand"]) == ("Samsung", "html:brand-link")
    rows = "<table><tr><td>Manufacturer</td><td>Hanesbrands Inc.</td></tr><tr><td>Brand Name</td><td>Champion</td></tr></table>"
    assert [p.brand for p in _products(_page(head + rows))] == ["Champion"]
    # A brand class every listed item shares is theirs (onsale.com's `span.itemManufacturer`).
    assert _shown("swde_onsale-nikon-coolpix-s70-red").brand == "Nikon"  # not "Sharp"
    items = "".join(
        f'<div><span class="itemBrand">Sharp</span> <a href="/p/{i}">Speaker {i}</a></div>' for i in range(3)
    )
    assert [p.brand for p in _products(_page(head + items))] == [None]


def test_a_product_to_be_received_when_it_arrives_is_not_in_stock():
    # onsale.com: an enabled "Add to cart" beside "Place your order today and be one of the first to
    # receive this product when it arrives!"
    assert _shown("swde_onsale-nikon-coolpix-s70-red").availability is None
