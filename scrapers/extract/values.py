"""Pure normalizers for the messy values retailers publish: prices, availability, brands,
image lists, text, colours and materials.

Every function takes what a page or API gave (a string, a number, a dict, a list or None)
and returns a clean value or None; none of them raises on bad input.
"""

from __future__ import annotations

import functools
import html
import re
import string
from collections.abc import Iterable
from decimal import Decimal, InvalidOperation
from typing import Any
from urllib.parse import parse_qs, parse_qsl, urljoin, urlsplit

# Locales whose prices are written "1.234,56": a lone "." followed by exactly three digits
# is a thousands separator there ("$3.499" in Colombia is three thousand four hundred).
DOT_THOUSANDS_LANGS = frozenset(
    [
        "de",
        "es",
        "pt",
        "it",
        "nl",
        "id",
        "tr",
        "da",
        "nb",
        "no",
        "sv",
        "fi",
        "pl",
        "cs",
        "sk",
        "sl",
        "hr",
        "sr",
        "ro",
        "hu",
        "el",
        "vi",
        "is",
        "et",
        "lv",
        "lt",
        "bg",
        "uk",
        "ru",
    ]
)
DOT_THOUSANDS_CURRENCIES = frozenset(["IDR", "COP", "CLP", "ARS", "VND", "ISK", "HUF", "PYG", "UYU"])

_NUMBER = re.compile(r"-?\d[\d.,'\u00a0\u202f ]*")


_SCRIPT_STYLE = re.compile(r"<(script|style)\b.*?</\1>", re.S | re.I)
_LINE_BREAK_TAGS = re.compile(r"<br\s*/?>|</p>|</li>|</div>", re.I)
_TAG = re.compile(r"<[^>]+>")
_BLANKS = re.compile(r"[ \t\r\f\v\u00a0\u200b]+")
_NEWLINE_RUN = re.compile(r"\s*\n\s*")


def clean_text(value: Any) -> str | None:
    """Unescape HTML entities (twice-escaped ones too), drop tags, collapse whitespace."""
    if value is None:
        return None
    if isinstance(value, list):
        value = " ".join(str(v) for v in value if v is not None)
    text = str(value)
    for _ in range(2):  # "&amp;quot;" is common in CMS exports
        if "&" not in text:
            break
        unescaped = html.unescape(text)
        if unescaped == text:
            break
        text = unescaped
    if "<" in text and ">" in text:
        text = _SCRIPT_STYLE.sub(" ", text)
        text = _LINE_BREAK_TAGS.sub("\n", text)
        text = _TAG.sub(" ", text)
        text = html.unescape(text)
    text = _BLANKS.sub(" ", text)
    text = _NEWLINE_RUN.sub("\n", text).strip()
    return text or None


def clean_title(value: Any) -> str | None:
    text = clean_text(value)
    return " ".join(text.split()) if text else None


def completed_title(title: str | None, *fuller: str | None) -> str | None:
    """A title the page cut short ("… Car Seat Pad Pain...", a heading shortened to its box)
    completed by another statement of it that starts with the same words (`og:title`); else
    the title as it is."""
    if not title or not title.endswith(("...", "…")):
        return title
    stem = title.rstrip(".…").rstrip().casefold()
    for other in fuller:
        if not other or len(other) <= len(stem) or not other.casefold().startswith(stem):
            continue
        # The name goes on in words; a name that itself ends in "..." followed by the site's
        # name ("And Then There Were None... - Book Nook") is complete already.
        if other.endswith(("...", "…")) or re.match(r"[.…]*\s+[-|–—·•]\s", other[len(stem) :]):
            continue
        return other
    return title


def without_site_name(title: str | None, site_name: str | None) -> str | None:
    """`title` less a trailing site name the page declares (`og:site_name`) after a separator:
    "Pink camera by メルカリ", "Linen shirt | Shop", "Linen shirt - Shop". Shops append their own
    name to the titles they share; it is never the product's. The title is kept whole when
    nothing else would be left."""
    if not title or not site_name:
        return title
    found = re.fullmatch(
        r"(?P<rest>.+?)\s*(?:\s(?:by|on|at|bei|chez|en|em|auf)\s|[|\-–—:·•｜]|::)\s*" + re.escape(site_name),
        title,
        flags=re.IGNORECASE,
    ) or re.fullmatch(
        # After a bar, the site's name and its tagline: "Toro Lounge Chair | Rove Concepts Rove
        # Concepts Mid-Century Furniture" (a bar parts a page's title; a dash may be the name's).
        r"(?P<rest>.+?)\s*[|｜]\s*" + re.escape(site_name) + r"\s.*",
        title,
        flags=re.IGNORECASE,
    )
    rest = found.group("rest").strip() if found else ""
    return rest if len(rest) >= 2 else title


# Currencies whose shops never price in fractions, nor below a thousand units (a thousand dong,
# rupiah, won or guaraní is cents): "439.000" in one is 439 000, a dot before a group of three.
_THOUSANDS_ONLY = frozenset({"VND", "IDR", "KRW", "PYG"})


