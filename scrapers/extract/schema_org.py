"""schema.org Product data in an HTML page: JSON-LD first, microdata (microdata.py) and OpenGraph
as fallbacks, merged into one normalized product per item shown.

Several Product nodes for one item (one per size or colour, or a `ProductGroup` with
`hasVariant`) become one product; its colour, images and price are those of the variant
the page shows (matched by URL, `?variant=`/`?color=`, or SKU), not of the first node.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any
from urllib.parse import parse_qs, urlsplit, urlunsplit

from lxml import html as lxml_html

from lookbench_live.scrapers.extract.conventions import property_value
from lookbench_live.scrapers.extract.jsonld import (
    Script,
    id_index,
    load_script,
    load_scripts,
    top_nodes,
    type_names,
)
from lookbench_live.scrapers.extract.model import Extraction, NormalizedProduct, Problem, parse_datetime
from lookbench_live.scrapers.extract.page_extras import (
    card_currency,
    crumb_path,
    fill_stated,
    fuller_category,
    home_crumb,
    microdata_breadcrumbs,
    root_crumb,
    twitter_card_product,
)
from lookbench_live.scrapers.extract.values import (
    CHOICES,
    absolute_url,
    clean_text,
    clean_title,
    color_from_url,
    completed_title,
    find_color,
    find_material,
    image_urls,
    merge_availability,
    normalize_availability,
    normalize_brand,
    parse_price,
    title_color,
    url_item_id,
    url_key,
    without_name,
    without_site_name,
)

PRODUCT_TYPES = frozenset({"product", "productgroup", "individualproduct", "productmodel", "someproducts"})
MAX_PAGE_TEXT = 20_000


def extract_schema_org(
    text: str,
    url: str,
    tree: lxml_html.HtmlElement | None = None,
    scripts: list[Script] | None = None,
    *,
    earlier: bool = False,
) -> Extraction:
    """Products of one HTML page. Bad JSON-LD scripts are counted in `problems`, never fatal.
    `earlier`: as the rules before issue 27's twelfth round read it (no repaired script, no
    product stated in place as a page's `mainEntity` or an offer's `itemOffered`, a product
    stated twice read twice), for the key those rules gave (`_earlier_keys`)."""
    out = Extraction(platform="schema_org")
    if tree is None:
        from lookbench_live.scrapers.extract.jsonld import parse_tree

        tree = parse_tree(text)
    if tree is None:
        out.problems.append(Problem("unparsable_html", "no document"))
        return out
    metas = _Metas(tree)
    lang = _page_lang(tree, metas)
    canonical = _canonical(tree, url, metas)
    scripts = load_scripts(tree) if scripts is None else scripts
    if earlier:
        scripts = [s for s in scripts if not s.repaired]
    nodes: list[dict[str, Any]] = []
    for script in scripts:
        if script.problem:
            out.problems.append(script.problem)
        if script.data is not None:
            nodes.extend(top_nodes(script.data, in_place=not earlier))
    products = [n for n in nodes if type_names(n) & PRODUCT_TYPES]
    if not earlier:
        # A page that states its product twice, word for word (a theme's script and an app's,
        # or in place as the page's `mainEntity` and again on its own), states one product.
        products = _distinct(products)
    read_anew = not earlier and (
        any(s.repaired for s in scripts)
        or products
        != [
            n
            for s in scripts
            if s.data is not None
            for n in top_nodes(s.data, in_place=False)
            if type_names(n) & PRODUCT_TYPES
        ]
    )
    source = "jsonld"
    if not products:
        products = _microdata_products(tree, url)
        nodes.extend(products)
        source = "microdata"
    index = id_index(nodes)
    groups = _group(products, index, by_name=not earlier)
    # Variants grouped by the group they name (rules of the twelfth round) key the page anew.
    read_anew = read_anew or (not earlier and groups != _group(products, index, by_name=False))
    from lookbench_live.scrapers.extract.html_fallback import page_cards

    body = tree.find("body")
    # The page's product cards, read once for the rules below (each leaves them out): for a page
    # of one product, whose text and fields are read.
    cards = page_cards(body) if body is not None and len(groups) == 1 else set()
    page_text = _page_text(tree, cards=cards) if len(groups) == 1 else None
    varying = _varying(tree)
    breadcrumbs = _breadcrumbs(nodes) or _breadcrumbs([*nodes, *microdata_breadcrumbs(tree, url)])
    candidates: list[_Candidate] = []
    for group_node, members in groups:
        try:
            product = _normalize(
                group_node, members, index, url, canonical, lang, page_text, breadcrumbs, varying
            )
        except Exception as exc:  # one odd node never loses the page
            out.problems.append(Problem("bad_product_node", f"{type(exc).__name__}: {exc}"[:300]))
            continue
        product.raw = {"source": source, "nodes": [group_node, *members] if group_node else members}
        shown = _shown(members, url) or group_node or {}
        candidates.append(
            _Candidate(product, absolute_url(shown.get("url"), url), _stated_id(group_node, members, shown))
        )
    out.products.extend(_page_products(candidates, url, canonical, tree, metas, out.problems))
    for product in out.products:
        _note_sources(product, source)
    if not out.products:
        product = _opengraph_product(tree, metas, url, canonical, lang)
        if product is not None:
            # OpenGraph states no stock, category or id beyond the URL: what the page shows.
            fill_stated(product, tree, canonical, lang)
            _key_by_query(product, canonical)
        if product is None:
            from lookbench_live.scrapers.extract.html_fallback import html_product
            from lookbench_live.scrapers.extract.microdata import itemprop_values

            product = html_product(tree, url, canonical, metas.values, itemprop_values(tree, url), lang)
        if product is None:  # a Twitter product card is the page's only product data
            product = twitter_card_product(metas.values, url, canonical, lang)
        if product is not None:
            out.products.append(product)
    elif len(out.products) == 1:
        _fill_from_meta(out.products[0], tree, metas, url, lang)
        if len(groups) != 1 and body is not None:
            cards = page_cards(body)
        fill_stated(out.products[0], tree, canonical, lang, cards)
        _key_by_query(out.products[0], canonical)
        # A page whose markup holds several product items has its fields read only when the
        # others are fragments of this one (no name, or its name: Walmart's second Product for
        # another seller's offer), never another product's ("bought together" with its colour).
        chosen = (out.products[0].title or "").casefold()
        fragments = all(
            not clean_title(n.get("name")) or clean_title(n.get("name")).casefold() == chosen
            for n in products
        )
        _fill_from_fields(
            out.products[0],
            tree,
            varying,
            read_text=page_text is None and fragments,
            whole_page=fragments or page_text is not None,
            cards=cards,
        )
        if out.products[0].price is None and _article_item(metas.first("og:type"), products):
            # A news site's or a blog's article marked up as a Product for its paywall or its
            # star rating (the New York Times' `CreativeWork Product`, a review's rated item):
            # the page says it is an article, and no price anywhere says anything is sold here.
            out.problems.append(Problem("article_not_product", out.products.pop().title or ""))
    if read_anew and out.products:
        _earlier_keys(out.products, extract_schema_org(text, url, tree, scripts, earlier=True))
    return out


def _distinct(products: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The products, each written one only once (`@context` aside); by a key per product, as
    comparing each with all before it is quadratic on a listing's thousands."""
    seen: set[str] = set()
    out = []
    for node in products:
        key = json.dumps({k: v for k, v in node.items() if k != "@context"}, sort_keys=True, default=str)
        if key not in seen:
            seen.add(key)
            out.append(node)
    return out


