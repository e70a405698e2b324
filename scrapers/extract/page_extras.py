"""Facts a page states outside the places the main readers look (issue 27's marketplace pages).

Small readers, each for one way a page states a fact, called by `schema_org` and
`html_fallback` only where their own sources state nothing (never overriding):

- `twitter_card_product`: a page whose only product data is a Twitter product card
  (`twitter:title`, `twitter:image`, `twitter:label1` "Price" with `twitter:data1` "LBP139999.00").
- `sold_status`: a marketplace listing's status element stating only "Sold" / "Vendu" /
  "Verkocht"… (the item is gone: OutOfStock; it also tells a product page without a buy button).
- `stock_words`: Japanese stock words ("在庫あり" in stock, "在庫なし" / "品切れ" / "売り切れ" out).
- `attribute_product_id`: the one `data-product-id` / `data-productid` value of a page whose
  structured data states no id, when the canonical URL's path names the same id.
- `markup_url_id`: the one sku / productID the page's markup states when the canonical URL's
  path has it too (Target's second Product item and `…/A-52062126`).
- `twitter_card_field`, `card_currency`: a Twitter product card's labelled field ("Brand", "Price")
  and the currency its price field names for the page's price.
- `microdata_breadcrumbs`: a microdata `BreadcrumbList` (read like a JSON-LD one), or Google's
  former data-vocabulary.org `Breadcrumb` items.
- `home_crumb`: a breadcrumb's first link to the site's home page ("/", "/no/") is no category.
- `search_crumb`, `no_category_crumb`, `crumb_path`: a crumb naming or linking to search
  results, "Back", "Next", "See all …" or cut short is no category; a search between categories
  voids the trail.
- `fill_stated`: for a page's one structured (or OpenGraph-only) product, the id (above), stock,
  category from the page's breadcrumb element, and the price its Product element, or with no
  Product element the block around its `<h1>`, shows when the markup has no offer.
- `shown_sale_price`: the price the page charges when the structured price is the one the page
  shows struck through as the former price.

Each returns None when the page does not state the fact plainly: a missing fact is better than
an invented one.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

from lxml import html as lxml_html

from lookbench_live.scrapers.extract.conventions import other_than_product
from lookbench_live.scrapers.extract.model import NormalizedProduct
from lookbench_live.scrapers.extract.values import absolute_url, clean_title, parse_price, url_key, url_tokens

# --------------------------------------------------------------------------- Twitter card

_PRICE_LABEL = re.compile(r"(?i)^\s*(?:price|preis|prix|precio|prezzo|pris|prijs|cena|preço)\s*:?\s*$")
# A three-capital code written against the amount ("LBP139999.00", "139999.00 LBP"): the card's
# price field writes the ISO 4217 code there.
_CODE_AMOUNT = re.compile(r"^\s*([A-Z]{3})\s?\d|\d\s?([A-Z]{3})\s*$")


# Not "Vendor": on a marketplace the vendor is the seller, not the brand.
_BRAND_LABEL = re.compile(r"(?i)^\s*(?:brand|marke|marque|marca|merk)\s*:?\s*$")


def twitter_card_field(metas: dict[str, list[str]], fact: str) -> str | None:
    """The value a Twitter product card states under a label ("Price" → "$955.00 USD", "Brand"
    → "Christenson": `twitter:labelN` / `twitter:dataN`), for `fact` "price" or "brand"."""
    label = _PRICE_LABEL if fact == "price" else _BRAND_LABEL
    for n in range(1, 5):
        labels, data = metas.get(f"twitter:label{n}", []), metas.get(f"twitter:data{n}", [])
        if labels and data and label.match(labels[0]) and data[0].strip():
            return data[0].strip()
    return None


def card_currency(
    metas: dict[str, list[str]], price: Any, lang: str | None, *, written: bool = False
) -> str | None:
    """The currency the Twitter card's price field names ("$955.00 USD", "LBP139999.00") when
    its amount is the page's price; with `written`, only one the field writes itself, by its code
    or a sign of one currency ("9.277.400 VND", "£250"), never a "$" the page's market resolves."""
    from lookbench_live.scrapers.extract.html_fallback import currencies_written, currency_of

    text = twitter_card_field(metas, "price")
    if not text or price is None or parse_price(text, lang=lang) != price:
        return None
    code = _CODE_AMOUNT.search(text)
    found = (code.group(1) or code.group(2)) if code else currency_of(text, lang)
    return found if not written or currencies_written(text) == {found} else None


