"""The product of a page with no usable structured data, read from what the page shows.

Used only when JSON-LD, microdata and OpenGraph give no product (`schema_org.extract_schema_org`).
Each fact comes from the first source that states it, in this order, and `product.sources`
records which one ("itemprop", "meta", "html:title-element", "html:price-element", "html:label"…):
(the marketplace rules of `page_extras` add to some below: a price element by `data-testid`, a
sold status, Japanese stock words, a numbered gallery's "Title 1" alt):

- title (a price element inside the heading is no part of it; an element named for the title is
  not read when it or a block around it is not displayed, a pop-up's template): a loose
  `itemprop="name"`; an element whose id names a product title (`#productTitle`;
  inside a title group such as Amazon's `#productTitleGroupAnchor`, the innermost title or
  `<h1>` in it); the page's only meaningful `<h1>` (with the `<h2>` after it when the page's
  `<title>` starts with both: a brand heading over the model; an `<h1>` of only a number is
  none, and a "by <a>Author</a>" part of it is no part of the name); an element whose class names one;
  `og:title`. A title cut short ("…Pain...") is completed by the page's `og:title` / `twitter:title`.
- price: a loose `itemprop="price"`; the first element whose id (then, failing that, class, then
  a test hook: `data-testid`, Target's `data-test`, `TEST_HOOKS`) names
  a price (not a list, old, "was", saving or shipping price) whose text is one amount with a
  currency sign or code (the next price element instead when it reads "Now $52.00": `_now_price`),
  or, for a price block that also shows a former, lowest or coupon
  price, the amount its own `data-price-value` / `data-price-amount` / `data-price` / `content`
  states as its text writes it ("32 990 Kč"); never one labelled "List Price:" / "RRP" / "UVP",
  struck through (`a-text-strike`, `data-a-strike`), under a list-price element, in a table
  column headed as a list or reference price ("List price", "MSRP", "参考基準価格":
  `_column_header`), or in other sellers' offers (Amazon's `#mbc`). Only when no element names
  a price, on a product page whose title is its `<h1>`: the first element after that `<h1>`
  whose whole text is one amount with a currency ("249 kronor"), never a unit price ("83 kr/l"),
  a struck one or a card's (`html:header-price`: a script-built product header).
- currency: `itemprop="priceCurrency"`, else the sign or code written in that price text
  (€ EUR, £ GBP, CHF…; a sign several currencies write — "$", "kr", "¥", "LE" — only where the
  page names its market: its language tag's region, "en-US" USD, "en-EG" EGP, "sv-SE" SEK, else
  its URL path's store locale, "/us/", "/en-ca/", else its host's country-code domain, `.se`,
  `.ca`; never `.com` or `.co`), else
  the Amazon marketplace's currency (amazon.com USD, .co.uk GBP, .de EUR, .ca CAD, .com.br BRL,
  .co.jp JPY…) when the price text names no other and, for a dollar marketplace, writes "$"
  (source `url:marketplace`), else the currency a Twitter product card's price field names for
  the same amount ("$955.00 USD"), else USD for "$" on a page that states no market but shows a
  US postal address ("Torrance, CA 90504") or asks for a ZIP code ("Enter your zip":
  `us_address_currency`, source `html:us-address`). A price element's parts under a `display: none` class
  (`ng-hide`, `d-none`, `hidden`) are not read.
- image: a loose `itemprop="image"`; `og:image`; an `<img>` whose id names the main picture
  (Amazon's `#landingImage`, `#main-image`, `#imgBlkFront`); one whose class (or its holder's)
  starts with landing/main/primary/hero; one whose alt is the product's title (not in a
  thumbnail strip); one in a gallery or zoom; else a gallery's item or lightbox link outside
  product cards (lightGallery's `data-src`, a thickbox `<a href="….jpg">`). A `data:`
  placeholder is read for its `data-old-hires`, `data-a-dynamic-image` (the largest) or
  `data-src`. A structured product that names no picture (and no `og:image`) takes the same
  rules' picture, without `itemprop` and `og:image` (`page_image`).
- brand: `itemprop="brand"`, `product:brand` / `og:brand`, a Twitter product card's "Brand"
  field, the brand part of the `<h1>`, an element outside product cards whose id/class names a
  brand or byline stating "Visit the X Store", "Besuche den X-Store", "Brand: X", "Marca: X"…
  (never an author or a contributor: a byline linking to an author page; never a widget's
  "powered by …" credit; never one in a site menu, `_in_menu`, or of one character), a "Brand"
  field of a specification table; a link to the brand's own
  listing (`/brand/sony/`, `/manufacturer/Samsung/…`, `?man=Nikon`) outside menus and product
  cards whose name the product's title starts with; a meta description's leading "Brand: X,".
  A brand element is named by its id, class or test hook (Target's `data-test="shopAllBrandLink"`
  "Shop all X"), never by a "Marker" class nor as a section holding buttons ("From the brand" +
  "Show more"). A value that says there is none ("Unbranded", "Generic") or names a sale ("HR24
  NOVEMBER SALE") is dropped by `extract_document`, a season after the name ("STAUD SUMMER 2025")
  cut (`values.known_brand`).
- identifier: a loose `itemprop` sku / productID / mpn / gtin; a hidden `ASIN` / `sku` input; the
  ASIN of an Amazon product URL (`/dp/`, `/gp/product/`, mobile `/gp/aw/d/`); a labelled line
  ("SKU: …", "Item #: …", "Art.-Nr.: …", "ASIN: …": after the URL, as a Kindle page's first
  labelled id is the print edition's ISBN); an element named for a code whose value the URL keys
  by; a short element "Nr 262708" whose number the URL keys by (`conventions.url_keyed_number`).
  "Art.No. 77-3066" after the other labels; then an element named for the item's code holding it
  ("Item: SB00260" in `div.item-code`: `html:code-element`); then, after a "Part #", the id the
  page's own add-to-cart form posts (Magento's hidden `product`, PrestaShop's `id_product`,
  WooCommerce's `add-to-cart`: `cart_form_id`, `html:cart-form`); last, a "Style: HF3227-400"
  code (`html:label-style`). A product keyed by the URL's item number, an "Art.No.", its cart
  form's id or a style code (rules added after the lake's first products) keeps its URL key as
  an alias.
- availability: `itemprop="availability"`, `og:availability`, else the text of an element whose
  id/class names availability or stock (Amazon's `.availGreen`) ("In Stock", "Auf Lager", "En
  stock", "Em stock", "Ausverkauft", "Indisponible"…; never "In stock soon", "Notify me…"), an
  element named for the dispatch time or a short "Usually ships within 2-3 days" (up to five
  days or 72 hours), an "Availability" field, else InStock when the page's own add-to-cart controls are all enabled and
  its text outside product cards states no out-of-stock or "coming soon" phrase
  (`conventions.buy_control_stock`, source `html:buy-control`).
- colour, material (never guessed; for colour, the chosen colour an accessible label states,
  then the one checked radio button of a colour option, `page_chosen_color`, and after the
  fields, an element named for the chosen colour's value, `_named_color`): a field the page
  shows outside product cards — a table row,
  a definition or a row of two elements ("Color" | "Backsteinrot", "Material Composition" |
  "100% polyester, …"), or a short element reading "Farbe: Schwarz" / "Obermaterial: 100%
  Polyester / Futter: …" (a watch's "Case / bezel material: Stainless steel"). A colour from a
  "Label: value" line must be in the vocabulary; from a
  table cell it may be any one-word name. A material is a composition adding up to
  100% or a material of the vocabulary ("Material" | "Bikini Bademoden" is none). Then an
  element that states nothing but a composition (Amazon's bullet "100% recycled polyester"; not
  a link's or a site menu's, Massimo Dutti's "100% CASHMERE" entry), then a composition with a
  known fibre in the page's text. Field text has its leftover
  character references undone and UTF-8 misread as Windows-1252 repaired.
- category: the links of the first breadcrumb element (Amazon's `#wayfinding-breadcrumbs`, an
  `itemprop="breadcrumb"`, `aria-label="Breadcrumb"`, Cafe24's `xans-product-headcategory`), at
  least two or one after the home link, a leading home dropped by its name ("Home") or its link
  ("/"), a trail held twice read once, a crumb's drop-down of other categories left out, the trail
  inside a trail block left open around the page read instead; a crumb naming or linking to
  search results, "Back",
  "See all …", the whole catalogue ("All Products") or cut short is no category ("‹ Back to
  results" is no path). A structured product that names no category takes the same
  (`page_breadcrumb`).

A product is made only when the page shows a title and a price and is a product page: a buy
button or form (add to cart / basket / bag, "In den Warenkorb", "Ajouter au panier",
"Añadir a la cesta"…, a form whose action adds to the cart, `/cart/add`, or that is named for
it and has a submit control, `#productDetailsAddToCartForm`), an availability
element, `og:type` product, or, with a title from the page's title element or `<h1>`, a product
gallery (an element named for a product's gallery or media, "product-gallery", holding a picture
file) outside product cards, or an item number the URL keys by ("Nr 262708" at `…/crudo-262708/`):
a reduced or script-built page may show no buy control, but an article or a price tracker shows
no product gallery and no item number its URL names. Articles, recipes, listings of prices without a buy
control, and removed products ("PDP" placeholders) give nothing: a wrong product is worse than none.
Nor does a page not `og:type` product with more than `_LISTING_BUY_CONTROLS` things to buy
outside product cards, a form and its buttons one (a listing whose items the card rule did not
group: Wayfair's 86 "Add to Cart"). With no price, a product is made only when its title is an
element whose id names a product's title (`#productTitle`, never a bare `#title`), the page shows
the product's picture (the main image by id, or a gallery) and says no offer is to be had now
(Amazon's "No featured offers available", "Currently unavailable"): the product with no price.
"""

from __future__ import annotations

import contextlib
import functools
import html as html_module
import itertools
import json
import re
from collections import Counter
from decimal import Decimal
from typing import Any
from urllib.parse import parse_qsl, unquote_plus, urlsplit

from lxml import html as lxml_html

from lookbench_live.scrapers.extract.conventions import (
    ADD_TO_CART,
    NOT_YET,
    button_picture,
    buy_control_stock,
    control_name,
    control_type,
    other_than_product,
    url_keyed_number,
)
from lookbench_live.scrapers.extract.microdata import product_elements
from lookbench_live.scrapers.extract.model import NormalizedProduct
from lookbench_live.scrapers.extract.page_extras import (
    card_currency,
    crumb_path,
    no_category_crumb,
    sold_status,
    stock_words,
    twitter_card_field,
)
from lookbench_live.scrapers.extract.values import (
    READER_ONLY,
    absolute_url,
    clean_title,
    color_value,
    find_composition,
    material_value,
    normalize_availability,
    parse_price,
    textile_fibre,
    url_item_id,
    url_key,
    url_query_item,
    url_tokens,
    without_color_code,
)

