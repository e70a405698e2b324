"""Pure normalizers for the messy values retailers publish: prices, availability, brands,
image lists, text, colours and materials.

Every function takes what a page or API gave (a string, a number, a dict, a list or None)
and returns a clean value or None; none of them raises on bad input.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable
from decimal import Decimal, InvalidOperation
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

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


def clean_text(value: Any) -> str | None:
    """Unescape HTML entities (twice-escaped ones too), drop tags, collapse whitespace."""
    if value is None:
        return None
    if isinstance(value, list):
        value = " ".join(str(v) for v in value if v is not None)
    text = str(value)
    for _ in range(2):  # "&amp;quot;" is common in CMS exports
        unescaped = html.unescape(text)
        if unescaped == text:
            break
        text = unescaped
    if "<" in text and ">" in text:
        text = re.sub(r"<(script|style)\b.*?</\1>", " ", text, flags=re.S | re.I)
        text = re.sub(r"<br\s*/?>|</p>|</li>|</div>", "\n", text, flags=re.I)
        text = re.sub(r"<[^>]+>", " ", text)
        text = html.unescape(text)
    text = re.sub(r"[ \t\r\f\v\u00a0\u200b]+", " ", text)
    text = re.sub(r"\s*\n\s*", "\n", text).strip()
    return text or None


def clean_title(value: Any) -> str | None:
    text = clean_text(value)
    return " ".join(text.split()) if text else None


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


def normalize_brand(value: Any, index: dict[str, dict[str, Any]] | None = None) -> str | None:
    """A brand given as a string, an object (`Brand`, `Organization`, `Thing`), an `@id` or a list."""
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
    return clean_title(value)


def absolute_url(value: Any, base: str | None) -> str | None:
    if not isinstance(value, str):
        return None
    value = value.strip()
    if not value or value.startswith(("data:", "javascript:", "blob:")):
        return None
    if value.startswith("//"):
        scheme = urlsplit(base).scheme if base else "https"
        return f"{scheme or 'https'}:{value}"
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
        else:
            url = absolute_url(item, base)
            if url and url not in out:
                out.append(url)

    visit(value)
    return out


# Words a title, description or URL uses for colour, with the value we store (English).
# Values follow the taxonomy's colour names (schema/taxonomy.json).
COLOR_WORDS: dict[str, str] = {
    "black": "black", "white": "white", "ivory": "ivory", "cream": "ivory", "beige": "beige",
    "grey": "gray", "gray": "gray", "charcoal": "gray", "red": "red", "burgundy": "burgundy",
    "pink": "pink", "orange": "orange", "yellow": "yellow", "mustard": "yellow", "green": "green",
    "olive": "olive", "khaki": "olive", "teal": "teal", "blue": "blue", "navy": "navy", "denim": "blue",
    "purple": "purple", "lilac": "purple", "brown": "brown", "camel": "camel", "tan": "camel",
    "gold": "gold", "silver": "silver",
    # a few other languages (the store and real sites are not all English)
    "schwarz": "black", "weiß": "white", "weiss": "white", "rot": "red", "blau": "blue", "grün": "green",
    "noir": "black", "blanc": "white", "rouge": "red", "bleu": "blue", "vert": "green", "rose": "pink",
    "negro": "black", "blanco": "white", "rojo": "red", "azul": "blue", "verde": "green", "rosa": "pink",
}  # fmt: skip

MATERIAL_WORDS: dict[str, str] = {
    "cotton": "cotton", "linen": "linen", "wool": "wool", "merino": "wool", "cashmere": "cashmere",
    "silk": "silk", "satin": "satin", "denim": "denim", "leather": "leather", "suede": "suede",
    "polyester": "polyester", "viscose": "viscose", "rayon": "viscose", "nylon": "nylon",
    "polyamide": "nylon", "elastane": "elastane", "spandex": "elastane", "acrylic": "acrylic",
    "velvet": "velvet", "chiffon": "chiffon", "lace": "lace", "knit": "knit", "corduroy": "corduroy",
    "fleece": "fleece", "tweed": "tweed", "jersey": "jersey",
    "baumwolle": "cotton", "leinen": "linen", "wolle": "wool", "seide": "silk",
    "coton": "cotton", "lin": "linen", "laine": "wool", "soie": "silk",
    "algodón": "cotton", "algodon": "cotton", "lana": "wool", "seda": "silk",
}  # fmt: skip

_COMPOSITION = re.compile(
    r"(?:(\d{1,3}(?:[.,]\d+)?)\s*%\s*([^\W\d_]+(?:[ -][^\W\d_]+)?)\s*[,/;]?\s*){1,6}", re.UNICODE
)
_COMPOSITION_PART = re.compile(r"(\d{1,3}(?:[.,]\d+)?)\s*%\s*([^\W\d_]+)", re.UNICODE)
_MATERIAL_SECTION = re.compile(
    r"(?:material(?:s)?(?:\s*(?:&|and)\s*care)?|composition|fabric|materiale|matière|zusammensetzung)\s*[:\-]\s*([^\n.]+)",
    re.I,
)


def find_composition(text: str | None) -> str | None:
    """A composition line ("50% Viscose, 27% Nylon, 23% Polyester") as found, normalized spacing."""
    if not text:
        return None
    best: list[tuple[str, str]] = []
    for match in _COMPOSITION.finditer(text):
        parts = _COMPOSITION_PART.findall(match.group(0))
        if len(parts) > len(best) or (len(parts) == len(best) and best == []):
            best = parts
    if best:
        return ", ".join(f"{pct}% {name}" for pct, name in best)
    return None


def find_material(*texts: str | None) -> str | None:
    """Material from the page's own text: a composition line first, then a "Material:" section,
    then a known material word."""
    for text in texts:
        composition = find_composition(text)
        if composition:
            return composition
    for text in texts:
        if text:
            match = _MATERIAL_SECTION.search(text)
            if match:
                value = match.group(1).strip(" :-")
                if value and len(value) <= 80:
                    return value
    for text in texts:
        word = _first_word(text, MATERIAL_WORDS)
        if word:
            return word
    return None


def find_color(*texts: str | None) -> str | None:
    for text in texts:
        word = _first_word(text, COLOR_WORDS)
        if word:
            return word
    return None


def _first_word(text: str | None, vocabulary: dict[str, str]) -> str | None:
    if not text:
        return None
    for token in re.findall(r"[^\W\d_]+", text.lower(), re.UNICODE):
        if token in vocabulary:
            return vocabulary[token]
    return None


def color_from_url(url: str | None) -> str | None:
    """The colour a URL selects (`?color=navy`, `?colour=…`, `/p/dress-red`)."""
    if not url:
        return None
    query = parse_qs(urlsplit(url).query)
    for key in ("color", "colour", "farbe", "couleur", "attribute_pa_color", "attribute_color"):
        if query.get(key):
            return clean_title(query[key][0].replace("-", " ").replace("_", " "))
    return None
