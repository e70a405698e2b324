"""Opt-outs a product page can state beyond the image's `X-Robots-Tag` header.

- Robots meta tags: `<meta name="robots" content="noai, noimageai">` (or addressed to our
  agent token, `<meta name="lookbench-live" content="noai">`). `noai` forbids any AI use of the
  page's content, `noimageai` of its images; a benchmark of images honours both.
- TDMRep (W3C Community Group, "TDM Reservation Protocol"): the `tdm-reservation` HTTP header,
  the `<meta name="tdm-reservation" content="1">` tag, or the origin's
  `/.well-known/tdmrep.json` rules. `1` reserves text-and-data-mining rights: we do not mine.

Pure functions over what the spider already has (headers, HTML bytes, the well-known file's
text); the spider decides where to call them and records the reason. Nothing here does I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from html.parser import HTMLParser
from urllib.parse import urlsplit

from lookbench_live.network import limits

OPT_OUT_DIRECTIVES = frozenset({"noai", "noimageai"})
TDMREP_PATH = "/.well-known/tdmrep.json"
# Meta tags live in <head>; a page that has not closed it within this many characters is
# scanned that far and no further (bounded work on hostile pages).
MAX_HEAD_CHARS = 512 * 1024
MAX_TDMREP_RULES = 10_000


@dataclass(frozen=True, slots=True)
class OptOut:
    """Why a page may not be used: `reason` is the rejection code, `detail` what the page said."""

    reason: str  # opt_out_noai | opt_out_tdm
    detail: str
    policy: str | None = None  # TDMRep's tdm-policy URL, when the reservation names one


@dataclass(frozen=True, slots=True)
class TdmRule:
    """One entry of /.well-known/tdmrep.json."""

    location: str
    reserved: bool
    policy: str | None = None

    def matches(self, path: str) -> bool:
        return _location_regex(self.location).match(path) is not None


class _HeadEnded(Exception):
    """Raised by the scanner at </head> or <body>: nothing after it is read (saves parsing the body)."""


class _MetaScanner(HTMLParser):
    """Collects (name, content) of <meta> tags until </head> or <body>."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.metas: list[tuple[str, str]] = []
        self.done = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.done:
            return
        if tag == "body":
            self.done = True
            raise _HeadEnded
        if tag != "meta":
            return
        values = {k.lower(): (v or "") for k, v in attrs}
        name = (values.get("name") or values.get("http-equiv") or "").strip().lower()
        if name:
            self.metas.append((name, values.get("content", "")))

    handle_startendtag = handle_starttag

    def handle_endtag(self, tag: str) -> None:
        if tag == "head":
            self.done = True
            raise _HeadEnded


def meta_tags(html: str | bytes) -> list[tuple[str, str]]:
    """The (lowercased name or http-equiv, content) of every <meta> in the page's head."""
    text = html.decode("utf-8", "replace") if isinstance(html, bytes) else html
    scanner = _MetaScanner()
    try:
        scanner.feed(text[:MAX_HEAD_CHARS])
        scanner.close()
    except _HeadEnded:
        pass
    except (ValueError, AssertionError):  # html.parser gives up on some broken markup
        pass
    return scanner.metas


def may_name_meta(html: str | bytes, names: Iterable[str]) -> bool:
    """False only when no <meta> that `meta_tags` reads can be named one of `names` (lowercase
    ASCII): the scanned text spells none of them in any case, and has no numeric character
    reference (`&#82;`) nor `&fjlig;`, the only ways HTML spells an ASCII letter or hyphen
    without writing it. Most pages state no opt-out, and this test costs a fraction of parsing
    their head with html.parser (0.2 ms a page, a tenth of a crawl's CPU per page)."""
    text = html.decode("utf-8", "replace") if isinstance(html, bytes) else html
    lowered = text[:MAX_HEAD_CHARS].lower()
    if "&#" in lowered or "&fjlig" in lowered:
        return True
    return any(name in lowered for name in names)


def meta_robots_optout(
    html: str | bytes, token: str = limits.BOT_NAME, *, metas: list[tuple[str, str]] | None = None
) -> OptOut | None:
    """`noai`/`noimageai` in a robots meta tag addressed to every robot or to ``token``
    (``metas``: the page's `meta_tags`, when the caller already has them)."""
    names = {"robots", token.lower()}
    for name, content in meta_tags(html) if metas is None else metas:
        if name not in names:
            continue
        for directive in re.split(r"[,\s]+", content.lower()):
            if directive in OPT_OUT_DIRECTIVES:
                return OptOut("opt_out_noai", f'<meta name="{name}" content="{content.strip()}">')
    return None