def whole_amount(price: Decimal | None, currency: str | None) -> Decimal | None:
    """`price` read again for its currency: "439.000 ₫" on a page whose language tag says
    English (`parse_price` read it as 439) is 439 000 dong; any other price as it was."""
    if price is None or currency not in _THOUSANDS_ONLY:
        return price
    exponent = price.as_tuple().exponent
    if exponent == -3 and 0 < price < 1000:
        return price.scaleb(3)
    return price


def parse_price(value: Any, *, minor_unit: int | None = None, lang: str | None = None) -> Decimal | None:
    """A price as a Decimal, or None when there is none.

    Accepts numbers, numeric strings ("26.00"), display strings ("26,00 €", "$1,299.50",
    "1.234,56 kr"), and minor units (`minor_unit=2`: 2600 → 26.00). `lang` (a page's
    language, e.g. "es-CO") decides the one ambiguous case: a single "." followed by
    exactly three digits is a thousands separator in dot-thousands locales.
    """
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, dict):  # {"amount": …} / {"value": …} shapes
        for key in ("@value", "amount", "value", "price"):
            if key in value:
                return parse_price(value[key], minor_unit=minor_unit, lang=lang)
        return None
    if isinstance(value, list):
        prices = [
            p for p in (parse_price(v, minor_unit=minor_unit, lang=lang) for v in value) if p is not None
        ]
        return min(prices) if prices else None
    if isinstance(value, int | float):
        if value != value or value in (float("inf"), float("-inf")):
            return None
        number = Decimal(str(value))
    else:
        text = clean_text(value)
        if not text:
            return None
        match = _NUMBER.search(text)
        if not match:
            return None
        number = _parse_number_text(match.group(0), lang, minor_unit is not None)
        if number is None:
            return None
    if minor_unit:
        number = number.scaleb(-int(minor_unit))
    if number < 0:
        return None
    return number


def _parse_number_text(raw: str, lang: str | None, integer_expected: bool) -> Decimal | None:
    text = re.sub(r"[\s\u00a0\u202f']", "", raw).rstrip(".,")
    if not text:
        return None
    dots, commas = text.count("."), text.count(",")
    if dots and commas:
        # The separator that comes last is the decimal one.
        if text.rfind(",") > text.rfind("."):
            text = text.replace(".", "").replace(",", ".")
        else:
            text = text.replace(",", "")
    elif commas:
        head, _, tail = text.rpartition(",")
        if commas > 1 or (len(tail) == 3 and not integer_expected and head not in ("", "0", "-0")):
            text = text.replace(",", "")  # "1,299" or "1,234,567"
        else:
            text = text.replace(",", ".")  # "26,00", "26,5"
    elif dots:
        head, _, tail = text.rpartition(".")
        if dots > 1:
            text = text.replace(".", "")  # "1.234.567"
        elif len(tail) == 3 and head not in ("", "0", "-0") and _dot_thousands(lang):
            text = text.replace(".", "")
    try:
        return Decimal(text)
    except InvalidOperation:
        return None


def _dot_thousands(lang: str | None) -> bool:
    if not lang:
        return False
    lang = lang.strip()
    if lang.upper() in DOT_THOUSANDS_CURRENCIES:
        return True
    return lang.lower().replace("_", "-").split("-")[0] in DOT_THOUSANDS_LANGS


def decimal_text(value: Decimal | None) -> str | None:
    """Decimal as plain text without exponent ("26.00", "3499")."""
    if value is None:
        return None
    text = format(value, "f")
    return text


_AVAILABILITY = {
    "instock": "InStock",
    "in stock": "InStock",
    "in_stock": "InStock",
    "available": "InStock",
    "limitedavailability": "InStock",
    "onlineonly": "InStock",
    "instoreonly": "InStock",
    "preorder": "InStock",
    "presale": "InStock",
    "backorder": "InStock",
    "madetoorder": "InStock",
    "outofstock": "OutOfStock",
    "out of stock": "OutOfStock",
    "out_of_stock": "OutOfStock",
    "soldout": "OutOfStock",
    "sold out": "OutOfStock",
    "discontinued": "OutOfStock",
    "unavailable": "OutOfStock",
}