def _earlier_keys(products: list[NormalizedProduct], before: Extraction) -> None:
    """A page's JSON-LD that the earlier rules could not read (a repaired script, a product stated
    in place, one stated twice) gives its product a key they did not: a product the lake holds
    under the key they gave the page's one product keeps it (`id_aliases`)."""
    if len(before.products) != 1:
        return
    kept = [before.products[0].product_id, *before.products[0].id_aliases]
    for product in products:
        product.id_aliases = list(dict.fromkeys([*product.id_aliases, *kept]))
        if product.product_id in product.id_aliases:
            product.id_aliases.remove(product.product_id)


# What a Product states when a shop sells it, even out of stock and with no price (an offer, an
# article number): a Product with none of them on an article's page is the article's rated item.
_SOLD_KEYS = ("offers", "sku", "gtin", "gtin8", "gtin12", "gtin13", "gtin14", "mpn", "productID")


def _article_item(og_type: str | None, nodes: list[dict[str, Any]]) -> bool:
    """Whether the page says it is an article or a blog post (`og:type` "article", "blog") and
    its Product items are the article itself (typed `CreativeWork Product`, as the New York
    Times' paywall markup with its `productID`) or state no offer and no article number. A
    book's page (`og:type` "book") or a shop's product page a plugin types "article" keeps a
    Product that has an offer."""
    if (og_type or "").strip().lower() not in ("article", "blog"):
        return False
    if any(
        type_names(node) & _WORK_TYPES or _WORK_TYPE.search(str(node.get("@context") or "")) for node in nodes
    ):
        return True  # also a type list written with "%20" (`itemtype="…/CreativeWork%20…/Product"`)
    return not any(node.get(key) for node in nodes for key in _SOLD_KEYS)


_WORK_TYPES = frozenset({"creativework", "article", "newsarticle", "blogposting"})
_WORK_TYPE = re.compile(r"(?i)/(?:CreativeWork|Article|NewsArticle|BlogPosting)(?:%20|\s)")


def _fill_from_fields(
    product: NormalizedProduct,
    tree: lxml_html.HtmlElement,
    varying: frozenset[str],
    *,
    read_text: bool,
    whole_page: bool,
    cards: set[lxml_html.HtmlElement],
) -> None:
    """The colour and material fields of a page whose markup holds several product items (Walmart's
    second Product for another seller's offer): once one is the page's product, the fields its
    page states are its own ("Color" | "Black" in the specification table). Never a field the
    shopper chooses (`varying`). Then an element that states nothing but a composition (Nordstrom's
    bullet "100% polyester": the element is the label, the fibre need not be in the vocabulary)."""
    text = _page_text(tree, cards=cards) if read_text else None
    if text and not product.color and "color" not in varying:
        product.color = find_color(text)
        if product.color:
            product.sources["color"] = "html:field"
    if text and not product.material and "material" not in varying:
        product.material = find_material(None, text)
        if product.material:
            product.sources["material"] = "html:field"
    body = tree.find("body")
    if not product.material and "material" not in varying and whole_page and body is not None:
        # A specification table's "Main Material" | "Cotton": a field the page states as its
        # product's (the markup's description "Cotton materialLiner length…" states none).
        from lookbench_live.scrapers.extract.html_fallback import page_field_material

        product.material = page_field_material(body, cards)
        if product.material:
            product.sources["material"] = "html:field"
    if not product.material and "material" not in varying and body is not None:
        from lookbench_live.scrapers.extract.html_fallback import page_composition

        # With other products' items on the page, only the product's own item element is read
        # (Ann Taylor's blazer beside its "complete the look" items).
        scope = body if whole_page else _own_item(body, product.title)
        product.material = page_composition(body, scope, cards) if scope is not None else None
        if product.material:
            product.sources["material"] = "html:composition"
        elif scope is not None and not whole_page:
            # The item's own text: a composition between `<br>`s ("• 63% Polyester, 33% Rayon, 4% Spandex").
            product.material = find_material(None, _page_text(tree, scope, cards))
            if product.material:
                product.sources["material"] = "html:field"


def _own_item(body: lxml_html.HtmlElement, title: str | None) -> lxml_html.HtmlElement | None:
    """The one microdata Product element whose `name` is the product's title."""
    from lookbench_live.scrapers.extract.microdata import product_elements

    if not title:
        return None
    found = [
        e
        for e in product_elements(body)
        if any(
            clean_title(n.get("content") or n.text_content()) == title
            for n in e.iter()
            if isinstance(n.tag, str) and n.get("itemprop") == "name"
        )
    ]
    return found[0] if len(found) == 1 else None


_FACT_FIELDS = (
    "title", "brand", "price", "currency", "availability", "color", "material", "images", "category_path",
)  # fmt: skip


def _note_sources(product: NormalizedProduct, source: str) -> None:
    """Which source gave each fact (`product.sources`); the fallbacks below name themselves."""
    for name in _FACT_FIELDS:
        if getattr(product, name):
            product.sources.setdefault("image" if name == "images" else name, source)
    product.sources.setdefault("product_id", source if not product.product_id.startswith("/") else "url")


@dataclass(slots=True)
class _Candidate:
    product: NormalizedProduct
    own_url: str | None  # the node's `url`
    stated_id: str | None  # an id the node states (None: the key is a URL path)