_TITLE_HINT = re.compile(r"(?i)product[-_ ]?(?:title|name)|^title$|item[-_ ]?title|pdp[-_ ]?title")
_PRODUCT_TITLE_CLASS = re.compile(
    r"(?i)product[-_ ]?(?:title|name)|item[-_ ]?title|pdp[-_ ]?title|main[-_]title"
)
# "price" in the languages shops name their classes in (Dutch "prijs", Polish and Czech "cena",
# Portuguese "preco", Turkish "fiyat", Indonesian "harga", Japanese "kakaku", Chinese "jiage",
# Scandinavian "pris" as a whole word: never "enterprise" or "prism").
_PRICE_HINT = re.compile(
    r"(?i)price|preis|prix|precio|prezzo|prijs|cena|pre[cç]o|fiyat|harga|kakaku|jiage|(?<![a-z])pris(?![a-z])"
)
_NOT_PRICE = re.compile(
    r"(?i)list|old|was|strike|rrp|uvp|save|saving|shipping|delivery|per[-_]?unit|basket|cart|range|compet|"
    r"member|install|afterpay|klarna|monthly|"
    r"hidden(?!-(?:xs|sm|md|lg|xl)\b)|secondary|compare|before|origin"
)
# A price's own label that names another price than the one to pay ("Print List Price:", "RRP:",
# "Statt:", "Prix conseillé :"), or a struck-through amount (Amazon's `a-text-strike`,
# `data-a-strike`): a list price, never the product's.
# Other sellers' offers for the same product (Amazon's "More Buying Choices" box, `#mbc`, and
# offer-listing links): their prices are not the buy box's.
_OTHER_OFFERS = re.compile(r"(?i)(?:^|[\s_-])mbc(?:$|[\s_-])|other[-_]?sellers|more[-_]?buying|olp[-_]")
# An ancestor named for a list or former price ("list-price-label" around Kindle's "price-value"):
# words, not substrings ("list-unstyled", "wishlist" and "listing" wrap shown prices too).
_LIST_PRICE_HINT = re.compile(
    r"(?i)list[-_ ]?price|price[-_ ]?list|(?:^|[\s_-])(?:old|was)[-_ ]?price|strike|rrp|uvp|compare[-_ ]?at|original[-_ ]?price"
)
_OTHER_PRICE_LABEL = re.compile(
    r"(?i)^(?:[\w ]*list price|[\w ]*retail price|rrp|uvp|was|why pay|statt|prix conseillé|precio recomendado|"
    r"prezzo consigliato)\b"
)
# The main picture's element on a gallery: Amazon's `#landingImage` (2016-), `#main-image` (-2015),
# `#imgBlkFront` / `#ebooksImgBlkFront` (books), `#prodImage`; other shops' `#main-image`,
# `#product-image`. An id, so one per page (a carousel's thumbnails carry classes).
_MAIN_IMAGE_ID = re.compile(
    r"(?i)landing[-_]?image|main[-_]?image|imgblkfront|prod[-_]?image|product[-_]?(?:image|img|photo)"
)
# Who wrote a book is not its brand: a byline whose link goes to an author page or whose id/class
# names a contributor ("bylineContributor", Amazon's `/e/B0…` and `author=` links).
_AUTHOR_HINT = re.compile(r"(?i)author|contributor|/e/B0")
# Cafe24's `xans-product-headcategory` is its shops' breadcrumb module ("Home > CATEGORIES > Outerwear").
_BREADCRUMB_HINT = re.compile(r"(?i)bread[-_]?crumb|wayfinding|headcategory")
_HOME = re.compile(r"(?i)^(?:home|startseite|accueil|inicio|home page|pagina iniziale)$")
# The main picture by its class or its holder's: first the words that name the main one, then
# (after a picture whose alt is the product's name) the gallery's and zoom's, which also hold
# thumbnails.
_MAIN_IMAGE_HINT = re.compile(
    r"(?i)(?:^|\s)(?:landing|main|primary|hero)"
)  # a word's start: not "border-primary"
_IMAGE_HINT = re.compile(r"(?i)landing|main|primary|hero|product[-_ ]?(?:image|img|photo)|zoom|gallery")
# German "Marke", never "market" ("gmarketcard", "marketplace" name shops and payment cards).
# Not "branding": the site's own logo block (`div#branding`).
_BRAND_HINT = re.compile(
    r"(?i)brand(?!ing(?:$|[\s_-]))|(?<![\w-])(?:product|item)-branding|byline|manufacturer|marke(?![tr])|marque|marca"
)  # "marke" as German's brand, never "market" or a design system's "ndsMarker"
# "availability", Amazon's "availGreen" / "availRed" (a class token that starts with "avail": never
# "variationUnavailable" or "main-image-unavailable", which say an image is missing).
_STOCK_HINT = re.compile(r"(?i)availability|(?:^|\s)avail\w*|stock|lieferbar|dispon")
# A control that sells the product: one that adds it to the cart (`conventions.ADD_TO_CART`), or
# "Buy now" ("Jetzt kaufen", "Comprar", "立即购买"…). Never the bare word for the cart ("购物车",
# "カート", "장바구니"), which every page's header links to.
_BUY = re.compile(
    rf"(?i){ADD_TO_CART}|buy (?:it )?now|jetzt kaufen|acheter|comprar|"
    r"加入购物车|加入購物車|カートに入れる|カートへ入れる|장바구니에?\s?담기|立即购买|立即購買|今すぐ購入|바로\s?구매(?:하기)?|구매하기"
)
# A form that adds to the cart, by its action (`/cart/add`, `checkout/cart/add/product/…`,
# `?add-to-cart=…`, `warenkorb/add`): never a cart page's own update or checkout form ("/cart").
_ADD_ACTION = re.compile(
    r"(?i)(?:cart|basket|bag|warenkorb|panier|carrito|carrello)[/_-]?add|add[-_/]?to[-_/]?(?:cart|basket|bag)|addtocart"
)
_BUY_ATTR = re.compile(r"(?i)add[-_]?to[-_]?(?:cart|basket|bag)|buy[-_]?now|addtocart|buybox")
_BRAND_TEXT = re.compile(
    r"(?i)^(?:visit the (?P<a>.+?) store|besuche den (?P<b>.+?)-store|visita la tienda de (?P<c>.+)|"
    r"visiter la boutique (?P<d>.+)|(?:brand|marke|marque|marca|品牌(?:名称|名稱)?|ブランド名?|브랜드)\s*[:：]\s*(?P<e>.+)|"
    r"shop all (?P<f>.+))$"  # Target's brand link "Shop all Hearth & Hand with Magnolia"
)
_AUTHOR = re.compile(r"(?i)^(?:by|von|de|par|di|door)\s|\(|:|\d")
_ID_LABEL = re.compile(
    r"(?im)(?:^|\s)(?:sku|upc|ean|gtin|mpn|isbn(?:[- ]?1[03])?|item\s*(?:#|no\.?|number)|art\.?-?nr\.?|"
    r"artikelnummer|asin|product code|style\s*#|r[ée]f(?:[ée]rence)?\.?|referencia|c[óo]digo|"
    r"kod produktu)\s*[:#]?\s*"
    r"(?P<id>(?=[\w-]*\d)[A-Z0-9][A-Z0-9_-]{3,30})\b"
)
# "Style: HF3227-400" (Nike's style-colour code), read after every other id rule: "style" is also
# a word, so only with a colon and a code as shops write one.
_STYLE_LABEL = re.compile(
    r"(?m)(?:^|\s)(?i:style)\s*:\s*"
    r"(?P<id>(?=[A-Z0-9-]*[A-Z])(?=(?:[A-Z-]*\d){3})[A-Z0-9]+(?:-[A-Z0-9]+)*)(?![\w-])"
)  # a code in capitals with a letter and three digits: never "Style: 1970s-inspired", "2-piece", "2024"
_ART_NO_LABEL = re.compile(
    r"(?im)(?:^|\s)art\.\s?no\.?\s*[:#]?\s*(?P<id>(?=[\w-]*\d)[A-Z0-9][A-Z0-9_-]{3,30})\b"
)
# "CDU Part#", "Mfr. Part No.:" as a label starting a line of the page's text, never inside a
# sentence ("This filter replaces part # 4396395, 4396508…").
_PART_NO_LABEL = re.compile(
    r"(?im)^(?:[A-Za-z.]{1,6}\s)?part\s*(?:#|no\.?|number)\s*[:#]?\s*"
    r"(?P<id>(?=[\w-]*\d)[A-Z0-9][A-Z0-9_-]{3,30})\b(?!\s*,)"
)
_NEWER_ID_SOURCES = frozenset(
    {
        "url:item-number",
        "html:label-art-no",
        "html:label-part-no",
        "html:code-element",
        "html:cart-form",
        "html:label-style",
    }
)
# In the languages whose add-to-cart words `conventions.ADD_TO_CART` reads: a page that says one
# of these sells nothing now, whatever button it keeps.
_OUT = re.compile(
    r"(?i)out of stock|sold out|not available|unavailable|currently unavailable|ausverkauft|"
    r"nicht (?:verfügbar|lieferbar)|épuisé|rupture de stock|non disponible|agotado|no disponible|"
    r"indisponible|esgotado|indisponível|sem estoque|esaurito|uitverkocht|niet (?:op voorraad|leverbaar)|"
    r"slutsåld|ej i lager|udsolgt|ikke på lager|utsolgt|loppuunmyyty|ei varastossa|niedostępny|"
    r"brak w magazynie|wyprzedany|vyprodáno|není skladem|tükendi|stokta yok|нет в наличии|распродан"
)
# "Usually ships in 1-2 days" / "within 24 hours" / "Usually dispatched within 48 hours": a shop
# that ships within days holds the item
# (weeks, 45 days of making to order, or 24 hours "of release" are no stock).
_SHIPS_SOON = (
    r"\b(?:ships|dispatche[sd]) (?:in|within) (?:(?:[1-5]|one|two|three)(?:\s*(?:-|–|to)\s*[1-5])? "
    r"(?:business |working )?days?|(?:24|48|72) hours)\b(?! of| after| from| once)"
)
_IN = re.compile(
    r"(?i)in stock|auf lager|lieferbar|vorrätig|en stock|disponible|available|in magazzino|em stock|em estoque|"
    + _SHIPS_SOON
)
# An element named for the dispatch time (bookdepository's `span.dispatchMessage`): only its
# "ships within days" counts, not a word such as "available" ("Dispatch available to the UK").
_DISPATCH_HINT = re.compile(r"(?i)dispatch|ship(?:ping)?[-_]?(?:time|message|estimate)")
_SHIPS_SOON_TEXT = re.compile("(?i)" + _SHIPS_SOON)
# The same words with no boundary around them: found in the page's text wherever an element's
# text states one (`_dispatch_time` reads elements only then).
_SHIPS_SOON_ANY = re.compile(r"(?i)(?:ships|dispatche[sd]) (?:in|within) ")
_USUALLY = re.compile(r"(?i)^usually (?:ships|dispatched)\b")
# Signs and words that name one currency, the longer first ("US$" before "S$", "CA$" before "A$").
# "$" alone (USD, CAD, AUD, MXN, ARS…), "¥" (JPY or CNY) and "kr" (SEK, NOK, DKK, ISK) do not.
_SIGNS = (
    ("US$", "USD"), ("CA$", "CAD"), ("AU$", "AUD"), ("NZ$", "NZD"), ("HK$", "HKD"), ("MX$", "MXN"),
    ("R$", "BRL"), ("S$", "SGD"), ("A$", "AUD"), ("C$", "CAD"), ("E£", "EGP"), ("L.E", "EGP"),
    ("ج.م", "EGP"), ("€", "EUR"), ("£", "GBP"),
    ("₹", "INR"), ("₽", "RUB"), ("руб", "RUB"), ("₴", "UAH"), ("грн", "UAH"), ("₺", "TRY"),
    ("₩", "KRW"), ("￦", "KRW"), ("원", "KRW"), ("円", "JPY"), ("zł", "PLN"), ("Kč", "CZK"), ("₫", "VND"),
    ("kronor", "SEK"), ("CHF", "CHF"), ("¥", None), ("￥", None), ("元", None),
)  # fmt: skip
# "원" is the won's word (Korean writes "19,900원"), "円" the yen's (Japanese only); "¥"/"￥" is
# both the yen and the yuan, "元" the yuan's and the Taiwan and Hong Kong dollars' word: those
# name a currency only where the page states its market (`_LOCAL`).
_CODE = re.compile(
    r"\b(EUR|USD|GBP|CHF|SEK|NOK|DKK|PLN|CZK|HUF|JPY|CNY|CAD|AUD|NZD|RUB|UAH|INR|BRL|MXN|ARS|TRY|ZAR|KRW|"
    r"AED|SAR|EGP|QAR|KWD|BHD|OMR|JOD|ILS|SGD|HKD|THB|IDR|MYR|VND|TWD|CLP|COP|PEN|RON|BGN|RSD|ISK|"
    r"NGN|KES|MAD|PKR|BDT|KZT)\b"
)
_AMOUNT = re.compile(r"\d[\d.,'\u00a0\u202f ]*")
# More buy controls outside product cards than a product page shows (its own button, a sticky
# copy, per-variant forms, a form and its buttons counted once: at most 12 on the dev pages,
# Amazon's included): a list of items.
_LISTING_BUY_CONTROLS = 24


def html_product(
    tree: lxml_html.HtmlElement,
    url: str,
    canonical: str,
    metas: dict[str, list[str]],
    itemprops: dict[str, list[Any]],
    lang: str | None,
) -> NormalizedProduct | None:
    """The page's product from what it shows, or None when the page is not clearly one."""
    body = tree.find("body")
    if body is None:
        return None
    og_type = (_first(metas, "og:type") or "").lower()
    if other_than_product(og_type):
        return None  # an article, a profile, a video: the page says what it is
    sources: dict[str, str] = {}
    cards = _cards(body)
    # The detail text is long to gather: read at most once, and only if a rule comes to it.
    detail = functools.cache(lambda: _detail_text(body, cards))
    title = _pick(sources, "title", _itemprop_text(itemprops, "name"), "itemprop")
    title = title or _pick(sources, "title", _title_element(body), "html:title-element")
    title = title or _pick(sources, "title", clean_title(_first(metas, "og:title")), "meta:og:title")
    # An element whose class is just "title" also marks an upsell's or an option box's heading
    # (Coupang's "개당 용량 × 총 수량"): only when the page states its title nowhere else.
    named = None if title else _page_title_element(body, cards, canonical)
    title = title or _pick(
        sources, "title", clean_title(_text(named)) if named is not None else None, "html:page-title-element"
    )
    title = title or _pick(sources, "title", _class_title(body, _TITLE_HINT), "html:title-element")
    price_text, price_source = _price_text(body, itemprops, cards)
    # Read once: the product-page test, the cart form's id and the chosen colour each ask.
    controls = _buy_controls(body, cards, canonical)
    buy_controls = controls
    if sources.get("title") == "html:page-title-element" and not (
        len(buy_controls) <= 3 or _stock_element(body, cards) or url_query_item(canonical)
    ):
        # A name the `<title>` repeats over many buy buttons is a category's (an older shop's
        # listing "Action DVDs" with a button per row), unless the URL keys one item
        # (`product.asp?sku=D37860`, whose page also lists "also featured" items to buy).
        buy_controls = []
    if "product" not in og_type and _buy_units(buy_controls) > _LISTING_BUY_CONTROLS:
        return None  # a listing whose items the card rule did not group (Wayfair's 86 "Add to Cart")
    keyed_number = None
    product_page = (
        "product" in og_type
        or buy_controls
        or _stock_element(body, cards)
        or (
            sources.get("title") == "html:title-element"
            and _gallery(body, url, cards, _PRODUCT_GALLERY) is not None
        )
    )
    if not product_page and sources.get("title") == "html:title-element":
        keyed_number = url_keyed_number(body, canonical)
        product_page = keyed_number is not None
    if not price_text and product_page and sources.get("title") == "html:title-element":
        price_text, price_source = _header_price(body, cards, next(body.iter("h1"), None))
    if (
        not price_text
        and product_page
        and named is not None
        and sources.get("title") == "html:page-title-element"
    ):
        price_text, price_source = _header_price(body, cards, named, in_block=True)
    price = parse_price(price_text, lang=lang) if price_text else None
    # No price because the page says no offer is to be had now (Amazon's "No featured offers
    # available" beside its `#productTitle`): the product still, with no price. Only when the
    # title is an element whose id names a product's title (a listing's or an article's `<h1>`, a
    # blog's `#title`, is none) and, below, the page shows the product's picture.
    no_offer = (
        not price
        and sources.get("title") == "html:title-element"
        and _id_titled(body, title)
        and _NO_OFFER.search(detail()) is not None
    )
    if not title or not (price or no_offer) or not (product_page or no_offer):
        return None  # not a product page, or a listing (its prices are all in product cards)
    if price:
        sources["price"] = price_source
    currency = _currency(_itemprop_text(itemprops, "priceCurrency")) or _currency(
        _first(metas, "product:price:currency")
    )
    if currency:
        sources["currency"] = "itemprop/meta"
    else:
        currency = _pick(sources, "currency", currency_of(price_text, lang, canonical), price_source)
        currency = currency or _pick(
            sources, "currency", marketplace_currency(canonical, price_text), "url:marketplace"
        )
        currency = currency or _pick(
            sources, "currency", us_address_currency(body, price_text, lang, canonical), "html:us-address"
        )
        currency = currency or _pick(
            sources,
            "currency",
            card_currency(metas, parse_price(price_text, lang=lang) if price_text else None, lang),
            "meta:twitter:data",
        )
    images = _images(body, itemprops, metas, url, sources, title, cards)
    brand = _pick(sources, "brand", _itemprop_text(itemprops, "brand"), "itemprop")
    brand = brand or _pick(
        sources, "brand", clean_title(_first(metas, "product:brand") or _first(metas, "og:brand")), "meta"
    )
    brand = brand or _pick(
        sources, "brand", clean_title(twitter_card_field(metas, "brand")), "meta:twitter:data"
    )
    brand = brand or _pick(sources, "brand", heading_brand(body), "html:heading-brand")
    brand = brand or _pick(sources, "brand", _brand_element(body, cards), "html:brand-element")
    fields = _fields(body, cards)
    brand = brand or _pick(sources, "brand", _field_brand(fields), "html:field")
    brand = brand or _pick(sources, "brand", brand_link(body, cards, title), "html:brand-link")
    brand = brand or _pick(sources, "brand", _described_brand(metas), "meta:description")
    # The id markup or a form states, then an Amazon URL's ASIN, then a labelled line: on a
    # Kindle page the first labelled id is the print edition's ISBN, not this product's.
    product_id = _pick(sources, "product_id", _markup_id(body, itemprops), "html:id")
    product_id = product_id or _pick(sources, "product_id", url_identifier(canonical), "url:asin")
    shown = functools.cache(lambda: visible_text(body))  # the labelled-id rules read it once
    product_id = product_id or _pick(sources, "product_id", _labelled_id(shown()), "html:label")
    product_id = product_id or _pick(sources, "product_id", _article_number(shown()), "html:label-art-no")
    product_id = product_id or _pick(sources, "product_id", url_confirmed_id(body, canonical), "html:code")
    product_id = product_id or _pick(sources, "product_id", _code_element(body, cards), "html:code-element")
    product_id = product_id or _pick(sources, "product_id", _part_number(shown()), "html:label-part-no")
    product_id = product_id or _pick(
        sources, "product_id", cart_form_id(body, cards, canonical, controls), "html:cart-form"
    )
    product_id = product_id or _pick(
        sources, "product_id", keyed_number or url_keyed_number(body, canonical), "html:number"
    )
    product_id = product_id or _pick(sources, "product_id", url_item_id(canonical), "url:item-number")
    product_id = product_id or _pick(sources, "product_id", _style_number(detail()), "html:label-style")
    availability = normalize_availability(
        _itemprop_text(itemprops, "availability")
    ) or normalize_availability(_first(metas, "og:availability") or _first(metas, "product:availability"))
    if availability:
        sources["availability"] = "itemprop/meta"
    else:
        availability = _pick(
            sources, "availability", _stock_element(body, cards), "html:availability-element"
        )
        availability = availability or _pick(sources, "availability", _field_stock(fields), "html:field")
        availability = availability or _pick(
            sources,
            "availability",
            buy_control_stock(buy_controls, _OUT, detail()) if buy_controls else None,
            "html:buy-control",
        )
    color = _pick(sources, "color", _selected_color(body, cards), "html:aria-label")
    color = color or _pick(
        sources, "color", page_chosen_color(body, cards, canonical, controls), "html:chosen-option"
    )
    color = color or _pick(sources, "color", _field_color(fields), "html:field")
    color = color or _pick(sources, "color", _named_color(body, cards), "html:color-element")
    material = _pick(sources, "material", _field_material(fields), "html:field")
    material = material or _pick(sources, "material", _composition_element(body, cards), "html:composition")
    material = material or _pick(sources, "material", find_composition(detail()), "html:composition")
    category = _pick(sources, "category_path", _breadcrumb(body, cards, title, canonical), "html:breadcrumb")
    if not price and sources.get("image") not in ("html:main-image", "html:gallery"):
        return None  # no offer, and no product picture shown either: no product page
    key = product_id or url_key(canonical)
    if not images:
        found = _id_picture(body, url, key, cards)
        images = [found] if found else []
        if found:
            sources["image"] = "html:id-picture"
    return NormalizedProduct(
        product_id=key,
        # The page's URL key, which identifier rules added since (the item number, "Art.No.")
        # replace: a product the lake holds under it keeps that key (`pipelines`). Not for the
        # older rules: their products were never keyed by the URL, and a script's path
        # (`/index.php`) is every product's.
        id_aliases=[url_key(canonical)] if sources.get("product_id") in _NEWER_ID_SOURCES else [],
        url=canonical,
        platform="html",
        title=title,
        brand=brand,
        price=price,
        price_max=price,
        currency=currency,
        availability=availability,
        color=color,
        material=material,
        category_path=category or [],
        images=images,
        raw={"source": "html", "url": url},
        sources=sources,
    )


def currencies_written(text: str) -> set[str]:
    """Every ISO currency a text names by its code or by a sign or word that names one."""
    found = set(_CODE.findall(text))
    rest = text
    for sign, iso in _SIGNS:  # longer signs first, each removed so "US$" is not also "S$"
        if sign in rest:
            if iso:
                found.add(iso)
            rest = rest.replace(sign, " ")
    return found


def currency_of(text: str | None, lang: str | None, url: str | None = None) -> str | None:
    """ISO currency a price text writes ("£49.00" GBP, "EUR 12,99", "209,00€"); a sign that
    several currencies write ("$", "kr", "¥", "LE") only where the page names its market
    (`local_currency`); None when unsure."""
    if not text:
        return None
    code = _CODE.search(text)
    if code:
        return code.group(1)
    for sign, iso in _SIGNS:
        if sign in text and iso:
            return iso
    return local_currency(text, lang, url)


