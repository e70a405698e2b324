"""Read views over lake tables that several stages share."""

from __future__ import annotations

from lookbench_live.schema.records import Product, product_key
from lookbench_live.warehouse.lake import Lake


def latest_products(lake: Lake) -> dict[str, Product]:
    """The current row of every product, by product key.

    A changed product is a new row (new `content_hash`) carrying the product's original
    `first_seen_at`; the newest row is its current content. Ties break on the content hash,
    so the choice is the same on every machine.
    """
    latest: dict[str, Product] = {}
    for record in lake.records("products"):
        assert isinstance(record, Product)
        key = product_key(record.source, record.product_id)
        current = latest.get(key)
        if current is None or (record.created_at, record.content_hash) > (
            current.created_at,
            current.content_hash,
        ):
            latest[key] = record
    return latest