def _page_products(
    candidates: list[_Candidate],
    url: str,
    canonical: str,
    tree: lxml_html.HtmlElement,
    metas: _Metas,
    problems: list[Problem],
) -> list[NormalizedProduct]:
    """The page's own product first, then the others it lists or recommends. With several, the
    page's is the one whose URL is the page's, else whose name is the page's title (`og:title`,
    `<h1>`, `<title>`), else the only one without a URL of its own. The others keep their own
    URL and an id of their own (stated, else their URL's path); one with neither is dropped
    (`recommended_product_without_id`): keyed by the page's path it would pass for the page's
    product. Only the page's product keeps its pre-issue-27 key as an alias."""
    if len(candidates) <= 1:
        return [c.product for c in candidates]
    main = _page_product_index(candidates, url, canonical, tree, metas)
    ordered = ([candidates[main]] if main is not None else []) + [
        c for i, c in enumerate(candidates) if i != main
    ]
    out = []
    for position, candidate in enumerate(ordered):
        product = candidate.product
        if main is not None and position == 0:
            out.append(product)
            continue
        product.id_aliases = []
        if candidate.own_url and not _same_page(candidate.own_url, url, canonical):
            product.url = candidate.own_url
        elif not candidate.stated_id:
            problems.append(Problem("recommended_product_without_id", product.title or ""))
            continue
        if not candidate.stated_id and candidate.own_url:
            product.product_id = urlsplit(candidate.own_url).path.rstrip("/") or candidate.own_url
        out.append(product)
    return out


def _page_product_index(
    candidates: list[_Candidate], url: str, canonical: str, tree: lxml_html.HtmlElement, metas: _Metas
) -> int | None:
    for index, candidate in enumerate(candidates):
        if candidate.own_url and _same_page(candidate.own_url, url, canonical):
            return index
    titles = {_fold(metas.first("og:title")), _fold(tree.findtext(".//title"))}
    titles |= {_fold(h.text_content()) for h in tree.iter("h1")}
    titles.discard("")
    named = [
        i
        for i, c in enumerate(candidates)
        if c.product.title
        and any(t == _fold(c.product.title) or t.startswith(_fold(c.product.title) + " ") for t in titles)
    ]
    if len(named) == 1:
        return named[0]
    unowned = [i for i, c in enumerate(candidates) if not c.own_url]
    return unowned[0] if len(unowned) == 1 else None


def _key_by_query(product: NormalizedProduct, canonical: str) -> None:
    """A product keyed by its URL's path when that path is one script serving every item
    (IBM WebSphere Commerce's `/ProductDisplay?storeId=10161&productId=70682436`): the item the
    query names instead, as `url_key` keys a page with no structured data; the path stays an
    alias, so a product the lake holds under it keeps that key."""
    if product.sources.get("product_id") != "url" or not product.product_id.startswith("/"):
        return
    item = url_key(canonical)
    if item != product.product_id and not item.startswith(("/", "http")):
        product.id_aliases = list(dict.fromkeys([*product.id_aliases, product.product_id]))
        product.product_id = item
        product.sources["product_id"] = "url:query-item"


def _same_page(other: str, url: str, canonical: str) -> bool:
    def key(value: str) -> tuple[str, str]:
        parts = urlsplit(value)
        return parts.netloc.lower().removeprefix("www."), parts.path.rstrip("/")

    return key(other) in (key(url), key(canonical))


def _fold(text: str | None) -> str:
    return " ".join((text or "").casefold().split())


def _fill_from_meta(
    product: NormalizedProduct, tree: lxml_html.HtmlElement, metas: _Metas, url: str, lang: str | None
) -> None:
    """What a malformed or partial JSON-LD offer lost, from the page's OpenGraph / `product:`
    meta: price with its currency, images, colour and material fields; a missing title or brand
    from the page's own heading. Never overrides, but for the site's own name after the markup's
    product name ("Nhẫn cầu hôn Tiny Bauquet NCH1310 - TIERRA" where `og:site_name` is "TIERRA":
    a template that fills the name from the page's `<title>`)."""
    product.title = without_site_name(product.title, clean_title(metas.first("og:site_name")))
    amount = metas.first("product:price:amount") or metas.first("og:price:amount")
    currency = _currency(metas.first("product:price:currency") or metas.first("og:price:currency"))
    price = parse_price(amount, lang=lang)
    # A Twitter card's "9.277.400 VND" for og's "9.277.400" and "USD": a Shopify theme writes the
    # shop's own currency beside the amount in the shopper's; the card writes the two together.
    carded = card_currency(metas.values, price, lang, written=True) if price and currency else None
    currency = carded or currency
    if product.price is None and not price:
        price, currency = _state_offer(tree, lang)
    if product.price is None and price:
        product.price, product.price_max = price, price
        product.currency = product.currency or currency
        product.sources.update(price="meta", currency="meta")
    elif product.currency is None and currency and price is not None and price == product.price:
        product.currency = currency
        product.sources["currency"] = "meta"
    if product.currency is None and product.price is not None:
        # "lowPrice": "£49.00": the offer states its currency in the amount's text.
        from lookbench_live.scrapers.extract.html_fallback import currency_of

        texts = [
            o.get(k) for n in (product.raw or {}).get("nodes", []) if isinstance(n, dict) for o in _offers(n)
            for k in ("price", "lowPrice") if isinstance(o.get(k), str)
        ]  # fmt: skip
        found = {currency_of(t, lang, url) for t in texts if parse_price(t, lang=lang) == product.price}
        if len(found) == 1 and None not in found:
            product.currency = found.pop()
            product.sources["currency"] = "offer price text"
    retailer_id = _identifier(metas.first("product:retailer_item_id"))
    if retailer_id and product.sources.get("product_id") == "url":
        # The structured data states no id; the page's `product:retailer_item_id` does. The
        # URL-path key stays an alias, so a product the lake holds under it keeps that key.
        product.id_aliases = list(dict.fromkeys([*product.id_aliases, product.product_id]))
        product.product_id = retailer_id
        product.sources["product_id"] = "meta:product:retailer_item_id"
    full = completed_title(
        product.title,
        without_site_name(clean_title(metas.first("og:title")), clean_title(metas.first("og:site_name"))),
        clean_title(metas.first("twitter:title")),
    )
    if full != product.title:
        product.title = full
        product.sources["title"] = "meta:og:title"
    if not product.images:
        product.images = image_urls(metas.all("og:image") + metas.all("og:image:url"), url)
        if product.images:
            product.sources["image"] = "meta"
    if product.availability is None:
        product.availability = normalize_availability(
            metas.first("og:availability") or metas.first("product:availability")
        )
        if product.availability:
            product.sources["availability"] = "meta"
    product.color = product.color or clean_title(metas.first("product:color"))
    product.material = product.material or clean_title(metas.first("product:material"))
    if not product.brand:
        product.brand = clean_title(metas.first("product:brand") or metas.first("og:brand"))
        if product.brand:
            product.sources["brand"] = "meta"
    body = tree.find("body")
    if (not product.title or not product.brand) and body is not None:
        # A Product in the markup without a name or brand (microdata on the offer only): the
        # page's own heading states them, or for the brand a "Brand" field of its specification
        # table. Not `og:title`, which sites pad ("В наличии: …").
        from lookbench_live.scrapers.extract.html_fallback import (
            heading_brand,
            page_brand_field,
            page_brand_link,
            page_heading,
        )

        if not product.title:
            product.title = page_heading(body)
            if product.title:
                product.sources["title"] = "html:heading"
        if not product.brand:
            product.brand = heading_brand(body)
            if product.brand:
                product.sources["brand"] = "html:heading-brand"
        if not product.brand:  # a "Marke" | "XADO" row of the page's specification table
            product.brand = page_brand_field(body)
            if product.brand:
                product.sources["brand"] = "html:field"
        if not product.brand:  # "See all Sony products": a link to the brand's own listing
            product.brand = page_brand_link(body, product.title)
            if product.brand:
                product.sources["brand"] = "html:brand-link"
    if product.sources.get("product_id") == "url" and body is not None:
        # No id in the markup: one an element named for it shows that the URL also keys the
        # page by (oriflame's `<span class="code">31270</span>` at `?code=31270`). The URL-path
        # key stays an alias, as for `product:retailer_item_id` above.
        from lookbench_live.scrapers.extract.html_fallback import url_confirmed_id

        code = url_confirmed_id(body, url)
        if code:
            product.id_aliases = list(dict.fromkeys([*product.id_aliases, product.product_id]))
            product.product_id = code
            product.sources["product_id"] = "html:code"
    item_number = url_item_id(product.product_id) if product.sources.get("product_id") == "url" else None
    if item_number:
        # No id in the markup: the item number the URL ends in. The URL-path key stays an alias.
        product.id_aliases = list(dict.fromkeys([*product.id_aliases, product.product_id]))
        product.product_id = item_number
        product.sources["product_id"] = "url:item-number"
    if not product.images and body is not None:
        # Neither the markup nor `og:image` names a picture: the one the page's gallery shows
        # (a lazy-loaded `data-src` behind a `data:` placeholder, a lightbox link to the full size).
        from lookbench_live.scrapers.extract.html_fallback import page_image

        product.images, source = page_image(body, url, product.title)
        if source:
            product.sources["image"] = source