# A sign several currencies write names one when the page states the market it sells in: the
# region of its language tag (`lang="en-EG"`, `og:locale` "sv_SE"), else its host's country-code
# domain (`.se`, `.ca`). Only the signs that market's own currency writes count, so "$" on an
# `en-GB` page, "kr" on an `en-US` page or "$" on `lang="en"` at a `.com` host stay unknown.
# ".co" (Colombia) is not read: it is sold as a generic domain.
_LOCAL = {
    "US": ("USD", r"\$"), "CA": ("CAD", r"\$"), "AU": ("AUD", r"\$"), "NZ": ("NZD", r"\$"),
    "MX": ("MXN", r"\$"), "SG": ("SGD", r"\$"), "HK": ("HKD", r"\$"), "AR": ("ARS", r"\$"),
    "CL": ("CLP", r"\$"), "SE": ("SEK", r"(?<![^\W\d_])kr(?![^\W\d_])|\d:-"),
    "NO": ("NOK", r"(?<![^\W\d_])kr(?![^\W\d_])"), "DK": ("DKK", r"(?<![^\W\d_])kr(?![^\W\d_])"),
    "IS": ("ISK", r"(?<![^\W\d_])kr(?![^\W\d_])"), "JP": ("JPY", r"[¥￥]|円"), "CN": ("CNY", r"[¥￥]|元"),
    "EG": ("EGP", r"(?<![^\W\d_])LE(?![^\W\d_])"), "ZA": ("ZAR", r"(?<![^\W\d_])R\s?\d"),
}  # fmt: skip


_COUNTRY_SEGMENTS = frozenset({"us", "au", "nz", "sg", "hk", "mx"})
# A language tag without a region whose language is a nation's own and no other's, for the
# signs `_LOCAL` reads: "¥" on a `lang="ja"` page is yen, "kr" on a `lang="sv"` page kronor
# (Finland's Swedish speakers pay in euros, which no shop writes "kr").
_ONE_COUNTRY_LANGUAGES = {"ja": "JP", "sv": "SE", "nb": "NO", "nn": "NO", "no": "NO", "da": "DK", "is": "IS"}


def market_region(lang: str | None, url: str | None) -> str | None:
    """The country a page sells in, as it states it: its language tag's region ("en-EG" EG),
    else its URL path's locale ("/us/", "/en-gb/"), else its host's country-code domain
    ("shop.example.se" SE); None when it states none."""
    found = re.fullmatch(r"[A-Za-z]{2,3}[-_]([A-Za-z]{2})", (lang or "").strip())
    if found:
        return found.group(1).upper()
    spoken = _ONE_COUNTRY_LANGUAGES.get((lang or "").strip().lower())
    if spoken:
        return spoken
    # A store's locale in its path (`adidas.com/us/…`, `uniqlo.com/us/en/…`, `/en-us/`): a
    # language-country pair, or a bare segment that can only be a country (not "ca": Catalan).
    for segment in urlsplit(url or "").path.lower().split("/")[1:3]:
        pair = re.fullmatch(r"[a-z]{2}[-_]([a-z]{2})", segment)
        if pair:
            return pair.group(1).upper()
        if segment in _COUNTRY_SEGMENTS:
            return segment.upper()
    host = urlsplit(url or "").netloc.lower().split(":")[0]
    tld = host.rsplit(".", 1)[-1] if "." in host else ""
    return tld.upper() if len(tld) == 2 and tld != "co" else None


def local_currency(text: str, lang: str | None, url: str | None = None) -> str | None:
    """The currency of the page's market (`market_region`) when the price text writes that
    currency's own sign and names no other currency ("LE 34" on an `en-EG` page, "$59.99" on an
    `en-US` page, "249:-" on a `.se` host)."""
    local = _LOCAL.get(market_region(lang, url) or "")
    if not local or currencies_written(text) - {local[0]}:
        return None
    iso, sign = local
    return iso if re.search(sign, text) else None


# A US postal address: a city, a state's code and a five-digit ZIP ("Mountain View, CA 94041",
# "New York, NY 10038-1234"). Canada's, Australia's and Mexico's addresses are written otherwise.
_US_ADDRESS = re.compile(
    r"[A-Za-z][A-Za-z .'-]{1,30},\s*(?:AL|AK|AZ|AR|CA|CO|CT|DE|DC|FL|GA|HI|ID|IL|IN|IA|KS|KY|LA|ME|MD|MA|"
    r"MI|MN|MS|MO|MT|NE|NV|NH|NJ|NM|NY|NC|ND|OH|OK|OR|PA|RI|SC|SD|TN|TX|UT|VT|VA|WA|WV|WI|WY)\s+"
    r"\d{5}(?:-\d{4})?(?![\d-])"
)


def us_address_currency(
    body: lxml_html.HtmlElement, text: str | None, lang: str | None, url: str | None
) -> str | None:
    """USD for a "$" price on a page that states no market (`market_region`) but shows a US
    postal address (the shop's, in its footer or contact block) or asks for a ZIP code (Barnes &
    Noble's "Enter your zip" for store pickup, a shipping quote's "Enter your 5 digit zip"): a
    shop that gives its address in the US, or quotes for a US address, sells in dollars there.
    Never when the price text names another currency or the page names another dollar country."""
    if not text or "$" not in text or currencies_written(text) - {"USD"} or market_region(lang, url):
        return None
    if lang and not lang.lower().startswith("en"):
        return None
    pieces = (p for e in body.iter() if isinstance(e.tag, str) and e.tag not in ("script", "style")
              for p in (e.text, e.tail) if p and p.strip())  # fmt: skip
    shown = " ".join(" ".join(pieces).split())
    if _OTHER_DOLLAR_PLACE.search(shown):
        return None
    if _US_ADDRESS.search(shown) or _zip_prompt(shown):
        return "USD"
    prompts = (
        " ".join(filter(None, (c.get("title"), c.get("placeholder"), c.get("aria-label"))))
        for c in body.iter("input")
    )
    return "USD" if any(_zip_prompt(p) for p in prompts if p) else None


def _zip_prompt(text: str) -> bool:
    """Whether a text asks for a US ZIP code and not, beside it, for another country's postcode
    ("Postal / Zip Code", "Postcode / ZIP code", "ZIP code or postcode": any country's form)."""
    return any(
        not _POSTCODE.search(text[max(0, m.start() - 20) : m.end() + 20]) for m in _ZIP_PROMPT.finditer(text)
    )


_POSTCODE = re.compile(r"(?i)\bpost(?:al)?[- ]?code|\bpostal\b")


# A prompt for a US ZIP code, the US's own word for a postcode ("Enter your zip", "ZIP Code",
# "5 digit zip"); `_zip_prompt` leaves out any country's "Zip/Postal Code" (Magento's default label).
_ZIP_PROMPT = re.compile(
    r"(?i)\benter (?:your |a )?(?:5[- ]digit )?zip\b|\bzip[- ]?code\b|\b5[- ]digit zip\b"
)


# Another dollar country's address or name: a Canadian postcode, an Australian state and postcode.
_OTHER_DOLLAR_PLACE = re.compile(
    r"\b[A-Z]\d[A-Z] ?\d[A-Z]\d\b|\b(?:NSW|VIC|QLD|TAS|ACT)\s+\d{4}\b|\b(?:Canada|Australia|New Zealand|M[eé]xico)\b"
)


# Amazon sells in one currency per marketplace; its pages write "$" or "¥" (or no sign on old
# mobile pages' "Price: 25.34") and often no `lang`. Keyed by the host's suffix after "amazon.".
_MARKETPLACES = {
    "com": "USD", "ca": "CAD", "com.mx": "MXN", "com.br": "BRL", "co.uk": "GBP", "de": "EUR",
    "fr": "EUR", "es": "EUR", "it": "EUR", "nl": "EUR", "be": "EUR", "ie": "EUR", "at": "EUR",
    "co.jp": "JPY", "in": "INR", "com.au": "AUD", "se": "SEK", "pl": "PLN", "com.tr": "TRY",
    "sg": "SGD", "ae": "AED", "sa": "SAR", "eg": "EGP",
}  # fmt: skip
_DOLLARS = {"USD", "CAD", "MXN", "AUD", "SGD"}


def marketplace_currency(url: str, text: str | None) -> str | None:
    """The currency of the Amazon marketplace a page is on (amazon.com USD, amazon.co.uk GBP,
    amazon.co.jp JPY…), only when its price text names no other currency and, for a dollar
    marketplace, writes "$"."""
    host = urlsplit(url).netloc.lower().split(":")[0]
    found = re.search(r"(?:^|\.)amazon\.([a-z.]+)$", host)
    iso = _MARKETPLACES.get(found.group(1)) if found else None
    if not iso or not text:
        return None
    named = currencies_written(text)
    if named - {iso}:
        return None
    if iso in _DOLLARS and "$" not in text:
        return None
    return iso


# --------------------------------------------------------------------------- facts


def _pick(sources: dict[str, str], fact: str, value: Any, source: str) -> Any:
    if value and fact not in sources:
        sources[fact] = source
    return value


def _first(metas: dict[str, list[str]], key: str) -> str | None:
    values = metas.get(key)
    return values[0] if values else None


def _itemprop_text(itemprops: dict[str, list[Any]], name: str) -> str | None:
    for value in itemprops.get(name, []):
        if isinstance(value, dict):
            value = value.get("name")
        text = clean_title(value) if isinstance(value, str) else None
        if text:
            return text
    return None


def _hint(element: lxml_html.HtmlElement, *, tests: bool = False) -> str:
    """What an element's id and class (and, with `tests`, its `TEST_HOOKS`) name it."""
    hint = f"{element.get('id') or ''} {element.get('class') or ''}"
    return f"{hint} {' '.join(element.get(a) or '' for a in TEST_HOOKS)}" if tests else hint


# Attributes a site's own tests find elements by, named for what the element is, as an id is
# (React Testing Library's `data-testid`, Target's `data-test="product-price"`, Walmart's
# `data-automation-id`, Cypress's `data-cy`, `data-qa`): read after the id and the class.
TEST_HOOKS = ("data-testid", "data-test", "data-test-id", "data-qa", "data-cy", "data-automation-id")


def _text(element: lxml_html.HtmlElement) -> str:
    return " ".join(element.text_content().split())


# Classes that every framework's stylesheet sets to `display: none` (AngularJS's `ng-hide`,
# Bootstrap's `d-none` / `hidden` / `hide`, Cafe24's `displaynone`): a price part under one is
# not shown ("$19.99 <sup class="ng-hide">$19.99</sup>" shows one amount). Not Bootstrap's
# `hidden-xs`: hidden on phones only.
_DISPLAY_NONE = frozenset({"ng-hide", "d-none", "hidden", "hide", "is-hidden", "displaynone"})
# A class that shows the element again from a screen width on (Bootstrap's `d-none d-md-inline`,
# Tailwind's `hidden md:block`): hidden on phones only, shown on a desktop.
_SHOWN_AT = re.compile(r"^(?:d-(?:sm|md|lg|xl|xxl)-|(?:sm|md|lg|xl|2xl):)(?!hidden$)")


def _hidden_here(node: lxml_html.HtmlElement) -> bool:
    """Whether an element itself is not displayed: a `display: none` class (not one shown again
    from a screen width on), the `hidden` attribute or a `display: none` style."""
    classes = set((node.get("class") or "").lower().split())
    return bool(
        (_DISPLAY_NONE & classes and not any(_SHOWN_AT.match(c) for c in classes))
        or node.get("hidden") is not None
        or re.search(r"display\s*:\s*none", node.get("style") or "", re.I)
    )


def _undisplayed(element: lxml_html.HtmlElement) -> bool:
    """Whether an element or a block around it is not displayed: a pop-up's template the page's
    script fills and shows (`<div id="overlay-form" class="hide"><p id="popup-product-title"> is
    temporarily sold out.</p>`) names no product. A block that holds most of the page's text is
    no pop-up: a page hidden until its script has run (`<div id="page" style="display:none">`)."""
    page: list[int] = []
    for above in (element, *element.iterancestors()):
        if not isinstance(above.tag, str) or not _hidden_here(above):
            continue
        if above is element:
            return True
        if not page:
            page.append(len(_text(element.getroottree().getroot())))
        if 2 * len(_text(above)) < page[0]:
            return True
    return False


def _undisplayed_text(element: lxml_html.HtmlElement, *, readers: bool = True) -> str:
    """An element's text without its descendants that are not displayed (a `display: none`
    class or style, the `hidden` attribute). Screen-reader-only parts stay unless `readers` is
    False: a price's whole amount can be one (`_reader_price`)."""
    parts: list[str] = []

    def walk(node: lxml_html.HtmlElement, top: bool) -> None:
        if not top and (
            _hidden_here(node)
            or (not readers and READER_ONLY & set((node.get("class") or "").lower().split()))
        ):
            parts.append(node.tail or "")
            return
        parts.append(node.text or "")
        for child in node:
            if isinstance(child.tag, str):
                walk(child, False)
            else:
                parts.append(child.tail or "")
        if not top:
            parts.append(node.tail or "")

    walk(element, True)
    return " ".join("".join(parts).split())


def _heading_text(element: lxml_html.HtmlElement) -> str:
    """A heading's words: its parts joined by a space ("<a>Maison Francis Kurkdjian</a><span>Gentle
    Fluidity Gold</span>" is two phrases, not "KurkdjianGentle"). Only for headings: a price's
    parts ("649<span>.</span>00") must stay joined. A price the heading holds is no part of the
    name (H&M's `<h1>Bomber Jacket <span class="price">$24.99 $39.99</span></h1>`)."""
    words: list[str] = []

    def walk(node: lxml_html.HtmlElement) -> None:
        if not isinstance(node.tag, str):
            return  # a comment (Knockout's `<!-- ko if: isNew -->`): no words; its tail is added below
        if node is not element and _PRICE_HINT.search(_hint(node)) and _MONEY.search(_text(node)):
            return  # the tail after it is the heading's
        if node is not element and _byline(node):
            return  # "One Day <em>by <a href=…>David Nicholls</a></em>": the author, not the name
        words.append(node.text or "")
        for child in node:
            walk(child)
            words.append(child.tail or "")

    walk(element)
    return " ".join(" ".join(words).split())


def _worded(text: str) -> bool:
    """Whether a heading has a word: not only a number or code ("9780805087444")."""
    return not re.fullmatch(r"[\d\s-]{8,}", text)


_BYLINE = re.compile(r"(?i)^(?:by|von|par|door)\s")


def _byline(node: lxml_html.HtmlElement) -> bool:
    """A heading's author part: an element whose text starts with "by", linking to the author or
    named for one (a title's own words "Stand <em>by Me</em>" link nowhere)."""
    return bool(_BYLINE.match(node.text or "")) and (
        node.find(".//a") is not None or bool(_AUTHOR_HINT.search(_hint(node)))
    )


def _innermost_title(element: lxml_html.HtmlElement) -> lxml_html.HtmlElement:
    """The title inside a title group: Amazon wraps `h1#title` and the byline, edition and ISBN
    in `#productTitleGroupAnchor` / `#mobile_productTitleGroup_inner_feature_div`; the first
    descendant named as a title (or a heading) that holds no other one is the product's name."""
    while True:
        inner = next(
            (
                d
                for d in element.iterdescendants()
                if isinstance(d.tag, str) and (d.tag == "h1" or "title" in _hint(d).lower()) and _text(d)
            ),
            None,
        )
        if inner is None:
            return element
        element = inner


# A page's statement that no seller's offer is to be had now (not a stock level: others may sell).
_NO_OFFER = re.compile(
    r"(?i)no featured offers available|currently unavailable|derzeit nicht verfügbar|"
    r"actuellement indisponible|no disponible por el momento|attualmente non disponibile|"
    r"momenteel niet beschikbaar|atualmente indisponível"
)


def _id_titled(body: lxml_html.HtmlElement, title: str | None) -> bool:
    """Whether the title is the text of an element whose id names a product's title
    (`#productTitle`; never a bare `#title`, a blog post's or a checkout's heading)."""
    return any(
        isinstance(e.tag, str)
        and _PRODUCT_TITLE_CLASS.search(e.get("id") or "")
        and clean_title(_text(_innermost_title(e))) == title
        for e in body.iter()
    )


