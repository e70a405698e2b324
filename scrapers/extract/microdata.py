"""schema.org microdata (`itemscope` / `itemtype` / `itemprop`) read from the page's lxml tree.

The shape is extruct's "uniform" one (`{"@type": "Product", "name": …, "offers": {…}}`, a
property stated twice becomes a list), so the JSON-LD code reads both. It is read here rather
than through extruct because importing extruct loads rdflib, mf2py, BeautifulSoup and requests
(about 0.4 s) for the one syntax extraction uses: `lookbench-live extract` starts without them.
"""

from __future__ import annotations

import re
from typing import Any

from lxml import html as lxml_html

from lookbench_live.scrapers.extract.values import absolute_url, shown_text

MAX_DEPTH = 24  # nested items deeper than this are not product data
_URL_ATTRS = {"a": "href", "area": "href", "link": "href", "img": "src", "audio": "src", "embed": "src",
              "iframe": "src", "source": "src", "track": "src", "video": "src", "object": "data"}  # fmt: skip
_TEXT_PROPS = {"name", "brand", "title"}  # properties whose value is a name, never a URL


def microdata_items(tree: lxml_html.HtmlElement, url: str) -> list[dict[str, Any]]:
    """Top-level items of the page (an `itemscope` that is no other item's property), in order."""
    out = []
    for element in tree.iter():
        if not isinstance(element.tag, str) or element.get("itemscope") is None:
            continue
        if element.get("itemprop") is not None and _owner(element) is not None:
            continue
        out.append(_item(element, url, 0))
    return out


def microdata_item(element: lxml_html.HtmlElement, url: str) -> dict[str, Any]:
    """The item an `itemscope` element states, in the uniform shape `microdata_items` gives."""
    return _item(element, url, 0)


def product_elements(root: lxml_html.HtmlElement) -> list[lxml_html.HtmlElement]:
    """The elements below `root` that are a schema.org Product item (`itemscope`, `itemtype`
    ending in "Product"), in page order."""
    return [
        e
        for e in root.iter()
        if isinstance(e.tag, str)
        and e.get("itemscope") is not None
        and (e.get("itemtype") or "").rstrip("/").rsplit("/", 1)[-1].lower() == "product"
    ]


def itemprop_values(tree: lxml_html.HtmlElement, url: str) -> dict[str, list[Any]]:
    """Every `itemprop` of the page that belongs to no item (fragments a template left outside
    its Product), by property name, in page order."""
    out: dict[str, list[Any]] = {}
    for element in tree.iter():
        if not isinstance(element.tag, str) or element.get("itemprop") is None:
            continue
        if _owner(element) is not None:
            continue
        value = _item(element, url, 0) if element.get("itemscope") is not None else _value(element, url)
        for name in element.get("itemprop", "").split():
            if value not in (None, ""):
                out.setdefault(name, []).append(value)
    return out


def _owner(element: lxml_html.HtmlElement) -> lxml_html.HtmlElement | None:
    parent = element.getparent()
    while parent is not None:
        if parent.get("itemscope") is not None:
            return parent
        parent = parent.getparent()
    return None


def _item(element: lxml_html.HtmlElement, url: str, depth: int) -> dict[str, Any]:
    item: dict[str, Any] = {}
    types = (element.get("itemtype") or "").split()
    if types:
        names = [t.rstrip("/").rsplit("/", 1)[-1] for t in types]
        item["@type"] = names[0] if len(names) == 1 else names
        item["@context"] = types[0].rstrip("/").rsplit("/", 1)[0]
    if element.get("itemid"):
        item["@id"] = element.get("itemid")
    if depth > MAX_DEPTH:
        return item
    for prop in _properties(element):
        nested = _item(prop, url, depth + 1) if prop.get("itemscope") is not None else None
        for name in (prop.get("itemprop") or "").split():
            value = nested if nested is not None else _value(prop, url, name)
            if value in (None, ""):
                continue
            # schema.org's property names start lower-case; a template's `itemprop="Color"`
            # (Walmart) means `color`. Full URLs (`http://schema.org/color`) stay as written.
            if name[:1].isupper() and ":" not in name:
                name = name[:1].lower() + name[1:]
            if name in item and name not in ("@type", "@context", "@id"):
                known = item[name] if isinstance(item[name], list) else [item[name]]
                # A value stated again (a `<meta itemprop="name">` beside the `<h1 itemprop="name">`,
                # the currency beside each of a sale and a standard price) is one value, not two.
                if value not in known:
                    item[name] = [*known, value]
            else:
                item[name] = value
    return item


def _properties(element: lxml_html.HtmlElement) -> list[lxml_html.HtmlElement]:
    """The `itemprop` elements below `element` that belong to it (not to a nested item)."""
    out = []
    stack = list(reversed([c for c in element if isinstance(c.tag, str)]))
    while stack:
        child = stack.pop()
        if child.get("itemprop") is not None:
            out.append(child)
        if child.get("itemscope") is None:
            stack.extend(reversed([c for c in child if isinstance(c.tag, str)]))
    return out


def _value(element: lxml_html.HtmlElement, url: str, name: str | None = None) -> Any:
    """The value of `element`'s property `name` (all its properties' when None)."""
    tag = element.tag.lower() if isinstance(element.tag, str) else ""
    if element.get("content") is not None:
        return element.get("content").strip()
    names = [name] if name else (element.get("itemprop") or "").split()
    if tag in ("a", "area") and _TEXT_PROPS & set(names) and shown_text(element):
        # By the microdata spec a link's value is its href; a template's `<a itemprop="name"
        # href="/search?q=brand:…">Marmont Hill</a>` names the brand by its text, not by a URL.
        return shown_text(element)
    if tag in _URL_ATTRS:
        return absolute_url(element.get(_URL_ATTRS[tag]), url) or ""
    if tag in ("data", "meter") and element.get("value") is not None:
        return element.get("value").strip()
    if tag == "time" and element.get("datetime"):
        return element.get("datetime").strip()
    if "name" in names:
        return shown_text(element)
    if {"price", "lowPrice", "highPrice"} & set(names):
        # Mango's `<span itemprop="price">` holds the struck former price ("$79.99", class
        # "strikethrough") before the one it charges ("$39.99"): the struck parts are no value.
        return " ".join("".join(t for t in _unstruck_text(element)).split())
    return " ".join(element.text_content().split())


_STRUCK = re.compile(r"(?i)strike|line-through")


def _unstruck_text(element: lxml_html.HtmlElement) -> list[str]:
    """The element's text without its struck-through parts (`<del>`, `<s>`, a class naming a strike)."""
    out: list[str] = []

    def walk(node: lxml_html.HtmlElement) -> None:
        struck = node is not element and (
            str(node.tag).lower() in ("del", "s", "strike") or _STRUCK.search(node.get("class") or "")
        )
        if not struck:
            out.append(node.text or "")
            for child in node:
                if isinstance(child.tag, str):
                    walk(child)
                out.append(child.tail or "")

    walk(element)
    return out
