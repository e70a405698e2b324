"""The saved retailer pages of tests/corpus as the extraction tests read them: a payload's text
(decoded as a crawl decodes a body) and the URL it was saved from, and the products one page gives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lookbench_live.scrapers.extract import decode_body, extract_document

CORPUS = Path(__file__).parent / "corpus"


def corpus_page(name: str) -> tuple[str, str]:
    """(text, url) of the payload `name` (its file name without the extension)."""
    payload = next((CORPUS / "payloads").glob(name + ".*"))
    url = json.loads((CORPUS / "expected" / f"{name}.json").read_text(encoding="utf-8"))["url"]
    return decode_body(payload.read_bytes()), url


def page_products(text: str, url: str) -> list[Any]:
    """The products `extract` finds on a page, looks left out."""
    return extract_document(text, url, looks=False).products