def _title_element(body: lxml_html.HtmlElement) -> str | None:
    """An element whose id names the product title (one per page); else one whose class names a
    product's title (`.product-title`, `.product-name`, `.item-title`); else the page's one
    meaningful `<h1>` (of several, the longest the page's `<title>` repeats). Not an element
    whose class is just "title", which also marks an upsell's or a protection plan's heading
    (Best Buy's "Protect your cell phone"): `html_product` asks for it after `og:title`."""
    for element in body.iter():
        if (
            isinstance(element.tag, str)
            and _TITLE_HINT.search(element.get("id") or "")
            and _text(element)
            and not _undisplayed(element)
        ):
            return clean_title(_text(_innermost_title(element)))
    found = _class_title(body, _PRODUCT_TITLE_CLASS)
    if found:
        return found
    h1s = [(h, _heading_text(h)) for h in body.iter("h1")]
    h1s = [(h, t) for h, t in h1s if 3 <= len(t) <= 300 and not _BUY.search(t) and _worded(t)]
    headings = [t for _, t in h1s]
    document_title = _fold(body.getroottree().findtext(".//title"))
    if len(headings) == 1:
        # The heading's part RDFa names the Dublin Core title (Book Depository's `<h1><span property="dc:title">
        # Sarah's Key</span> <span class="format">(Paperback)</span> <span class="author">By …`).
        named = next((d for d in h1s[0][0].iter() if _RDFA_TITLE.search(d.get("property") or "")), None)
        if named is not None and clean_title(_text(named)):
            return clean_title(_text(named))
        return clean_title(_with_subheading(*h1s[0], document_title))
    # Several <h1> (a logo "BELTZ" and the book's name): the longest one the page's <title>
    # repeats ("12 Wege zu guter Pflege - … | BELTZ").
    repeated = [h for h in headings if document_title and _fold(_TAG_PREFIX.sub("", h)) in document_title]
    if repeated:
        return clean_title(max(repeated, key=len))
    # Or whose words the <title> all holds, two or more: "Nikon COOLPIX S70 … - Red and Red (26189)"
    # titled "onSale | Nikon COOLPIX S70 … - Red and Red 26189" beside an <h1> "Most Recent Reviews".
    title_words = set(_WORD.findall(document_title))
    worded = [
        h
        for h in headings
        if len(set(_WORD.findall(_fold(h)))) >= 2 and set(_WORD.findall(_fold(h))) <= title_words
    ]
    return clean_title(max(worded, key=len)) if worded else None


def _page_title_element(
    body: lxml_html.HtmlElement, cards: set[lxml_html.HtmlElement], url: str
) -> lxml_html.HtmlElement | None:
    """On a page with no `<h1>`, the element that shows the product's name as the page's `<title>`
    states it: older shops set the name in bold or a lesser heading (`<font size=4><b>City By
    The Sea (Widescreen Version) [DVD]</b>`, `<h2>DVD : 24 - Season Three</h2>`) and title the
    page with it ("City By The Sea (Widescreen Version) [DVD] online at Movies Unlimited"). The
    short element outside product cards whose words are all words of the `<title>`, two or more
    and at least half of them or one whole part of it before the last; of several, the one with the most words, then the first. Never the
    shop's own name: words the page's host name spells ("Movies Unlimited" on
    www.moviesunlimited.com, "Example Shop" on shop.example.com), a logo linking home."""
    if any(_worded(_heading_text(h)) for h in body.iter("h1")):
        return None  # an <h1> of only a number (AbeBooks's ISBN-13 over its `<h2>` title) names nothing
    document_title = _fold(body.getroottree().findtext(".//title"))
    document_words = set(_WORD.findall(document_title))
    parts = _TITLE_PARTS.split(document_title)
    trailing = parts[-1].strip() if len(parts) > 1 else None
    whole_parts = {max((p.strip() for p in parts[:-1]), key=len)} if len(parts) > 1 else set()
    host = (urlsplit(url).hostname or "").lower()
    host_words = set(re.split(r"[.-]", host))
    best, most = None, 1
    for element in body.iter("h2", "h3", "h4", "h5", "h6", "b", "strong", "font", "span", "td", "div", "p"):
        # At most three elements inside (checked without walking a big block), then its text.
        if next(itertools.islice(element.iterdescendants(), 3, None), None) is not None:
            continue
        text = _text(element)
        if not 3 <= len(text) <= 150:
            continue
        words = set(_WORD.findall(_fold(text)))
        if len(words) <= most or not words <= document_words:
            continue
        if 2 * len(words) < len(document_words) and _fold(text) not in whole_parts:
            continue  # a few of the title's words, and not one of its parts ("ISBN: Name - Shop - Author")
        if _BUY.search(text) or _MONEY.search(text) or _in_card(element, cards):
            continue
        if host and (words <= host_words or "".join(_WORD.findall(_fold(text))) in host.replace("-", "")):
            continue  # the shop's name
        if _fold(text) == trailing:
            continue  # the `<title>`'s last part: the shop's or a category's name ("… - The Book Shop Ltd")
        if any(_BREADCRUMB_HINT.search(_hint(a)) for a in element.iterancestors()) or any(
            _text(a) == text for a in element.iter("a")
        ):
            continue  # a trail's or a menu's link
        links = (*element.iter("a"), *element.iterancestors("a"))
        if any(_site_root(a.get("href")) for a in links):
            continue  # a logo, or its holder
        best, most = element, len(words)
    return best


_WORD = re.compile(r"\w+")


# The separators a `<title>` puts before the shop's name ("Sarah's Key - The Book Shop Ltd",
# "… | Example", "…: booksamillion.com").
_TITLE_PARTS = re.compile(r"\s[-|–—]\s|\s::\s|:\s")
_RDFA_TITLE = re.compile(r"(?i)(?:^|\s)(?:dc|dcterms):title(?:\s|$)")


def _with_subheading(heading: lxml_html.HtmlElement, text: str, document_title: str) -> str:
    """The name an `<h1>` and the `<h2>` right after it state together, when the page's
    `<title>` starts with both (a brand as the heading, the model below it: "Kryptonite" +
    "KryptoLok Series 2 w/ Key", titled "Kryptonite KryptoLok Series 2 w/ Key - Campus Bike
    Shop"); else the heading's text."""
    following = heading.getnext()
    while following is not None and not isinstance(following.tag, str):
        following = following.getnext()
    if following is None or following.tag != "h2" or len(text.split()) > 4:
        return text
    both = f"{text} {_heading_text(following)}"
    return both if document_title and document_title.startswith(_fold(both)) else text


# A marketplace's tag before the name ("[삼성전자] 갤럭시S9", "【官网价直降】Apple iPhone 11"), which
# its <title> leaves out.
_TAG_PREFIX = re.compile(r"^\s*[\[【][^\]】]{1,30}[\]】]\s*(?=\S)")


def _class_title(body: lxml_html.HtmlElement, hint: re.Pattern[str]) -> str | None:
    for element in body.iter():
        if isinstance(element.tag, str) and any(hint.search(c) for c in (element.get("class") or "").split()):
            text = _text(element)
            if text and len(text) < 300 and not _undisplayed(element):
                return clean_title(text)
    return None


def page_heading(body: lxml_html.HtmlElement) -> str | None:
    """The product name the page shows as its heading: an element whose id names a product
    title, else the page's one meaningful `<h1>`. For a structured product that states no name;
    class names are not used here, as "product-name" also marks every recommended product."""
    for element in body.iter():
        if (
            isinstance(element.tag, str)
            and _TITLE_HINT.search(element.get("id") or "")
            and _text(element)
            and not _undisplayed(element)
        ):
            return clean_title(_text(element))
    headings = [_heading_text(h) for h in body.iter("h1")]
    headings = [h for h in headings if 3 <= len(h) <= 300 and not _BUY.search(h)]
    return clean_title(headings[0]) if len(headings) == 1 else None


def heading_brand(body: lxml_html.HtmlElement) -> str | None:
    """The brand inside the page's one `<h1>` ("<h1><a class=…brand…>Maison Francis Kurkdjian</a>
    <span>Gentle Fluidity Gold</span></h1>"): a part of the product's own heading whose id or class
    names a brand, so never a "Brands" menu or a recommended product's brand."""
    headings = list(body.iter("h1"))
    if len(headings) != 1:
        return None
    for element in headings[0].iterdescendants():
        # Zappos's `<meta itemtype="brand" content="SKECHERS">` inside the `<h1>` (a template's
        # slip for `itemprop`): the heading's own statement of the brand.
        marked = f"{element.get('itemprop') or ''} {element.get('itemtype') or ''}".lower().split()
        if element.tag == "meta" and "brand" in marked and clean_title(element.get("content")):
            return clean_title(element.get("content"))
        if isinstance(element.tag, str) and _BRAND_HINT.search(_hint(element)):
            text = _text(element)
            if text and len(text) <= 60 and not _AUTHOR.search(text):
                return clean_title(text)
    return None


def _price_text(
    body: lxml_html.HtmlElement, itemprops: dict[str, list[Any]], cards: set[lxml_html.HtmlElement]
) -> tuple[str | None, str]:
    """The shown price: a loose `itemprop="price"`, else the first element stating one amount with
    a currency whose id names a price (`#priceblock_ourprice`, `#price`: one per page), else whose
    class does (classes repeat in "bought together" and carousel widgets further down)."""
    for value in itemprops.get("price", []):
        if isinstance(value, str) and parse_price(value):
            return value, "itemprop"
    for attr in ("id", "class", *TEST_HOOKS):
        for element in body.iter():
            if not isinstance(element.tag, str):
                continue
            hint = element.get(attr) or ""
            if not _PRICE_HINT.search(hint) or _NOT_PRICE.search(f"{_hint(element)} {hint}"):
                continue
            text = _undisplayed_text(element)
            if not text or _in_card(element, cards) or _other_price(element, text):
                continue
            shown = text if len(text) <= 40 and len(_AMOUNT.findall(text)) == 1 else None
            shown = shown or _range_low(text) or _reader_price(element)
            # A price block that also shows a former, lowest-in-30-days or coupon price: the
            # amount its own attribute states (`data-price-value="32990"`, Magento's
            # `data-price-amount`), as its text writes it with a currency ("32 990 Kč").
            shown = shown or _attribute_amount(element, text)
            if not shown or not (_CODE.search(shown) or any(s in shown for s, _ in _SIGNS) or "$" in shown):
                continue
            if not parse_price(shown):
                continue  # "0원": an order total before a quantity is chosen, never the price
            now = _now_price(element)
            if now is not None:
                element, shown = now
                hint = element.get(attr) or hint
            where = f"#{hint}" if attr == "id" else f".{hint.split()[0]}"
            return shown, f"html:price-element {element.tag}{where}"
    return None, ""


# The label of the price charged now, after the former one ("$64.95" then "Now $52.00").
# What follows it is the amount alone, with its currency: "Sale: save $5.00 today" or "Sale price
# for members $24.00" states another amount (a saving, a member's price).
_BARE_PRICE = re.compile(
    r"(?:[^\w\s]{1,3}|[A-Za-z]{1,3}\.?)?\s?\d[\d.,'\u00a0\u202f ]*?\s?(?:[^\w\s]{1,3}|[A-Za-z]{1,3}\.?)?"
)
_NOW_LABEL = re.compile(r"(?i)^(?:now|sale|sale price|jetzt|nu|maintenant|ahora|ora|agora)\s*:?\s*(?=\S)")


def _now_price(element: lxml_html.HtmlElement) -> tuple[lxml_html.HtmlElement, str] | None:
    """The price element right after a price that a "Now $52.00" beside it labels as the one
    charged now (Gap's unlabelled, unstruck `h5.product-price--markdown` "$64.95", then
    `h5.product-price` "Now $52.00"): that one, its amount without the label."""
    for sibling in itertools.islice(element.itersiblings(), 2):
        if not isinstance(sibling.tag, str) or not _PRICE_HINT.search(_hint(sibling)):
            continue
        text = _undisplayed_text(sibling)
        label = _NOW_LABEL.match(text)
        rest = text[label.end() :] if label else ""
        if label and _BARE_PRICE.fullmatch(rest) and parse_price(rest):
            return sibling, rest
    return None


def page_price(
    body: lxml_html.HtmlElement,
    lang: str | None,
    url: str,
    cards: set[lxml_html.HtmlElement] | None = None,
    title: str | None = None,
) -> tuple[Decimal, str | None, str] | None:
    """The price a structured product's own block shows when its markup states no offer, by the
    fallback's rules (product cards left out), and its currency when the text names one:
    (price, currency or None, source). Only inside the page's one microdata Product element
    (GODIVA's `<div itemscope itemtype=…/Product>` holding `<span class="price-sales">$51.95`)
    or, with no Product element, the small block around the `<h1>` naming the product (a JSON-LD
    Product with `"price": ""`, CVS; none at all, Tiffany), where only a bare amount counts
    (`_heading_price`): a related product's, a shipping banner's or a footer's price elsewhere on
    the page is not this product's."""
    cards = _cards(body) if cards is None else cards
    scopes = product_elements(body)
    if len(scopes) > 1:
        return None
    if scopes:
        text, source = _price_text(scopes[0], {}, cards)
    else:
        text, source = _heading_price(body, title, cards)
    price = parse_price(text, lang=lang) if text else None
    if not text or not price:
        return None
    currency = currency_of(text, lang, url) or marketplace_currency(url, text)
    return price, currency or us_address_currency(body, text, lang, url), source


_HEADING_BLOCK_LEVELS = 3  # a heading's parent, grandparent, great-grandparent
_HEADING_BLOCK_CHARS = 1500  # more text than a product's title block holds: the page's layout
# Prices beside a title that are not the one it sells at: a manufacturer's or former price, a
# member's, a financing instalment, an add-on's or a protection plan's, a promotion's.
_NOT_HEADING_PRICE = re.compile(
    r"(?i)msrp|member|financ|affirm|klarna|afterpay|install|monthly|"
    r"add-?on|accessor|upsell|bundle|warranty|protection|gift"
)
# The price a shop charges when it also shows another (SFCC's `price-sales` after the struck
# `price-standard`; Dawn's `price-item--sale`): read first.
_CHARGED_HINT = re.compile(r"(?i)sale|current|(?<![a-z])now(?![a-z])|final|special")
_ISO_AFTER = re.compile(r"\s+[A-Z]{3}$")  # "$68.00 USD"
# A shop that withholds the price until the cart or a sign-in (US minimum advertised prices).
_WITHHELD = re.compile(
    r"(?i)(?:see|view|show)\s+(?:the\s+|our\s+)?(?:price|pricing)\s+in\s+(?:the\s+|your\s+)?(?:cart|bag|basket|checkout)|"
    r"add\s+to\s+(?:cart|bag|basket)\s+to\s+see|(?:sign|log)\s*in\s+(?:to\s+see|for)|price\s+in\s+cart"
)
_BARE_PRICE_WORD = re.compile(r"(?i)^(?:price|our price|sale|sale price|now)\s*:?\s*")


def _heading_price(
    body: lxml_html.HtmlElement, title: str | None, cards: set[lxml_html.HtmlElement]
) -> tuple[str | None, str]:
    """The one bare amount ("$34,300", "Price: $19.99") an element named for a price shows in the
    block around the `<h1>` that names the product, when that block holds the whole title and
    says nothing of a price withheld until the cart; never an element named for another price
    (MSRP, regular, member, financing, add-on, warranty) or one whose text says more than the
    amount ("MSRP: $349.99", "Free shipping over $75", "As low as $29/mo")."""
    name = _squash(title)
    for block in _heading_blocks(body, title):
        block_text = " ".join(block.text_content().split())
        if name not in _squash(block_text) or _WITHHELD.search(block_text):
            continue
        named = [
            e
            for e in block.iter()
            if isinstance(e.tag, str)
            and not _in_card(e, cards)
            and _PRICE_HINT.search(_hint(e))
            and not _NOT_PRICE.search(_hint(e))
            and not _NOT_HEADING_PRICE.search(_hint(e))
        ]
        charged = [e for e in named if _CHARGED_HINT.search(_hint(e))]
        for element in charged + [e for e in named if e not in charged]:
            text = _one_amount(_reader_less_text(element))
            amount = _ISO_AFTER.sub("", _BARE_PRICE_WORD.sub("", text, count=1))
            if _MONEY_TEXT.fullmatch(amount) and not _other_price(element, text):
                where = (
                    f"#{element.get('id')}"
                    if element.get("id")
                    else f".{(element.get('class') or '').split()[0]}"
                )
                return amount, f"html:price-element {element.tag}{where}"
    return None, ""


def _reader_less_text(element: lxml_html.HtmlElement) -> str:
    """A price element's shown text without a screen-reader-only label inside it (Dawn's
    `<span class="visually-hidden">Regular price</span>`), when visible parts remain."""
    return _undisplayed_text(element, readers=False) or _undisplayed_text(element)


def _one_amount(text: str) -> str:
    """A price's text with the same amount written twice in a row reduced to one: a mobile and a
    desktop copy (`<span class="hidden md:inline">$24.00</span><span class="md:hidden">$24.00`)."""
    found = _MONEY_TEXT.findall(text)
    if len(found) >= 2 and len(set(found)) == 1 and not _MONEY_TEXT.sub("", text).strip():
        return found[0]
    return text


def _squash(text: str | None) -> str:
    """Text without case or spaces, for "is this title in that block" ("Tiffany Novo®<h1>Diamond
    Ring</h1>" holds "Tiffany Novo® Diamond Ring")."""
    return "".join((text or "").casefold().split())