def twitter_card_product(metas: dict[str, list[str]], url: str, canonical: str, lang: str | None) -> Any:
    """The product of a Twitter product card, or None. A card states a product only with a title
    and a field labelled as its price (`twitter:labelN` "Price" / `twitter:dataN`), on a page
    whose `og:type`, when it states one, is a product."""
    from lookbench_live.scrapers.extract.html_fallback import currencies_written, currency_of

    og_type = (metas.get("og:type") or [""])[0].lower()
    if other_than_product(og_type):
        return None  # an article or a video the page says it is, as for the visible page
    titles = [t for t in (clean_title(v) for v in metas.get("twitter:title", [])) if t]
    price_text = twitter_card_field(metas, "price")
    price = parse_price(price_text, lang=lang) if price_text else None
    if not titles or not price:
        return None
    # Several titles: the one the others begin with (they add the section and the site's name).
    title = next((t for t in titles if all(o.startswith(t) for o in titles)), titles[0])
    written = currencies_written(price_text or "")
    currency = currency_of(price_text, lang) or (written.pop() if len(written) == 1 else None)
    if currency is None:
        code = _CODE_AMOUNT.search(price_text or "")
        currency = (code.group(1) or code.group(2)) if code else None
    images = [i for i in (absolute_url(v, url) for v in metas.get("twitter:image", [])[:1]) if i]
    sources = {"title": "meta:twitter:title", "price": "meta:twitter:data"}
    if currency:
        sources["currency"] = "meta:twitter:data"
    if images:
        sources["image"] = "meta:twitter:image"
    return NormalizedProduct(
        product_id=url_key(canonical),
        url=canonical,
        platform="html",
        title=title,
        price=price,
        price_max=price,
        currency=currency,
        images=images,
        raw={"source": "twitter:card", "url": url},
        sources=sources,
    )


# --------------------------------------------------------------------------- stock

_STATUS_HINT = re.compile(r"(?i)status|availability|stock")
# The whole text of a status element: "Sold by X" or "Sold out soon" never matches.
_SOLD = re.compile(
    r"(?i)^(?:sold|vendu|vendue|verkocht|venduto|venduta|verkauft|vendido|vendida|sprzedane|"
    r"såld|solgt|myyty)$"
)


def sold_status(body: lxml_html.HtmlElement, cards: set[Any]) -> str | None:
    """OutOfStock when an element whose id, class or `data-testid` names a status states only
    that the item is sold (a marketplace listing of one item: Vinted's "Vendu")."""
    for element in body.iter():
        if not isinstance(element.tag, str):
            continue
        hint = " ".join(element.get(a) or "" for a in ("id", "class", "data-testid"))
        if not _STATUS_HINT.search(hint) or any(a in cards for a in (element, *element.iterancestors())):
            continue
        if _SOLD.match(" ".join(element.text_content().split())):
            return "OutOfStock"
    return None


_JA_OUT = re.compile(r"在庫(?:なし|切れ)|品切れ|売り切れ|完売")
_JA_IN = re.compile(r"在庫あり")


def stock_words(text: str) -> str | None:
    """A stock element's Japanese text: "在庫あり" in stock; "在庫なし" / "在庫切れ" / "品切れ" /
    "売り切れ" / "完売" out of stock."""
    if _JA_OUT.search(text):
        return "OutOfStock"
    if _JA_IN.search(text):
        return "InStock"
    return None


# --------------------------------------------------------------------------- identifier

_ID_ATTRS = ("data-product-id", "data-productid")


def attribute_product_id(tree: lxml_html.HtmlElement, canonical: str) -> str | None:
    """The page's one `data-product-id` value when the canonical URL's path has it as a segment:
    two statements of the same id. Several values (recommendation cards) are no answer."""
    values = {
        (element.get(attr) or "").strip()
        for element in tree.iter()
        if isinstance(element.tag, str)
        for attr in _ID_ATTRS
        if element.get(attr)
    }
    if len(values) != 1:
        return None
    value = values.pop()
    segments = urlsplit(canonical).path.split("/")
    return value if value and value in segments else None


def markup_url_id(tree: lxml_html.HtmlElement, canonical: str) -> str | None:
    """The one sku / productID the page's markup states (Target's `<meta itemprop="sku">` in a
    second Product item beside the shown one) when the canonical URL also has it as a part of its
    path (`…/-/A-52062126`): two statements of the same id. Several values (recommended products'
    markup) are no answer."""
    values = {
        (element.get("content") or " ".join(element.text_content().split())).strip()
        for element in tree.iter()
        if isinstance(element.tag, str) and element.get("itemprop") in ("sku", "productID")
    } - {""}
    if len(values) != 1:
        return None
    value = values.pop()
    fits = re.fullmatch(r"(?=[\w-]*\d)[\w-]{3,40}", value)
    return value if fits and value in url_tokens(canonical, query=False) else None


