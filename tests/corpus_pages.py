"""The saved retailer pages of tests/corpus as the extraction tests read them: a payload's text
(decoded as a crawl decodes a body) and the URL it was saved from, and the products one page gives."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

from lookbench_live.scrapers.extract import decode_body, extract_document
from lookbench_live.scrapers.items import CrawlItem
from lookbench_live.scrapers.pipelines import LakePipeline
from lookbench_live.warehouse.lake import Lake

CORPUS = Path(__file__).parent / "corpus"


def corpus_page(name: str) -> tuple[str, str]:
    """(text, url) of the payload `name` (its file name without the extension)."""
    payload = next((CORPUS / "payloads").glob(name + ".*"))
    url = json.loads((CORPUS / "expected" / f"{name}.json").read_text(encoding="utf-8"))["url"]
    return decode_body(payload.read_bytes()), url


def page_products(text: str, url: str) -> list[Any]:
    """The products `extract` finds on a page, looks left out."""
    return extract_document(text, url, looks=False).products


def only_product(text: str, url: str) -> Any:
    """The one product a page gives (the test fails when it gives none or several)."""
    (product,) = page_products(text, url)
    return product


def corpus_product(name: str) -> Any:
    """The one product the corpus payload `name` gives."""
    return only_product(*corpus_page(name))


FIRST_SEEN = dt.datetime(2026, 10, 1, tzinfo=dt.UTC)


def rekeyed_lake(
    tmp_path: Path, product: Any, old_id: str, site: str, **changes: Any
) -> list[dict[str, Any]]:
    """The product rows of a lake that held `product` under `old_id` (the key the rules before gave
    it, first seen on `FIRST_SEEN`) after a crawl found it again under its new key, with `changes`
    (a new price): a product keeps its key and `first_seen_at` through a new id rule."""
    lake = Lake(tmp_path / "lake")
    before = type(product).from_json({**product.to_json(), "product_id": old_id, "id_aliases": []})
    lake.append([before.to_record(site, FIRST_SEEN)])
    pipeline = LakePipeline(str(tmp_path / "lake"), site, "run-2", str(tmp_path), batch_size=10)
    pipeline.open_spider()
    pipeline.add(
        CrawlItem("product", {**product.to_json(), **changes}, observed_at="2026-12-01T00:00:00+00:00")
    )
    pipeline.close_spider()
    return lake.read("products", columns=["product_id", "first_seen_at"]).to_pylist()