def _heading_blocks(body: lxml_html.HtmlElement, title: str | None) -> list[lxml_html.HtmlElement]:
    """The blocks around each `<h1>` that names the product (its text within the title, or the
    title within it), innermost first, while they stay the size of a title block."""
    name = " ".join((title or "").casefold().split())
    out: list[lxml_html.HtmlElement] = []
    if not name:
        return out
    for heading in body.iter("h1"):
        text = " ".join(heading.text_content().casefold().split())
        if len(text) < 3 or (text not in name and name not in text):
            continue
        block = heading.getparent()
        for _ in range(_HEADING_BLOCK_LEVELS):
            if block is None or block.tag in ("body", "html"):
                break  # the page itself is no block around the heading
            if len(" ".join(block.text_content().split())) > _HEADING_BLOCK_CHARS:
                break
            if block not in out:
                out.append(block)
            block = block.getparent()
    return out


def _reader_price(element: lxml_html.HtmlElement) -> str | None:
    """The whole amount a price element gives screen readers (Amazon's `<span class="a-offscreen">
    $19.99</span>` beside the visible `<span class="a-price-whole">19</span>…`), when its text
    is one amount with a currency."""
    for inner in element.iterdescendants():
        if isinstance(inner.tag, str) and READER_ONLY & set((inner.get("class") or "").lower().split()):
            text = _text(inner)
            if _MONEY_TEXT.fullmatch(text):
                return text
    return None


# "¥149.00 - 159.00", "€ 20 – 35": the variants' price range a price element shows.
_RANGE = re.compile(r"^(?P<low>\D{0,4}\d[\d.,' ]*?)\s*[-–~～]\s*(?P<high>\D{0,4}\d[\d.,' ]*\D{0,4})$")


# The label a price block starts with ("价格 ¥ 5499.00-6799.00", "Price: $20 - $35").
_PRICE_WORD = re.compile(r"^(?:price|preis|prix|precio|prezzo|价格|價格|価格|가격|판매가)\s*[:：]?\s*", re.I)


def _range_low(text: str) -> str | None:
    """The low end of a price range a price element shows, as the price to pay from (schema.org's
    `lowPrice`), when it writes its currency and is below the high end; else None."""
    found = _RANGE.match(_PRICE_WORD.sub("", text, count=1)) if len(text) <= 40 else None
    if not found or not _MONEY_TEXT.fullmatch(low := found.group("low").strip()):
        return None
    low_amount, high_amount = parse_price(low), parse_price(found.group("high"))
    return low if low_amount and high_amount and low_amount < high_amount else None


_PRICE_ATTRS = ("data-price-amount", "data-price-value", "data-price", "content")


# A unit price ("83 kr/l", "83 kronor per liter", "2,49 €/kg"), never the product's.
_PER_UNIT = re.compile(r"(?i)/\s*\w{1,5}\b|\bper\b|\bpro\b|\bje\b")


# How many elements after the product's heading its price may come (moviesunlimited.com's comes
# after a description, a director and ten actors' links: 46).
_HEADER_PRICE_REACH = 80


def _header_price(
    body: lxml_html.HtmlElement,
    cards: set[lxml_html.HtmlElement],
    heading: lxml_html.HtmlElement | None,
    *,
    in_block: bool = False,
) -> tuple[str | None, str]:
    """A price no element names, as a script-built product header or an older shop's table shows
    it: the first element after the product's heading (the page's `<h1>`, or the element its
    `<title>` repeats) whose whole text is one amount with a currency ("249 kronor", "€ 19,95",
    `<font size=4><b>$13.49</b></font>`, "Our Price: $299.00"), outside product cards, never a
    unit price, a struck or list price. Only asked for a product page whose title is that
    heading, so the price that follows it is the product's. With `in_block` (an older shop's name
    in bold), only inside the heading's table or block, where a text between tags counts too
    ("<b>Name</b><br>Our Price: $299.00<br>"): a "Recommended accessories" table after it is not
    the product's."""
    if heading is None:
        return None, ""
    block = next(heading.iterancestors(*_BLOCKS), None) if in_block else None
    for seen, element in enumerate(_after(heading)):
        if seen >= _HEADER_PRICE_REACH:
            break  # past the product's own block: a related item's or a footer's price
        if not isinstance(element.tag, str):
            continue
        if block is not None and block not in element.iterancestors():
            break
        if any(a.tag in ("s", "del", "strike") for a in element.iterancestors()) or _in_card(element, cards):
            continue
        struck = next(element.iter("s", "del", "strike"), None) is not None  # `<b><s>$499.95</s></b>`
        own = _text(element) if len(element) <= 2 and not struck else ""
        for text, where in ((own, element.tag), ((element.tail or "") if in_block else "", "text")):
            amount = _header_amount(" ".join(text.split()))
            if amount and (where == "text" or not _other_price(element, amount)):
                return amount, f"html:header-price {where}"
    return None, ""


_BLOCKS = ("table", "div", "section", "article", "form", "ul", "ol")


def _header_amount(text: str) -> str | None:
    """The text's amount when it is one amount with a currency, after a plain price word ("Our
    Price: $299.00"); never a list, former or unit price."""
    if _OTHER_PRICE_LABEL.match(text):
        return None
    text = _BARE_PRICE_WORD.sub("", text, count=1)
    if not text or len(text) > 30 or not _MONEY_TEXT.fullmatch(text) or _PER_UNIT.search(text):
        return None
    return text


def _after(element: lxml_html.HtmlElement) -> Any:
    """The elements after `element` in document order (not inside it)."""
    inside = set(element.iter())
    seen = False
    for node in element.getroottree().getroot().iter():
        if node is element:
            seen = True
            continue
        if seen and node not in inside:
            yield node


def _attribute_amount(element: lxml_html.HtmlElement, text: str) -> str | None:
    """The money text (amount and currency) in a price element's text that equals the amount
    the element's own attribute states; None when it states none or the text does not show it."""
    stated = next((parse_price(element.get(a)) for a in _PRICE_ATTRS if element.get(a)), None)
    if not stated:
        return None
    for match in _MONEY_TEXT.finditer(text):
        if parse_price(match.group(0)) == stated:
            return match.group(0).strip()
    return None


def _other_price(element: lxml_html.HtmlElement, text: str) -> bool:
    """A list or struck-through price: its label says so, or it or its parent/grandparent is
    named for one ("list-price-label" around "price-value"), or it holds a struck-through amount."""
    if _OTHER_PRICE_LABEL.match(text):
        return True
    header = _column_header(element)
    if header and (_OTHER_PRICE_LABEL.match(header) or _REFERENCE_HEADER.search(header)):
        return True  # a table's "参考基準価格" or "List Price" column: another price than the one charged
    for above in list(element.iterancestors())[:2]:
        if _LIST_PRICE_HINT.search(_hint(above)):
            return True
    if any(_other_offers(above) for above in list(element.iterancestors())[:8]):
        return True
    return any(
        isinstance(d.tag, str) and ("strike" in _hint(d).lower() or d.get("data-a-strike") == "true")
        for d in element.iter()
    )


# A price table's column for a price other than the one charged: a list, retail or reference
# price (MonotaRO's "参考基準価格(税別)" before "販売価格(税別)"), a manufacturer's suggested one.
_REFERENCE_HEADER = re.compile(r"(?i)list price|retail price|msrp|rrp|uvp|reference price|参考|定価|希望小売")


def _column_header(element: lxml_html.HtmlElement) -> str | None:
    """The header text of the table column a price element sits in (the `<th>` of its table's
    head row at the cell's place), or None outside a table with a head row."""
    cell = next(
        (a for a in itertools.islice((element, *element.iterancestors()), 5) if a.tag in ("td", "th")), None
    )
    row = cell.getparent() if cell is not None else None
    table = next(row.iterancestors("table"), None) if row is not None else None
    if table is None:
        return None
    head = next(
        (r for r in table.iter("tr") if all(c.tag == "th" for c in r if isinstance(c.tag, str))), None
    )
    if head is None or head is row:
        return None
    place = [c for c in row if isinstance(c.tag, str)].index(cell)
    headers = [c for c in head if isinstance(c.tag, str)]
    return _text(headers[place]) if place < len(headers) else None


def _other_offers(element: lxml_html.HtmlElement) -> bool:
    """Named for other sellers' offers (Amazon's `mbc`, `olp_feature_div`); not a block named for
    the price and the offers' link both (2010 Amazon's `#price-and-olp-condition-link-outer`
    around the product's own "Price: $129.00")."""
    return any(_OTHER_OFFERS.search(f" {t} ") and not _price_first(t) for t in _hint(element).split())


def _price_first(token: str) -> bool:
    price, offers = _PRICE_HINT.search(token), _OTHER_OFFERS.search(f" {token} ")
    return bool(price and offers and price.start() < offers.start())


def _badge(img: lxml_html.HtmlElement, holder: lxml_html.HtmlElement) -> bool:
    """A badge, a logo or an icon set in the main picture's holder ("New arrival", the brand's
    logo linking to its page), by its file or its own or its wrappers' names inside the holder."""
    inside = list(itertools.takewhile(lambda a: a is not holder, img.iterancestors()))
    named = " ".join([img.get("src") or "", _hint(img), *(_hint(a) for a in inside)])
    return bool(re.search(r"(?i)badge|logo|icon|ribbon|sprite", named))


def _images(
    body: lxml_html.HtmlElement,
    itemprops: dict[str, list[Any]],
    metas: dict[str, list[str]],
    url: str,
    sources: dict[str, str],
    title: str,
    cards: set[lxml_html.HtmlElement],
) -> list[str]:
    for value in itemprops.get("image", []):
        found = absolute_url(value, url) if isinstance(value, str) else None
        if found:
            sources["image"] = "itemprop"
            return [found]
    og = absolute_url(_first(metas, "og:image"), url)
    if og:
        sources["image"] = "meta:og:image"
        return [og]
    for img in body.iter("img"):  # the gallery's main picture, named by its id
        found = _img_url(img, url) if _MAIN_IMAGE_ID.search(img.get("id") or "") else None
        if found:
            sources["image"] = "html:main-image"
            return [found]
    for img in body.iter("img"):
        # Or by its holder's (2010 Amazon's `div#prodImageCell > a > img`): the first picture in it.
        holder = next(
            (a for a in list(img.iterancestors())[:2] if _MAIN_IMAGE_ID.search(a.get("id") or "")), None
        )
        if (
            holder is not None
            and next((i for i in holder.iter("img") if not _badge(i, holder)), None) is img
            and not _thumbnail(img)
            and not _in_card(img, cards)
        ):
            found = _img_url(img, url)
            if found:
                sources["image"] = "html:main-image"
                return [found]
    for hint in (_MAIN_IMAGE_HINT, None, _IMAGE_HINT, _GALLERY_HINT):
        if hint is _GALLERY_HINT:  # a gallery's item or lightbox link: the full-size picture
            found = _gallery(body, url, cards)
            if found:
                sources["image"] = "html:gallery"
                return [found]
            continue
        for img in body.iter("img"):
            holder = img.getparent()
            hints = _hint(img) + " " + (_hint(holder) if holder is not None else "")
            exact = False
            if hint is None:  # the picture the page labels with the product's name
                # The name, "Name 1" (a gallery's first), or the name less a code in brackets
                # after it ("… - Red and Red" for "… - Red and Red (26189)").
                names = {_fold(title), f"{_fold(title)} 1", _fold(_TRAILING_CODE.sub("", title or ""))}
                exact = bool(title) and _fold(img.get("alt")) in names - {""}
                named = (exact or _names_product(img.get("alt"), title, img, url, cards)) and not _thumbnail(
                    img
                )
            else:
                named = bool(hint.search(hints))
            # A picture labelled with exactly the product's name is no spacer or icon, whatever its
            # format (an older shop's cover `ISTU_icon.gif`).
            found = _img_url(img, url, any_format=exact) if named else None
            if found:
                sources["image"] = "html:image-alt" if hint is None else "html:image-element"
                return [found]
    return []


# A product's gallery: lightGallery's `#lightgallery`, `.product-gallery`, `.product-media`,
# `.woocommerce-product-gallery`, a zoom or lightbox. Not "carousel" or "slider": those also hold
# rows of other products.
_GALLERY_HINT = re.compile(
    r"(?i)gallery|zoom|lightbox|fancybox|thickbox|main[-_]?image|product[-_]?(?:image|media|photo|picture)s?"
)
# As a product page's sign, the gallery must be named for a product's ("product-gallery",
# "product-media", "pdp-images"): a blog post's WordPress `.gallery` is no product.
_PRODUCT_GALLERY = re.compile(r"(?i)(?:product|pdp)[-_]?(?:gallery|images?|img|media|photos?|pictures?)")
# The full-size picture a gallery item or a lightbox link points to (`data-src` on lightGallery's
# items, `href` of a link around the thumbnail).
_PICTURE_ATTRS = ("data-src", "data-zoom-image", "data-large", "data-full", "data-image", "href")
_PICTURE_FILE = re.compile(r"(?i)\.(?:jpe?g|png|webp|avif)(?:$|[?;#])")


def _gallery(
    body: lxml_html.HtmlElement,
    url: str,
    cards: set[lxml_html.HtmlElement],
    hint: re.Pattern[str] = _GALLERY_HINT,
) -> str | None:
    """The first picture of the page's product gallery, outside product cards: an element in an
    element named for a gallery, zoom or lightbox (or so named itself, or a link whose `rel`
    names a gallery) whose `data-src` / `data-zoom-image` / `href`… is a picture file. A
    lightbox link points to the full-size picture; a gallery item's `data-src` is the picture
    lightGallery shows."""
    for element in body.iter():
        if not isinstance(element.tag, str) or _in_card(element, cards):
            continue
        named = bool(hint.search(_hint(element))) or (
            hint is _GALLERY_HINT and "gallery" in (element.get("rel") or "")
        )
        if not named and not any(hint.search(_hint(a)) for a in list(element.iterancestors())[:3]):
            continue
        if element.tag == "img":
            found = _img_url(element, url)
            if found:
                return found
            continue
        for attr in _PICTURE_ATTRS:
            if attr == "href" and element.tag != "a":
                continue
            found = absolute_url(element.get(attr), url)
            if found and _PICTURE_FILE.search(urlsplit(found).path + "?"):
                return found
    return None


def page_image(body: lxml_html.HtmlElement, url: str, title: str | None) -> tuple[list[str], str | None]:
    """The product's picture as the page shows it, for a structured product that states none
    (a lazy-loaded gallery: `data-src` behind a `data:` placeholder, a lightbox link): the
    visible-page rules without `itemprop` and `og:image`; ([], None) when none."""
    sources: dict[str, str] = {}
    images = _images(body, {}, {}, url, sources, title or "", _cards(body))
    return images, sources.get("image")


def _thumbnail(img: lxml_html.HtmlElement) -> bool:
    """A gallery's thumbnail strip repeats the main picture small, with the product's name: an
    element named for thumbnails around it that holds several pictures (Bootstrap's
    `.thumbnail` frame around a single picture is no strip)."""
    return any(
        "thumb" in _hint(a).lower() and len(list(a.iter("img"))) > 1 for a in list(img.iterancestors())[:4]
    )


_TRAILING_CODE = re.compile(r"\s*\([^()]{1,20}\)\s*$")


def _names_product(
    alt: str | None,
    title: str | None,
    img: lxml_html.HtmlElement,
    url: str,
    cards: set[lxml_html.HtmlElement],
) -> bool:
    """Whether a picture's `alt` holds the product's name as one part of a label joined by " - ",
    " | " or ": " (an older shop's "Marx, Richard - Greatest Hits CD"), the other parts naming
    no amount ("Greatest Hits - 2 for $20" is a promotion's banner), the picture neither in a
    product card nor in a link to another page (another artist's "ABBA - Greatest Hits")."""
    name, label = _fold(title), _fold(alt)
    parts = [p.strip() for p in _ALT_PARTS.split(label)]
    if len(name.split()) < 2 or name not in parts or any(re.search(r"\d", p) for p in parts if p != name):
        return False
    if _in_card(img, cards):
        return False
    page = urlsplit(url)
    for link in img.iterancestors("a"):
        target = urlsplit(absolute_url(link.get("href"), url) or "")
        if target.path and (target.hostname, target.path) != (page.hostname, page.path):
            return False
    return True


_ALT_PARTS = re.compile(r"\s[-|–]\s|:\s")


