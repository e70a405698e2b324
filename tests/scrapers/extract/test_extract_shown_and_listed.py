"""Issue 27, tenth round: what a page shows for its own product, told apart from what it hides,
lists or offers as a choice. A pop-up's title template, a "Shop by Brand" menu, a trail's
drop-downs and the block left open around it, a legend of stock states, swatches to choose from,
a listing's repeated fields, several blends a description offers; ids written with their scheme,
before a slug, in a servlet's query or in an element named for the code; the price a "Now" label
marks and a shop that asks for a ZIP code. Each rule on real dev payloads of tests/corpus (ten
2017 pages of swathiiyer2/fathom-products), on a small page that shows it alone, and on the cases
where it must NOT fire (a missing fact is better than an invented one)."""

from __future__ import annotations

from corpus_pages import corpus_product, only_product, page_products

from lookbench_live.scrapers.extract.values import (
    find_color,
    find_composition,
    find_material,
    url_item_id,
    url_key,
)

URL = "https://shop.example.com/catalog/linen-shirt.html"
BUY = "<button>Add to cart</button>"


def _page(body: str, title: str = "Acme Linen Shirt", head: str = "", lang: str = "en") -> str:
    return (
        f'<html lang="{lang}"><head><title>{title} - Example Shop</title>{head}</head>'
        f"<body>{body}</body></html>"
    )


def _one(text: str, url: str = URL):
    return only_product(text, url)


# --------------------------------------------------------------------------- title


def test_a_hidden_pop_ups_title_template_is_not_the_title():
    # healthypets.com: `<div id="overlay-form" class="hide"><p id="popup-product-title"> is
    # temporarily sold out.</p>` (its script writes the name in front) before the `<h1>`.
    product = corpus_product("fathom_healthypets-sexy-beast-canine-fragrance")
    assert product.title == "Sexy Beast Signature Canine Fragrance - 3.4 FL OZ"
    popup = '<div class="hide"><p id="popup-product-title"> is temporarily sold out.</p></div>'
    shown = '<h1>Acme Linen Shirt</h1><span class="price">$25.00</span>' + BUY
    assert _one(_page(popup + shown)).title == "Acme Linen Shirt"
    for hidden in (
        '<p id="product-title" style="display: none">Old name</p>',
        '<p id="product-title" hidden>Old</p>',
    ):
        assert _one(_page(hidden + shown)).title == "Acme Linen Shirt", hidden
    # A title element that is shown still outranks the heading.
    named = '<p id="product-title">Acme Linen Shirt, Navy</p>'
    assert _one(_page(named + shown)).title == "Acme Linen Shirt, Navy"


# --------------------------------------------------------------------------- brand


def test_a_shop_by_brand_menu_names_no_brand():
    # healthypets.com's "Shop by Brand" drop-down: `<ul class="dropdown-menu" role="menu">…
    # <li class="brands-A"><a class="alphaBrand">A</a></li>` (an A-Z index), and gap.com's
    # "Shop Our Sister Brands: Gap, Old Navy…" bar in its navigation (old navy's page too).
    assert corpus_product("fathom_healthypets-sexy-beast-canine-fragrance").brand is None
    assert corpus_product("fathom_gap-gfast-blackout-mesh-leggings").brand is None
    shown = '<h1>Linen Shirt</h1><span class="price">$25.00</span>' + BUY
    for menu in (
        '<ul class="dropdown-menu"><li class="brand-item">Acme</li></ul>',
        '<nav><div class="brand-list">Acme</div></nav>',
        '<div role="menu"><span class="brand">Acme</span></div>',
    ):
        assert _one(_page(menu + shown, title="Linen Shirt")).brand is None, menu
    assert _one(_page('<div class="brand">A</div>' + shown, title="Linen Shirt")).brand is None
    # The product's own brand element, in its header block, still names it; flags on `<body>`
    # ("a-aui_dropdown_187959-c" on Amazon's) make no menu of the page.
    own = '<header class="product-header"><div class="brand">Acme</div>' + shown + "</header>"
    assert _one(_page(own, title="Linen Shirt")).brand == "Acme"
    flagged = _page(own, title="Linen Shirt").replace("<body>", '<body class="a-aui_dropdown_187959-c">')
    assert _one(flagged).brand == "Acme"


# --------------------------------------------------------------------------- category


