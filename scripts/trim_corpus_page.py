"""Cut a saved page down to what extraction reads, for tests/corpus (each payload < 200 kB).

    .venv/bin/python scripts/trim_corpus_page.py IN.html OUT.html [--max-bytes 190000]

Removed, in this order until the page fits: comments, non-JSON scripts, styles, svg, noscript,
iframes, stylesheet/preload links, `style`/`srcset`/`sizes`/event attributes; then the site's
header, footer and nav (page chrome: not a `<header>` inside the main content or the product,
nor a breadcrumb); then JSON state scripts over 40 kB (JSON-LD is always kept); then variant
`<select>` lists with the label naming each; then long link lists. Text, classes, ids, `itemprop`, `<meta>` and `<img src>` are kept, so
the page's visible title, price block and gallery stay as the site served them.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from lxml import html as lxml_html

from lookbench_live.scrapers.extract import decode_body

DROP_ATTRS = ("style", "srcset", "sizes", "data-srcset", "onclick", "onload", "onerror", "onmouseover")
# Amazon's analytics attributes (`data-csa-c-*`, `data-cel-widget`, `data-feature-name`): a third of
# a product page after the other cuts, and no fact. Image attributes (`data-old-hires`,
# `data-a-dynamic-image`) are kept.
TRACKING_ATTR = re.compile(r"data-csa-|data-cel-widget$|data-feature-name$")


def _drop(element: lxml_html.HtmlElement) -> None:
    parent = element.getparent()
    if parent is None:
        return
    tail = element.tail
    parent.remove(element)
    if tail and tail.strip():  # keep the text that followed it
        prev = parent[-1] if len(parent) else None
        if prev is not None:
            prev.tail = (prev.tail or "") + tail
        else:
            parent.text = (parent.text or "") + tail


# Blocks of other products and of reviews (Amazon's carousels, "customers also bought"): the
# last cut, for pages that are still too large without them.
_BLOCKS = "|".join(
    f"//*[contains(translate(@id, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz'), '{w}') or "
    f"contains(translate(@class, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz'), '{w}')]"
    for w in (
        "carousel",
        "review",
        "sims",
        "rhf",
        "similar",
        "recommend",
        "sponsored",
        "navfooter",
        "quickview",
    )
)


# Where a page's content is: a `<header>` in here is the product's own ("product--header" on
# Shopware 5, holding the title, brand and rating), not the site's.
# `<html>` and `<body>` do not count: Magento names its body "catalog-product-view", and some
# sites put `itemscope` on the whole page.
_CONTENT = (
    "ancestor::main or ancestor::article or ancestor::*[not(self::body or self::html)]"
    "[@role='main' or @itemscope or contains(translate(@class, 'PRODUCT', 'product'), 'product')]"
)


_MARKUP_OR_PRICE = (
    "descendant-or-self::*[@itemprop or contains(translate(@class, 'PRICE', 'price'), 'price')]"
)
_HOLDS_FACTS = (
    ".//h1|.//*[@itemprop or @itemscope]|.//*[contains(translate(@class, 'BREADCUM', 'breadcum'), 'breadcrumb')"
    " or contains(translate(@id, 'BREADCUM', 'breadcum'), 'breadcrumb')]"
)


def _page_chrome(element: lxml_html.HtmlElement) -> bool:
    """A site's header, footer or navigation: not one inside the main content or a product, not
    one named for the product, and not a breadcrumb (`<nav class="breadcrumb">`: the category path)."""
    hint = f"{element.get('id') or ''} {element.get('class') or ''} {element.get('aria-label') or ''}".lower()
    if "product" in hint or "breadcrumb" in hint:
        return False
    return not element.xpath(f"boolean({_CONTENT})")


def _drop_select(select: lxml_html.HtmlElement) -> None:
    """A variant `<select>` with the label that names it (`<label for=…>`, Shopware's
    `<p class="configurator--label">Farbe:</p>` just before it): left without its select, the
    label reads as a field whose value is whatever text follows ("Farbe: Größe:")."""
    labels = []
    if select.get("id"):
        labels += select.getroottree().xpath("//label[@for=$id]", id=select.get("id"))
    before = select.getprevious()
    holder = select.getparent()
    if before is None and holder is not None and len(holder) == 1 and not (holder.text or "").strip():
        before = holder.getprevious()  # Shopware: the label, then a `.select-field` holding the select
        select = holder
    if before is not None and isinstance(before.tag, str) and len(before) == 0:
        text = " ".join((before.text or "").split())
        if text.endswith(":") and len(text) <= 31:
            labels.append(before)
    for element in [*labels, select]:
        _drop(element)


def _drop_long_attributes(element: lxml_html.HtmlElement) -> None:
    for name, value in list(element.attrib.items()):
        if len(value) > 400 and name not in ("content", "src", "href"):
            del element.attrib[name]


def _size(tree: lxml_html.HtmlElement) -> int:
    return len(lxml_html.tostring(tree, encoding="unicode").encode())


def trim(text: str, max_bytes: int) -> str:
    tree = lxml_html.document_fromstring(text)
    for comment in tree.xpath("//comment()"):
        _drop(comment)
    for element in list(tree.iter()):
        if not isinstance(element.tag, str):
            continue
        tag = element.tag.lower()
        kind = (element.get("type") or "").split(";")[0].strip().lower()
        script = tag == "script" and not kind.endswith("json")
        styling = tag in ("style", "svg", "noscript", "iframe", "template") or tag.endswith("}svg")
        # A microdata `<link itemprop="availability" href=…>` is a fact, not a resource hint.
        link = (
            tag == "link"
            and (element.get("rel") or "").lower() != "canonical"
            and not element.get("itemprop")
        )
        if script or styling or link:
            _drop(element)
        else:
            for attr in DROP_ATTRS:
                element.attrib.pop(attr, None)
            for attr in [a for a in element.attrib if TRACKING_ATTR.match(a)]:
                del element.attrib[attr]
    steps = [
        lambda: [_drop(e) for e in tree.xpath("//header|//footer|//nav") if _page_chrome(e)],
        lambda: [
            _drop(e)
            for e in tree.xpath("//script")
            if "ld+json" not in (e.get("type") or "").lower() and len(e.text or "") > 40_000
        ],
        lambda: [_drop_select(e) for e in tree.xpath("//select")],
        lambda: [_drop(e) for e in tree.xpath("//ul[count(li) > 15]|//ol[count(li) > 15]")],
        # Hidden blocks, but not one holding the page's gallery: Amazon marks its image block
        # aria-hidden while its script runs, and `data-old-hires` / `data-a-dynamic-image` are the
        # main image's only copy outside the scripts. Nor one holding markup or a price: aria-hidden
        # is not unseen (Walmart's shown price digits, `itemprop="price"` among them, are hidden
        # from screen readers, which read a copy).
        lambda: [
            _drop(e)
            for e in tree.xpath("//*[@aria-hidden='true']|//*[@hidden]")
            if not e.xpath(".//img[@data-old-hires or @data-a-dynamic-image]")
            and not e.xpath(_MARKUP_OR_PRICE)
        ],
        lambda: [_drop_long_attributes(e) for e in tree.iter() if isinstance(e.tag, str)],
        lambda: [_drop(e) for e in tree.xpath(_BLOCKS)],
        # Amazon's overlays (`#a-popover-immersiveView`: the video and 360° viewer), shown on a click.
        lambda: [_drop(e) for e in tree.xpath("//*[starts-with(@id, 'a-popover-')]")],
        # A long table, unless it holds the product (an older shop's layout table around the
        # `<h1>`, the price and the picture: Buy.com's and Newegg's 2010 pages).
        lambda: [
            _drop(e)
            for e in tree.xpath("//input[@type='hidden']|//form//ul|//table[count(.//tr) > 12]")
            if e.tag != "table" or not e.xpath(_HOLDS_FACTS)
        ],
        # Pages laid out on YUI's grids (before HTML5) name the site's header and footer `#hd` /
        # `#ft` (the content is `#bd`); kept when it holds the product's heading, markup or crumbs.
        lambda: [
            _drop(e)
            for e in tree.xpath("//*[@id='hd' or @id='ft']")
            if _page_chrome(e) and not e.xpath(_HOLDS_FACTS)
        ],
    ]
    for element in tree.iter():  # whitespace runs left by the removed elements
        if element.tail and not element.tail.strip():
            element.tail = "\n" if "\n" in element.tail else " "
        if isinstance(element.tag, str) and element.text and not element.text.strip():
            element.text = "\n" if "\n" in element.text else " "
    for step in steps:
        if _size(tree) <= max_bytes:
            break
        step()
    # The cut page is written as UTF-8: a declared ISO-8859-1 or Shift_JIS would have it read as
    # that ("Cyber-shot®" as "Cyber-shotÂ®").
    for meta in tree.iter("meta"):
        if meta.get("charset"):
            meta.set("charset", "utf-8")
        elif (meta.get("http-equiv") or "").lower() == "content-type" and "charset" in (
            meta.get("content") or ""
        ):
            meta.set("content", "text/html; charset=utf-8")
    return "<!DOCTYPE html>\n" + lxml_html.tostring(tree, encoding="unicode")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("source", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--max-bytes", type=int, default=190_000)
    args = parser.parse_args()
    text = trim(decode_body(args.source.read_bytes()), args.max_bytes)
    args.out.write_text(text, encoding="utf-8")
    print(f"{args.out}: {len(text.encode())} bytes")


if __name__ == "__main__":
    main()