def _id_picture(
    body: lxml_html.HtmlElement, url: str, product_id: str, cards: set[lxml_html.HtmlElement]
) -> str | None:
    """The picture whose file is named by the product's id (`/boxcovers/100_Wide/D37860.jpg` on
    the page of item D37860; the id, then at most a size suffix), outside product cards and links
    to other pages: shops file their pictures under the item's number. Only an id of letters and
    digits, five characters or more (never a path)."""
    if not re.fullmatch(r"(?=\w*\d)\w{5,30}", product_id):
        return None
    stem = re.compile(rf"(?i){re.escape(product_id)}(?:[-_.]\w{{0,12}})?\.\w{{3,4}}")
    for img in body.iter("img"):
        found = _img_url(img, url)
        if not found or not stem.fullmatch(found.rsplit("/", 1)[-1].split("?", 1)[0]):
            continue
        if _in_card(img, cards) or _thumbnail(img) or next(img.iterancestors("a"), None) is not None:
            continue  # another item's picture links to its page
        return found
    return None


def _img_url(img: lxml_html.HtmlElement, url: str, *, any_format: bool = False) -> str | None:
    """The picture's URL; a `data:` placeholder's real one is in `data-old-hires`, Amazon's
    `data-a-dynamic-image` (a JSON map of sizes: the largest) or `data-src`. GIF and SVG files
    (spacers, icons, logos) only when `any_format`."""
    for attr in (
        "src",
        "data-old-hires",
        "data-a-dynamic-image",
        "data-src",
        "data-zoom-image",
        "data-large",
    ):
        value = img.get(attr)
        if attr == "data-a-dynamic-image":
            value = _largest(value)
        found = absolute_url(value, url)
        if found and (any_format or not found.lower().endswith((".gif", ".svg"))):
            return found
    return None


def _largest(sizes: str | None) -> str | None:
    try:
        parsed = json.loads(sizes or "")
    except ValueError:
        return None
    if not isinstance(parsed, dict) or not parsed:
        return None

    def area(item: tuple[str, Any]) -> float:
        dims = item[1] if isinstance(item[1], list) else []
        try:
            return float(dims[0]) * float(dims[1])
        except (IndexError, TypeError, ValueError):
            return 0.0

    return max(parsed.items(), key=area)[0]


def _fold(text: str | None) -> str:
    return " ".join((text or "").casefold().split())


# The word for brands itself, as a menu or a link to the brands page says it.
_MENU_BRAND = re.compile(
    r"(?i)^\s*(?:all |our |top |shop (?:all |by )?)?(?:brands?|marken|marques|marcas|merken|marchi)\s*$"
)


def _brand_element(body: lxml_html.HtmlElement, cards: set[lxml_html.HtmlElement]) -> str | None:
    named = [e for e in body.iter() if isinstance(e.tag, str) and _BRAND_HINT.search(_hint(e, tests=True))]
    # A class that three or more brand elements share is a list's field (onsale.com's
    # `span.itemManufacturer` "Sharp" in each "customers also bought" item), not the product's.
    shared = Counter((e.tag, e.get("class")) for e in named if e.get("class"))
    for element in named:
        if shared[(element.tag, element.get("class"))] >= 3:
            continue
        if _SHARE_HINT.search(_hint(element)) or _in_card(element, cards):
            continue  # Amazon's "tell-a-friend-byline" ("Share"); a recommended product's brand
        if _in_menu(element):
            continue  # a "Shop by Brand" menu's entries (`<li class="brands-A">A</li>`, every brand)
        hooked = not _BRAND_HINT.search(_hint(element))  # named for a brand by a test hook only
        if hooked and (_in_chrome(element) or _links_home(element)):
            continue  # never the site's own logo (`data-testid="brand-logo"`)
        if element.find(".//button") is not None:
            continue  # a section with its controls (Target's `ManufacturerNotes` "From the brand" + "Show more")
        text = _text(element)
        if len(text) == 1:
            continue  # one letter: an A-Z index of brands, no brand's name
        if _CREDIT.match(text):
            continue  # a widget's credit in its `<p class="brand">`: "powered by Recomatic"
        if _MENU_BRAND.match(text) or any(_MENU_BRAND.match(i.get("alt") or "") for i in element.iter("img")):
            continue  # a menu's "Brands" button (`<img id="brands" alt="Brands">`), no brand's name
        if text and _is_author(element):
            continue
        match = _BRAND_TEXT.match(text) if text else None
        if match and match.group("f") and not _brand_listing_link(element):
            continue  # "Shop all New Arrivals": a brand's name only on a link to its listing
        if match:
            return clean_title(next(v for v in match.groupdict().values() if v))
        if hooked:
            continue  # a hook's block states a brand only as a label does ("Featured brands" + names)
        # A byline that is only a name ("ChangM"); "by Mat Follas (Author)" names an author.
        if text and len(text) <= 40 and len(text.split()) <= 4 and not _AUTHOR.search(text):
            return clean_title(text)
        if not text:  # a brand logo: its picture's alt names it
            alt = next((clean_title(i.get("alt")) for i in element.iter("img") if i.get("alt")), None)
            alt = _LOGO_WORD.sub("", alt or "") or None  # "아식스 로고", "Nike logo": the brand's logo
            if alt and len(alt) <= 40 and len(alt.split()) <= 4 and not _AUTHOR.search(alt):
                return alt
    return None


def _links_home(element: lxml_html.HtmlElement) -> bool:
    """Whether the element is or holds a link to the site's root ("/"): the site's own logo."""
    links = [element] if element.tag == "a" else list(element.iter("a"))
    return any(urlsplit(a.get("href") or "").path in ("", "/") and a.get("href") is not None for a in links)


def _brand_listing_link(element: lxml_html.HtmlElement) -> bool:
    """Whether the element is or holds a link to a brand's own listing (`/brand/sony/`,
    Target's `/b/hearth-hand-with-magnolia/-/N-2l26w`)."""
    links = [element] if element.tag == "a" else list(element.iter("a"))
    for link in links:
        href = link.get("href") or ""
        if _brand_slugs(href) or re.match(r"^/b/[^/]+", urlsplit(href).path):
            return True
    return False


# A link to a brand's own listing names the brand in its URL: a path segment for brands and the
# slug after it (`/brand/sony/n/56363/`, `/manufacturer/Samsung/smsc.aspx`), or a query key
# (`/s?cc=LAKB&man=Nikon`; any key naming a brand: 2010 Amazon's "by <a href=…&field-brandtextbin=Canon>").
_BRAND_SEGMENTS = frozenset(
    {"brand", "brands", "manufacturer", "manufacturers", "designer", "designers", "marke", "marken",
     "marque", "marques", "marca", "marcas", "merk", "merken"}
)  # fmt: skip
_BRAND_KEYS = frozenset({"brand", "man", "manufacturer", "mfr", "marke", "marque", "marca"})
# Page chrome: a menu's brand links list every brand the shop sells.
_CHROME_HINT = re.compile(r"(?i)(?:^|[\s_-])(?:nav\w*|\w*menu\w*|header|footer)(?:$|[\s_-])")
_PAGE_SUFFIX = re.compile(r"(?i)\.(?:s?html?|aspx?|php|jsp|cfm)$")


def brand_link(
    body: lxml_html.HtmlElement, cards: set[lxml_html.HtmlElement], title: str | None
) -> str | None:
    """The brand a link to its own listing names ("See all Sony products" → `/brand/sony/`), when
    the product's title starts with that name: as the title writes it ("Sony"). Never a link in a
    menu, header or footer, nor in a product card (those list other products' brands)."""
    words = list(re.finditer(r"\w+", (title or "").replace("_", " ")))
    if not words:
        return None
    for link in body.iter("a"):
        # The URL first: most links name no brand, and the ancestor walks below cost more.
        names = _brand_slugs(link.get("href") or "")
        if not names or _in_card(link, cards) or _in_chrome(link):
            continue
        for name in names:
            named = re.findall(r"\w+", name.replace("_", " ").casefold())
            if (
                named
                and len("".join(named)) >= 2
                and len(named) <= min(4, len(words) - 1)
                and [w.group().casefold() for w in words[: len(named)]] == named
                and not re.match(r"[-'’]\w", title[words[len(named) - 1].end() :] if title else "")
                and not _compat_or_list(link)
            ):
                return title[: words[len(named) - 1].end()] if title else None
    return None


_COMPAT = re.compile(
    r"(?i)\b(?:fits?|compatible|compatibility|works with|for use with|replacement for|suitable for)\b"
)


def _compat_or_list(link: lxml_html.HtmlElement) -> bool:
    """A link naming a brand the product fits ("Fits: Apple Watch"), or one of a list of brands."""
    above = list(link.iterancestors())[:2]
    if any(_COMPAT.search(_text(a)) for a in above[:1]):
        return True
    return any(
        len({s.casefold() for x in a.iter("a") for s in _brand_slugs(x.get("href") or "")}) > 1 for a in above
    )


def page_brand_link(body: lxml_html.HtmlElement, title: str | None) -> str | None:
    """`brand_link` for a structured product that states no brand."""
    return brand_link(body, _cards(body), title)


def _brand_slugs(href: str) -> list[str]:
    parts = urlsplit(href)
    segments = [unquote_plus(s) for s in parts.path.split("/")]
    slugs = [
        _PAGE_SUFFIX.sub("", segments[i + 1])
        for i, segment in enumerate(segments[:-1])
        if segment.casefold() in _BRAND_SEGMENTS
    ]
    slugs += [
        value
        for key, value in parse_qsl(parts.query)
        if key.casefold() in _BRAND_KEYS or "brand" in key.casefold()  # `field-brandtextbin=Canon`
    ]
    return [s for s in slugs if s and not s.isdigit()]


# A site menu: `<nav>`, WAI-ARIA's menu roles, a class or id that is a menu's name ("navbar",
# "dropdown-menu", "main-nav", "js-nav-content", BEM's "universal-nav--inner-wrapper"); not a name
# that only starts with "nav" (a page wrapper's "nav_with_tb"), nor a widget's own navigation
# (Foundation's product details in `li.accordion-navigation`, a gallery's or tabs' arrows).
_MENU_NAME = re.compile(
    r"(?i)^(?!(?:accordion|tabs?|pager|pagination|slider|carousel|breadcrumbs?|steps?|gallery|thumbs?|"
    r"thumbnails?|swatch(?:es)?|product|pdp|image|media)[-_])(?:[a-z0-9]+[-_]+)?"
    r"(?:nav|navbar|navigation|menu|megamenu|submenu)"
    r"(?:[-_]+(?:bar|list|items?|wrapper|container|content|inner|outer|links?|menu|nav|panel|group))*$"
)


def _menu_named(element: lxml_html.HtmlElement) -> bool:
    return any(_MENU_NAME.match(token) for token in _hint(element).split())


def named_menu(element: lxml_html.HtmlElement) -> bool:
    """Whether an element is named as a site menu (`_MENU_NAME`) and is no page wrapper (it holds
    no `<h1>`: `_in_menu`)."""
    return (
        element.tag not in ("body", "html")
        and _menu_named(element)
        and next(element.iter("h1"), None) is None
    )


def _in_menu(element: lxml_html.HtmlElement) -> bool:
    """Whether an element is in a site menu. Unlike `_in_chrome`, a header is no menu: a product's
    own header block (`<header class="product-header">`) holds its brand, and a block that holds
    the page's `<h1>` is the page's, whatever its class (mmenu's `div.mm-page`, a theme's
    `div.off-canvas-menu-push` wrapping the page beside its sliding menu)."""
    return any(
        (e.tag == "nav" or (e.get("role") or "") in ("menu", "menubar", "navigation") or _menu_named(e))
        and next(e.iter("h1"), None) is None
        for e in (element, *element.iterancestors())
        if isinstance(e.tag, str) and e.tag not in ("body", "html")  # a page's flags name no menu
    )


def _in_chrome(element: lxml_html.HtmlElement) -> bool:
    return any(
        e.tag in ("nav", "header", "footer") or _CHROME_HINT.search(_hint(e))
        for e in (element, *element.iterancestors())
        if isinstance(e.tag, str)
    )


# A shop's meta description that leads with the brand as a field ("Brand: Kryptonite, Product:
# KryptoLok Series 2 w/ Key": SmartEtailing's product pages).
_DESCRIBED_BRAND = re.compile(r"(?i)^\s*(?:brand|marke|marque|marca)\s*:\s*(?P<brand>[^,;|]{1,60}?)\s*[,;|]")


def _described_brand(metas: dict[str, list[str]]) -> str | None:
    match = _DESCRIBED_BRAND.match(_first(metas, "description") or "")
    return clean_title(match.group("brand")) if match else None


_CREDIT = re.compile(r"(?i)^(?:powered|hosted) by\b")
_SHARE_HINT = re.compile(r"(?i)share|tell-?a-?friend|social")
_LOGO_WORD = re.compile(r"(?i)\s*(?:logo|로고|ロゴ|标志|標誌)$")


def _is_author(element: lxml_html.HtmlElement) -> bool:
    return any(
        isinstance(e.tag, str) and (_AUTHOR_HINT.search(_hint(e)) or _AUTHOR_HINT.search(e.get("href") or ""))
        for e in element.iter()
    )


def _markup_id(body: lxml_html.HtmlElement, itemprops: dict[str, list[Any]]) -> str | None:
    for name in ("sku", "productID", "mpn", "gtin13", "gtin"):
        value = _itemprop_text(itemprops, name)
        if value:
            return value
    for element in body.iter("input"):
        if (element.get("name") or element.get("id") or "").lower() in (
            "asin",
            "sku",
            "product_id",
            "productid",
        ):
            value = (element.get("value") or "").strip()
            if value:
                return value
    return None


def _labelled_id(text: str) -> str | None:
    """The first id a label names in the page's visible text (`visible_text`)."""
    match = _ID_LABEL.search(text)
    return match.group("id") if match else None


def page_labelled_id(body: lxml_html.HtmlElement) -> str | None:
    """The first id a label names in the page's visible text (`_labelled_id`)."""
    return _labelled_id(visible_text(body))


def page_style_number(body: lxml_html.HtmlElement, cards: set[lxml_html.HtmlElement]) -> str | None:
    """The code a "Style:" label names in the page's text outside product cards (`_STYLE_LABEL`)."""
    return _style_number(_detail_text(body, cards))


def _style_number(detail: str) -> str | None:
    match = _STYLE_LABEL.search(detail)
    return match.group("id") if match else None


def _article_number(text: str) -> str | None:
    """H&M's "Art.No. 77-3066" (a label read since issue 27's sixth round: `html:label-art-no`)."""
    match = _ART_NO_LABEL.search(text)
    return match.group("id") if match else None


def _part_number(text: str) -> str | None:
    """A shop's "Part #" / "Part No." ("CDU Part# 1107874"; read since issue 27's eighth round)."""
    match = _PART_NO_LABEL.search(text)
    return match.group("id") if match else None


_CODE_HINT = re.compile(
    r"(?i)^(?:product[-_]?)?(?:code|sku|item[-_]?(?:no|number|code)|art(?:icle)?[-_]?(?:no|nr|number))$"
)


def url_confirmed_id(body: lxml_html.HtmlElement, url: str) -> str | None:
    """An id an element named for it shows (`<span class="code">31270</span>`, `.sku`,
    `.product-code`), outside product cards, that the page's URL also uses as a key (a query
    value `?code=31270` or a path segment): two places on the page agree it is this product's."""
    keys = url_tokens(url, query=True)
    cards = _cards(body)
    for element in body.iter():
        if not isinstance(element.tag, str) or len(element):
            continue
        if not any(
            _CODE_HINT.match(c) for c in f"{element.get('id') or ''} {element.get('class') or ''}".split()
        ):
            continue
        text = _text(element)
        if (
            re.fullmatch(r"(?=[\w-]*\d)[A-Za-z0-9][\w-]{2,30}", text)
            and text in keys
            and not _in_card(element, cards)
        ):
            return text
    return None


# An element named for the item's code holding it, after a short label or alone ("Item: SB00260").
_CODE_TEXT = re.compile(r"(?:[^\W\d_][\w.# ]{0,19}:\s*)?(?P<id>(?=[\w-]*\d)[A-Z0-9][A-Z0-9_-]{3,30})")


def _code_element(body: lxml_html.HtmlElement, cards: set[lxml_html.HtmlElement]) -> str | None:
    """The code an element named for the item's code states (`<div class="item-code">Item:
    SB00260</div>`, `.sku`, `.product-code`) outside product cards, when all such elements on
    the page state one code: the element's name and its text's shape agree it is this item's.
    (Since issue 27's tenth round: `html:code-element`.)"""
    found = set()
    for element in body.iter():
        if not isinstance(element.tag, str) or len(element) or _in_card(element, cards):
            continue
        if not any(_CODE_HINT.match(c) and c.lower() != "code" for c in _hint(element).split()):
            continue  # a bare "code" also marks a discount's ("use code <span class="code">SAVE20</span>")
        match = _CODE_TEXT.fullmatch(_text(element))
        if match:
            found.add(match.group("id"))
    return found.pop() if len(found) == 1 else None