def test_a_crumbs_drop_down_of_other_categories_is_not_the_trail():
    # lightinthebox.com: `<li><dl><dt><a>Home & Garden</a></dt><dd class="breadcrumb-list"><ul>
    # <li><a>Shop by Room</a>…` under each crumb (the trail read 25 categories).
    product = corpus_product("fathom_lightinthebox-nose-shower-gel-dispenser")
    assert product.category_path == ["Home & Garden", "Bathroom Products", "Bathroom Gadgets"]
    crumb = '<li><dl><dt><a href="/c/{0}">{0}</a></dt><dd><ul><li><a href="/c/x">Other {0}</a></li></ul></dd></dl></li>'
    nested = '<li><a href="/c/{0}">{0}</a><ul><li><a href="/c/y">Sibling of {0}</a></li></ul></li>'
    for shape in (crumb, nested):
        trail = '<ul class="breadcrumb">' + shape.format("Women") + shape.format("Shirts") + "</ul>"
        body = trail + '<h1>Linen Shirt</h1><span class="price">$25.00</span>' + BUY
        assert _one(_page(body, title="Linen Shirt")).category_path == ["Women", "Shirts"], shape
    # Newegg 2010's trail is a list of `<dd>` alone: those are its crumbs.
    assert corpus_product("swde_newegg-canon-powershot-s90-black").category_path == [
        "Cameras & Camcorders",
        "Point & Shoot Cameras",
        "Canon USA",
    ]


def test_a_trail_block_left_open_around_the_page_reads_the_trail_inside():
    # bkstr.com: `<div id="breadcrumb">` is never closed, so it holds the product block (its
    # share bar's "More", the swatches "Heather Grey", "Cardinal"); `#widget_breadcrumb` inside
    # holds the trail.
    product = corpus_product("fathom_bkstr-stanford-hooded-sweatshirt")
    assert product.category_path == ["Apparel & Accessories", "Men", "Sweatshirts"]
    # Bootstrap's crumbs are each named for one (`li.breadcrumb-item`): one link each, no trail.
    items = "".join(f'<li class="breadcrumb-item"><a href="/c/{c}">{c}</a></li>' for c in ("Women", "Shirts"))
    body = f'<ol class="breadcrumb">{items}</ol><h1>Linen Shirt</h1><span class="price">$25.00</span>{BUY}'
    assert _one(_page(body, title="Linen Shirt")).category_path == ["Women", "Shirts"]


def test_a_trail_named_bread_crumbs():
    # dhgate.com's `<div class="bread-crumbs-inner">` (a JSON-LD Product with no category).
    product = corpus_product("fathom_dhgate-funny-eye-stickers")
    assert product.category_path == ["Health & Beauty", "Tattoos & Body Art", "Temporary Tattoos"]


# --------------------------------------------------------------------------- stock


def test_a_legend_of_stock_states_and_a_message_template_state_no_stock():
    # bkstr.com: `th.stockText` rows "In Stock (✓)", "Backordered", "Out of Stock", "PreOrder"
    # defining each state, and `#CMRP_OUT_OF_STOCK` "Out of Stock${0}This item has gone out of
    # stock since you searched…" (a script's message). Before: OutOfStock.
    assert corpus_product("fathom_bkstr-stanford-hooded-sweatshirt").availability is None
    shown = '<h1>Linen Shirt</h1><span class="price">$25.00</span>'
    legend = "".join(f'<th class="stockText">{s}</th>' for s in ("In Stock", "Out of Stock", "PreOrder"))
    assert _one(
        _page(shown + f"<table><tr>{legend}</tr></table>" + BUY, title="Linen Shirt")
    ).availability != ("OutOfStock")
    template = '<div id="stock-message">Out of Stock${0} since you searched</div>'
    assert _one(_page(shown + template + BUY, title="Linen Shirt")).availability != "OutOfStock"
    # One stock element, or several saying the same, still state it.
    same = '<p class="stock">Out of stock</p><p class="stock">Out of stock</p>'
    assert _one(_page(shown + same + BUY, title="Linen Shirt")).availability == "OutOfStock"


# --------------------------------------------------------------------------- colour, material


