"""Editorial and "shop the look" pages as looks: the photo, the products it links to, and the
hotspot boxes when the page states them.

Recognised markup (what real shop-the-look widgets publish):
- a container whose class or `data-*` names a look (`look`, `shop-the-look`, `get-the-look`,
  `data-look-id`), holding the look photo (`img`) and product links;
- hotspots: elements with `data-bbox="x0,y0,x1,y1"` (pixels, or percents with `%`), or
  `data-x`/`data-y` / `style="left:…%;top:…%"` points, linking a product by `href`,
  `data-product-url` or `data-product-id`;
- JSON-LD `ImageObject` / `CreativeWork` nodes whose `mentions` or `about` are Products.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from lxml import html as lxml_html

from lookbench_live.scrapers.extract.jsonld import (
    load_scripts,
    parse_tree,
    top_nodes,
    type_names,
)
from lookbench_live.scrapers.extract.model import Extraction, LookData, Problem, parse_datetime
from lookbench_live.scrapers.extract.values import absolute_url, clean_title

_LOOK_CLASSES = frozenset({"look", "shop-the-look", "shopthelook", "get-the-look", "outfit", "lookbook-look"})
_PERCENT = re.compile(r"(left|top|width|height)\s*:\s*(-?\d+(?:\.\d+)?)%", re.I)
MAX_LOOKS_PER_PAGE = 50


def look_id(page_url: str, photo_url: str) -> str:
    return hashlib.sha256(f"{page_url}\n{photo_url}".encode()).hexdigest()[:20]


def extract_looks(
    text: str,
    url: str,
    tree: lxml_html.HtmlElement | None = None,
    scripts: list[tuple[Any, Problem | None]] | None = None,
) -> Extraction:
    out = Extraction(platform="looks")
    tree = tree if tree is not None else parse_tree(text)
    if tree is None:
        out.problems.append(Problem("unparsable_html", "no document"))
        return out
    published = None
    for name in ("article:published_time", "og:published_time"):
        for meta in tree.iter("meta"):
            if (meta.get("property") or meta.get("name") or "").lower() == name:
                published = parse_datetime(meta.get("content"))
    page_title = clean_title(tree.findtext(".//title"))
    seen_photos: set[str] = set()
    for container in _containers(tree):
        look = _look_from_container(container, url, page_title, published)
        if look is None:
            continue
        if look.photo_url in seen_photos:
            continue
        seen_photos.add(look.photo_url)
        out.looks.append(look)
        if len(out.looks) >= MAX_LOOKS_PER_PAGE:
            out.problems.append(Problem("too_many_looks", f"kept the first {MAX_LOOKS_PER_PAGE}"))
            return out
    for script in load_scripts(tree) if scripts is None else scripts:
        if script.problem:
            out.problems.append(script.problem)
        for node in top_nodes(script.data) if script.data is not None else []:
            look = _look_from_jsonld(node, url, published)
            if look is not None and look.photo_url not in seen_photos:
                seen_photos.add(look.photo_url)
                out.looks.append(look)
    return out


def _containers(tree: lxml_html.HtmlElement) -> list[lxml_html.HtmlElement]:
    found = []
    for element in tree.iter():
        if not isinstance(element.tag, str) or element.tag in ("html", "body", "img", "a", "script"):
            continue
        is_look = element.get("data-look-id") is not None or bool(
            _LOOK_CLASSES & set((element.get("class") or "").lower().split())
        )
        # The innermost look container wins (a page wrapper called "looks" is not a look).
        if is_look and not any(_is_ancestor(element, other) for other in found):
            found = [f for f in found if not _is_ancestor(f, element)]
            found.append(element)
    return found


def _is_ancestor(ancestor: Any, element: Any) -> bool:
    parent = element.getparent()
    while parent is not None:
        if parent is ancestor:
            return True
        parent = parent.getparent()
    return False


def _look_from_container(
    container: lxml_html.HtmlElement, url: str, page_title: str | None, published: Any
) -> LookData | None:
    images = [img for img in container.iter("img") if img.get("src") or img.get("data-src")]
    photo = next((img for img in images if "look" in (img.get("class") or "").lower()), None)
    if photo is None and images:
        photo = images[0]
    if photo is None:
        return None
    photo_url = absolute_url(photo.get("src") or photo.get("data-src"), url)
    if not photo_url:
        return None
    refs: list[str] = []
    boxes: list[dict[str, Any]] = []
    for element in container.iter():
        if not isinstance(element.tag, str):
            continue
        ref = _ref(element, url)
        box = _box(element)
        if ref is None and box is not None:
            link = next((a for a in element.iter("a") if a.get("href")), None)
            ref = _ref(link, url) if link is not None else None
        if ref is None:
            continue
        if ref not in refs:
            refs.append(ref)
        if box is not None:
            boxes.append({"ref": ref, **box})
    if not refs:
        return None
    title = clean_title(container.get("data-title") or photo.get("alt")) or page_title
    return LookData(
        look_id=container.get("data-look-id") or look_id(url, photo_url),
        url=url,
        photo_url=photo_url,
        title=title,
        product_refs=refs,
        boxes=boxes,
        published_at=parse_datetime(container.get("data-published")) or published,
    )


def _ref(element: Any, url: str) -> str | None:
    if element is None:
        return None
    for attr in ("data-product-url", "data-product-href"):
        if element.get(attr):
            return absolute_url(element.get(attr), url)
    if element.tag == "a" and element.get("href") and not element.get("href", "").startswith("#"):
        return absolute_url(element.get("href"), url)
    if element.get("data-product-id"):
        return str(element.get("data-product-id")).strip() or None
    return None


def _box(element: Any) -> dict[str, Any] | None:
    bbox = element.get("data-bbox")
    if bbox:
        unit = "percent" if "%" in bbox else "px"
        try:
            values = [float(v.strip().rstrip("%")) for v in bbox.split(",")]
        except ValueError:
            return None
        if len(values) == 4 and values[2] > values[0] and values[3] > values[1]:
            return {"bbox": [_num(v) for v in values], "unit": unit}
        return None
    x, y = element.get("data-x"), element.get("data-y")
    if x is not None and y is not None:
        unit = "percent" if "%" in x or "%" in y else "px"
        try:
            return {"point": [_num(float(x.rstrip("%"))), _num(float(y.rstrip("%")))], "unit": unit}
        except ValueError:
            return None
    style = dict((k.lower(), float(v)) for k, v in _PERCENT.findall(element.get("style") or ""))
    if "left" in style and "top" in style:
        if "width" in style and "height" in style:
            return {
                "bbox": [_num(style["left"]), _num(style["top"]), _num(style["left"] + style["width"]),
                         _num(style["top"] + style["height"])],
                "unit": "percent",
            }  # fmt: skip
        return {"point": [_num(style["left"]), _num(style["top"])], "unit": "percent"}
    return None


def _num(value: float) -> int | float:
    return int(value) if float(value).is_integer() else round(value, 3)


def _look_from_jsonld(node: dict[str, Any], url: str, published: Any) -> LookData | None:
    if not type_names(node) & {"imageobject", "creativework", "collectionpage", "article"}:
        return None
    mentions = node.get("mentions") or node.get("about") or []
    mentions = mentions if isinstance(mentions, list) else [mentions]
    refs = []
    for mention in mentions:
        if isinstance(mention, dict) and type_names(mention) & {"product", "productgroup"}:
            ref = absolute_url(mention.get("url") or mention.get("@id"), url) or mention.get("sku")
            if ref and ref not in refs:
                refs.append(str(ref))
    image = node.get("contentUrl") or node.get("image")
    if isinstance(image, list):
        image = image[0] if image else None
    if isinstance(image, dict):
        image = image.get("contentUrl") or image.get("url")
    photo_url = absolute_url(image, url)
    if not refs or not photo_url:
        return None
    return LookData(
        look_id=look_id(url, photo_url),
        url=url,
        photo_url=photo_url,
        title=clean_title(node.get("name") or node.get("headline")),
        product_refs=refs,
        published_at=parse_datetime(node.get("datePublished")) or published,
    )