def _reservation(value: str | None) -> bool | None:
    if value is None:
        return None
    value = value.strip()
    return True if value == "1" else False if value == "0" else None


def tdm_header_optout(headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> OptOut | None:
    """`tdm-reservation: 1` in the response headers (case-insensitive names)."""
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    found = {k.strip().lower(): v for k, v in pairs}
    if _reservation(found.get("tdm-reservation")):
        policy = found.get("tdm-policy") or None
        return OptOut("opt_out_tdm", "tdm-reservation: 1 (HTTP header)", policy)
    return None


def tdm_meta_optout(html: str | bytes, *, metas: list[tuple[str, str]] | None = None) -> OptOut | None:
    """`<meta name="tdm-reservation" content="1">` in the page's head."""
    first = dict(reversed(meta_tags(html) if metas is None else metas))  # the first tag of a name wins
    if _reservation(first.get("tdm-reservation")):
        return OptOut(
            "opt_out_tdm", '<meta name="tdm-reservation" content="1">', first.get("tdm-policy") or None
        )
    return None


def tdmrep_url(page_url: str) -> str:
    """Where the origin of ``page_url`` publishes its TDMRep rules."""
    parts = urlsplit(page_url)
    return f"{parts.scheme}://{parts.netloc}{TDMREP_PATH}"


def parse_tdmrep(text: str | bytes) -> tuple[list[TdmRule], str | None]:
    """The rules of a tdmrep.json file, and a fault to record ("" rules and the fault when it is
    malformed: a broken file reserves nothing, but the caller should say it was broken)."""
    try:
        data = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        return [], f"tdmrep.json is not JSON: {exc}"
    if not isinstance(data, list):
        return [], "tdmrep.json must be a JSON array of rules"
    rules: list[TdmRule] = []
    faults = 0
    for entry in data[:MAX_TDMREP_RULES]:
        if not isinstance(entry, dict) or not isinstance(entry.get("location"), str):
            faults += 1
            continue
        reserved = _reservation(str(entry.get("tdm-reservation", "")))
        if reserved is None:
            faults += 1
            continue
        policy = entry.get("tdm-policy")
        rules.append(TdmRule(entry["location"], reserved, policy if isinstance(policy, str) else None))
    return rules, (f"tdmrep.json: {faults} malformed rules skipped" if faults else None)


def tdmrep_optout(rules: Iterable[TdmRule], page_url: str) -> OptOut | None:
    """The first rule whose location matches the page's path (and query) decides."""
    parts = urlsplit(page_url)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    for rule in rules:
        if rule.matches(path):
            if rule.reserved:
                return OptOut("opt_out_tdm", f"{TDMREP_PATH}: {rule.location} reserved", rule.policy)
            return None
    return None


def _location_regex(location: str) -> re.Pattern[str]:
    # robots.txt-style patterns: "*" any run of characters, a final "$" anchors the end;
    # otherwise a location matches every path that starts with it.
    anchored = location.endswith("$")
    body = location[:-1] if anchored else location
    if not body.startswith("/"):
        body = "/" + body
    pattern = ".*".join(re.escape(part) for part in body.split("*"))
    return re.compile(pattern + ("$" if anchored else ""))


def page_optout(
    page_url: str,
    *,
    headers: Mapping[str, str] | Iterable[tuple[str, str]] = (),
    html: str | bytes = "",
    tdmrep_rules: Iterable[TdmRule] = (),
    token: str = limits.BOT_NAME,
) -> OptOut | None:
    """Every page-level opt-out in one call: TDMRep header, robots meta, TDMRep meta, TDMRep file.

    The spider calls it on each product or look page before yielding items; a non-None answer
    means: record the page as rejected with ``reason`` and ``detail``, and take nothing from it.
    """
    found = tdm_header_optout(headers)
    if found is None and html and may_name_meta(html, ("robots", token.lower(), "tdm-reservation")):
        metas = meta_tags(html)  # the head is parsed once for both meta checks
        found = meta_robots_optout(html, token, metas=metas) or tdm_meta_optout(html, metas=metas)
    return found or tdmrep_optout(tdmrep_rules, page_url)
