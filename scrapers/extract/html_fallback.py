"""The product of a page with no usable structured data, read from what the page shows.

Used only when JSON-LD, microdata and OpenGraph give no product (`schema_org.extract_schema_org`).
Each fact comes from the first source that states it, in this order, and `product.sources`
records which one ("itemprop", "meta", "html:title-element", "html:price-element", "html:label"…):

- title: a loose `itemprop="name"`; an element whose id/class names a product title
  (`#productTitle`, `.product-name`…); the page's only meaningful `<h1>`; `og:title`.
- price: a loose `itemprop="price"`; the first element whose id (then, failing that, class) names
  a price (not a list, old, "was", saving or shipping price) whose text is one amount with a
  currency sign or code.
- currency: `itemprop="priceCurrency"`, else the sign or code written in that price text
  (€ EUR, £ GBP, "$" USD only on an `en-US` page, CHF, kr only with a Nordic language…).
- image: a loose `itemprop="image"`; `og:image`; the first `<img>` whose id/class names the main
  product image (a `data:` placeholder is skipped for its `data-old-hires` / `data-src`).
- brand: `itemprop="brand"`, `product:brand` / `og:brand`, an element whose id/class names a brand
  or byline stating "Visit the X Store", "Besuche den X-Store", "Brand: X"… (never an author).
- identifier: a loose `itemprop` sku / productID / mpn / gtin; a hidden `ASIN` / `sku` input; a
  labelled line ("SKU: …", "Item #: …", "Art.-Nr.: …", "ASIN: …"); the ASIN of an Amazon
  product URL (`/dp/<ASIN>`).
- availability: `itemprop="availability"`, `og:availability`, else the text of an element whose
  id/class names availability or stock ("In Stock", "Auf Lager", "En stock", "Ausverkauft"…).

A product is made only when the page shows a title and a price and is a product page: a buy
button or form (add to cart / basket / bag, "In den Warenkorb", "Ajouter au panier",
"Añadir a la cesta"…) or `og:type` product. Articles, recipes, listings of prices without a buy
control, and removed products ("PDP" placeholders) give nothing: a wrong product is worse than none.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from lxml import html as lxml_html

from lookbench_live.scrapers.extract.model import NormalizedProduct
from lookbench_live.scrapers.extract.values import (
    absolute_url,
    clean_title,
    normalize_availability,
    parse_price,
)

_TITLE_HINT = re.compile(r"(?i)product[-_ ]?(?:title|name)|^title$|item[-_ ]?title|pdp[-_ ]?title")
_PRICE_HINT = re.compile(r"(?i)price|preis|prix|precio|prezzo")
_NOT_PRICE = re.compile(
    r"(?i)list|old|was|strike|rrp|uvp|save|saving|shipping|delivery|per[-_]?unit|basket|cart|range|"
    r"hidden|secondary|compare|before|original"
)
_IMAGE_HINT = re.compile(r"(?i)landing|main|primary|hero|product[-_ ]?(?:image|img|photo)|zoom|gallery")
_BRAND_HINT = re.compile(r"(?i)brand|byline|manufacturer|marke|marque|marca")
_STOCK_HINT = re.compile(r"(?i)availability|stock|lieferbar|dispon")
_BUY = re.compile(
    r"(?i)add(?:ing)? to (?:cart|basket|bag|trolley)|buy now|in den (?:warenkorb|einkaufswagen)|"
    r"jetzt kaufen|ajouter au panier|acheter|añadir a la cesta|comprar|aggiungi al carrello|"
    r"in winkelwagen|lägg i varukorgen"
)
_BUY_ATTR = re.compile(r"(?i)add[-_]?to[-_]?(?:cart|basket|bag)|buy[-_]?now|addtocart|buybox")
_BRAND_TEXT = re.compile(
    r"(?i)^(?:visit the (?P<a>.+?) store|besuche den (?P<b>.+?)-store|visita la tienda de (?P<c>.+)|"
    r"visiter la boutique (?P<d>.+)|(?:brand|marke|marque|marca)\s*:\s*(?P<e>.+))$"
)
_AUTHOR = re.compile(r"(?i)^(?:by|von|de|par|di|door)\s|\(|:|\d")
_ID_LABEL = re.compile(
    r"(?im)(?:^|\s)(?:sku|upc|ean|gtin|mpn|isbn(?:-1[03])?|item\s*(?:#|no\.?|number)|art\.?-?nr\.?|"
    r"artikelnummer|asin|product code|style\s*#|r[ée]f(?:[ée]rence)?\.?|referencia|c[óo]digo|"
    r"kod produktu)\s*[:#]?\s*"
    r"(?P<id>(?=[\w-]*\d)[A-Z0-9][A-Z0-9_-]{3,30})\b"
)
_OUT = re.compile(
    r"(?i)out of stock|sold out|not available|unavailable|currently unavailable|ausverkauft|"
    r"nicht (?:verfügbar|lieferbar)|épuisé|rupture de stock|non disponible|agotado|no disponible"
)
_IN = re.compile(r"(?i)in stock|auf lager|lieferbar|vorrätig|en stock|disponible|available|in magazzino")
# Signs and words that name one currency, the longer first ("US$" before "S$", "CA$" before "A$").
# "$" alone (USD, CAD, AUD, MXN, ARS…), "¥" (JPY or CNY) and "kr" (SEK, NOK, DKK, ISK) do not.
_SIGNS = (
    ("US$", "USD"), ("CA$", "CAD"), ("AU$", "AUD"), ("NZ$", "NZD"), ("HK$", "HKD"), ("MX$", "MXN"),
    ("R$", "BRL"), ("S$", "SGD"), ("A$", "AUD"), ("C$", "CAD"), ("€", "EUR"), ("£", "GBP"),
    ("₹", "INR"), ("₽", "RUB"), ("руб", "RUB"), ("₴", "UAH"), ("грн", "UAH"), ("₺", "TRY"),
    ("₩", "KRW"), ("zł", "PLN"), ("Kč", "CZK"), ("kronor", "SEK"), ("CHF", "CHF"), ("¥", None),
)  # fmt: skip
_CODE = re.compile(
    r"\b(EUR|USD|GBP|CHF|SEK|NOK|DKK|PLN|CZK|HUF|JPY|CNY|CAD|AUD|NZD|RUB|UAH|INR|BRL|MXN|ARS|TRY|ZAR|KRW)\b"
)
_AMOUNT = re.compile(r"\d[\d.,'\u00a0\u202f ]*")


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
    if og_type and "product" not in og_type:
        return None  # an article, a profile, a video: the page says what it is
    sources: dict[str, str] = {}
    cards = _cards(body)
    title = _pick(sources, "title", _itemprop_text(itemprops, "name"), "itemprop")
    title = title or _pick(sources, "title", _title_element(body), "html:title-element")
    title = title or _pick(sources, "title", clean_title(_first(metas, "og:title")), "meta:og:title")
    price_text, price_source = _price_text(body, itemprops, cards)
    price = parse_price(price_text, lang=lang) if price_text else None
    product_page = "product" in og_type or _buy_controls(body, cards) or _stock_element(body, cards)
    if not title or not price or not product_page:
        return None  # not a product page, or a listing (its prices are all in product cards)
    sources["price"] = price_source
    currency = _currency(_itemprop_text(itemprops, "priceCurrency")) or _currency(
        _first(metas, "product:price:currency")
    )
    if currency:
        sources["currency"] = "itemprop/meta"
    else:
        currency = _pick(sources, "currency", currency_of(price_text, lang), price_source)
    images = _images(body, itemprops, metas, url, sources, title)
    brand = _pick(sources, "brand", _itemprop_text(itemprops, "brand"), "itemprop")
    brand = brand or _pick(
        sources, "brand", clean_title(_first(metas, "product:brand") or _first(metas, "og:brand")), "meta"
    )
    brand = brand or _pick(sources, "brand", heading_brand(body), "html:heading-brand")
    brand = brand or _pick(sources, "brand", _brand_element(body), "html:brand-element")
    product_id = _pick(sources, "product_id", _stated_id(body, itemprops), "html:id")
    product_id = product_id or _pick(sources, "product_id", url_identifier(canonical), "url:asin")
    availability = normalize_availability(
        _itemprop_text(itemprops, "availability")
    ) or normalize_availability(_first(metas, "og:availability") or _first(metas, "product:availability"))
    if availability:
        sources["availability"] = "itemprop/meta"
    else:
        availability = _pick(
            sources, "availability", _stock_element(body, cards), "html:availability-element"
        )
    return NormalizedProduct(
        product_id=product_id or urlsplit(canonical).path.rstrip("/") or canonical,
        url=canonical,
        platform="html",
        title=title,
        brand=brand,
        price=price,
        price_max=price,
        currency=currency,
        availability=availability,
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


def currency_of(text: str | None, lang: str | None) -> str | None:
    """ISO currency a price text writes ("£49.00" GBP, "EUR 12,99", "209,00€"); "$" only on a
    US English page (it is also CAD, AUD, MXN, ARS…); None when unsure."""
    if not text:
        return None
    code = _CODE.search(text)
    if code:
        return code.group(1)
    for sign, iso in _SIGNS:
        if sign in text:
            return iso
    if "$" in text and (lang or "").lower().replace("_", "-") == "en-us":
        return "USD"
    return None


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


def _hint(element: lxml_html.HtmlElement) -> str:
    return f"{element.get('id') or ''} {element.get('class') or ''}"


def _text(element: lxml_html.HtmlElement) -> str:
    return " ".join(element.text_content().split())


def _heading_text(element: lxml_html.HtmlElement) -> str:
    """A heading's words: its parts joined by a space ("<a>Maison Francis Kurkdjian</a><span>Gentle
    Fluidity Gold</span>" is two phrases, not "KurkdjianGentle"). Only for headings: a price's
    parts ("649<span>.</span>00") must stay joined."""
    return " ".join(" ".join(element.itertext()).split())


def _title_element(body: lxml_html.HtmlElement) -> str | None:
    for element in body.iter():
        if isinstance(element.tag, str) and _TITLE_HINT.search(element.get("id") or "") and _text(element):
            return clean_title(_text(element))
    for element in body.iter():
        if isinstance(element.tag, str) and any(
            _TITLE_HINT.search(c) for c in (element.get("class") or "").split()
        ):
            text = _text(element)
            if text and len(text) < 300:
                return clean_title(text)
    headings = [_heading_text(h) for h in body.iter("h1")]
    headings = [h for h in headings if 3 <= len(h) <= 300 and not _BUY.search(h)]
    return clean_title(headings[0]) if len(headings) == 1 else None


def page_heading(body: lxml_html.HtmlElement) -> str | None:
    """The product name the page shows as its heading: an element whose id names a product
    title, else the page's one meaningful `<h1>`. For a structured product that states no name;
    class names are not used here, as "product-name" also marks every recommended product."""
    for element in body.iter():
        if isinstance(element.tag, str) and _TITLE_HINT.search(element.get("id") or "") and _text(element):
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
    for attr in ("id", "class"):
        for element in body.iter():
            if not isinstance(element.tag, str):
                continue
            hint = element.get(attr) or ""
            if not _PRICE_HINT.search(hint) or _NOT_PRICE.search(_hint(element)):
                continue
            text = _text(element)
            if not text or len(text) > 40 or len(_AMOUNT.findall(text)) != 1 or _in_card(element, cards):
                continue
            if not (_CODE.search(text) or any(sign in text for sign, _ in _SIGNS) or "$" in text):
                continue
            where = f"#{hint}" if attr == "id" else f".{hint.split()[0]}"
            return text, f"html:price-element {element.tag}{where}"
    return None, ""


def _images(
    body: lxml_html.HtmlElement,
    itemprops: dict[str, list[Any]],
    metas: dict[str, list[str]],
    url: str,
    sources: dict[str, str],
    title: str,
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
    for img in body.iter("img"):  # the picture the page labels with the product's name
        found = _img_url(img, url)
        if found and title and _fold(img.get("alt")) == _fold(title):
            sources["image"] = "html:image-alt"
            return [found]
    for img in body.iter("img"):
        holder = img.getparent()
        hints = _hint(img) + " " + (_hint(holder) if holder is not None else "")
        if not _IMAGE_HINT.search(hints):
            continue
        found = _img_url(img, url)
        if found:
            sources["image"] = "html:image-element"
            return [found]
    return []


def _img_url(img: lxml_html.HtmlElement, url: str) -> str | None:
    """The picture's URL; a `data:` placeholder's real one is in `data-old-hires` / `data-src`."""
    for attr in ("src", "data-old-hires", "data-src", "data-zoom-image", "data-large"):
        found = absolute_url(img.get(attr), url)
        if found and not found.lower().endswith((".gif", ".svg")):
            return found
    return None


def _fold(text: str | None) -> str:
    return " ".join((text or "").casefold().split())


def _brand_element(body: lxml_html.HtmlElement) -> str | None:
    for element in body.iter():
        if not isinstance(element.tag, str) or not _BRAND_HINT.search(_hint(element)):
            continue
        text = _text(element)
        match = _BRAND_TEXT.match(text) if text else None
        if match:
            return clean_title(next(v for v in match.groupdict().values() if v))
        # A byline that is only a name ("ChangM"); "by Mat Follas (Author)" names an author.
        if text and len(text) <= 40 and len(text.split()) <= 4 and not _AUTHOR.search(text):
            return clean_title(text)
    return None


def _stated_id(body: lxml_html.HtmlElement, itemprops: dict[str, list[Any]]) -> str | None:
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
    match = _ID_LABEL.search(visible_text(body))
    return match.group("id") if match else None


def url_identifier(url: str) -> str | None:
    """The id an Amazon product URL states (`/dp/<ASIN>`, `/gp/product/<ASIN>`)."""
    parts = urlsplit(url)
    if "amazon." not in parts.netloc.lower():
        return None
    found = re.search(r"/(?:dp|gp/product)/([A-Z0-9]{10})(?:[/?]|$)", parts.path + "/")
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


def _stock_element(body: lxml_html.HtmlElement, cards: set[lxml_html.HtmlElement]) -> str | None:
    """The stock an element named for it states: by id first (one per page), then by class."""
    for attr in ("id", "class"):
        for element in body.iter():
            if not isinstance(element.tag, str) or not _STOCK_HINT.search(element.get(attr) or ""):
                continue
            if _in_card(element, cards):
                continue
            text = _text(element)
            if not text or len(text) > 200:
                continue
            if _OUT.search(text):
                return "OutOfStock"
            if _IN.search(text):
                return "InStock"
    return None


def _buy_controls(body: lxml_html.HtmlElement, cards: set[lxml_html.HtmlElement]) -> int:
    """Buy buttons, links and forms outside product cards (the page's own product's)."""
    count = 0
    for element in body.iter("button", "input", "a"):
        if _in_card(element, cards):
            continue
        label = element.get("value") or element.get("title") or _text(element)
        named = _BUY_ATTR.search(_hint(element)) or _BUY_ATTR.search(element.get("name") or "")
        if named or (label and len(label) < 60 and _BUY.search(label)):
            count += 1
    return count


_MONEY_SIGN = "|".join(re.escape(sign) for sign, _ in _SIGNS) + r"|\$|" + _CODE.pattern
_MONEY = re.compile(rf"(?:{_MONEY_SIGN})\s?\d|\d\s?(?:{_MONEY_SIGN})")


def _cards(body: lxml_html.HtmlElement) -> set[lxml_html.HtmlElement]:
    """Product cards: three or more sibling elements of one tag and class, each a short block
    showing a picture and a price (a listing's items, a "recently viewed" or "bought together"
    row). Their prices, titles and
    buttons are other products'."""
    groups: dict[tuple[Any, str, str], list[lxml_html.HtmlElement]] = {}
    for parent in body.iter():
        if not isinstance(parent.tag, str):
            continue
        for element in parent:  # siblings: a row of cards shares its parent
            if (
                isinstance(element.tag, str)
                and element.get("class")
                and element.tag not in ("span", "p", "a")
            ):
                groups.setdefault((parent, element.tag, element.get("class") or ""), []).append(element)
    # The elements themselves, not id()s: lxml makes a new proxy for a node no one holds, so an
    # id() could name another element later; holding them keeps each node's one proxy.
    out: set[lxml_html.HtmlElement] = set()
    for members in groups.values():
        if len(members) >= 3:
            priced = [
                m
                for m in members
                if len(_text(m)) < 600 and _MONEY.search(_text(m)) and next(m.iter("img"), None) is not None
            ]
            if len(priced) >= 3:
                out.update(priced)
    return out


def _in_card(element: lxml_html.HtmlElement, cards: set[lxml_html.HtmlElement]) -> bool:
    return any(a in cards for a in (element, *element.iterancestors())) if cards else False


def _currency(value: str | None) -> str | None:
    return value.strip().upper() if value and re.fullmatch(r"\s*[A-Za-z]{3}\s*", value) else None