def normalize_availability(value: Any) -> str | None:
    """ "http://schema.org/InStock", "InStock", "instock", "in stock", True → "InStock"; etc."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "InStock" if value else "OutOfStock"
    if isinstance(value, list):
        found = [normalize_availability(v) for v in value]
        return "InStock" if "InStock" in found else ("OutOfStock" if "OutOfStock" in found else None)
    if isinstance(value, dict):
        return normalize_availability(value.get("@id") or value.get("name"))
    text = str(value).strip().rstrip("/")
    text = text.rsplit("/", 1)[-1].rsplit(":", 1)[-1].strip().lower()
    return _AVAILABILITY.get(text) or _AVAILABILITY.get(text.replace("-", ""))


def merge_availability(values: Iterable[str | None]) -> str | None:
    """InStock when anything can be bought; OutOfStock when all stated are out; else None."""
    seen = [v for v in values if v]
    if "InStock" in seen:
        return "InStock"
    return "OutOfStock" if seen else None


# What marketplaces and spec tables write in a brand's field for an item that has none (eBay's
# "Unbranded" and "Does not apply", Amazon's "Generic", Mercado Libre's "Genérico"). Not "No
# Brand" or "No Name": E-Mart's and Loblaw's own brands.
_PLACEHOLDER_BRAND = re.compile(
    r"(?i)^\s*(?:un-?branded|non-?branded|generic|gen[eé]ric[oa]|n/?a|none|unknown|"
    r"not applicable|does not apply|sin marca|ohne marke|sans marque|senza marca|-+)\s*\.?\s*$"
)


# A shop's campaign written in its brand field (Shopify's `vendor`, which merchants also use to
# group products): a sale event names no brand ("HR24 NOVEMBER SALE"; never "Sale&Pepe"), nor
# does a season alone ("Spring/Summer 2025"); a season after the name is the collection's, not
# the brand's ("STAUD SUMMER 2025" is STAUD's).
_CAMPAIGN_BRAND = re.compile(
    r"(?i)(?<![\w&'])(?:sale|clearance|black friday|cyber monday|soldes|rebajas|saldi|ausverkauf)(?![\w&'])"
)
_SEASON = (
    r"(?:pre-?)?(?:spring|summer|fall|autumn|winter|holiday|resort|cruise)(?:[\s/-]+(?:summer|winter))?"
    r"[\s'-]+(?:20)?\d{2}|(?:ss|fw|aw|pf)[\s'-]?(?:20)?\d{2}"
)
_SEASON_ONLY = re.compile(rf"(?i)^\s*(?:{_SEASON})\s*$")
_SEASON_AFTER = re.compile(rf"(?i)[\s,]+(?:{_SEASON})\s*$")


def known_brand(value: str | None) -> str | None:
    """A brand field's value, or None when it says the item has no brand ("Unbranded") or names
    a sale event or only a season; without a season written after the name."""
    if (
        value is None
        or _PLACEHOLDER_BRAND.match(value)
        or _CAMPAIGN_BRAND.search(value)
        or _SEASON_ONLY.match(value)
    ):
        return None
    return _SEASON_AFTER.sub("", value).strip() or None


def normalize_brand(value: Any, index: dict[str, dict[str, Any]] | None = None) -> str | None:
    """A brand given as a string, an object (`Brand`, `Organization`, `Thing`), an `@id`, a list,
    or the URL of the brand's page (its last path segment, "…/brands/activelle" is "activelle")."""
    if value is None:
        return None
    if isinstance(value, list):
        for item in value:
            brand = normalize_brand(item, index)
            if brand:
                return brand
        return None
    if isinstance(value, dict):
        name = value.get("name")
        if name is None and index and value.get("@id") in index:
            name = index[value["@id"]].get("name")
        if isinstance(name, list | dict):
            return normalize_brand(name, index)
        return clean_title(name)
    if isinstance(value, str) and re.match(r"(?i)https?://", value.strip()):
        # `<link itemprop="brand" href="…/brands/activelle">`: the brand page's last path segment
        segment = urlsplit(value.strip()).path.rstrip("/").rsplit("/", 1)[-1]
        return clean_title(segment.replace("-", " ").replace("_", " ")) if segment else None
    return clean_title(value)


# A page served by one script for every item (`/item.htm?id=562283240178`,
# `/DetailView/Item.asp?goodsCode=1155357080`, `/product.php?id=7`): its path names no item,
# the query parameter does. A Java servlet's name has no suffix (IBM WebSphere Commerce's
# `/ProductDisplay?storeId=10161&productId=70682436`, `/ItemDetail?…`): capitalised words ending
# in a view's name, never a product's slug written in capitals (`/products/LinenShirt`).
_SCRIPT_PAGE = re.compile(
    r"(?i)^[a-z_]{1,24}\.(?:html?|php|aspx?|jsp|do|cgi)$|^(?-i:(?:[A-Z][a-z]+){1,3}(?:Display|Details?|View))$"
)
_ID_PARAM = re.compile(
    r"(?i)^(?:id|item(?:_?(?:id|no|code))?|goods_?(?:code|no|id)|product_?(?:id|no|code)|prod_?id|pid|sku)$"
)
_ID_VALUE = re.compile(r"(?=[\w-]*\d)[A-Za-z0-9][\w-]{2,40}")


def url_tokens(url: str, *, query: bool) -> set[str]:
    """The parts of a URL an id can be stated by: its path's segments split at "/", "-", "_", "."
    (`…/A-52062126` → "52062126") and, with `query`, its query's values (`?id=81070185`)."""
    parts = urlsplit(url)
    tokens = set(re.split(r"[/\-_.]", parts.path))
    if query:
        tokens |= {v for pair in parts.query.split("&") for v in pair.split("=")[1:]}
    return tokens


def url_key(url: str) -> str:
    """The key of a product whose page states no id: its URL's path (`/products/linen-shirt`),
    or, when the path is one script serving every item, the value of the query parameter that
    names the item (`/item.htm?id=562283240178` is "562283240178"; the bare path would give every
    item of the site one key). Otherwise the URL itself."""
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    if _SCRIPT_PAGE.fullmatch(path.rsplit("/", 1)[-1]) or not path:
        item = url_query_item(url)
        if item:
            return item
    return path or url


def url_query_item(url: str) -> str | None:
    """The item a URL's query names by a parameter for ids (`?id=562283240178`, `?sku=D37860`,
    `product_id=`); a value padded with encoded spaces (`?sku=D37860++`) is the same item's."""
    for name, value in parse_qsl(urlsplit(url).query):
        if _ID_PARAM.fullmatch(name) and _ID_VALUE.fullmatch(value.strip()):
            return value.strip()
    return None