def test_swatches_to_choose_from_are_no_colour():
    # bkstr.com: "Color:" over `<a role="radio" title="Heather Grey"><div class="hide">Heather
    # Grey</div>…` and "Cardinal": two choices, none chosen. Before: "Heather Grey".
    assert corpus_product("fathom_bkstr-stanford-hooded-sweatshirt").color is None
    product = (
        '<div itemscope itemtype="https://schema.org/Product"><h1 itemprop="name">Linen Shirt</h1></div>'
    )
    offer = (
        '<div itemscope itemtype="https://schema.org/Product"><span itemprop="name">Linen Shirt</span></div>'
    )
    swatches = '<p>Color:</p><a role="radio">Navy</a><a role="radio">Red</a>'
    assert _one(_page(offer + swatches, title="Linen Shirt")).color is None
    chosen = '<p>Color:</p><a role="radio" aria-checked="true">Navy</a><a role="radio">Red</a>'
    assert _one(_page(product + chosen, title="Linen Shirt")).color == "Navy"


def test_a_listings_repeated_field_is_not_the_products():
    # wayfair.com: 28 swing sets below the deal, each "Primary Material: Wood". Before: Wood.
    assert corpus_product("fathom_wayfair-treasure-trove-swing-set").material is None
    listing = "\n".join(["Primary Material: Wood", "Slide Included: Yes"] * 5)
    assert find_material(listing) is None
    assert find_color("\n".join(f"Color: {c}" for c in ("Red", "Blue", "Green"))) is None
    # The product's own field, stated once or twice (a tab and a copy), still is.
    assert find_material("Material: 100% cotton\nSize: M\nMaterial: 100% cotton") == "100% cotton"
    assert find_color("Color: Navy\nColor: Navy") == "Navy"


def test_several_blends_a_description_offers_are_no_material():
    # etsy.com: "may come with one of the following fabric contents: White Tees: -Cotton Poly:
    # 50% Cotton/50% polyester -Triblend: 50% recycled polyester/ 37% organic cotton/ 13% rayon".
    assert corpus_product("fathom_etsy-happy-soba-toddler-tee").material is None
    assert find_composition("Shell 50% cotton/50% polyester.\nOr 60% cotton, 40% polyester.") is None
    # One blend stated twice is the product's.
    assert (
        find_composition("80% wool, 20% polyamide\nCare: 80% wool, 20% polyamide")
        == "80% wool, 20% polyamide"
    )


# --------------------------------------------------------------------------- identifier


def test_a_product_id_written_with_its_scheme():
    # B&H: `<meta itemprop="productID" content="sku:CAE5D4">` (schema.org's own example is
    # "isbn:123-456-789"). The key the lake may hold ("sku:CAE5D4") stays an alias.
    product = corpus_product("fathom_bhphotovideo-canon-eos-5d-mark-iv")
    assert (product.product_id, product.id_aliases) == ("CAE5D4", ["sku:CAE5D4"])
    markup = (
        '<div itemscope itemtype="https://schema.org/Product"><h1 itemprop="name">Linen Shirt</h1>{}</div>'
    )
    for value, key in (
        ("isbn:978-0-13-110362-7", "978-0-13-110362-7"),
        ("SKU: A-1234", "A-1234"),
        ("A-1234", "A-1234"),
    ):
        meta = f'<meta itemprop="productID" content="{value}">'
        assert _one(_page(markup.format(meta), title="Linen Shirt")).product_id == key, value


def test_the_number_before_a_products_slug_is_its_id():
    # etsy.com's `/listing/252423036/happy-soba-graphic-toddler-baby-kid-tee`; the path stays an alias.
    product = corpus_product("fathom_etsy-happy-soba-toddler-tee")
    assert product.product_id == "252423036"
    assert product.id_aliases == ["/listing/252423036/happy-soba-graphic-toddler-baby-kid-tee"]
    assert url_item_id("/p/1234567/red-linen-shirt") == "1234567"
    for path in (
        "/category/20210129/new-arrivals",
        "/c/123456/womens",
        "/blog/12345/my-post",
        "/p/1234567/shirt",
    ):
        assert url_item_id(path) is None, path


def test_a_servlets_query_names_the_item():
    # IBM WebSphere Commerce's `/ProductDisplay?storeId=10161&…&productId=70682436` (bkstr.com):
    # every item's path is `/ProductDisplay`. The structured product's path key stays an alias.
    product = corpus_product("fathom_bkstr-stanford-hooded-sweatshirt")
    assert (product.product_id, product.id_aliases, product.sources["product_id"]) == (
        "70682436",
        ["/ProductDisplay"],
        "url:query-item",
    )
    assert url_key("https://shop.example.com/shop/ItemDetail?pid=A12345") == "A12345"
    # A product's slug written in capitals names the product: its path stays the key.
    assert url_key("https://shop.example.com/products/LinenShirt?id=123456") == "/products/LinenShirt"