# --------------------------------------------------------------------------- breadcrumbs


def microdata_breadcrumbs(tree: lxml_html.HtmlElement, url: str) -> list[dict[str, Any]]:
    """The page's microdata `BreadcrumbList` items, in the JSON-LD shape `_breadcrumbs` reads, and
    Google's former data-vocabulary.org `Breadcrumb` items (`title`, `url`; side by side or each
    the `child` of the one before, La-Z-Boy 2017) of the page's first trail as one more list."""
    from lookbench_live.scrapers.extract.jsonld import type_names
    from lookbench_live.scrapers.extract.microdata import microdata_items

    lists = [n for n in microdata_items(tree, url) if "breadcrumblist" in type_names(n)]
    crumbs: list[tuple[str, Any]] = []
    for node in _first_trail(tree, url):
        while isinstance(node, dict):  # a crumb and the `child` chain below it
            name = node.get("title") or node.get("name")
            if isinstance(name, str) and name.strip() and (name, node.get("url")) not in crumbs:
                crumbs.append((name, node.get("url")))
            node = node.get("child")
    if crumbs:
        elements = [{"position": i + 1, "name": n, "item": u} for i, (n, u) in enumerate(crumbs)]
        lists.append({"@type": "BreadcrumbList", "itemListElement": elements})
    return lists


_TRAIL_LEVELS = 4  # a crumb's `<span>` in an `<li>` in a `<ul>` in a `<nav>`


def _first_trail(tree: lxml_html.HtmlElement, url: str) -> list[dict[str, Any]]:
    """The top-level data-vocabulary `Breadcrumb` items of the page's first trail: those inside
    the nearest holder of the first one that holds more than it (a footer's "Help" crumb, or a
    second trail elsewhere, is not part of it)."""
    from lookbench_live.scrapers.extract.microdata import microdata_item

    found = [
        e
        # a `child` (an `itemprop`) belongs to the crumb above it
        for e in tree.xpath("//*[@itemscope][@itemtype][not(@itemprop)]")
        if e.get("itemtype").rstrip("/").lower().endswith("data-vocabulary.org/breadcrumb")
    ]
    if not found:
        return []
    trail = [found[0]]
    holder = found[0].getparent()
    for _ in range(_TRAIL_LEVELS):
        if holder is None:
            break
        inside = [e for e in found if holder in e.iterancestors()]
        if len(inside) > 1:
            trail = inside
            break
        holder = holder.getparent()
    return [microdata_item(e, url) for e in trail]


# A site's home: its root, or a locale's root ("/no/", "/en-gb/").
_HOME_PATH = re.compile(r"(?i)^/?(?:[a-z]{2}(?:[-_][a-z]{2})?/?)?$")


def root_crumb(item: Any) -> bool:
    """Whether a breadcrumb's link is the site's root page itself ("/", no locale, no query)."""
    link = (item.get("@id") or item.get("url")) if isinstance(item, dict) else item
    if not isinstance(link, str) or not link.strip():
        return False
    parts = urlsplit(link.strip())
    return bool(parts.netloc) and parts.path in ("", "/") and not parts.query


def fuller_category(stated: list[str], trail: list[str]) -> list[str]:
    """A product's category: what its `category` states, or the page's breadcrumb trail when
    that names more levels than a one-word `category` ("Shoes", Shopify's product type "PANTS",
    beside "Men › Shoes"); a path the markup states ("Furniture > Sofas") is the shop's own."""
    return trail if len(stated) <= 1 and len(trail) > len(stated) else stated


def home_crumb(item: Any) -> bool:
    """Whether a breadcrumb's link goes to the site's home page (the trail's start, no category)."""
    link = (item.get("@id") or item.get("url")) if isinstance(item, dict) else item
    if not isinstance(link, str) or not link.strip():
        return False
    parts = urlsplit(link.strip())
    return not parts.query and bool(_HOME_PATH.match(parts.path))


# A shopper's search, not a category: a crumb named for the results ("Home › Search Results ›
# Oven Mitt" on Williams Sonoma) or linking to a search for typed words. A search URL that
# filters by category (`/search?category=4`, Suruga-ya's category pages) is a category.
_SEARCH_QUERY = re.compile(r"(?i)(?:^|&)(?:q|query|keywords?|words|searchterm|search_query)=")
_SEARCH_NAME = re.compile(
    r"(?i)^(?:search results?|results|suchergebnisse?|résultats(?: de (?:la )?recherche)?|resultados(?: de (?:la )?búsqueda)?|"
    r"risultati(?: della ricerca)?|zoekresultaten)$"
)


