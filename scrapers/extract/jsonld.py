"""Read every JSON-LD script of a page on its own, so one bad script never hides a good one.

extruct's JSON-LD extractor stops at the first script it cannot parse (extruct#109, #143,
#208, PR #255), so scripts are loaded here one by one with the clean-ups real pages need
(CDATA wrappers, HTML comments, trailing semicolons, `&quot;` entities, control characters),
and each failure is returned as a counted `Problem` (docs/reliability.md S7–S9).
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from typing import Any

from lxml import html as lxml_html

from lookbench_live.scrapers.extract.model import Problem

MAX_SCRIPT_CHARS = 2_000_000
MAX_DEPTH = 64  # deeper nesting is never real product data (S8: 10,000 levels is an attack)

_WRAPPERS = re.compile(r"/\*\s*<!\[CDATA\[\s*\*/|/\*\s*\]\]>\s*\*/|<!\[CDATA\[|\]\]>|<!--|-->")
_LINE_COMMENT = re.compile(r"^\s*//[^\n]*$", re.M)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")
_TRAILING_COMMA = re.compile(r",\s*([}\]])")


def jsonld_scripts(tree: lxml_html.HtmlElement) -> list[str]:
    """Texts of `<script type="application/ld+json">` (type matched case- and space-insensitively)."""
    out = []
    for script in tree.iter("script"):
        kind = (script.get("type") or "").split(";")[0].strip().lower()
        if kind == "application/ld+json":
            out.append(script.text or "")
    return out


def load_scripts(tree: lxml_html.HtmlElement) -> list[tuple[Any, Problem | None]]:
    """Every JSON-LD script of the page, parsed once: products and looks both read them."""
    return [load_script(text) for text in jsonld_scripts(tree)]


def load_script(text: str) -> tuple[Any, Problem | None]:
    """Parse one script; returns (data or None, problem or None). Empty scripts are (None, None)."""
    if not text or not text.strip():
        return None, None
    if len(text) > MAX_SCRIPT_CHARS:
        return None, Problem("jsonld_too_large", f"{len(text)} characters")
    cleaned = _WRAPPERS.sub("", text)
    cleaned = _LINE_COMMENT.sub("", cleaned)
    cleaned = _CONTROL.sub(" ", cleaned).strip().rstrip(";").strip()
    if not cleaned:
        return None, None
    attempts = [cleaned, _TRAILING_COMMA.sub(r"\1", cleaned)]
    if "&quot;" in cleaned or "&#" in cleaned:
        attempts.append(html.unescape(cleaned))
    error = ""
    for attempt in attempts:
        try:
            data = json.loads(attempt, strict=False)
        except RecursionError:
            return None, Problem("jsonld_too_deep", "nesting beyond the parser's recursion limit")
        except ValueError as exc:
            error = str(exc)
            continue
        if _depth_exceeds(data, MAX_DEPTH):
            return None, Problem("jsonld_too_deep", f"nesting deeper than {MAX_DEPTH}")
        return data, None
    return None, Problem("invalid_jsonld", error[:200])


def _depth_exceeds(data: Any, limit: int) -> bool:
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return False


def type_names(node: dict[str, Any]) -> set[str]:
    """Lower-case schema.org type names of a node ("schema:Product", "http://schema.org/Product" → "product")."""
    raw = node.get("@type") or node.get("type") or []
    values = raw if isinstance(raw, list) else [raw]
    out = set()
    for value in values:
        if isinstance(value, str):
            out.add(re.split(r"[/:#]", value.strip())[-1].lower())
    return out


def top_nodes(data: Any, depth: int = 0) -> Iterator[dict[str, Any]]:
    """The top-level nodes of a JSON-LD document: roots, `@graph` members, list members, and
    the items of an `ItemList` (not arbitrary nested nodes such as related products)."""
    if depth > 6:
        return
    if isinstance(data, list):
        for item in data:
            yield from top_nodes(item, depth + 1)
    elif isinstance(data, dict):
        if "@graph" in data:
            yield from top_nodes(data["@graph"], depth + 1)
            rest = {k: v for k, v in data.items() if k not in ("@graph", "@context")}
            if "@type" in rest:
                yield rest
            return
        yield data
        if "itemlist" in type_names(data):
            for element in data.get("itemListElement") or []:
                if isinstance(element, dict):
                    inner = element.get("item")
                    yield from top_nodes(inner if isinstance(inner, dict) else element, depth + 1)


def id_index(nodes: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Nodes by `@id`, including nested ones (for `{"@id": …}` references)."""
    index: dict[str, dict[str, Any]] = {}
    stack: list[tuple[Any, int]] = [(n, 0) for n in nodes]
    while stack:
        item, depth = stack.pop()
        if depth > 12:
            continue
        if isinstance(item, dict):
            if isinstance(item.get("@id"), str) and len(item) > 1:
                index.setdefault(item["@id"], item)
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return index


def parse_tree(text: str) -> lxml_html.HtmlElement | None:
    try:
        return lxml_html.document_fromstring(text)
    except (ValueError, TypeError, Exception):  # lxml raises ParserError on empty documents
        return None