_ITEM_SEGMENT = re.compile(
    r"(?:[A-Za-z]-)?(?P<id>[A-Za-z]{0,2}\d{6,20})(?:\.html?)?"  # `32993251330.html`, `R-230657`
    r"|(?P<lead>\d{6,20})-[^\W\d_][\w-]*"  # `1190485849-marmont-hill-floral-crown-skull`
    # `tiffany-novo-diamond-ring-30399048`; a slug of two words or more, not a `pgid-11161311` pair
    r"|(?=[\w-]*[^\W\d_])(?:[^\W_]+-){2,}(?P<tail>[A-Za-z]?\d{6,20})(?:\.html?)?"
)


# A product's slug: two words or more, joined by hyphens ("happy-soba-graphic-toddler-baby-kid-tee").
_SLUG = re.compile(r"(?=[\w-]*[^\W\d_])[^\W_]+(?:-[^\W_]+)+")
_ID_BEFORE_SLUG = re.compile(r"\d{6,20}")


def url_item_id(url: str) -> str | None:
    """The item number a product URL ends in (`/item/32993251330.html`, `/item/m73194523815`,
    `/itm/123456789012`, `/_/R-230657`): a last path segment of six digits or more, after at
    most two letters, or a slug that starts or ends with such a number (`…/1190485849-floral-
    crown-skull`, `…/novo-diamond-ring-30399048`, `…-setting-spray-P263504`). Fewer digits name no item
    (`/products/linen-shirt-42`, `/p/12345`: a size, a year, a page)."""
    segments = urlsplit(url).path.rstrip("/").rsplit("/", 2)
    found = _ITEM_SEGMENT.fullmatch(segments[-1])
    if (
        not found
        and len(segments) == 3
        and _SLUG.fullmatch(segments[-1])
        and _ID_BEFORE_SLUG.fullmatch(segments[-2])
        and not _not_an_item(segments[-2])
    ):
        return segments[-2]  # the number before the product's slug (`/listing/252423036/happy-soba-tee`)
    if not found:
        return None
    number = found.group("id") or found.group("lead") or found.group("tail")
    if (found.group("lead") or found.group("tail")) and _not_an_item(number.lstrip(string.ascii_letters)):
        return None
    return number


def _not_an_item(digits: str) -> bool:
    """A number a slug states that names no item: a date (`…-case-20210129`, `…-shirt-202106`) or a
    round quantity (`…-power-bank-100000`, `1000000-piece-puzzle`)."""
    year, month, day = digits[:4], digits[4:6], digits[6:8]
    dated = len(digits) == 6 or (len(digits) == 8 and "01" <= day <= "31")
    if dated and "1990" <= year <= "2039" and "01" <= month <= "12":
        return True
    return len(digits.rstrip("0")) <= 2


# The classes sites give text that only screen readers read (eBay's "Details about" before a
# title in `<span class="g-hdn">`, Bootstrap's `sr-only`, WordPress's `screen-reader-text`,
# Amazon's `a-offscreen` whole price beside its split visible parts).
READER_ONLY = frozenset(
    {
        "g-hdn",
        "sr-only",
        "visually-hidden",
        "visuallyhidden",
        "screen-reader-text",
        "a11y-hidden",
        "a-offscreen",
    }
)


def shown_text(element: Any) -> str:
    """An element's text as the page shows it: without the text of a descendant hidden from
    view (a screen-reader-only class, the `hidden` attribute, `display:none`). For a name: a
    hidden part of a price can be the whole amount the visible parts split."""
    parts: list[str] = []

    def walk(node: Any, top: bool) -> None:
        if not top and isinstance(node.tag, str) and _hidden(node):
            if node.tail:
                parts.append(node.tail)
            return
        if isinstance(node.tag, str) and node.text:
            parts.append(node.text)
        for child in node:
            walk(child, False)
        if not top and node.tail:
            parts.append(node.tail)

    walk(element, True)
    return " ".join("".join(parts).split())


def _hidden(node: Any) -> bool:
    if node.get("hidden") is not None or node.tag in ("script", "style", "template"):
        return True
    if READER_ONLY & set((node.get("class") or "").lower().split()):
        return True
    return re.search(r"display\s*:\s*none", node.get("style") or "", re.I) is not None


_BARE_HOST = re.compile(
    r"(?i)(?:[a-z0-9-]+\.)+(?!(?:jpe?g|png|gif|webp|avif|svg|bmp|tiff?|html?|php|aspx?|jsp|css|js|json|xml)/)"
    r"[a-z]{2,6}/"
)


def absolute_url(value: Any, base: str | None) -> str | None:
    if not isinstance(value, str):
        return None
    value = value.strip()
    if not value or value.startswith(("data:", "javascript:", "blob:")):
        return None
    if value.startswith("//") or _BARE_HOST.match(value):
        # "//cdn.example.com/a.jpg", or the same written without its slashes
        # ("sitem.ssgcdn.com/17/27/53/item/…_i1_1200.jpg" in SSG's JSON-LD): another host, not a
        # path under the page's (a file name's extension is no top-level domain).
        scheme = urlsplit(base).scheme if base else "https"
        return f"{scheme or 'https'}://{value.removeprefix('//')}"
    if base:
        return urljoin(base, value)
    return value if urlsplit(value).scheme in ("http", "https") else None