def test_an_element_named_for_the_items_code():
    # healthypets.com: `<div class="item-code">Item: SB00260</div>` under the heading; the URL
    # (`/sexybeast3oz.html`) stays an alias.
    product = corpus_product("fathom_healthypets-sexy-beast-canine-fragrance")
    assert (product.product_id, product.sources["product_id"]) == ("SB00260", "html:code-element")
    assert product.id_aliases == ["/sexybeast3oz.html"]
    shown = '<h1>Linen Shirt</h1><span class="price">$25.00</span>' + BUY
    assert (
        _one(_page(shown + '<span class="sku">LS-2041</span>', title="Linen Shirt")).product_id == "LS-2041"
    )
    # Two codes (a list's) or a card's name none; nor a code element without a number.
    two = '<span class="sku">LS-2041</span><span class="sku">LS-2042</span>'
    assert _one(_page(shown + two, title="Linen Shirt")).product_id == "/catalog/linen-shirt.html"
    assert _one(_page(shown + '<span class="sku">Linen</span>', title="Linen Shirt")).product_id != "Linen"


# --------------------------------------------------------------------------- price, currency


def test_the_price_a_now_label_marks_after_the_former_one():
    # gap.com: `h5.product-price--markdown` "$64.95" (unlabelled, unstruck), then
    # `h5.product-price` "Now $52.00". Before: 64.95.
    assert str(corpus_product("fathom_gap-gfast-blackout-mesh-leggings").price) == "52.00"
    block = '<h1>Linen Shirt</h1><div><p class="price">$64.95</p><p class="price">{} $52.00</p></div>' + BUY
    for label in ("Now", "Sale:", "Jetzt"):
        assert str(_one(_page(block.format(label), title="Linen Shirt")).price) == "52.00", label
    # Without a label, the first price stays the price.
    assert str(_one(_page(block.format(""), title="Linen Shirt")).price) == "64.95"


def test_a_shop_that_asks_for_a_zip_code_sells_in_us_dollars():
    # Barnes & Noble 2010's "Enter your zip" (store pickup) and Beach Audio's shipping quote
    # `<input title="Enter your 5 digit zip…">`: "$" prices on pages that state no market.
    for name in ("swde_barnesandnoble-one-day", "swde_beachaudio-canon-powershot-d10"):
        product = corpus_product(name)
        assert (product.currency, product.sources["currency"]) == ("USD", "html:us-address"), name
    shown = '<h1>Linen Shirt</h1><span class="price">$25.00</span>' + BUY
    for prompt in (
        "<p>Enter your ZIP code</p>",
        '<input title="Enter your 5 digit zip">',
        "<label>ZIP Code</label>",
    ):
        assert _one(_page(shown + prompt, title="Linen Shirt")).currency == "USD", prompt
    # Any country's "Zip/Postal Code", or a page that names another dollar country: no market.
    for prompt in ("<label>Zip/Postal Code</label>", "<p>Enter your zip code. Ships from Canada.</p>"):
        assert _one(_page(shown + prompt, title="Linen Shirt")).currency is None, prompt


# --------------------------------------------------------------------------- review of round 10


def test_a_bootstrap_crumbs_drop_down_is_neither_the_trail_nor_in_it():
    # Bootstrap's crumb drop-down (`li.breadcrumb-item.dropdown` > `div.dropdown-menu` of links):
    # the crumb's item holds more links than one crumb but is no trail of its own, and the
    # drop-down's links are no crumbs. Before: "Shirts > T-Shirts > Polos > Knitwear".
    menu = '<div class="dropdown-menu"><a href="/c/tees">T-Shirts</a><a href="/c/polos">Polos</a></div>'
    items = (
        '<li class="breadcrumb-item"><a href="/">Home</a></li>'
        '<li class="breadcrumb-item"><a href="/c/men">Men</a></li>'
        f'<li class="breadcrumb-item dropdown"><a href="/c/shirts">Shirts</a>{menu}</li>'
        '<li class="breadcrumb-item"><a href="/c/linen">Linen</a></li>'
    )
    body = f'<nav aria-label="breadcrumb"><ol class="breadcrumb">{items}</ol></nav><h1>Linen Shirt</h1>'
    body += '<span class="price">$25.00</span>' + BUY
    assert _one(_page(body, title="Linen Shirt")).category_path == ["Men", "Shirts", "Linen"]


