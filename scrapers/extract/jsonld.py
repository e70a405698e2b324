"""Read every JSON-LD script of a page on its own, so one bad script never hides a good one.

extruct's JSON-LD extractor stops at the first script it cannot parse (extruct#109, #143,
#208, PR #255), so scripts are loaded here one by one with the clean-ups real pages need
(CDATA wrappers, HTML comments, trailing semicolons, `&quot;` entities, control characters),
then, for a script JSON still refuses, the repairs templates call for (`repaired`: unescaped
quotes, missing commas, PHP escapes, block comments, several objects, closers), and each failure
is returned as a counted `Problem` (docs/reliability.md S7–S9).
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from typing import Any, NamedTuple

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


class Script(NamedTuple):
    """One JSON-LD script as read: its data (None when empty or refused), why it was refused,
    and whether it parsed only after the template repairs below (`repaired`)."""

    data: Any
    problem: Problem | None = None
    repaired: bool = False


def load_scripts(tree: lxml_html.HtmlElement) -> list[Script]:
    """Every JSON-LD script of the page, parsed once: products and looks both read them."""
    return [load_script(text) for text in jsonld_scripts(tree)]


def load_script(text: str) -> Script:
    """Parse one script. Empty scripts are `Script(None)`."""
    if not text or not text.strip():
        return Script(None)
    if len(text) > MAX_SCRIPT_CHARS:
        return Script(None, Problem("jsonld_too_large", f"{len(text)} characters"))
    cleaned = _WRAPPERS.sub("", text)
    cleaned = _LINE_COMMENT.sub("", cleaned)
    cleaned = _CONTROL.sub(" ", cleaned).strip().rstrip(";").strip()
    if not cleaned:
        return Script(None)
    attempts = [cleaned, _TRAILING_COMMA.sub(r"\1", cleaned)]
    if "&quot;" in cleaned or "&#" in cleaned:
        attempts.append(html.unescape(cleaned))
    error = ""
    for attempt in attempts:
        try:
            data = json.loads(attempt, strict=False)
        except RecursionError:
            return Script(None, Problem("jsonld_too_deep", "nesting beyond the parser's recursion limit"))
        except ValueError as exc:
            error = error or str(exc)
            continue
        return _checked_depth(data)
    try:
        # The text as written, not `attempts[1]`: that regex drops `,]` inside values too.
        data = repaired(cleaned)
    except RecursionError:
        return Script(None, Problem("jsonld_too_deep", "nesting beyond the parser's recursion limit"))
    if data is None:
        return Script(None, Problem("invalid_jsonld", error[:200]))
    return _checked_depth(data, repaired=True)


def _checked_depth(data: Any, *, repaired: bool = False) -> Script:
    if _depth_exceeds(data, MAX_DEPTH):
        return Script(None, Problem("jsonld_too_deep", f"nesting deeper than {MAX_DEPTH}"))
    return Script(data, None, repaired)


# Repairs for JSON-LD as templates write it, tried only on a script `json.loads` refuses; each
# keeps every character of every value as written (S7):
# - a quote a template did not escape inside a value (`"name": "Pan 12" Round"`, a description's
#   `<p class="lead">`): it is escaped;
# - a comma a template left out between two members (`"sku": "A1" "brand": …`) or two values;
# - an escape JSON does not have (PHP's `addslashes` writes `Men\'s`; `\x` before any other letter):
#   the character as written;
# - `/* … */` comments, a byte-order mark or zero-width and no-break spaces between tokens;
# - several objects in one script (`{…}{…}`, `{…},{…}`): a list of them; closers left over
#   after the first complete value (`…]} }`) are dropped, and closers a script ends without
#   are added when it ends between two values (never inside a value: a cut-off text is refused).
MAX_REPAIRS = 20  # a script needing more is not what a template wrote: it is refused
MAX_REPAIR_CHARS = 500_000  # each repair re-reads the script from its start
_BLANK = "\ufeff\u200b\u200c\u200d\u2060\u00a0"
_ESCAPABLE = frozenset('"\\/bfnrtu')
_END_OF_VALUE = frozenset('"}]0123456789el')  # a string, object, array, number, true/false/null


def repaired(text: str) -> Any:
    """The data of a JSON text after the repairs above, or None when they do not make it one."""
    if len(text) > MAX_REPAIR_CHARS:
        return None
    text = text.strip(_BLANK + " \t\r\n")
    for _ in range(MAX_REPAIRS + 1):
        try:
            return _values(text)
        except json.JSONDecodeError as exc:
            fixed = _fix_at(text, exc.pos)
        if fixed is None or fixed == text:
            return None
        text = fixed
    return None


def _values(text: str) -> Any:
    """One JSON value, or a list of the values a script writes one after another (optionally
    comma-separated); closers or semicolons after them are ignored."""
    decoder = json.JSONDecoder(strict=False)
    values: list[Any] = []
    # Positions, not slices: copying the rest of the script per value is quadratic.
    at = _SPACE.match(text).end()
    while True:
        value, at = decoder.raw_decode(text, at)
        values.append(value)
        at = _SPACE.match(text, at).end()
        if _CLOSERS_TO_END.match(text, at):
            return values[0] if len(values) == 1 else values
        if text[at] == ",":
            at = _SPACE.match(text, at + 1).end()
        if text[at] not in "{[":
            # Something other than another object follows: report where, for `_fix_at`.
            raise json.JSONDecodeError("Extra data", text, at)


_SPACE = re.compile(r"\s*")
_CLOSERS_TO_END = re.compile(r"[}\]);, \t\r\n]*\Z")
# A JavaScript object's unquoted key (`sku: "A1"`; not a URL's `https://`).
_UNQUOTED_KEY = re.compile(r"[A-Za-z_$][\w$]*\s*:(?!//)")


def _fix_at(text: str, at: int) -> str | None:
    """The text with the one repair the parser's stop at `at` calls for, or None when none does."""
    if at >= len(text):
        closers = _missing_closers(text)
        return text + closers if closers else None
    char = text[at]
    if char in _BLANK:
        return text[:at] + " " + text[at + 1 :]
    if text.startswith("/*", at):
        # A comment between tokens (the parser stops only outside strings): a comment-like text
        # inside a value whose quote is left unescaped stays the value's.
        end = text.find("*/", at + 2)
        return None if end < 0 else text[:at] + " " + text[end + 2 :]
    if char == "\\":
        following = text[at + 1 : at + 2]
        if following == "'":
            return text[:at] + text[at + 1 :]
        if following not in _ESCAPABLE or (following == "u" and not _HEX4.fullmatch(text[at + 2 : at + 6])):
            return text[:at] + "\\" + text[at:]
        return None
    before = len(text[:at].rstrip()) - 1
    if before < 0:
        return None
    previous = text[before]
    if char in "}]" and previous == ",":
        return text[:before] + text[before + 1 :]  # a trailing comma
    if char in '"{[' and previous in _END_OF_VALUE:
        if previous == '"' and char == '"' and before + 1 == at:
            return None  # `""`: an empty string's quotes, not two values
        return text[:at] + "," + text[at:]
    if previous == '"' and char not in ",:}]":
        return text[:before] + '\\"' + text[before + 1 :]
    if previous == "," and char not in '"}]' and not _UNQUOTED_KEY.match(text, at):
        # `"Pan 12", Round"`: the quote before the comma was a value's own.
        quote = len(text[:before].rstrip()) - 1
        if quote >= 0 and text[quote] == '"':
            return text[:quote] + '\\"' + text[quote + 1 :]
    return None


