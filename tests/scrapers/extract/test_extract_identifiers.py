"""Identifier rules of issue 27 on a real page (tests/corpus/payloads/ms_overstock.html, a saved
Overstock product page whose JSON-LD states `sku` 34092028 and `mpn` 23272SET6), and the lake:
a product keeps the key an earlier release of these rules gave it."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from lookbench_live.scrapers.extract import decode_body, extract_document
from lookbench_live.scrapers.items import CrawlItem
from lookbench_live.scrapers.pipelines import LakePipeline
from lookbench_live.warehouse.lake import Lake

CORPUS = Path(__file__).parents[2] / "corpus"
PAGE = (CORPUS / "payloads" / "ms_overstock.html").read_text(encoding="utf-8")
URL = "https://www.overstock.com/Home-Garden/Certified-International-Elegance-Canape-Plates-Set-of-6/29099468/product.html"
# The same page as other templates write it: the sku only in the offer; a blank sku.
OFFER_SKU = PAGE.replace(
    '"availability":"InStock"},"sku":"34092028"', '"availability":"InStock","sku":"34092028"}'
)
BLANK_SKU = PAGE.replace('"sku":"34092028"', '"sku":" "')
# What the rules before issue 27 (commit e9f1ec7) gave for these two pages: the mpn, because the
# offer's sku was not read, and the blank sku itself. Their content hashes as that code wrote them.
BEFORE = {
    "offer_sku": ("23272SET6", "40e283a820bb0ea0b3215182b810af69532deb5305b8705b74da7cc55d1707bd"),
    "blank_sku": (" ", "df7f3e2f53929ba902b20fe02df269048f33ea436943c7510717d3654a266e4f"),
}


def _product(text: str):
    return extract_document(text, URL).products[0]


def test_the_offer_sku_is_the_id_and_a_blank_sku_is_none():
    assert OFFER_SKU != PAGE and BLANK_SKU != PAGE
    assert _product(PAGE).product_id == "34092028"
    assert _product(OFFER_SKU).product_id == "34092028"  # not the mpn
    assert _product(BLANK_SKU).product_id == "23272SET6"  # the next stated id, not " "


@pytest.mark.parametrize("variant", ["offer_sku", "blank_sku"])
def test_a_lake_written_before_keeps_each_products_key(tmp_path, variant):
    text = {"offer_sku": OFFER_SKU, "blank_sku": BLANK_SKU}[variant]
    old_id, old_hash = BEFORE[variant]
    product = _product(text)
    assert product.product_id != old_id and old_id in product.id_aliases
    # The lake as the earlier code left it: this product under its old key, seen in October.
    lake = Lake(tmp_path / "lake")
    first_seen = dt.datetime(2026, 10, 1, tzinfo=dt.UTC)
    before = type(product).from_json({**product.to_json(), "product_id": old_id, "id_aliases": []})
    assert before.content_hash() == old_hash  # the row the earlier code wrote, byte for byte
    lake.append([before.to_record("overstock", first_seen)])

    def crawl(item_data: dict) -> LakePipeline:
        pipeline = LakePipeline(str(tmp_path / "lake"), "overstock", "run-2", str(tmp_path), batch_size=10)
        pipeline.open_spider()
        pipeline.add(CrawlItem("product", item_data, observed_at="2026-12-01T00:00:00+00:00"))
        pipeline.close_spider()
        return pipeline

    crawl(product.to_json())  # unchanged: nothing new, no second key
    rows = lake.read("products", columns=["product_id", "first_seen_at"]).to_pylist()
    assert [r["product_id"] for r in rows] == [old_id]
    # A changed price is a new row under the same key, keeping first_seen_at (freshness evidence).
    changed = json.loads(json.dumps(product.to_json()))
    changed["price"] = "29.99"
    crawl(changed)
    rows = lake.read("products", columns=["product_id", "first_seen_at", "price"]).to_pylist()
    assert {r["product_id"] for r in rows} == {old_id}
    assert {r["first_seen_at"] for r in rows} == {first_seen}
    # A product the lake never held takes the new key.
    fresh = tmp_path / "fresh"
    pipeline = LakePipeline(str(fresh), "overstock", "run-1", str(tmp_path), batch_size=10)
    pipeline.open_spider()
    pipeline.add(CrawlItem("product", product.to_json(), observed_at="2026-12-01T00:00:00+00:00"))
    pipeline.close_spider()
    assert Lake(fresh).read("products", columns=["product_id"]).to_pylist() == [
        {"product_id": product.product_id}
    ]


def test_recommended_products_are_not_the_pages_and_never_take_its_key():
    """extruct's schema.org sample: the Executive Anvil page references a product and lists two
    related ones, none with an id or a URL of its own."""
    case = json.loads(
        (CORPUS / "expected" / "extruct_schemaorg_product-ref.json").read_text(encoding="utf-8")
    )
    page = (CORPUS / "payloads" / "extruct_schemaorg_product-ref.html").read_bytes()
    extraction = extract_document(decode_body(page), case["url"])
    assert [p.title for p in extraction.products] == ["Executive Anvil"]
    dropped = [p.detail for p in extraction.problems if p.reason == "recommended_product_without_id"]
    assert {"REFERENCED PRODUCT", "REL PROD 1", "REL PROD 2"} <= set(dropped)
