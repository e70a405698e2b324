"""The item pipeline: crawl items become `Product`, `Look` and `Rejection` rows in the lake.

- Rows are written in batches (`CrawlSettings.batch_size`), idempotent by key, so a replay
  after a kill writes nothing twice.
- `first_seen_at` of a product already in the lake is kept: an unchanged product (same
  content hash) is not new work and writes nothing; a changed one gets a new row with the
  same `first_seen_at` and counts as changed.
- What a run added is counted afterwards from the lake against the run's baseline
  (`crawl.run_crawl`), so the counts stay exact across kills and resumes.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow.dataset as pads

from lookbench_live.schema.moments import parse_moment
from lookbench_live.schema.records import Look, Product, Record, Rejection
from lookbench_live.scrapers.extract.model import LookData, NormalizedProduct
from lookbench_live.scrapers.items import CrawlItem
from lookbench_live.warehouse.lake import Lake


class LakePipeline:
    def __init__(
        self,
        lake_home: str,
        source: str,
        run_key: str,
        state_dir: str,
        batch_size: int,
        seen_at: str | None = None,
    ):
        self.lake_home = lake_home
        self.source = source
        self.run_key = run_key
        self.state_dir = state_dir
        self.batch_size = batch_size
        # The run's logical time, when the flow gives one: first_seen_at of what this run discovers.
        self.seen_at = parse_moment(seen_at)
        self.crawler: Any = None
        self.buffer: dict[str, list[Record]] = {"products": [], "looks": [], "rejections": []}

    @classmethod
    def from_crawler(cls, crawler: Any) -> LakePipeline:
        settings = crawler.settings
        pipeline = cls(
            lake_home=settings["LOOKBENCH_LAKE"],
            source=settings["LOOKBENCH_SOURCE"],
            run_key=settings["LOOKBENCH_RUN_KEY"],
            state_dir=settings["LOOKBENCH_STATE_DIR"],
            batch_size=settings.getint("LOOKBENCH_BATCH_SIZE", 200),
            seen_at=settings.get("LOOKBENCH_SEEN_AT"),
        )
        pipeline.crawler = crawler
        return pipeline

    # ------------------------------------------------------------------ lifecycle
    def open_spider(self, spider: Any = None) -> None:
        self.lake = Lake(self.lake_home)
        # What the lake already knows about this source's products.
        self.first_seen: dict[str, dt.datetime] = {}
        self.known_hashes: set[tuple[str, str]] = set()
        # Only this source's rows leave Arrow (the filter is pushed into the scan: row groups
        # whose statistics exclude the source are skipped), not every site's history as dicts.
        table = self.lake.read(
            "products",
            columns=["product_id", "content_hash", "first_seen_at"],
            where=pads.field("source") == self.source,
        )
        for row in table.to_pylist():
            self.known_hashes.add((row["product_id"], row["content_hash"]))
            seen = row["first_seen_at"]
            if row["product_id"] not in self.first_seen or seen < self.first_seen[row["product_id"]]:
                self.first_seen[row["product_id"]] = seen
        self.known_looks = {key for key in self.lake.keys("looks") if key[0] == self.source}
        self.pending_products: set[tuple[str, str]] = set()
        # Items a killed run logged but may not have committed: replay them first.
        # Scrapy 2.13+ calls open_spider() without the spider: take it from the crawler.
        spider = spider or getattr(getattr(self, "crawler", None), "spider", None)
        journal = getattr(spider, "journal", None)
        if journal is not None:
            for item in journal.logged_items():
                self.add(item)
            self.flush()

    def close_spider(self, spider: Any = None) -> None:
        self.flush()

    def process_item(self, item: Any, spider: Any = None) -> Any:
        if isinstance(item, CrawlItem):
            self.add(item)
            if sum(len(v) for v in self.buffer.values()) >= self.batch_size:
                self.flush()
        return item

    # ------------------------------------------------------------------ rows
    def add(self, item: CrawlItem) -> None:
        observed = self.seen_at or parse_moment(item.observed_at)
        if item.kind == "product":
            product = NormalizedProduct.from_json(item.data)
            if product.product_id not in self.first_seen:
                # Identifier rules changed (issue 27): a product the lake holds under the key the
                # earlier rules gave keeps that key, its first_seen_at and its freshness evidence.
                held = next((a for a in product.id_aliases if a in self.first_seen), None)
                if held is not None:
                    product.product_id = held
            digest = product.content_hash()
            key = (product.product_id, digest)
            if key in self.known_hashes or key in self.pending_products:
                return  # seen and unchanged: not new work
            first_seen = self.first_seen.get(product.product_id, observed)
            self.first_seen.setdefault(product.product_id, first_seen)
            self.pending_products.add(key)
            self.buffer["products"].append(product.to_record(self.source, first_seen))
        elif item.kind == "look":
            look = LookData.from_json(item.data)
            if (self.source, look.look_id) in self.known_looks:
                return
            self.buffer["looks"].append(look.to_record(self.source, observed))
        else:
            data = item.data
            self.buffer["rejections"].append(
                Rejection(
                    stage=data.get("stage", "crawl"),
                    item=data["item"],
                    reason=data["reason"],
                    detail=data.get("detail") or None,
                    source=self.source,
                    run_id=self.run_key,
                )
            )

    def flush(self) -> None:
        from lookbench_live.scrapers.browser_guard import REFUSALS

        # What the browser proxy and the page route refused (their threads cannot yield items).
        for refusal in REFUSALS.drain():
            self.add(refusal.item())
        for table in ("products", "looks", "rejections"):
            rows = self.buffer[table]
            if rows:
                self.lake.append(rows)
        for record in self.buffer["products"]:
            assert isinstance(record, Product)
            self.known_hashes.add((record.product_id, record.content_hash))
        self.known_looks.update((r.source, r.look_id) for r in self.buffer["looks"] if isinstance(r, Look))
        self.pending_products.clear()
        self.buffer = {"products": [], "looks": [], "rejections": []}