# Links in a trail that name no category: a way back ("Back", "‹ Back to results"; not "Back to
# School"), a page of the trail ("Next", "Nächstes", "Suivant"), the whole catalogue ("All Products", "Browse Products",
# Cafe24's "CATEGORIES", "Shop", WooCommerce's default "Uncategorized", Shopify's "Home page"
# collection), the shopper's account, a link to all of a category's items
# (Walmart's "See all Car Seats" after "Car Seats"), a label cut short ("See more Size 10 - PUMA
# RS-Dreamer x J. Cole Aquarius 2...": eBay's catalog product).
_NO_CATEGORY = re.compile(
    r"(?i)^(?:[‹«<←]\s*)?(?:back(?:\s+to\s+(?:(?:search\s+)?results|search|list|overview|previous(?:\s+page)?))?$"
    r"|(?:see (?:all|more)|view all|shop all)\b|(?:next|prev(?:ious)?)$"
    # The same pages of the trail in other languages ("Vorheriges" | "Nächstes" on a German shop).
    r"|(?:vorherige[rs]?|nächste[rs]?|zurück|weiter|précédent|suivant|retour|anterior|siguiente|volver|"
    r"precedente|successivo|indietro|vorige|volgende|terug|próximo|voltar)$"
    r"|(?:all |browse )?(?:products|categories)$|uncategori[sz]ed$|(?:the )?(?:shop|store)$|home ?page$|front ?page$"
    r"|(?:my )?account$|(?:log|sign) ?in$)|(?:\.\.\.|…)$"
)


def search_crumb(name: Any, item: Any) -> bool:
    """Whether a breadcrumb is the shopper's search (named for the results or linking to a
    search for typed words): a trail with one between its categories is no category path."""
    link = (item.get("@id") or item.get("url")) if isinstance(item, dict) else item
    if isinstance(name, str) and _SEARCH_NAME.match(" ".join(name.split())):
        return True
    if not isinstance(link, str) or not link.strip():
        return False
    return bool(_SEARCH_QUERY.search(urlsplit(link.strip()).query))


def no_category_crumb(name: Any, item: Any) -> bool:
    """Whether a breadcrumb names no category: the shopper's search (`search_crumb`), a way back,
    a page of the trail ("Next"), "See all …", a label cut short."""
    return search_crumb(name, item) or (isinstance(name, str) and bool(_NO_CATEGORY.search(name.strip())))


def crumb_path(crumbs: list[tuple[Any, Any]]) -> list[str] | None:
    """The names of a trail's crumbs ((name, link) pairs, home and product already left out)
    that name a category; None when a search crumb stands between two of them (the shopper's
    path, not the catalogue's: a level would be missing)."""
    searched = [i for i, (name, item) in enumerate(crumbs) if search_crumb(name, item)]
    kept = [i for i, (name, item) in enumerate(crumbs) if not no_category_crumb(name, item)]
    if kept and any(kept[0] < i < kept[-1] for i in searched):
        return None
    return [crumbs[i][0] for i in kept]


# --------------------------------------------------------------------------- sale price

_OLD_HINT = re.compile(
    r"(?i)(?:^|[\s_-])(?:old|was|strike|before|regular)(?:price)?(?:$|[\s_-])|line-through"
)
_BUY_HINT = re.compile(r"(?i)(?:^|[\s_-])(?:buy|sale|current|now|special|final)(?:$|[\s_-])")


def shown_sale_price(body: lxml_html.HtmlElement, price: Decimal, lang: str | None) -> Decimal | None:
    """The price the page charges when the structured price is shown as the former one: an
    element named old / was / struck stating that price, with a sibling named buy / sale / current
    stating one lower price, or else around it, in its holder's own text, one lower amount
    (laas.vn's `<div class="pricedetail">100.000 đ<br><span class="oldprice">439.000 đ</span>`).
    None when the page does not mark it so."""
    for element in body.iter():
        if not isinstance(element.tag, str) or not _OLD_HINT.search(element.get("class") or ""):
            continue
        if parse_price(" ".join(element.text_content().split()), lang=lang) != price:
            continue
        parent = element.getparent()
        if parent is None:
            continue
        for sibling in parent:
            if sibling is element or not isinstance(sibling.tag, str):
                continue
            if not _BUY_HINT.search(sibling.get("class") or ""):
                continue
            shown = parse_price(" ".join(sibling.text_content().split()), lang=lang)
            if shown and shown < price:
                return shown
        own = " ".join(" ".join(t for t in (parent.text, *(c.tail for c in parent)) if t).split())
        if own and len(_AMOUNTS.findall(own)) == 1 and _ONLY_A_SIGN.fullmatch(_AMOUNTS.sub("", own)):
            shown = parse_price(own, lang=lang)
            if shown and shown < price:
                return shown
    return None