_CURRENCY_KEYS = ("priceCurrency", "currencyCode", "currency_code", "currency")
_AMOUNT_KEYS = ("price", "amount", "value", "salePrice", "currentPrice")


def _state_offer(tree: lxml_html.HtmlElement, lang: str | None) -> tuple[Decimal | None, str | None]:
    """(price, currency) from the page's embedded state JSON (`<script type="application/json">`,
    `__NEXT_DATA__`…): objects stating an amount beside an ISO currency. Taken only when all such
    objects agree on one pair, so a page listing other products or prices gives nothing."""
    pairs: set[tuple[Decimal, str]] = set()
    for script in tree.iter("script"):
        kind = (script.get("type") or "").split(";")[0].strip().lower()
        if kind == "application/ld+json" or not kind.endswith("json"):
            continue
        data = load_script(script.text or "").data
        stack: list[tuple[Any, int]] = [(data, 0)]
        while stack and len(pairs) < 2:
            item, depth = stack.pop()
            if depth > 16:
                continue
            if isinstance(item, dict):
                currency = next(
                    (_currency(item[k]) for k in _CURRENCY_KEYS if isinstance(item.get(k), str)), None
                )
                amount = next(
                    (item[k] for k in _AMOUNT_KEYS if isinstance(item.get(k), str | int | float)), None
                )
                price = parse_price(amount, lang=lang) if currency and amount is not None else None
                if price:
                    pairs.add((price, currency))
                stack.extend((v, depth + 1) for v in item.values() if isinstance(v, dict | list))
            elif isinstance(item, list):
                stack.extend((v, depth + 1) for v in item if isinstance(v, dict | list))
    if len(pairs) == 1:
        return next(iter(pairs))
    return None, None


def _currency(value: str | None) -> str | None:
    return value.strip().upper() if value and re.fullmatch(r"\s*[A-Za-z]{3}\s*", value) else None


# --------------------------------------------------------------------------- grouping


def _group(
    products: list[dict[str, Any]], index: dict[str, dict[str, Any]], *, by_name: bool = True
) -> list[tuple[dict[str, Any] | None, list[dict[str, Any]]]]:
    """(group node or None, member nodes) per item on the page; `by_name`: a ProductGroup's
    members include the products that name it as their group (`_naming`)."""
    groups: list[tuple[dict[str, Any] | None, list[dict[str, Any]]]] = []
    used: set[int] = set()
    naming = _naming(products) if by_name else {}
    for node in products:
        if "productgroup" in type_names(node):
            members = []
            for variant in _as_list(node.get("hasVariant")):
                if isinstance(variant, dict):
                    resolved = index.get(variant.get("@id"), variant) if len(variant) == 1 else variant
                    members.append(resolved)
                    used.add(id(resolved))
            # Variants that name their group instead (`isVariantOf: {"@id": "#era-100-base"}`,
            # `inProductGroupWithID`): schema.org's other way to write the same group.
            for at in sorted(
                {
                    *_named(naming, "@id", node.get("@id")),
                    *_named(naming, "productGroupID", _scalar(node.get("productGroupID"))),
                }
            ):
                other = products[at]
                if id(other) not in used and other is not node:
                    members.append(other)
                    used.add(id(other))
            groups.append((node, members))
            used.add(id(node))
    by_key: dict[str, list[dict[str, Any]]] = {}
    for node in products:
        if id(node) in used:
            continue
        by_key.setdefault(_group_key(node), []).append(node)
    for members in by_key.values():
        groups.append((None, members))
    return groups


def _naming(products: list[dict[str, Any]]) -> dict[tuple[str, Any], list[int]]:
    """Positions of the products that name a group, by what they name it with: the group's
    `@id` (`isVariantOf`) or its `productGroupID` (`inProductGroupWithID`). Looked up per group,
    not compared with every product per group (quadratic on a listing of groups)."""
    naming: dict[tuple[str, Any], list[int]] = {}
    for at, variant in enumerate(products):
        parent = variant.get("isVariantOf")
        if isinstance(parent, dict) and _hashable(parent.get("@id")) and parent.get("@id"):
            naming.setdefault(("@id", parent["@id"]), []).append(at)
        stated = _scalar(variant.get("inProductGroupWithID"))
        if stated is not None and _hashable(stated):
            naming.setdefault(("productGroupID", stated), []).append(at)
    return naming


def _named(naming: dict[tuple[str, Any], list[int]], key: str, value: Any) -> list[int]:
    return naming.get((key, value), []) if _hashable(value) else []


