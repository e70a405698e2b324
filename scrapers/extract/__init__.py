"""Pure extraction: a page or API response in, normalized products and looks out.

Nothing here fetches or stores; spiders and the `extract` command call `extract_document`. The
one exception, `vlm.py` (not imported here), asks the configured VLM for what a page's markup
left out, only when `extract --vlm` turns it on.
"""

from __future__ import annotations

import json
from typing import Any

from lookbench_live.scrapers.extract.jsonld import load_scripts, parse_tree
from lookbench_live.scrapers.extract.looks import extract_looks
from lookbench_live.scrapers.extract.model import (
    Extraction,
    LookData,
    NormalizedProduct,
    Problem,
    parse_datetime,
)
from lookbench_live.scrapers.extract.schema_org import extract_schema_org
from lookbench_live.scrapers.extract.shopify import extract_shopify, is_shopify_payload
from lookbench_live.scrapers.extract.values import known_brand, stand_in_picture, whole_amount
from lookbench_live.scrapers.extract.woocommerce import extract_woocommerce, is_woocommerce_payload

__all__ = [
    "Extraction",
    "LookData",
    "NormalizedProduct",
    "Problem",
    "decode_body",
    "detect_platform",
    "extract_document",
    "extract_looks",
    "extract_schema_org",
    "extract_shopify",
    "extract_woocommerce",
    "parse_datetime",
    "warm_up",
]


def warm_up() -> None:
    """Load what extraction otherwise loads on its first page: the taxonomy's vocabulary
    (~0.07 s). A crawl calls this before its spider opens, so the first pages are not held
    behind a load while the downloader waits."""
    from lookbench_live.schema.taxonomy import default_taxonomy

    default_taxonomy()


def decode_body(body: bytes, content_type: str | None = None) -> str:
    """Bytes to text: BOM, then the Content-Type charset, then `<meta charset>`, then sniffing
    (unknown charset names fall through), as Scrapy's TextResponse does (docs/reliability.md S10)."""
    import codecs

    from w3lib.encoding import html_body_declared_encoding, html_to_unicode, http_content_type_encoding

    header = content_type if content_type else None
    encoding, text = html_to_unicode(header, body)
    if (
        codecs.lookup(encoding).name != "utf-8"  # the common case: nothing to read again
        and http_content_type_encoding(header) is None
        and html_body_declared_encoding(body) == encoding
    ):
        # A stored page re-encoded as UTF-8 that kept its `<meta charset="gbk">`: the declared
        # charset cannot read its bytes, which are valid UTF-8 (text in GBK, Shift_JIS or
        # Latin-1 with bytes above 127 is almost never valid UTF-8 by chance).
        try:
            body.decode(encoding)
        except (UnicodeDecodeError, LookupError):
            try:
                return body.decode("utf-8")
            except UnicodeDecodeError:
                pass
    return text


def _json(text: str) -> Any:
    stripped = text.lstrip("\ufeff \t\r\n")
    if stripped[:1] not in ("{", "["):
        return None
    try:
        return json.loads(stripped)
    except (ValueError, RecursionError):
        return None


def detect_platform(text: str) -> str:
    """ "shopify", "woocommerce", "json" (JSON of another shape) or "html", from the content."""
    data = _json(text)
    if data is None:
        return "html"
    if is_shopify_payload(data):
        return "shopify"
    if is_woocommerce_payload(data):
        return "woocommerce"
    return "json"


def extract_document(text: str, url: str, *, looks: bool = True) -> Extraction:
    """Products (and looks) of one saved page or API response; the platform is detected."""
    extraction = _extract(text, url, looks=looks)
    for product in extraction.products:
        kept = known_brand(product.brand) if product.brand else None
        if product.brand and kept != product.brand:
            # "Brand: Unbranded" says the item has none; "STAUD SUMMER 2025" is STAUD's
            product.brand = kept
            if kept is None:
                product.sources.pop("brand", None)
        if any(stand_in_picture(u) for u in product.images):
            product.images = [u for u in product.images if not stand_in_picture(u)]
            if not product.images:
                product.sources.pop("image", None)
        product.price = whole_amount(product.price, product.currency)
        product.price_max = whole_amount(product.price_max, product.currency)
        product.compare_at_price = whole_amount(product.compare_at_price, product.currency)
    return extraction


def _extract(text: str, url: str, *, looks: bool) -> Extraction:
    data = _json(text)
    if data is not None:
        if is_shopify_payload(data):
            return extract_shopify(data, url)
        if is_woocommerce_payload(data):
            return extract_woocommerce(data, url)
        if isinstance(data, list) and not data:
            return Extraction(platform="json")
        return Extraction(
            platform="json", problems=[Problem("unknown_json", "neither Shopify nor WooCommerce")]
        )
    tree = parse_tree(text)
    if tree is None:
        return Extraction(platform="html", problems=[Problem("unparsable_html", "empty or not HTML")])
    scripts = load_scripts(tree)
    result = extract_schema_org(text, url, tree=tree, scripts=scripts)
    if looks:
        found = extract_looks(text, url, tree=tree, scripts=scripts)
        result.looks = found.looks
        result.problems.extend(
            p for p in found.problems if p.reason not in {q.reason for q in result.problems}
        )
    return result