_AMOUNTS = re.compile(r"\d[\d.,\u00a0\u202f ]*")
# What the holder's text may hold besides its amount: a currency's sign or code ("đ", "VND",
# "Rs.", "円"), not a saving's or a stock's words ("Save 20%", "You save", "Only 3 left").
_ONLY_A_SIGN = re.compile(r"[^\w%]*(?:[^\W\d_]{1,3}[^\w%]*)?")


# --------------------------------------------------------------------------- structured products


def fill_stated(
    product: NormalizedProduct,
    tree: lxml_html.HtmlElement,
    canonical: str,
    lang: str | None,
    cards: set[lxml_html.HtmlElement] | None = None,
) -> None:
    """What a page's one structured product leaves out or states as the former price, from the
    page itself: the id a `data-product-id`, the markup or a labelled line and the URL both state
    (the URL-path key stays an alias), else the id a label names ("SKU: …") or the add-to-cart
    form posts, the stock a stock element shows, the category its breadcrumb element shows, the
    price its Product element shows when the markup has no offer, the sale price the page
    charges. Never invents."""
    if product.sources.get("product_id") == "url":
        from lookbench_live.scrapers.extract.html_fallback import labelled_url_id

        body = tree.find("body")
        stated = (
            attribute_product_id(tree, canonical)
            or markup_url_id(tree, canonical)
            or (labelled_url_id(body, canonical) if body is not None else None)
        )
        if stated:
            product.id_aliases = list(dict.fromkeys([*product.id_aliases, product.product_id]))
            product.product_id = stated
            product.sources["product_id"] = "html:data-product-id"
    body = tree.find("body")
    if body is None:
        return
    from lookbench_live.scrapers.extract.html_fallback import (
        cart_form_id,
        page_breadcrumb,
        page_cards,
        page_chosen_color,
        page_labelled_id,
        page_stock,
        page_style_number,
    )

    cards = page_cards(body) if cards is None else cards  # read once: each rule leaves cards out
    if product.sources.get("product_id") in ("url", "url:item-number"):
        # Still keyed by its URL: the id a label of the page names ("SKU: AC452FA14DSVSNAFAMZ" in
        # Jumia's specification table, eBay's "eBay item number: 403760625150"), as the fallback
        # reads it, before the URL's path or its number (which stays an alias).
        labelled, source = page_labelled_id(body), "html:label"
        if labelled and any(labelled in card.text_content() for card in cards):
            labelled = None  # a related product's card's "SKU: …": that product's id, not this one's
        if not labelled:
            # No label: the id the page's own add-to-cart form posts (Magento's hidden `product`).
            labelled, source = cart_form_id(body, cards, canonical), "html:cart-form"
        if not labelled:  # last, a "Style:" code (Nike's "Style: HF3227-400")
            labelled, source = page_style_number(body, cards), "html:label-style"
        if labelled and labelled != product.product_id:
            product.id_aliases = list(dict.fromkeys([*product.id_aliases, product.product_id]))
            product.product_id = labelled
            product.sources["product_id"] = source
    if product.color is None:
        product.color = page_chosen_color(body, cards, canonical)
        if product.color:
            product.sources["color"] = "html:chosen-option"
    if product.availability is None:
        product.availability = page_stock(body, cards)
        if product.availability:
            product.sources["availability"] = "html:availability-element"
    if len(product.category_path) <= 1:  # none stated, or one name: the visible trail may say more
        trail = page_breadcrumb(body, product.title, cards, canonical) or []
        if fuller_category(product.category_path, trail) is trail:
            product.category_path = trail
            product.sources["category_path"] = "html:breadcrumb"
    if product.price is None and product.price_max is None:
        # Markup with no offer (GODIVA's microdata Product: name, image, productID): the price
        # the page's own price element shows.
        from lookbench_live.scrapers.extract.html_fallback import page_price

        shown = page_price(body, lang, canonical, cards, product.title)
        if shown is not None:
            product.price, product.price_max = shown[0], shown[0]
            product.sources["price"] = shown[2]
            if product.currency is None and shown[1]:
                product.currency = shown[1]
                product.sources["currency"] = shown[2]
    if product.price is not None:
        sale = shown_sale_price(body, product.price, lang)
        if sale is not None:
            if product.price_max == product.price:
                product.price_max = sale
            product.price = sale
            product.sources["price"] = "html:sale-price"