def _hashable(value: Any) -> bool:
    return isinstance(value, str | int | float)


def _group_key(node: dict[str, Any]) -> str:
    for key in ("inProductGroupWithID", "productGroupID"):
        if isinstance(node.get(key), str | int):
            return f"group:{node[key]}"
    parent = node.get("isVariantOf")
    if isinstance(parent, dict) and parent.get("@id"):
        return f"group:{parent['@id']}"
    title = clean_title(node.get("name"))
    return f"name:{title.lower()}" if title else f"node:{id(node)}"


def _shown(members: list[dict[str, Any]], url: str) -> dict[str, Any] | None:
    """The node the page actually shows: its URL or offer URL is the page URL, or its SKU /
    colour is what the URL selects."""
    if not members:
        return None
    page = _strip_fragment(url)
    for node in members:
        urls = [node.get("url"), *[o.get("url") for o in _offers(node)]]
        matches = any(
            isinstance(u, str) and _strip_fragment(absolute_url(u, url) or "") == page for u in urls
        )
        if matches and ("?" in page or len(members) == 1):
            return node
    query = parse_qs(urlsplit(url).query)
    wanted = {v.lower() for values in query.values() for v in values}
    if wanted:
        for node in members:
            keys = {str(node.get(k, "")).lower() for k in ("sku", "productID", "gtin", "mpn") if node.get(k)}
            colors = {c.lower() for c in _strings(node.get("color"))}
            if keys & wanted or colors & wanted:
                return node
    return members[0]


# --------------------------------------------------------------------------- normalizing


def _normalize(
    group: dict[str, Any] | None,
    members: list[dict[str, Any]],
    index: dict[str, dict[str, Any]],
    url: str,
    canonical: str,
    lang: str | None,
    page_text: str | None,
    breadcrumbs: list[str],
    varying: frozenset[str] = frozenset(),
) -> NormalizedProduct:
    shown = _shown(members, url) or group or {}
    head = group or shown
    nodes = ([group] if group else []) + members
    # An offer of another kind of thing (a warranty `Service`) is not this product's price.
    offers = [(node, offer) for node in nodes for offer in _offers(node) if not _offers_other(offer)]
    priced = []
    for node, offer in offers:
        low, high, currency, availability, list_price = _offer_values(offer, lang)
        priced.append((node, low, high, currency, availability, list_price))
    buyable = [p for p in priced if p[1] is not None and p[1] > 0 and p[4] != "OutOfStock"]
    positive = [p for p in priced if p[1] is not None and p[1] > 0]  # 0 = placeholder, not a price
    pool = buyable or positive
    shown_prices = [p for p in pool if p[0] is shown]
    price = min((p[1] for p in shown_prices), default=None) or min((p[1] for p in pool), default=None)
    highs = [p[2] or p[1] for p in pool]
    price_max = max(highs) if highs else None
    if price is not None and price_max is not None and price_max < price:
        price_max = price
    currency = next((p[3] for p in shown_prices if p[3]), None) or next((p[3] for p in pool if p[3]), None)
    if currency is None:
        currency = next((p[3] for p in priced if p[3]), None)
    list_prices = [p[5] for p in (shown_prices or pool) if p[5] is not None]
    compare = max(list_prices) if list_prices else None
    if compare is not None and (price is None or compare <= price):
        compare = None
    availability = merge_availability(p[4] for p in priced) or merge_availability(
        normalize_availability(n.get("availability")) for n in nodes
    )
    title = clean_title(head.get("name")) or clean_title(shown.get("name"))
    description = clean_text(head.get("description")) or clean_text(shown.get("description"))
    # Colour and material only where the page states them (reliability: a wrong fact is
    # worse than a missing one): structured fields, a labelled field in the text, the title.
    color = (
        next(iter(_strings(shown.get("color"))), None)
        or next(iter(_strings(head.get("color"))), None)
        or property_value([shown, head], "color")
        or color_from_url(url)
        or find_color(description, page_text)
        or title_color(_without_brand(title, normalize_brand(shown.get("brand"), index)))
    )
    material = (
        next(iter(_strings(shown.get("material"))), None)
        or next(iter(_strings(head.get("material"))), None)
        or property_value([shown, head], "material")
    )
    if not material:
        material = find_material(description, None if "material" in varying else page_text)
    images = image_urls(shown.get("image"), url)
    if group is not None or not images:
        images += [u for u in image_urls(head.get("image"), url) if u not in images]
    if not images:
        # The offer's `itemOffered` describing this product with its picture (CVS: the Product
        # names no image, its offer's `IndividualProduct` of the same name does).
        for _, offer in offers:
            item = offer.get("itemOffered")
            if isinstance(item, dict) and clean_title(item.get("name")) in (None, title):
                images += [u for u in image_urls(item.get("image"), url) if u not in images]
    stated = _category(head.get("category") or shown.get("category")) or _category(
        property_value([head, shown], "category")
    )
    category = fuller_category(stated, breadcrumbs)
    product_id = _product_id(group, members, shown, canonical, url)
    legacy_id = _legacy_product_id(group, members, shown, canonical)
    variants = []
    if len(nodes) > 1 or group is not None:
        for node in members:
            low, _, cur, avail, _ = _offer_values(next(iter(_offers(node)), {}), lang)
            variants.append(
                {
                    "sku": _scalar(node.get("sku")),
                    "name": clean_title(node.get("name")),
                    "color": next(iter(_strings(node.get("color"))), None),
                    "size": next(iter(_strings(node.get("size"))), None),
                    "price": str(low) if low is not None else None,
                    "currency": cur,
                    "availability": avail,
                    "url": absolute_url(node.get("url"), url),
                }
            )
    return NormalizedProduct(
        product_id=product_id,
        id_aliases=[legacy_id] if legacy_id != product_id else [],
        url=canonical,
        platform="schema_org",
        title=title,
        brand=normalize_brand(shown.get("brand"), index)
        or normalize_brand(head.get("brand"), index)
        or normalize_brand(shown.get("manufacturer"), index),
        price=price,
        price_max=price_max if price is not None else None,
        compare_at_price=compare,
        currency=currency,
        availability=availability,
        category_path=category,
        color=without_name(clean_title(color), title),
        material=clean_title(material),
        description=description,
        images=images,
        variants=variants,
        published_at=parse_datetime(_scalar(head.get("datePublished")) or _scalar(head.get("releaseDate"))),
        updated_at=parse_datetime(_scalar(head.get("dateModified"))),
    )


def _offers_other(offer: dict[str, Any]) -> bool:
    """Whether an offer's `itemOffered` is a `Service` (a protection plan sold beside the product).
    Any other item (a variant "Shirt - Blue / M", a `Thing`, a `Car`) is still this product's."""
    item = offer.get("itemOffered")
    return isinstance(item, dict) and "service" in type_names(item)