def url_identifier(url: str) -> str | None:
    """The id an Amazon product URL states (`/dp/<ASIN>`, `/gp/product/<ASIN>`, mobile `/gp/aw/d/<ASIN>`)."""
    parts = urlsplit(url)
    if "amazon." not in parts.netloc.lower():
        return None
    found = re.search(r"/(?:dp|gp/product|gp/aw/d)/([A-Z0-9]{10})(?:[/?]|$)", parts.path + "/")
    return found.group(1) if found else None


def visible_text(body: lxml_html.HtmlElement) -> str:
    parts = []
    for element in body.iter():
        if element.tag in ("script", "style", "noscript") or not isinstance(element.tag, str):
            continue
        for piece in (element.text, element.tail):
            if piece and piece.strip():
                parts.append(piece.strip())
    return "\n".join(parts)[:50_000]


def _detail_text(body: lxml_html.HtmlElement, cards: set[lxml_html.HtmlElement]) -> str:
    """The page's text outside product cards, one line per text node, for the labelled colour and
    material fields (Amazon's "Farbe: Schwarz", the detail table's "Colour" then "White", "Obermaterial:
    100% Polyester"). Direction marks (U+200E/F, Amazon's "Color ‎Backsteinrot") are dropped."""
    parts = []
    for element in body.iter():
        if element.tag in ("script", "style", "noscript") or not isinstance(element.tag, str):
            continue
        if cards and element in cards:
            continue
        for piece in (element.text, element.tail):
            piece = (piece or "").replace("\u200e", "").replace("\u200f", "").strip()
            if piece and not (cards and _in_card(element, cards)):
                parts.append(piece)
    return "\n".join(parts)[:50_000]


_COLOR_LABEL = re.compile(r"(?i)^(?:colou?r|farbe|couleur|colore|cor|kleur|färg|farge|farve)(?: name)?$")
_MATERIAL_LABEL = re.compile(
    r"(?i)^(?:materials?|material composition|(?:outer|main|upper|case|shell) material|case\s*/\s*bezel material|obermaterial|au(?:ß|ss)enmaterial|"
    r"material oberstoff|composition|zusammensetzung|mati[eè]re|composici[oó]n|composizione|fabric|"
    r"fabric type|shell|stoff|tissu|tejido|materiale|(?:fabric |fib(?:er|re) )?content)$"
)
_FIELD_LINE = re.compile(r"^(?P<label>[^\W\d][^:\n]{0,30}?)\s*:\s*(?P<value>\S.{0,120})$")


def _fields(body: lxml_html.HtmlElement, cards: set[lxml_html.HtmlElement]) -> list[tuple[str, str, bool]]:
    """(label, value, cell) pairs the page shows outside product cards: a table row, a definition,
    a row of two elements ("Color" | "Backsteinrot", Best Buy's specification rows) or a label
    element and what follows it (OpenCart's "<span>Brand:</span> <a>Airwheel</a>"; cell=True),
    and a short element reading "Label: value" ("Farbe: Schwarz", "Obermaterial: 100% Polyester /
    Futter: …")."""
    found: list[tuple[str, str, bool]] = []
    for element in body.iter("tr", "dt", "li", "div", "span", "p", "label", "b", "strong"):
        if element.tag in ("b", "strong") and not _text(element).endswith(":"):
            continue  # bold words of a sentence, not a label
        if _in_card(element, cards):
            continue
        pair = [c for c in element if isinstance(c.tag, str)]
        if element.tag in ("div", "li") and len(pair) == 2 and not (element.text or "").strip():
            label, value = _clean(_text(pair[0])), _clean(_text(pair[1]))
            if label and value and len(label) <= 30 and len(value) <= 120:
                found.append((label.rstrip(" :"), value, True))
                continue
        # A label element and what follows it; older shops write the label in bold ("<b>Availability:</b>
        # <span>Usually ships in 1-2 days</span>").
        if element.tag in ("span", "label", "b", "strong") and len(pair) == 0:
            label = _clean(_text(element))
            after = element.getnext()
            following = _clean(element.tail or "") or (
                _clean(_text(after)) if after is not None and isinstance(after.tag, str) else ""
            )
            if label.endswith(":") and 1 < len(label) <= 31 and following and len(following) <= 120:
                found.append((label.rstrip(" :"), following, True))  # <span>Brand:</span> <a>Airwheel</a>
                continue
        if element.tag in ("tr", "dt"):
            cells = [element.getnext()] if element.tag == "dt" else list(element)
            if element.tag == "dt":
                cells = [element, *cells]
            texts = [_clean(_text(c)) for c in cells if c is not None and isinstance(c.tag, str)]
            texts = [t for t in texts if t]
            if len(texts) == 2:
                found.append((texts[0].rstrip(" :"), texts[1], True))
            continue
        text = _clean(_text(element))
        if len(text) > 160:
            continue
        match = _FIELD_LINE.match(text)
        if match:
            found.append((match.group("label").strip(), match.group("value").strip(), False))
    return found


def _clean(text: str) -> str:
    """A field's text without direction marks, its leftover character references undone and
    UTF-8 read as Windows-1252 / Latin-1 repaired (Amazon.de's "Farbe: Wei&#xc3;&#x9f; + Schwarz"
    is "Weiß + Schwarz"); a text that does not round-trip is kept as it is."""
    text = " ".join(text.replace("\u200e", "").replace("\u200f", "").split())
    if "&#" in text:
        text = html_module.unescape(text)
    if re.search("[ÃÂ][^\\x00-\\x7f]", text):  # "Ã" then a non-ASCII: "ÃŸ" (ß), "Ã©" (é)
        for misread in ("cp1252", "latin-1"):
            with contextlib.suppress(UnicodeError):  # not UTF-8 misread after all ("SÃO" stays)
                return text.encode(misread).decode("utf-8")
    return text


_SELECTED = re.compile(
    r"(?i)^selected (?:colou?r|farbe|couleur|colore|cor) is (?P<value>[^.\d{}<>()]{2,40}?)(?:\.|$)"
)


def _selected_color(body: lxml_html.HtmlElement, cards: set[lxml_html.HtmlElement]) -> str | None:
    """The colour the page says is selected in an accessible label ("Selected Colour is Pale
    Pink. Tap to collapse.", Amazon's inline variation picker): a sentence that names it."""
    for element in body.iter():
        label = element.get("aria-label") if isinstance(element.tag, str) else None
        match = _SELECTED.match(label) if label else None
        if match and not _in_card(element, cards) and len(match.group("value").split()) <= 3:
            return match.group("value").strip()
    return None


def page_chosen_color(
    body: lxml_html.HtmlElement,
    cards: set[lxml_html.HtmlElement],
    url: str | None = None,
    controls: list[lxml_html.HtmlElement] | None = None,
) -> str | None:
    """The colour option the page's own buy form has chosen: the one checked radio button of a
    colour option (LESET's `<input type="radio" checked name="Color" value="Seafoam">`, Shopify's
    `options[Color]`) in the first add-to-cart form outside product cards, the page's product's.
    The variant the page shows, its picture's colour; a "Complete the look" item's own form
    further down is another product's, and the buttons not checked are choices."""
    checked = [e for e in body.iter("input") if _chosen_color_value(e)]
    if not checked:
        return None  # most pages: no buy form to look for
    form = next(
        (
            c if c.tag == "form" else next(c.iterancestors("form"), None)
            for c in (_buy_controls(body, cards, url) if controls is None else controls)
            if c.tag == "form" or next(c.iterancestors("form"), None) is not None
        ),
        None,
    )
    chosen = {_chosen_color_value(e) for e in checked if form is not None and form in e.iterancestors("form")}
    return chosen.pop() if len(chosen) == 1 else None


def _chosen_color_value(element: lxml_html.HtmlElement) -> str | None:
    """The value of a checked radio button of a colour option ("Color", `options[Colour]`)."""
    if control_type(element) != "radio" or element.get("checked") is None:
        return None
    name = re.sub(r"(?i)^options?\[(.*)\]$", r"\1", (element.get("name") or "").strip())
    value = (element.get("value") or "").strip()
    if _COLOR_LABEL.match(name) and value and len(value.split()) <= 4 and not re.search(r"\d", value):
        return value
    return None


# An element named for the chosen colour's value ("pdp-color-value", "selected-color",
# "colour-name"): a picker's heading shows the swatch the page is on.
_COLOR_VALUE_HINT = re.compile(
    r"(?i)(?:selected|chosen|current|active)[-_]?colou?r(?![-_]?(?:s|list|picker|swatch|options?)\b)"
    r"|colou?r[-_]?(?:value|name|label|selected|text)\b"
)


def _named_color(body: lxml_html.HtmlElement, cards: set[lxml_html.HtmlElement]) -> str | None:
    """The colour an element named for the chosen colour's value states (Banana Republic's
    `<h2>Color</h2><span data-testid="pdp-color-value">Aragon Pink Clay</span>`), outside product
    cards, when all such elements state one: a short name with no digit, under a "Color" label or
    a colour of the vocabulary."""
    found = set()
    for element in body.iter():
        if not isinstance(element.tag, str) or len(element) or _in_card(element, cards):
            continue
        hint = " ".join(element.get(a) or "" for a in ("id", "class", "data-testid"))
        if not _COLOR_VALUE_HINT.search(hint):
            continue
        text = _text(element).strip(" :")
        if not text or len(text.split()) > 4 or re.search(r"[\d{}<>()$€£:]", text):
            continue
        before = next((e for e in element.itersiblings(preceding=True) if isinstance(e.tag, str)), None)
        labelled = before is not None and _COLOR_LABEL.match(_text(before).strip(" :"))
        # Under a "Color" heading any name ("Aragon Pink Clay"); alone, a colour of the vocabulary
        # (not a swatch group's "Reduced Price").
        if labelled or any(color_value(w) for w in text.split()):
            found.add(text)
    return found.pop() if len(found) == 1 else None


def _field_color(fields: list[tuple[str, str, bool]]) -> str | None:
    """A colour field's value: a colour of the vocabulary ("Farbe: Schwarz", "Colour: White"),
    or in a table cell any one-word name ("Color" | "Backsteinrot"); never a sentence or a
    message ("Colour: To view this video download Flash Player")."""
    for label, value, cell in fields:
        value = without_color_code(value)
        if not _COLOR_LABEL.match(label) or re.search(r"[\d{}<>()]", value):
            continue
        value = re.split(r"\s+(?:[A-ZÄÖÜ][^\W\d_]*\s?){1,3}:\s", value)[0].strip(" /;,.")
        words = value.split()
        half = len(words) // 2
        if half and words[:half] == words[half:]:  # "Black Black": the chosen colour, then its one option
            words = words[:half]
            value = " ".join(words)
        if not words or len(words) > 4:
            continue
        if color_value(value) or all(color_value(w) for w in re.split(r"\s*[/&,+]\s*", value) if w):
            return value
        if cell and len(words) == 1:  # "Backsteinrot"; two words may be two options ("Black Navy")
            return value
    return None


_STOCK_LABEL = re.compile(
    r"(?i)^(?:availability|stock|in stock\?|verfügbarkeit|lieferstatus|disponibilit[ée]|disponibilidad|disponibilidade)$"
)


def _field_stock(fields: list[tuple[str, str, bool]]) -> str | None:
    """An availability field's value ("Availability:" | "In Stock", BigCommerce's DetailRow)."""
    for label, value, _cell in fields:
        if _STOCK_LABEL.match(label) and len(value) <= 60 and not NOT_YET.search(value):
            if _OUT.search(value):
                return "OutOfStock"
            if _IN.search(value):
                return "InStock"
    return None


# "Brand", also bilingual ("Brand/الماركة", "Marke (Brand)").
_BRAND_LABEL = re.compile(r"(?i)^(?:brand|brand name|marke|marque|marca|marchio|merk)(?:\s*[/(].{1,30})?$")


def page_brand_field(body: lxml_html.HtmlElement) -> str | None:
    """The brand a specification table's "Brand" / "Marke" field states, outside product cards:
    for a structured product that names none (toralin.de's microdata)."""
    return _field_brand(_fields(body, _cards(body)))


def _field_brand(fields: list[tuple[str, str, bool]]) -> str | None:
    """A brand field's value in a specification table or row ("Brand" | "Anker"). Never a
    "Manufacturer" field: the maker of a licensed brand is another company ("Hanesbrands Inc."
    for Champion)."""
    for label, value, cell in fields:
        if cell and _BRAND_LABEL.match(label) and len(value) <= 40 and len(value.split()) <= 4:
            return clean_title(value)
    return None


def _field_material(fields: list[tuple[str, str, bool]]) -> str | None:
    """A material field's value when it names one: a composition whose shares add up to 100%
    ("100% Polyester", its part before the next label "/ Futter: …") or a material of the
    vocabulary ("Baumwolle"); never another kind of value ("Material: Bikini Bademoden")."""
    for label, value, _cell in fields:
        if not _MATERIAL_LABEL.match(label):
            continue
        value = re.split(r"\s*/?\s+(?:[A-ZÄÖÜ][^\W\d_]*\s?){1,3}:\s", value)[0].strip(" /;,.")
        found = find_composition(value, labelled=True)
        if label.lower().endswith("content"):  # "Content" | a fibre composition, nothing else
            if found and textile_fibre(found):
                return found
            continue
        if found:
            return found
        if material_value(value):
            return value
    return None


def page_field_material(body: lxml_html.HtmlElement, cards: set[lxml_html.HtmlElement]) -> str | None:
    """The material a field of the page states outside product cards ("Main Material" |
    "Cotton" in a specification table), by `_field_material`'s rules."""
    return _field_material(_fields(body, cards))


def page_composition(
    body: lxml_html.HtmlElement,
    scope: lxml_html.HtmlElement | None = None,
    cards: set[lxml_html.HtmlElement] | None = None,
) -> str | None:
    """A composition an element of the page (or of `scope` in it) states alone (see
    `_composition_element`)."""
    return _composition_element(body if scope is None else scope, _cards(body) if cards is None else cards)


def labelled_url_id(body: lxml_html.HtmlElement, url: str) -> str | None:
    """A labelled id ("REF. 81070185", "Item #1124604") that the URL also states, as a path part
    or a query value (`?id=81070185`): two statements of the same id."""
    found = _labelled_id(visible_text(body))
    return found if found and found in url_tokens(url, query=True) else None


def _composition_element(body: lxml_html.HtmlElement, cards: set[lxml_html.HtmlElement]) -> str | None:
    """An element that states nothing but a composition adding up to 100% (Amazon's feature
    bullet "100% recycled polyester"): the element is the label, so the fibre need not be in the
    vocabulary. Marketing text around a percentage ("100% polyester for your best run") is more
    than a composition and does not count, nor does a link's (Massimo Dutti's menu entry
    "100% CASHMERE" leads to a listing) or a site menu's."""
    for element in body.iter("li", "span", "td", "dd", "p"):
        text = _clean(_text(element)).strip(" .;•·*-")  # "• 63% Polyester, 33% Rayon, 4% Spandex"
        if not text or len(text) > 60 or _in_card(element, cards):
            continue
        if next(element.iterancestors("a"), None) is not None or element.find(".//a") is not None:
            continue
        found = find_composition(text, labelled=True)
        if found and len(found) >= len(text) - 1 and textile_fibre(found) and not _in_menu(element):
            return found
    return None


# Named for the breadcrumb but a list of products ("breadcrumb-recent": recently viewed).
_NOT_CRUMBS = re.compile(r"(?i)recent|history|viewed")


def _site_root(href: str | None) -> bool:
    """A link to the site's home page itself ("/", "https://shop.example.com/"): not "#", not a
    two-letter section ("/tv")."""
    if not href or href.strip().startswith("#"):
        return False
    parts = urlsplit(href.strip())
    return parts.path.strip("/") == "" and not parts.query


def _breadcrumb(
    body: lxml_html.HtmlElement,
    cards: set[lxml_html.HtmlElement],
    title: str | None = None,
    url: str | None = None,
) -> list[str] | None:
    """The category path a breadcrumb shows (Amazon's "Clothing › Women › Dresses"): the links
    of the first element named for one, a leading "Home" dropped: at least two, or one after the
    home link. One link alone ("‹ Back to search results") is no path."""
    for element in body.iter():
        if not isinstance(element.tag, str):
            continue
        if not _named_trail(element) or _in_card(element, cards) or _NOT_CRUMBS.search(_hint(element)):
            continue
        links = _trail_links(element)
        if any(
            _named_trail(inner)
            and 2 <= len(_trail_links(inner)) < len(links)
            and set(_trail_links(inner)) <= set(links)  # not a crumb's item with its drop-down
            and not _in_drop_down(inner, element)
            for inner in element.iterdescendants()
            if isinstance(inner.tag, str)
        ):
            continue  # a block left open around the page (`<div id="breadcrumb">` never closed): its trail inside
        crumbs = [(_crumb_name(a), a.get("href")) for a in links]
        crumbs = [(t, href) for t, href in crumbs if t]
        while crumbs and no_category_crumb(*crumbs[0]):
            crumbs = crumbs[1:]  # a way back before the trail ("« Back")
        homed = bool(crumbs) and bool(_HOME.match(crumbs[0][0]) or _site_root(crumbs[0][1]))
        if homed:
            crumbs = crumbs[1:]  # the site's home, by name or by its link ("Target" → "/")
        if crumbs and (
            (title and crumbs[-1][0].casefold() == title.casefold()) or _this_page(crumbs[-1][1], url)
        ):
            crumbs = crumbs[:-1]  # the trail's last link is the product itself (its name, its page)
        links = crumb_path(crumbs)
        if links is None:
            continue  # a search between categories: the shopper's path, not the catalogue's
        half = len(links) // 2
        if len(links) % 2 == 0 and links[:half] == links[half:]:
            links = links[:half]  # one element holding the trail twice (a desktop and a mobile copy)
        # One category after the site's home is a path ("Home > Grossest Gifts"); one link
        # alone is a way back ("‹ Back to search results"), and one the title starts with is
        # the product's own ("Home › Linen Shirt" on "Linen Shirt - Navy").
        if len(links) >= 2:
            return links
        if homed and len(links) == 1 and not _title_head(links[0], title):
            return links
    return None