def image_urls(value: Any, base: str | None) -> list[str]:
    """Image entries that are strings, objects (`ImageObject`: url/contentUrl/src), lists or null,
    as absolute URLs in order, without duplicates or nulls."""
    out: list[str] = []

    def visit(item: Any, depth: int = 0) -> None:
        if depth > 8 or item is None:
            return
        if isinstance(item, list | tuple):
            for sub in item:
                visit(sub, depth + 1)
        elif isinstance(item, dict):
            for key in ("contentUrl", "url", "src", "@id"):
                if item.get(key):
                    visit(item[key], depth + 1)
                    return
        elif not (isinstance(item, str) and _PLACEHOLDER.fullmatch(item.strip())):
            url = absolute_url(item, base)
            if url and url not in out:
                out.append(url)

    visit(value)
    return out


def stand_in_picture(url: str) -> bool:
    """Whether an image URL's file is a shop's stand-in for a missing photo ("noimage.gif",
    "no-image-available.png", "placeholder.jpg", "image-coming-soon.png"): no picture of the product."""
    name = urlsplit(url).path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    return bool(_STAND_IN.fullmatch(name))


# A word before the name only as a word of its own ("default-noimage", not "piano-image"), a
# language code only after a separator ("no-photo-en", not "noimagery"), and each number whole
# (`(?!\d)`: a number split among repeats is exponential backtracking on a long one).
_STAND_IN = re.compile(
    r"(?i)(?:[a-z]{1,12}[-_ ])?(?:no[-_ ]?(?:image|img|photo|picture|pic|foto|bild|imagen|immagine)s?|"
    r"placeholders?|(?:image|photo|picture)[-_ ]?(?:coming[-_ ]?soon|not[-_ ]?available|unavailable|missing))"
    r"(?:[-_ ]?(?:available|found|yet|large|small|medium|thumb|default|\d+(?!\d)(?:x\d+(?!\d))?)|[-_ ][a-z]{2})*"
)


# What a template writes where it failed to fill an image in: PHP's "Array", JavaScript's
# "undefined" or "[object Object]", an unrendered "{{ image }}": no path, no file name, no URL.
_PLACEHOLDER = re.compile(r"[^/.]*|.*(?:\{\{|\{%|\[object ).*")


# Colour and material words come from one place, the taxonomy (schema/taxonomy.json): its
# values and synonyms, other languages included. A word is only taken where the page states
# it in a clear context (a "Material:" / "Farbe:" field, a composition that adds up to 100%,
# a title segment that is nothing but a colour); marketing text ("0% interest", "70% off",
# "100% polyester for your best run") never gives a material.

_MATERIAL_LABEL = (
    r"materials?|materiale|material oberstoff|obermaterial|au(?:ß|ss)enmaterial|composition|composici[oó]n|"
    r"composizione|zusammensetzung|mati[eè]re|fabric(?!at)|shell|upper|tissu|tejido|stoff|"
    r"(?:fabric |fib(?:er|re) )?content"  # "Content: 85% polyester/13% rayon" (a composition only)
)
_COLOR_LABEL = r"colou?r|farbe|couleur|colore|kleur|färg|farge|farve"
_LABEL_LINE = re.compile(
    rf"(?i)(?:^|(?<=[\s(\-•·*]))(?P<label>{_MATERIAL_LABEL})(?P<care>\s*(?:&|and|und|et|y)\s*(?:care|pflege\w*|entretien|cuidados))?"
    rf"(?:\s+(?!\d)\w+)?\s*(?P<colon>:)?\s*(?P<value>[^\n]*)$"  # "Material composition:", not "Material 100%"
)
# "Color/pattern:" (Shopify themes' option name for prints) labels the colour as "Color:" does.
_COLOR_LINE = re.compile(
    rf"(?i)(?:^|(?<=\s))(?:{_COLOR_LABEL})(?:\s*/\s*(?:pattern|print))?\s*(?P<colon>:)?\s*(?P<value>[^\n]*)$"
)
_PCT_FIRST = re.compile(r"(\d{1,3}(?:[.,]\d+)?)\s*%\s*([^\W\d_]+(?:[ -][^\W\d_]+)?)", re.UNICODE)
_PCT_LAST = re.compile(r"([^\W\d_]+(?:[ -][^\W\d_]+)?)\s+(\d{1,3}(?:[.,]\d+)?)\s*%", re.UNICODE)
# A part inside or under the garment ("Internal material: textile", "Fill material: Polyester",
# "Sole material", "Futtermaterial"): not what the product is made of.
_INNER_PART = re.compile(
    r"(?i)(?:internal|inner|interior|lining|sole|insole|outsole|fill|filling|padding|innen|futter|sohle|"
    r"doublure|semelle|forro|suela|fodera|suola)\s*$"
)
_INNER_FIELD = re.compile(
    r"(?i)\b(?:lining|inner|internal|insole|outsole|sole|fill(?:ing)?|padding|futter|innen\w*|doublure|forro|fodera)"
    r"\b[^:\n]{0,20}:"
)
_SUB_LABEL = re.compile(r"^[^\W\d_][^:\d\n]{0,30}:\s*")  # "Oberseite:", "Shell:", "Außenmaterial:"
# A lower-case word just before a label with no colon: the label word runs on in a sentence
# ("a variety of materials such as aluminium", "soft plush fabric, velour lined ears").
_RUNNING_WORD = re.compile(r"(?<![^\W\d_])[a-zäöüßàâçéèêëîïôûùüÿñæœ]+\s+$")
_NEXT_LABEL = re.compile(r"\s+(?:[A-ZÄÖÜ][^\W\d_]*\s?){1,3}:\s.*$")  # "… Lining: Cotton 100%"