_HEX4 = re.compile(r"[0-9A-Fa-f]{4}")


def _missing_closers(text: str) -> str:
    """The closers a text ending between two values leaves open ("" when it ends in a string)."""
    stack: list[str] = []
    at, in_string = 0, False
    while at < len(text):
        char = text[at]
        if in_string:
            if char == "\\":
                at += 2
                continue
            in_string = char != '"'
        elif char == '"':
            in_string = True
        elif char in "{[":
            stack.append("}" if char == "{" else "]")
        elif char in "}]" and (not stack or stack.pop() != char):
            return ""
        at += 1
    if in_string or not stack or text.rstrip()[-1:] in (":", ","):
        return ""
    return "".join(reversed(stack))


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


# The schema.org pages whose `mainEntity` is what the page is about: a product's page.
PAGE_TYPES = frozenset({"webpage", "itempage"})


def top_nodes(data: Any, depth: int = 0, *, in_place: bool = True) -> Iterator[dict[str, Any]]:
    """The top-level nodes of a JSON-LD document: roots, `@graph` members, list members, and
    the items of an `ItemList` (not arbitrary nested nodes such as related products); with
    `in_place`, also a page's `mainEntity` and an offer's `itemOffered` (which the rules before
    issue 27's twelfth round did not read: `schema_org` keeps the keys those rules gave)."""
    if depth > 6:
        return
    if isinstance(data, list):
        for item in data:
            yield from top_nodes(item, depth + 1, in_place=in_place)
    elif isinstance(data, dict):
        if "@graph" in data:
            yield from top_nodes(data["@graph"], depth + 1, in_place=in_place)
            rest = {k: v for k, v in data.items() if k not in ("@graph", "@context")}
            if "@type" in rest:
                yield rest
            return
        yield data
        types = type_names(data)
        if "itemlist" in types:
            for element in data.get("itemListElement") or []:
                if isinstance(element, dict):
                    inner = element.get("item")
                    yield from top_nodes(
                        inner if isinstance(inner, dict) else element, depth + 1, in_place=in_place
                    )
        if not in_place:
            return
        if types & PAGE_TYPES:
            # The thing a page is about (`ItemPage.mainEntity`: its product) is stated in place
            # as often as by an `@id` reference to a `@graph` member. Not a list it is about:
            # a category page's products are not the page's product.
            main = data.get("mainEntity")
            for node in main if isinstance(main, list) else [main]:
                if isinstance(node, dict) and len(node) > 1 and "itemlist" not in type_names(node):
                    yield node
        offered = data.get("itemOffered")
        if types & {"offer", "aggregateoffer"} and isinstance(offered, dict):
            # An Offer for one item (`Offer.itemOffered`): the item, with the offer as its own
            # unless it states its own.
            offer = {k: v for k, v in data.items() if k != "itemOffered"}
            yield offered if "offers" in offered else {**offered, "offers": offer}


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