def _named_trail(element: lxml_html.HtmlElement) -> bool:
    # schema.org's `WebPage.breadcrumb` (Costco's `<ul class="crumbs" itemprop="breadcrumb">`)
    # and WAI-ARIA's breadcrumb pattern (`<nav aria-label="Breadcrumb">`).
    return bool(
        _BREADCRUMB_HINT.search(_hint(element))
        or element.get("itemprop") == "breadcrumb"
        or _BREADCRUMB_HINT.search(element.get("aria-label") or "")
    )


def _trail_links(trail: lxml_html.HtmlElement) -> list[lxml_html.HtmlElement]:
    """A trail's links, without its tools and the drop-downs some trails open under a crumb."""
    return [a for a in trail.iter("a") if not _page_tool(a, trail) and not _in_drop_down(a, trail)]


# A block a crumb opens: Bootstrap's `dropdown-menu`, a `sub-menu`, a `flyout`.
_DROP_DOWN_HINT = re.compile(r"(?i)drop[-_]?down[-_]?menu|sub[-_]?menu|flyout|(?:^|\s)dropdown-content")


def _in_drop_down(element: lxml_html.HtmlElement, trail: lxml_html.HtmlElement) -> bool:
    """Whether an element of a trail is in a crumb's drop-down of the categories beside it (Light
    in the Box's `<li><dl><dt><a>Home & Garden</a></dt><dd><ul><li><a>Shop by Room</a>…`): a
    list inside one crumb's list item, or a definition list's `<dd>` under its crumb's `<dt>` (a
    list of `<dd>` alone is the trail itself: Newegg's `<dl><dd><a>Cameras</a> &gt; </dd>…`)."""
    items = 0
    for above in element.iterancestors():
        if above is trail:
            return False
        if above.tag == "dd" and above.getparent() is not None and above.getparent().find("dt") is not None:
            return True
        if (above.get("role") or "") == "menu" or _DROP_DOWN_HINT.search(_hint(above)):
            return True  # Bootstrap's `<li class="breadcrumb-item dropdown"><a>…<div class="dropdown-menu">`
        if above.tag == "li":
            items += 1
            if items >= 2:
                return True
    return False


def _crumb_name(link: lxml_html.HtmlElement) -> str | None:
    """A crumb's name; its `title` when the text is that and then no word (Newegg's "Cameras &
    Camcorders<span>0_.</span>": a styled-away marker)."""
    text, named = clean_title(_text(link)), clean_title(link.get("title"))
    rest = text[len(named) :] if text and named and text.startswith(named) else " "
    if not rest[:1].isspace() and not re.search(r"[^\W\d_]", rest):
        return named
    return text


# The page's tools a trail's bar also holds (Barnes & Noble's `ul.print-email`: "Add To List",
# "E-mail a Friend", "Print This Page"), by the class or id of their list.
_TOOLS_HINT = re.compile(
    r"(?i)share|tell-?a-?friend|social|print|e-?mail|wish-?list|add-?(?:item-?)?to-?list"
)


_TOOL_TEXT = re.compile(r"(?i)^(?:print\b|e-?mail\b|share\b|add to\b|tell a friend|save\b|\W*$)")


def _page_tool(link: lxml_html.HtmlElement, trail: lxml_html.HtmlElement) -> bool:
    for element in (link, *link.iterancestors()):
        if element is trail:
            return False
        if _TOOLS_HINT.search(_hint(element)) and _TOOL_TEXT.match(_text(link)):
            return True
    return False


def _title_head(crumb: str, title: str | None) -> bool:
    """Whether a crumb is the title's first part before a separator ("Linen Shirt" of "Linen Shirt
    - Navy"): the product's own crumb. A collection the title starts with ("Cashmere" of "Cashmere
    Crew Sweater") is a category."""
    head = re.split(r"\s+[-–|,]\s+|,\s+", title or "", maxsplit=1)[0]
    return bool(head) and crumb.casefold() == head.casefold()


_FRONT_CONTROLLER = re.compile(r"(?i)\.(?:php|aspx?|jsp|cfm|cgi|pl|do)$")


def _this_page(href: str | None, url: str | None) -> bool:
    """Whether a link goes to the page itself: its path, whatever the host or query; for a script
    that serves every page (`/index.php?main_page=…&products_id=42`), its path and query."""
    if not href or not url or href.strip().startswith("#"):
        return False
    link, page = urlsplit(absolute_url(href.strip(), url) or ""), urlsplit(url)
    if link.path.rstrip("/") != page.path.rstrip("/"):
        return False
    return not _FRONT_CONTROLLER.search(page.path) or sorted(link.query.split("&")) == sorted(
        page.query.split("&")
    )


def page_breadcrumb(
    body: lxml_html.HtmlElement,
    title: str | None,
    cards: set[lxml_html.HtmlElement] | None = None,
    url: str | None = None,
) -> list[str] | None:
    """The category path the page's own breadcrumb element shows (see `_breadcrumb`), the
    product's own last crumb (its title, or a link to `url` itself) left out."""
    return _breadcrumb(body, _cards(body) if cards is None else cards, title, url)


def _sold_out_shown(body: lxml_html.HtmlElement, cards: set[lxml_html.HtmlElement]) -> bool:
    """A short element outside cards that says only that the item is out ("Sold out")."""
    # Only small elements: reading the text of every block of a long page would be slow.
    return any(
        isinstance(e.tag, str)
        and len(e) <= 2
        and not _in_card(e, cards)
        and len(text := _text(e)) <= 30
        and _OUT.search(text)
        for e in body.iter()
    )


def _stock_element(body: lxml_html.HtmlElement, cards: set[lxml_html.HtmlElement]) -> str | None:
    """The stock an element named for it states: by id first (one per page), then by class."""
    for attr in ("id", "class"):
        for element in body.iter():
            if not isinstance(element.tag, str) or not _STOCK_HINT.search(element.get(attr) or ""):
                continue
            if _in_card(element, cards):
                continue
            text = _text(element)
            if not text or len(text) > 200 or _TEMPLATE.search(text):
                continue  # a script's message template ("Out of Stock${0}This item has gone out of …")
            state = _stated_stock(text)
            if state and attr == "class" and _stock_legend(body, element, state, cards):
                continue
            if state:
                return state
    sold = sold_status(body, cards)
    if not sold and _dispatch_time(body, cards) and not _sold_out_shown(body, cards):
        return "InStock"
    return sold


# A placeholder a script fills in: "${0}", "{0}", "{{ stock }}".
_TEMPLATE = re.compile(r"\$\{\w*\}|\{\d\}|\{\{.*?\}\}")


def _stated_stock(text: str) -> str | None:
    if NOT_YET.search(text):  # "In stock soon", "Notify me when back in stock": not now
        return None
    if _OUT.search(text):
        return "OutOfStock"
    if _IN.search(text):
        return "InStock"
    return stock_words(text)


def _stock_legend(
    body: lxml_html.HtmlElement,
    element: lxml_html.HtmlElement,
    state: str,
    cards: set[lxml_html.HtmlElement],
) -> bool:
    """Whether elements of the same tag and class state different stock: a legend of what each
    state means (a bookstore's "In Stock (✓)", "Backordered", "Out of Stock", "PreOrder" rows), not
    this product's. A recommended product's card states its own stock, no legend."""
    same = (
        e
        for e in body.iter(element.tag)
        if e is not element and e.get("class") == element.get("class") and not _in_card(e, cards)
    )
    return any(_stated_stock(_text(e)) not in (None, state) for e in same)


def _dispatch_time(body: lxml_html.HtmlElement, cards: set[lxml_html.HtmlElement]) -> bool:
    """Whether a small element outside cards states a dispatch within days: named for the
    dispatch time, or all of it the item's own "Usually ships within 2-3 days" (Barnes & Noble's,
    a link to the shipping help), not a banner's "Orders ship …"."""
    # The page's text read once: each element's text is read only on a page that has one.
    if not _SHIPS_SOON_ANY.search(" ".join(body.text_content().split())):
        return False
    for element in body.iter():
        if not isinstance(element.tag, str) or len(element) > 3 or _in_card(element, cards):
            continue
        text = _text(element)
        if not text or len(text) > 200 or not _SHIPS_SOON_TEXT.search(text) or NOT_YET.search(text):
            continue
        if _DISPATCH_HINT.search(_hint(element)) or (_USUALLY.match(text) and len(text) <= 60):
            return True
    return False


def page_stock(body: lxml_html.HtmlElement, cards: set[lxml_html.HtmlElement] | None = None) -> str | None:
    """The stock the page's own stock element states (not a product card's)."""
    return _stock_element(body, _cards(body) if cards is None else cards)


def page_cards(body: lxml_html.HtmlElement) -> set[lxml_html.HtmlElement]:
    """The page's product cards (see `_cards`), for callers that read several facts."""
    return _cards(body)


def _buy_controls(
    body: lxml_html.HtmlElement, cards: set[lxml_html.HtmlElement], url: str | None = None
) -> list[lxml_html.HtmlElement]:
    """Buy buttons, links and forms outside product cards (the page's own product's). A link to
    another site is none (a review's "Buy now" at a retailer)."""
    found = []
    host = urlsplit(url).hostname if url else None
    for element in body.iter("button", "input", "a", "form"):
        if _in_card(element, cards):
            continue
        if host and element.tag == "a" and urlsplit(element.get("href") or "").hostname not in (None, host):
            continue
        if element.tag == "form":  # Shopify's `/cart/add`, Magento's `checkout/cart/add`
            # or a form named for it that can be sent (BigCommerce's `#productDetailsAddToCartForm`
            # posting to `cart.php`, Magento's `#product_addtocart_form`)
            if _ADD_ACTION.search(element.get("action") or "") or (
                _ADD_ACTION.search(_hint(element)) and next(_submit_controls(element), None) is not None
            ):
                found.append(element)
            continue
        label = control_name(element)
        named = (
            _BUY_ATTR.search(_hint(element))
            or _BUY_ATTR.search(element.get("name") or "")
            or button_picture(element)
        )
        if named or (label and len(label) < 60 and _BUY.search(label)):
            found.append(element)
    return found


# The fields an add-to-cart form posts the product's id in: Magento's `product`, BigCommerce's
# and OpenCart's `product_id`, PrestaShop's `id_product`, WooCommerce's `add-to-cart` (a hidden
# field or the button's value), osCommerce's `products_id`. Not Shopify's `id`: a variant's.
_CART_ID_FIELDS = frozenset(
    {"product", "product_id", "productid", "id_product", "add-to-cart", "products_id"}
)


def cart_form_id(
    body: lxml_html.HtmlElement,
    cards: set[lxml_html.HtmlElement],
    url: str,
    controls: list[lxml_html.HtmlElement] | None = None,
) -> str | None:
    """The id the page's own add-to-cart form posts for its product (`<input type="hidden"
    name="product" value="14051">` in Magento's `#product_addtocart_form`), when all such forms
    outside product cards post one id: the shop's own key for the product the page sells.
    `controls`: the page's buy controls when the caller has read them already."""
    forms = {
        control if control.tag == "form" else next(control.iterancestors("form"), None)
        for control in (_buy_controls(body, cards, url) if controls is None else controls)
    }
    ids = set()
    for form in forms - {None}:
        for field in form.iter("input", "button"):
            if (field.get("name") or "").strip().lower() not in _CART_ID_FIELDS:
                continue
            if field.tag == "input" and control_type(field) not in ("hidden", "submit"):
                continue
            value = (field.get("value") or "").strip()
            if re.fullmatch(r"(?=[\w-]*\d)[\w-]{1,40}", value):
                ids.add(value)
    return ids.pop() if len(ids) == 1 else None


def _buy_units(controls: list[lxml_html.HtmlElement]) -> int:
    """How many things the controls buy: a form and the buttons inside it are one."""
    forms = {c for c in controls if c.tag == "form"}
    return sum(1 for c in controls if c.tag == "form" or not any(a in forms for a in c.iterancestors("form")))


def _submit_controls(form: lxml_html.HtmlElement) -> Any:
    return (e for e in form.iter("button", "input") if control_type(e) in ("submit", "image"))


_MONEY_SIGN = "|".join(re.escape(sign) for sign, _ in _SIGNS) + r"|\$|" + _CODE.pattern
_MONEY = re.compile(rf"(?:{_MONEY_SIGN})\s?\d|\d\s?(?:{_MONEY_SIGN})")
_MONEY_TEXT = re.compile(rf"(?:{_MONEY_SIGN})\s?\d(?:[\d.,' ]*\d)?|\d(?:[\d.,' ]*\d)?\s?(?:{_MONEY_SIGN})")


_ROW_MODIFIERS = {"odd", "even", "first", "last", "active", "selected", "current", "on"}


def _cards(body: lxml_html.HtmlElement) -> set[lxml_html.HtmlElement]:
    """Product cards: three or more sibling elements of one tag and class, each a short block
    showing a picture and a price (a listing's items, a "recently viewed" or "bought together"
    row). Their prices, titles and
    buttons are other products'."""
    groups: dict[tuple[Any, str, str], list[lxml_html.HtmlElement]] = {}
    rows: set[lxml_html.HtmlElement] = set()  # table rows grouped by their cells' classes
    for parent in body.iter():
        if not isinstance(parent.tag, str):
            continue
        for element in parent:  # siblings: a row of cards shares its parent
            # A list's items need no class (H&M's `<ul id="recommended-products-list"><li>`).
            if (
                isinstance(element.tag, str)
                and (element.get("class") or element.tag == "li")
                and element.tag not in ("span", "p", "a")
            ):
                # A row's items alternate "item even first", "item odd": one class without them.
                kind = " ".join(
                    c for c in (element.get("class") or "").split() if c.lower() not in _ROW_MODIFIERS
                )
                if element.tag == "tr":
                    kind = kind or _cell_classes(element)
                groups.setdefault((parent, element.tag, kind), []).append(element)
            elif element.tag == "tr" and (cells := _cell_classes(element)):
                # A table's rows of results (a price-comparison site's `<td class="pic">`,
                # `<td class="price">`, its first row also `class="first"`): rows whose cells are
                # named alike. An older shop lays out its own product's page in rows of unnamed
                # cells, which are no cards.
                groups.setdefault((parent, "tr", cells), []).append(element)
                rows.add(element)
    # The elements themselves, not id()s: lxml makes a new proxy for a node no one holds, so an
    # id() could name another element later; holding them keeps each node's one proxy.
    out: set[lxml_html.HtmlElement] = set()
    for members in groups.values():
        if any(m in rows for m in members):
            members = [m for m in members if _result_row(m)]
        if len(members) >= 3:
            priced = [
                m
                for m in members
                if len(_text(m)) < 600 and _MONEY.search(_text(m)) and next(m.iter("img"), None) is not None
            ]
            if len(priced) >= 3:
                out.update(priced)
    return out


def _result_row(row: lxml_html.HtmlElement) -> bool:
    """A table row that is one result of a list: it links to a page of its own and holds no
    heading or buy form (a variant table's rows, a layout table's rows, are the page's own)."""
    links = {a.get("href") for a in row.iter("a") if (a.get("href") or "#")[0] != "#"}
    return bool(links) and next(row.iter("h1", "form"), None) is None


def _cell_classes(row: lxml_html.HtmlElement) -> str:
    """A table row's cells' classes in order ("pic|name|price"), or "" when no cell has one."""
    classes = [(cell.get("class") or "").strip() for cell in row if cell.tag in ("td", "th")]
    return "|".join(classes) if any(classes) else ""


def _in_card(element: lxml_html.HtmlElement, cards: set[lxml_html.HtmlElement]) -> bool:
    return any(a in cards for a in (element, *element.iterancestors())) if cards else False


def _currency(value: str | None) -> str | None:
    return value.strip().upper() if value and re.fullmatch(r"\s*[A-Za-z]{3}\s*", value) else None