# Identifier properties in the order they name this product (a sku over a barcode).
_ID_KEYS = ("sku", "productID", "mpn", "gtin13", "gtin14", "gtin12", "gtin8", "gtin")


def _product_id(
    group: dict[str, Any] | None,
    members: list[dict[str, Any]],
    shown: dict[str, Any],
    canonical: str,
    url: str,
) -> str:
    """The product's key: the group's id, else (one node) its sku, its offers' one sku, productID,
    mpn or GTIN; blank values (`"sku": " "`) are no id. Without any: the node's own URL path when it
    states one, else the page's (a product recommended on another product's page is never keyed by
    that page's path: `_page_products` drops it when it has neither)."""
    stated = _stated_id(group, members, shown)
    if stated:
        return stated
    own = absolute_url(shown.get("url"), url) if len(members) == 1 else None
    path = urlsplit(own or canonical).path.rstrip("/")
    return path or own or canonical


def _stated_id(
    group: dict[str, Any] | None, members: list[dict[str, Any]], shown: dict[str, Any]
) -> str | None:
    if group is not None:
        for key in ("productGroupID", "sku", "productID", "mpn"):
            if _identifier(group.get(key)):
                return _identifier(group.get(key))
    for key in ("inProductGroupWithID", "productGroupID"):
        if _identifier(shown.get(key)):
            return _identifier(shown.get(key))
    return _node_identifier(shown) if len(members) == 1 else None


def _node_identifier(node: dict[str, Any]) -> str | None:
    if _identifier(node.get("sku")):
        return _identifier(node.get("sku"))
    skus = {_identifier(o.get("sku")) for o in _offers(node)} - {None}
    if len(skus) == 1:  # one offer's sku (or all offers agree): the product's
        return skus.pop()
    for key in _ID_KEYS[1:]:
        if _identifier(node.get(key)):
            return _identifier(node.get(key))
    return None


# schema.org's `productID` is written with its scheme ("isbn:123-456-789", the property's own
# example; B&H's `<meta itemprop="productID" content="sku:CAE5D4">`): the id is after it.
_ID_SCHEME = re.compile(r"(?i)^(?:sku|mpn|isbn(?:10|13)?|upc|ean|gtin(?:8|12|13|14)?|asin)\s*:\s*(?=\S)")


def _identifier(value: Any) -> str | None:
    """An id value as text: strings and numbers, stripped, a scheme before it dropped ("sku:CAE5D4"
    is "CAE5D4"); blank, "null" or nested ones are none."""
    value = _scalar(value)
    if isinstance(value, bool) or not isinstance(value, str | int):
        return None
    text = _ID_SCHEME.sub("", str(value).strip())
    return text if text and text.lower() not in ("null", "none", "undefined", "n/a") else None


def _legacy_product_id(
    group: dict[str, Any] | None, members: list[dict[str, Any]], shown: dict[str, Any], canonical: str
) -> str:
    """The key the rules before issue 27 gave (kept verbatim, blank skus included): the pipeline
    keeps a product under this key when the lake already holds it there (`id_aliases`)."""
    if group is not None:
        for key in ("productGroupID", "sku", "productID", "mpn"):
            if _scalar(group.get(key)):
                return str(_scalar(group[key]))
    for key in ("inProductGroupWithID", "productGroupID"):
        if _scalar(shown.get(key)):
            return str(_scalar(shown[key]))
    if len(members) == 1:
        for key in ("sku", "productID", "mpn", "gtin13", "gtin"):
            if _scalar(shown.get(key)):
                return str(_scalar(shown[key]))
    path = urlsplit(canonical).path.rstrip("/")
    return path or canonical


def _offers(node: dict[str, Any]) -> list[dict[str, Any]]:
    """Offers of a node, with AggregateOffers' nested `offers` flattened beside them."""
    out: list[dict[str, Any]] = []
    stack = [(o, 0) for o in _as_list(node.get("offers"))]
    while stack:
        offer, depth = stack.pop(0)
        if not isinstance(offer, dict) or depth > 4:
            continue
        out.append(offer)
        if "offers" in offer:
            stack.extend((o, depth + 1) for o in _as_list(offer["offers"]))
    if not out and node.get("price") is not None and type_names(node) & PRODUCT_TYPES:
        # An older template's Product states its price itself (Mango's `itemprop="price"` on the
        # Product, no Offer): read as the Product's one offer.
        out.append({k: node[k] for k in ("price", "priceCurrency", "availability") if k in node})
    return out


def _offer_values(
    offer: dict[str, Any], lang: str | None
) -> tuple[Decimal | None, Decimal | None, str | None, str | None, Decimal | None]:
    """(lowest, highest, currency, availability, list price) of one offer."""
    specs = [s for s in _as_list(offer.get("priceSpecification")) if isinstance(s, dict)]
    price = parse_price(offer.get("price"), lang=lang)
    list_price = None
    for spec in specs:
        kind = str(spec.get("priceType") or "").rsplit("/", 1)[-1].lower()
        value = parse_price(spec.get("price"), lang=lang)
        if kind in ("listprice", "strikethroughprice", "msrp", "srp"):
            list_price = value
        elif price is None:
            price = value
    low = parse_price(offer.get("lowPrice"), lang=lang)
    high = parse_price(offer.get("highPrice"), lang=lang)
    if price is None or (low is not None and 0 < low < price):
        price = low
    currency = offer.get("priceCurrency") or next(
        (s.get("priceCurrency") for s in specs if s.get("priceCurrency")), None
    )
    if isinstance(currency, str) and re.fullmatch(r"[A-Za-z]{3}", currency.strip()):
        currency = currency.strip().upper()
    else:
        currency = None
    if high is not None and price is not None and high < price:
        high = None
    return price, high, currency, normalize_availability(offer.get("availability")), list_price


def _category(value: Any) -> list[str]:
    if value is None:
        return []
    # A category stated as a link (GODIVA's `<a itemprop="category" href=…>`: microdata reads an
    # `<a>` as its URL) names no category; the page's breadcrumb may.
    if any(isinstance(v, str) and re.match(r"(?i)https?://", v.strip()) for v in _as_list(value)):
        return []
    if isinstance(value, list):
        out = [c for c in (clean_title(v.get("name") if isinstance(v, dict) else v) for v in value) if c]
        return out
    if isinstance(value, dict):
        value = value.get("name")
    text = clean_title(value)
    if not text:
        return []
    # Root first, whichever way the arrow points: Google's taxonomy writes "A > B", Etsy's listings
    # "Jewelry < Necklaces < Pendant Necklaces".
    return [part.strip() for part in re.split(r"\s*(?:>|<|/|›|»|\|)\s*", text) if part.strip()]