def _taxonomy() -> Any:
    from lookbench_live.schema.taxonomy import default_taxonomy

    return default_taxonomy()


def color_value(text: str | None) -> str | None:
    """The taxonomy colour a word or phrase names ("Schwarz", "navy blue"), else None."""
    if not text or not text.strip():
        return None
    value = _taxonomy().normalize_value("color", text)
    return value if value in _taxonomy().values("color") else None


def material_value(text: str | None) -> str | None:
    """The taxonomy material a word or phrase names ("Baumwolle", "calf leather"), else None."""
    if not text or not text.strip():
        return None
    value = _taxonomy().normalize_value("material", text)
    return value if value in _taxonomy().values("material") else None


def _mentions_material(text: str) -> bool:
    words = re.findall(r"[^\W\d_]+", text, re.UNICODE)
    spans = [" ".join(words[i : i + n]) for n in (2, 1) for i in range(len(words) - n + 1)]
    return any(material_value(w) for w in spans)


# Textile fibres as shops write them (the taxonomy's material vocabulary names garment materials,
# not every fibre: "polyester", "elastane" are none of its values). An element stating only
# "100% Arabica" is a coffee's blend, not a material.
_FIBRE = re.compile(
    r"(?i)(?<![^\W\d_])(?:polyester|poliest[eè]re?|poli[eé]ster|polyamid[e]?|poliammide|poliamida|nylon|"
    r"elastan[e]?|elasthan|elastano|spandex|lycra|elastomultiester|viscose|viskose|viscosa|rayon|modal|lyocell|"
    r"tencel|acryl(?:ic)?|acrilico|acetat[e]?|cotton|baumwolle|coton|algod[oó]n|algod[aã]o|cotone|katoen|"
    r"wool|wolle|laine|lana|wol|lã|silk|seide|soie|seda|seta|zijde|linen|leinen|lin|lino|linho|linnen|"
    r"cashmere|kaschmir|cachemire|leather|leder|cuir|cuero|pelle|couro|polyurethane?|polyurethan|"
    r"alpaca|mohair|angora|merino|hemp|hanf|bamboo|down|feathers?|daunen|federn|metallic|metallised)(?![^\W\d_])"
)


def textile_fibre(text: str) -> bool:
    """Whether a composition names a textile fibre (or a material of the vocabulary)."""
    return bool(_FIBRE.search(text)) or any(_mentions_material(w) for _, w in _parts(text))


def _parts(text: str) -> list[tuple[float, str]]:
    found = [(m.start(), float(m.group(1).replace(",", ".")), m.group(2)) for m in _PCT_FIRST.finditer(text)]
    if not found:
        found = [
            (m.start(), float(m.group(2).replace(",", ".")), m.group(1)) for m in _PCT_LAST.finditer(text)
        ]
    return [(pct, word) for _, pct, word in sorted(found)]


def find_composition(text: str | None, *, labelled: bool = False) -> str | None:
    """A fibre composition stated without a label ("50% Viscose, 27% Nylon, 23% Polyester",
    "Acrylic 31%; Wool 22%; …"): its shares add up to 100% and one fibre is a known material.
    A lone percentage in marketing text ("0% interest", "70% off") is not one. Under a
    material label (`labelled`) the shares adding up to 100% are enough ("100% polyester":
    the vocabulary has no polyester)."""
    if not text:
        return None
    found: list[str] = []
    for line in text.splitlines():
        line = _INNER_FIELD.split(line)[0]  # "Shell: 100% cotton, Lining: 100% polyester": the shell's
        for run in re.finditer(
            r"(?:\d{1,3}(?:[.,]\d+)?\s*%\s*[^\W\d_]+(?:[ -][^\W\d_]+)?|[^\W\d_]+(?:[ -][^\W\d_]+)?\s+\d{1,3}(?:[.,]\d+)?\s*%)"
            r"(?:\s*[,/;&+]?\s*(?:\d{1,3}(?:[.,]\d+)?\s*%\s*[^\W\d_]+(?:[ -][^\W\d_]+)?|[^\W\d_]+(?:[ -][^\W\d_]+)?\s+\d{1,3}(?:[.,]\d+)?\s*%))*",
            line,
            re.UNICODE,
        ):
            parts = _parts(run.group(0))
            total = sum(p for p, _ in parts)
            if parts and 99 <= total <= 101 and (labelled or textile_fibre(run.group(0))):
                if labelled:
                    return _tidy(run.group(0))
                found.append(_tidy(run.group(0)))
    # Two different blends in one text are choices, not the product's ("may come with one of the
    # following fabric contents: … 50% Cotton/50% polyester … 50% recycled polyester/ 37% …").
    blends = {frozenset((p, w.casefold()) for p, w in _parts(f)) for f in found}
    return found[0] if len(blends) == 1 else None