def test_a_discount_code_is_no_items_code():
    # A promotion's `<span class="code">SAVE20</span>` ("use code …"): a bare "code" class names
    # a discount's code as often as an item's. Before: product_id "SAVE20".
    shown = '<h1>Linen Shirt</h1><span class="price">$25.00</span>' + BUY
    promo = '<p>Extra 20% off: use code <span class="code">SAVE20</span></p>'
    assert _one(_page(promo + shown, title="Linen Shirt")).product_id == "/catalog/linen-shirt.html"


def test_a_sale_label_before_another_amount_marks_no_price():
    # "Sale: save $5.00 today", "Sale price for members $24.00" after the price: a saving, a
    # member's price, not the price charged now. Before: 5.00 and 24.00.
    block = '<h1>Linen Shirt</h1><div><p class="price">$30.00</p><p class="{}">{}</p></div>' + BUY
    for hint, text in (
        ("price-saving", "Sale: save $5.00 today"),
        ("member-price", "Sale price for members $24.00"),
    ):
        assert str(_one(_page(block.format(hint, text), title="Linen Shirt")).price) == "30.00", text


def test_a_zip_prompt_beside_a_postcode_names_no_market():
    # Any country's form writes both, in either order: "Postal / Zip Code", "Postcode / ZIP code",
    # "ZIP code or postcode". Before: USD.
    shown = '<h1>Linen Shirt</h1><span class="price">$25.00</span>' + BUY
    for prompt in (
        "<label>Postal / Zip Code</label>",
        '<input placeholder="Postcode / ZIP code">',
        "<p>Enter your ZIP code or postcode</p>",
    ):
        assert _one(_page(shown + prompt, title="Linen Shirt")).currency is None, prompt


def test_a_recommended_products_stock_is_no_legend():
    # Cards below the product state their own stock in the same `p.availability`: no legend of
    # states, the product's "In stock" stands. Before: no stock.
    cards = "".join(
        f'<li class="product-card"><a href="/p/{i}"><img src="/i/{i}.jpg">Tee {i}</a>'
        f'<span class="price">$1{i}.00</span><p class="availability">{state}</p></li>'
        for i, state in enumerate(("Out of stock", "In stock", "Out of stock"))
    )
    body = '<h1>Linen Shirt</h1><span class="price">$25.00</span><p class="availability">In stock</p>'
    body += f'<div class="related"><ul>{cards}</ul></div>'
    assert _one(_page(body, title="Linen Shirt")).availability == "InStock"


def test_a_page_hidden_until_its_script_runs_keeps_its_title():
    # A wrapper hidden until the page's script shows it (`<div id="page" style="display:none">`)
    # holds the whole page, no pop-up: its title element still names the product. Before: no
    # product at all.
    inner = '<h2 id="productTitle">Linen Shirt</h2><span class="price">$25.00</span>' + BUY
    for wrapper in ('<div id="page" style="display:none">{}</div>', '<div class="hidden">{}</div>'):
        (product,) = page_products(_page(wrapper.format(inner), title="Example Shop"), URL)
        assert product.title == "Linen Shirt", wrapper


def test_a_page_wrapped_beside_a_sliding_menu_keeps_its_brand():
    # mmenu-style themes wrap the whole page (its `<h1>` too) in a block named for the menu it
    # slides beside (`div.off-canvas-menu-push`): no site menu. Before: no brand.
    inner = '<h1>Linen Shirt</h1><div class="product-brand">Acme</div><span class="price">$25.00</span>' + BUY
    page = _page(f'<div class="off-canvas-menu-push">{inner}</div>', title="Linen Shirt")
    assert _one(page).brand == "Acme"


def test_a_label_over_swatches_none_chosen_reads_no_next_line():
    # "Color:" over swatches none of which is marked (`aria-checked`; the theme marks its chosen
    # one with a class), then the next block: that block's text is no colour or material.
    # Before: "Size", "Black" (of "Black Friday: …"), "Beige walls not included".
    product = (
        '<div itemscope itemtype="https://schema.org/Product"><h1 itemprop="name">Linen Shirt</h1></div>'
    )
    swatches = '<div role="radiogroup"><a role="radio" class="selected">Navy</a><a role="radio">Red</a></div>'
    for after in ("<p>Size</p>", "<p>Black Friday: extra 10% off</p>", "<p>Beige walls not included</p>"):
        page = _page(product + "<p>Color:</p>" + swatches + after, title="Linen Shirt")
        assert _one(page).color is None, after
        page = _page(
            product + "<p>Material</p>" + swatches.replace("Navy", "Oak") + after, title="Linen Shirt"
        )
        assert _one(page).material is None, after
    # A group that marks its chosen one keeps it as the value.
    chosen = swatches.replace('class="selected"', 'aria-checked="true"')
    assert (
        _one(_page(product + "<p>Color:</p>" + chosen + "<p>Size</p>", title="Linen Shirt")).color == "Navy"
    )


