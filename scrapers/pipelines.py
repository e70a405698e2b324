"""The item pipeline: crawl items become `Product`, `Look` and `Rejection` rows in the lake.

- Rows are written in batches (`CrawlSettings.batch_size`), idempotent by key, so a replay
  after a kill writes nothing twice.
- `first_seen_at` of a product already in the lake is kept: an unchanged product (same
  content hash) is not new work and writes nothing; a changed one gets a new row with the
  same `first_seen_at` and counts as changed.
- What a run added is counted afterwards from the lake against the run's baseline
  (`crawl.run_crawl`), so the counts stay exact across kills and resumes.
- Memory follows the run, not the lake's history: what the lake already holds is looked up per
  batch (the batch's product ids in this source's rows; its keys in the key index through
  `Lake.append`), never loaded whole when the spider opens.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow.dataset as pads

from lookbench_live.schema.moments import parse_moment
from lookbench_live.schema.records import Record, Rejection
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
        self.products: list[tuple[NormalizedProduct, dt.datetime]] = []

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
        # Product id -> its first_seen_at in the lake (None: the lake holds no row of it), for
        # the ids this run met: looked up a batch at a time, so it grows with the run only.
        self.first_seen: dict[str, dt.datetime | None] = {}
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
            if self.pending() >= self.batch_size:
                self.flush()
        return item

    # ------------------------------------------------------------------ rows
    def add(self, item: CrawlItem) -> None:
        observed = self.seen_at or parse_moment(item.observed_at)
        if item.kind == "product":
            # Decided at `flush`, with the batch's lookups (its key and first_seen_at).
            self.products.append((NormalizedProduct.from_json(item.data), observed))
        elif item.kind == "look":
            # A look the lake holds is not written again: `Lake.append` drops stored keys.
            look = LookData.from_json(item.data)
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

    def pending(self) -> int:
        return len(self.products) + sum(len(v) for v in self.buffer.values())

    def _look_up(self, products: list[tuple[NormalizedProduct, dt.datetime]]) -> None:
        """Fill `first_seen` for the batch's product ids and aliases the run has not met yet:
        one read of this source's rows with those ids (a filter pushed into the scan)."""
        wanted = {p.product_id for p, _ in products}
        wanted.update(a for p, _ in products for a in p.id_aliases)
        unknown = sorted(wanted.difference(self.first_seen))
        if not unknown:
            return
        table = self.lake.read(
            "products",
            columns=["product_id", "first_seen_at"],
            where=(pads.field("source") == self.source) & pads.field("product_id").isin(unknown),
        )
        found: dict[str, dt.datetime] = {}
        for product_id, seen in zip(
            table.column("product_id").to_pylist(), table.column("first_seen_at").to_pylist(), strict=True
        ):
            if product_id not in found or seen < found[product_id]:
                found[product_id] = seen
        for product_id in unknown:
            self.first_seen[product_id] = found.get(product_id)

    def _product_rows(self) -> list[Record]:
        """The batch's products as rows: aliases resolved, each with its first_seen_at; one row
        per (product, content) key (a repeated or stored key is dropped by `Lake.append`)."""
        self._look_up(self.products)
        rows: list[Record] = []
        for product, observed in self.products:
            if self.first_seen.get(product.product_id) is None:
                # Identifier rules changed (issue 27): a product the lake holds under the key the
                # earlier rules gave keeps that key, its first_seen_at and its freshness evidence.
                held = next((a for a in product.id_aliases if self.first_seen.get(a) is not None), None)
                if held is not None:
                    product.product_id = held
            first_seen = self.first_seen.get(product.product_id) or observed
            self.first_seen[product.product_id] = first_seen
            rows.append(product.to_record(self.source, first_seen))
        return rows

    def flush(self) -> None:
        from lookbench_live.scrapers.browser_guard import REFUSALS

        # What the browser proxy and the page route refused (their threads cannot yield items).
        for refusal in REFUSALS.drain():
            self.add(refusal.item())
        if self.products:
            self.buffer["products"] = self._product_rows()
        for table in ("products", "looks", "rejections"):
            rows = self.buffer[table]
            if rows:
                self.lake.append(rows)
        self.products = []
        self.buffer = {"products": [], "looks": [], "rejections": []}