def _tidy(value: str) -> str:
    return re.sub(r"\s+", " ", value).strip(" /;,-.")


# The line a page's text holds where swatches to choose from were left out: no field's value.
CHOICES = "(choices)"


@functools.lru_cache(maxsize=8)
def _listed_fields(text: str) -> frozenset[str]:
    """The labels of "Label: value" lines a listing repeats for each of its items (a grid of 28
    swing sets, each with "Primary Material: Wood"): stated five times or more, or three times or
    more with different values. A product's own field is stated once or twice (a tab, a copy).
    Read once per text: the colour and both material passes ask for the same page text."""
    values: dict[str, list[str]] = {}
    for line in text.splitlines():
        label, colon, value = line.strip().partition(":")
        if colon and 0 < len(label) <= 40:
            values.setdefault(label.strip().casefold(), []).append(value.strip().casefold())
    return frozenset(k for k, v in values.items() if len(v) >= 5 or (len(v) >= 3 and len(set(v)) > 1))


def _listed(line: str, listed: frozenset[str]) -> bool:
    label, colon, _ = line.partition(":")
    return bool(colon) and label.strip().casefold() in listed


def _labelled_material(text: str, *, bare: bool) -> str | None:
    lines = [line.strip() for line in text.splitlines()]
    listed = _listed_fields(text)
    for index, line in enumerate(lines):
        match = _LABEL_LINE.search(line)
        if not match or _INNER_PART.search(line[: match.start("label")]) or _listed(line, listed):
            continue
        if not match.group("colon") and _RUNNING_WORD.search(line[: match.start("label")]):
            continue  # mid-sentence, no field: "printed on a variety of materials such as …"
        if not match.group("colon") and match.group("value").rstrip().endswith("."):
            continue  # a sentence, no field: Nike's "Upper combines leather and textiles for a … fit."
        content = match.group("label").lower().endswith("content")
        if content and line[: match.start("label")].strip(" -•·*("):
            continue  # "Cocoa content:", "Recycled content:": another share than the fibres'"
        value, alone = match.group("value").strip(), False
        if not value:  # "Material" alone on its line: the value is the next line
            if line[: match.start()].strip(" -•·*("):
                continue  # a sentence that ends in the word ("Made with sunlight resistant materials")
            following = [v for v in lines[index + 1 : index + 4] if v and not _LABEL_LINE.match(v)]
            value = following[0] if following else ""
            alone = match.start() == 0
        if value == CHOICES:
            continue  # "Material" over swatches none of which is chosen
        value = _SUB_LABEL.sub("", value, count=1) if _SUB_LABEL.match(value) else value
        value = _NEXT_LABEL.sub("", value)
        value = _tidy(value.split(". ")[0])
        if not value or len(value) > 100:
            continue
        if not bare and _parts(value) and 99 <= sum(p for p, _ in _parts(value)) <= 101:
            if _prose(value):  # "This premium knit cardigan is made from 100% top quality …"
                continue
            if content and not all(textile_fibre(f"{p}% {w}") for p, w in _parts(value)):
                continue  # "Content: 100% satisfaction guaranteed", "100% fruit juice"
            return value
        if content:
            continue  # "Content" names a material only as a fibre composition ("Content: 3 items")
        if not bare and not _parts(value) and _mentions_material(value) and len(value.split()) <= 8:
            return value
        if not bare:
            continue
        # A key/value layout ("Material" on its own line, then "Pima stretch"; "Upper:
        # syntheticleather"): a short name the field states, even outside the vocabulary.
        # Only under a bare label ("Material & care" heads a section, not a value), never a
        # value that is itself a label or a UI phrase ("Détails du produit", "Mehr zu …").
        bare = not match.group("care") and not _LABEL_LINE.match(value) and not value.endswith(":")
        if (
            (alone or match.group("colon"))
            and bare
            and not re.search(r"[\d%{}<>]", value)
            and len(value.split()) <= 3
        ):
            return value
    return None


def _prose(value: str) -> bool:
    """A sentence that mentions a composition rather than states one: more than four words
    beside its percentages and the word after each ("made from 100% top quality extra fine
    Merino wool"), where a field reads "100% cotton" or "Made of 100% cotton"."""
    rest = re.sub(r"\d{1,3}(?:[.,]\d+)?\s*%\s*[^\W\d_]*", " ", value)
    return len(re.findall(r"[^\W\d_]+", rest)) > 4


def find_material(*texts: str | None) -> str | None:
    """Material a page states: a labelled field first ("Material: 100% cotton", "Composition:
    80% wool, 20% polyamide", "Zusammensetzung" / "Baumwolle 100%"), then an unlabelled
    composition that adds up to 100%. Never a bare word from marketing prose."""
    for text in texts:
        if text:
            found = _labelled_material(text, bare=False)
            if found:
                return found
    for text in texts:
        found = find_composition(text)
        if found:
            return found
    # A short name under a bare label ("Upper: syntheticleather") only when the page states no
    # composition: IKEA's "Ticking: 64% cotton, 36% polyester" outranks "Comfort material:
    # Polyester wadding".
    for text in texts:
        if text:
            found = _labelled_material(text, bare=True)
            if found:
                return found
    return None