# --------------------------------------------------------------------------- eleventh round


def test_a_trails_previous_and_next_links_in_other_languages_are_no_category():
    # de.happycoffee.org (Shopify): its breadcrumb bar holds only "‹ Vorheriges | Nächstes ›",
    # links to the shop's neighbouring products. Before: ["Vorheriges", "Nächstes"].
    assert corpus_product("tr_happycoffee-sidamo-bio-bohnen").category_path == []
    shown = '<h1>Linen Shirt</h1><span class="price">25,00 €</span>' + BUY
    for before, after in (("Vorheriges", "Nächstes"), ("Précédent", "Suivant"), ("Anterior", "Siguiente")):
        trail = f'<div class="breadcrumb"><a href="/p/a">{before}</a> | <a href="/p/b">{after}</a></div>'
        assert _one(_page(trail + shown, title="Linen Shirt", lang="de")).category_path == [], before
    # A category that only starts with such a word is one ("Weiterbildung", "Retour en classe").
    trail = '<div class="breadcrumb"><a href="/c/a">Weiterbildung</a> › <a href="/c/b">Bücher</a></div>'
    assert _one(_page(trail + shown, title="Linen Shirt", lang="de")).category_path == [
        "Weiterbildung",
        "Bücher",
    ]


def test_a_variant_colour_written_after_the_products_name():
    # allbirds.com (Shopify): each variant's JSON-LD "color" is "Men's Dasher NZ - Blizzard/Deep
    # Navy (Blizzard Sole)". Before: the whole string as the colour.
    assert corpus_product("c3_allbirds-mens-dasher-nz").color == "Blizzard/Deep Navy (Blizzard Sole)"
    node = '{{"@context": "https://schema.org", "@type": "Product", "name": "Linen Shirt", "color": "{}"}}'
    for color, shown in (("Linen Shirt - Navy", "Navy"), ("Linen Shirt: Sand", "Sand"), ("Navy", "Navy")):
        head = f'<script type="application/ld+json">{node.format(color)}</script>'
        assert _one(_page("<h1>Linen Shirt</h1>", title="Linen Shirt", head=head)).color == shown, color
    # A colour that only starts with the name's words, with no separator, stays whole.
    head = f'<script type="application/ld+json">{node.format("Linen Shirt Blue")}</script>'
    assert _one(_page("<h1>Linen Shirt</h1>", title="Linen Shirt", head=head)).color == "Linen Shirt Blue"


def test_an_element_named_for_the_chosen_colours_value():
    # bananarepublic.gap.com (no product markup): `<h2>Color</h2><span data-testid=
    # "pdp-color-value">Aragon Pink Clay</span>` over the swatches. Before: no colour.
    assert corpus_product("c3_bananarepublic-ribbed-henley").color == "Aragon Pink Clay"
    shown = '<h1>Linen Shirt</h1><span class="price">$25.00</span>' + BUY
    picker = '<div><h2>Colour</h2><span class="selected-color">Sea Salt</span></div>'
    assert _one(_page(shown + picker, title="Linen Shirt")).color == "Sea Salt"
    # Unlabelled, only a colour of the vocabulary: not a swatch group's "Reduced Price" (Lands'
    # End's `div.color-name`); two different values, or a card's, name none.
    for body in (
        '<div class="color-name">Reduced Price</div>',
        '<span class="color-name">Navy</span><span class="color-name">Red</span>',
        "".join(
            f'<li class="card"><img src="/{i}.jpg"><span class="color-name">Red</span>'
            f'<span class="price">$9.00</span></li>'
            for i in range(3)
        ),
    ):
        assert _one(_page(shown + body, title="Linen Shirt")).color is None, body
    assert _one(_page(shown + '<span class="color-name">Navy</span>', title="Linen Shirt")).color == "Navy"