def _crumb_name(element: dict[str, Any]) -> Any:
    item = element.get("item")
    return element.get("name") or (item.get("name") if isinstance(item, dict) else None)


def _breadcrumbs(nodes: list[dict[str, Any]]) -> list[str]:
    for node in nodes:
        if "breadcrumblist" in type_names(node):
            elements = sorted(
                (e for e in _as_list(node.get("itemListElement")) if isinstance(e, dict)),
                key=lambda e: int(e.get("position") or 0) if str(e.get("position") or 0).isdigit() else 0,
            )
            elements = [e for e in elements if clean_title(_crumb_name(e))]
            # The trail starts after the site's root ("/", "/no/", "Home"), which is no category;
            # a crumb before it is another trail's (Crutchfield's "See all Drones" link).
            homes = [
                i
                for i, e in enumerate(elements)
                if (
                    i == 0
                    and (
                        clean_title(_crumb_name(e)).lower()
                        in ("home", "start", "accueil", "inicio", "startseite", "hm.com")
                        or home_crumb(e.get("item"))
                    )
                )
                # Further on, only a link to the site's root itself: a "Home" department
                # (`/c/home/…`, `/en_gb/home.html`) or a `/tv` section is a category, and the
                # last crumb, the product's, may link to the root (Diptyque's).
                or (0 < i < len(elements) - 1 and root_crumb(e.get("item")))
            ]
            if homes:
                elements = elements[homes[-1] + 1 :]
            # The trail ends with the product itself on many sites (no link, or its name), with
            # the deepest category on others (Otto): only the product is dropped. Decided before
            # the crumbs that name no category go, so a search trail never leaves the product's
            # name as its category.
            products = {
                clean_title(n.get("name")).casefold()
                for n in nodes
                if type_names(n) & PRODUCT_TYPES and clean_title(n.get("name"))
            }
            # A trail of the product alone (Massimo Dutti's one crumb, its name) states no category.
            last = elements[-1] if elements else {}
            if (len(elements) > 1 and not last.get("item")) or (
                elements and clean_title(_crumb_name(last)).casefold() in products
            ):
                elements = elements[:-1]
            return crumb_path([(clean_title(_crumb_name(e)), e.get("item")) for e in elements]) or []
    return []


# --------------------------------------------------------------------------- fallbacks


def _microdata_products(tree: lxml_html.HtmlElement, url: str) -> list[dict[str, Any]]:
    from lookbench_live.scrapers.extract.microdata import microdata_items

    found = []
    stack = list(microdata_items(tree, url))
    while stack:  # a Product nested in another item (a WebPage's mainEntity) counts too
        node = stack.pop(0)
        if type_names(node) & PRODUCT_TYPES:
            found.append(node)
            continue
        stack.extend(v for v in node.values() if isinstance(v, dict))
    return found


def _page_lang(tree: lxml_html.HtmlElement, metas: _Metas) -> str | None:
    """The page's language tag, with the market's region where the page states one: `lang="en"`
    beside `<meta http-equiv="content-language" content="en-us">` is "en-us" (a region of
    another language than the page's is not this page's). `og:locale` only for a page with no
    `lang`: templates leave Facebook's default "en_US" on English shops of every market."""
    lang = (tree.get("lang") or "").strip() or None
    if lang is None:
        return metas.first("og:locale") or None
    if "-" in lang.replace("_", "-"):
        return lang
    for meta in tree.iter("meta"):
        if (meta.get("http-equiv") or "").lower() != "content-language":
            continue
        tag = (meta.get("content") or "").strip()
        found = re.fullmatch(r"([A-Za-z]{2,3})[-_][A-Za-z]{2}", tag)
        if found and found.group(1).lower() == lang.lower():
            return tag
    return lang


class _Metas:
    """The page's `<meta property|name content>` values by lowercased key, read in one pass
    (an OpenGraph fallback asks for about twenty keys; one scan of the tree per key was a tenth
    of the extraction's CPU)."""

    def __init__(self, tree: lxml_html.HtmlElement):
        self.values: dict[str, list[str]] = {}
        for meta in tree.iter("meta"):
            key = meta.get("property") or meta.get("name")
            content = meta.get("content")
            if key and content is not None:
                self.values.setdefault(key.strip().lower(), []).append(content.strip())

    def first(self, name: str) -> str | None:
        values = self.values.get(name)
        return values[0] if values else None

    def all(self, name: str) -> list[str]:
        return list(self.values.get(name, ()))


def _opengraph_product(
    tree: lxml_html.HtmlElement, metas: _Metas, url: str, canonical: str, lang: str | None
) -> NormalizedProduct | None:
    og_type = (metas.first("og:type") or "").lower()
    amount = metas.first("product:price:amount") or metas.first("og:price:amount")
    if "product" not in og_type and amount is None:
        return None
    title = without_site_name(clean_title(metas.first("og:title")), clean_title(metas.first("og:site_name")))
    description = clean_text(metas.first("og:description"))
    price = parse_price(amount, lang=lang)
    og_url = absolute_url(metas.first("og:url"), url)
    headings = {" ".join(h.text_content().split()).casefold() for h in tree.iter("h1")}
    # A removed product's page keeps `og:type` product with a placeholder ("PDP", price "null",
    # og:url the home page): a product needs a price, or a title the page shows as its heading.
    if og_url and urlsplit(og_url).path in ("", "/"):
        return None
    if not title or (not price and title.casefold() not in headings):
        return None
    currency = metas.first("product:price:currency") or metas.first("og:price:currency")
    sale = parse_price(metas.first("product:sale_price:amount"), lang=lang)
    compare = None
    if sale is not None and price is not None and sale < price:
        price, compare = sale, price
    page_text = _page_text(tree)
    varying = _varying(tree)
    path_id = urlsplit(canonical).path.rstrip("/") or canonical
    legacy_id = metas.first("product:retailer_item_id") or path_id
    # No retailer id: the item number the URL ends in; the path key stays an alias.
    product_id = _identifier(metas.first("product:retailer_item_id")) or url_item_id(path_id) or path_id
    return NormalizedProduct(
        product_id=product_id,
        id_aliases=[legacy_id] if legacy_id != product_id else [],
        url=canonical,
        platform="schema_org",
        title=title,
        brand=clean_title(metas.first("product:brand") or metas.first("og:brand")),
        price=price if price else None,
        price_max=price if price else None,
        compare_at_price=compare,
        currency=currency.strip().upper()
        if currency and re.fullmatch(r"\s*[A-Za-z]{3}\s*", currency)
        else None,
        availability=normalize_availability(
            metas.first("product:availability") or metas.first("og:availability")
        ),
        category_path=_category(metas.first("product:category")),
        color=clean_title(metas.first("product:color"))
        or color_from_url(url)
        or find_color(description, page_text)
        or title_color(title)
        or title_color(clean_title(tree.findtext(".//title"))),
        material=clean_title(metas.first("product:material"))
        or find_material(description, None if "material" in varying else page_text),
        description=description,
        images=image_urls(metas.all("og:image") + metas.all("og:image:url"), url),
        raw={"source": "opengraph", "url": url},
        sources={"title": "meta:og:title", "price": "meta:product:price:amount"}
        if price
        else {"title": "meta:og:title"},
    )