def without_name(value: str | None, name: str | None) -> str | None:
    """A variant's value without the product's name written before it (a Shopify variant's
    "color": "Men's Dasher NZ - Blizzard/Deep Navy (Blizzard Sole)" on "Men's Dasher NZ"): what
    follows the name and a separator; the value as it is when the name is all of it."""
    if not value or not name:
        return value
    head = value[: len(name)]
    rest = value[len(name) :]
    if head.casefold() == name.casefold():
        rest = re.sub(r"^\s*[-–:|/]\s*", "", rest) if re.match(r"\s*[-–:|/]", rest) else ""
        return rest.strip() or value
    return value


def without_color_code(value: str) -> str:
    """A colour name without the shop's colour number before it (Uniqlo's "69 NAVY") or its
    fabric code after it (La-Z-Boy's "Olive B942323"), when the rest is a colour of the
    vocabulary; any other value as it is."""
    coded = re.fullmatch(r"\d{1,4}\s+(\D+)", value) or re.fullmatch(
        r"(\D+?)\s+[A-Z]{0,3}\d{4,}[A-Z]{0,3}", value
    )
    return coded.group(1) if coded and color_value(coded.group(1)) else value


# An option box's prompt where its chosen value would be ("Please select a size", "Choose …").
_PROMPT = re.compile(r"(?i)^(?:please\s+)?(?:select|choose|pick)\b")


def find_color(*texts: str | None) -> str | None:
    """Colour a text states in a field ("Color: Navy", "Farbe: multicolor/multicolor", or
    "Colour" on its own line followed by the value), as written."""
    for text in texts:
        if not text:
            continue
        lines = [line.strip() for line in text.splitlines()]
        listed = _listed_fields(text)
        for index, line in enumerate(lines):
            match = _COLOR_LINE.search(line)
            if not match or _listed(line, listed):
                continue
            value = match.group("value").strip()
            if not value and match.start() == 0:
                value = next((v for v in lines[index + 1 : index + 3] if v and not _COLOR_LINE.match(v)), "")
            elif not match.group("colon") and not _all_colors(value):
                continue
            if value.endswith(":") or _PROMPT.match(value):
                continue  # an empty option box: "Color: Please select a size:"
            value = without_color_code(_tidy(_NEXT_LABEL.sub("", value)))
            if value and len(value) <= 40 and len(value.split()) <= 5 and not re.search(r"[\d{}<>()]", value):
                return value
    return None


def _all_colors(text: str) -> bool:
    parts = [p for p in re.split(r"\s*(?:/|&|,|\+|\band\b|\bund\b)\s*", text.strip()) if p]
    return bool(parts) and all(color_value(p) for p in parts)


def title_color(title: str | None) -> str | None:
    """Colour a title states: a segment that is nothing but colours ("Spit Velvet Shirt - Red -
    Shirts - Weekday DE", "… - White / black - …"), or leading colour words before a garment
    ("Navy Wrap Dress")."""
    if not title:
        return None
    segments = [s.strip() for s in re.split(r"\s+[-–|]\s+", title) if s.strip()]
    for segment in segments[1:]:
        if _all_colors(segment):
            return segment
    # A catalogue name "NAME type, detail, colour" (IKEA's "MOSHULT Foam mattress, firm, white"):
    # the last comma part, when it is nothing but one colour word and the title has a name before.
    parts = [p.strip() for p in segments[0].split(",")] if segments else []
    if (
        len(parts) >= 2
        and len(parts[-1].split()) == 1
        and not _all_colors(parts[0])
        and color_value(parts[-1])
    ):
        return parts[-1]
    words = segments[0].split() if segments else []
    for length in (3, 2, 1):
        if len(words) > length:
            value = color_value(" ".join(words[:length]))
            rest = words[length:]
            if value and rest[0].casefold() not in _NOT_A_COLOUR_NEXT and _names_garment(rest):
                return value
    return None


# Words that make a leading colour word part of another name ("Black Friday", "Black Tie
# Optional", "Red Label"), not the product's colour.
_NOT_A_COLOUR_NEXT = frozenset({"friday", "tie", "label"})


def _names_garment(words: list[str]) -> bool:
    """Whether a title's words after a leading colour name a garment or accessory the taxonomy
    names ("Wrap Dress for Women", "Leather Handbag"): "Navy Wrap Dress" is navy, but "Olive Oil Sprayer",
    "Wine Glass Set" and "Coffee Machine X200" name no colour (the vocabulary's synonyms are
    also foods and drinks)."""
    taxonomy = _taxonomy()
    return any(
        taxonomy.normalize_category(" ".join(words[i : i + n]))
        for n in (1, 2, 3)
        for i in range(len(words) - n + 1)
    )


def color_from_url(url: str | None) -> str | None:
    """The colour a URL selects (`?color=navy`, `?colour=…`, `/p/dress-red`)."""
    if not url:
        return None
    query = parse_qs(urlsplit(url).query)
    for key in ("color", "colour", "farbe", "couleur", "attribute_pa_color", "attribute_color"):
        if query.get(key):
            return clean_title(query[key][0].replace("-", " ").replace("_", " "))
    return None