def _canonical(tree: lxml_html.HtmlElement, url: str, metas: _Metas) -> str:
    for link in tree.iter("link"):
        if (link.get("rel") or "").strip().lower() == "canonical" and link.get("href"):
            found = absolute_url(link.get("href"), url)
            if found:
                return _strip_fragment(found)
    og = absolute_url(metas.first("og:url"), url)
    return _strip_fragment(og or url)


_VARIANT_ATTR = {"material": re.compile(r"(?i)material|mati[eè]re|(?:^|[_\s-])mat(?:$|[_\s-])")}


def _varying(tree: lxml_html.HtmlElement) -> frozenset[str]:
    """The materials the shopper chooses in a variant `<select>` (WooCommerce's `pa_mat`, a
    `<label for>` reading "Material"): the page's attribute table then lists the options
    ("Material: Jeans-Canvas, Leather, PVC"), not the product's material, and is not read for
    it. (A colour select's own row is left out of the page text, `_page_text`; a colour table row
    elsewhere states the shown variant's colour, Otto's "Farbe" | "schwarz, marine, olivgrün".)"""
    labels = {label.get("for"): label.text_content() for label in tree.iter("label") if label.get("for")}
    found = set()
    for select in tree.iter("select"):
        names = " ".join(select.get(a) or "" for a in ("name", "id", "data-attribute_name", "aria-label"))
        names += " " + labels.get(select.get("id"), "")  # <label for=…>Farbe</label>
        found.update(attr for attr, pattern in _VARIANT_ATTR.items() if pattern.search(names))
    return frozenset(found)


def _without_brand(title: str | None, brand: str | None) -> str | None:
    """The title after a leading brand: "Cream Co. Su Bazlı Moisturizer" names no colour, its
    brand does ("Cream")."""
    if title and brand and title.casefold().startswith(brand.casefold()):
        return title[len(brand) :].strip(" -|,:") or None
    return title


# Relative to the element read (the body, or one product's item).
_MENUS = ".//nav[not(ancestor::main or ancestor::article)]|.//*[@role='navigation' or @role='menu' or @role='menubar']"


def _checked_in_group(option: lxml_html.HtmlElement) -> bool:
    """Whether a swatch's group (its `role="radiogroup"`, else its parent) marks one as chosen."""
    group = next((a for a in option.iterancestors() if a.get("role") == "radiogroup"), option.getparent())
    return group is not None and bool(group.xpath(".//*[@role='radio' and @aria-checked='true']"))


def _page_text(
    tree: lxml_html.HtmlElement,
    root: lxml_html.HtmlElement | None = None,
    cards: set[lxml_html.HtmlElement] | None = None,
) -> str | None:
    """The page's visible text (or `root`'s) for labelled colour and material fields. A variant
    `<select>` is a choice the shopper makes, not what the page states: it is left out with its
    options, the table row that holds it (WooCommerce's "Color" | select + "Clear" link) and the
    `<label for>` that names it (uniqz's "Farbe" over the next field's "Größe"). Product cards
    are other products' (Hermès's "Perfect partners" row, each card's "Color: White")."""
    body = tree.find("body") if root is None else root
    if body is None:
        return None
    from lookbench_live.scrapers.extract.html_fallback import page_cards

    choice: set[lxml_html.HtmlElement] = set()
    for card in page_cards(body) if cards is None else cards:
        choice.update(card.iter())
    ids = set()
    for select in body.iter("select"):
        row = next((a for a in list(select.iterancestors())[:3] if a.tag == "tr"), select)
        choice.update(row.iter())
        if select.get("id"):
            ids.add(select.get("id"))
    for label in body.iter("label"):
        if label.get("for") in ids:
            choice.update(label.iter())
    # The site's menus are no field of this product (Crate & Barrel's "Outdoor Furniture by
    # Material" | "Metal" | "Wood" in its top navigation).
    for menu in body.xpath(_MENUS):
        choice.update(menu.iter())
    from lookbench_live.scrapers.extract.html_fallback import named_menu

    for element in body.xpath(".//*[@class or @id]"):  # a menu is named by its class or id
        if element not in choice and named_menu(element):
            choice.update(element.iter())
    # Swatches the shopper picks from (`<a role="radio" title="Heather Grey">` beside "Cardinal"
    # under "Color:"): choices too, except the one the page marks as chosen.
    # Where they stood, a mark no field takes for its value: a "Color:" over swatches none of
    # which is marked read the next line instead ("Size", "Black Friday: extra 10% off").
    # A group with one marked keeps that one's name in the mark's place.
    options = body.xpath(".//*[@role='radio' and not(@aria-checked='true')]")
    for option in options:
        choice.update(option.iter())
    unmarked = {o for o in options if not _checked_in_group(o)}
    parts = []
    for element in body.iter():
        if element.tag in ("script", "style", "noscript") or not isinstance(element.tag, str):
            continue
        if element in choice:
            outside = element.getparent() is not None and element.getparent() not in choice
            if outside and element in unmarked and parts[-1:] != [CHOICES]:
                parts.append(CHOICES)
            if outside and element.tail and element.tail.strip():
                parts.append(element.tail.strip())
            continue
        if element.text and element.text.strip():
            parts.append(element.text.strip())
        if element.tail and element.tail.strip():
            parts.append(element.tail.strip())
    return clean_text("\n".join(parts)[:MAX_PAGE_TEXT])


def _strip_fragment(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, parts.query, ""))


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def _strings(value: Any) -> list[str]:
    out = []
    for item in _as_list(value):
        if isinstance(item, dict):
            item = item.get("name") or item.get("@value")
        text = clean_title(item) if isinstance(item, str | int | float) else None
        if text:
            out.append(text)
    return out


def _scalar(value: Any) -> Any:
    if isinstance(value, list):
        return value[0] if value else None
    if isinstance(value, dict):
        return value.get("@value") or value.get("name")
    return value
