"""What a month's ingestion plans to fetch: the image URLs of each product's newest row and of
each look that have no `images` row yet, found through the lake's key index (issue 28)."""

from __future__ import annotations

import datetime as dt

import factories

from lookbench_live.ingest import pending_image_requests
from lookbench_live.schema.records import ImageRecord, Look
from lookbench_live.warehouse.lake import Lake

T0 = factories.T0


def _stored(owner_kind: str, owner_id: str, url: str) -> ImageRecord:
    return ImageRecord(
        source_url=url, owner_kind=owner_kind, owner_id=owner_id, source="shop", status="rejected",
        rejection_reason="http_error", fetched_at=T0, first_seen_at=T0,
    )  # fmt: skip


def test_pending_images_are_the_newest_rows_urls_without_a_row(tmp_path) -> None:
    lake = Lake(tmp_path / "lake")
    later = T0 + dt.timedelta(days=3)
    lake.append([
        factories.product("a", images=["u1", "u2"], created_at=T0),
        factories.product("b", images=["v1"], created_at=T0),
        factories.product("c", images=["", "w1", "w1"], created_at=T0),
        factories.product("done", images=["x1"], created_at=T0),
    ])  # fmt: skip
    # Changed products are new rows: a gains u3 (u2 is gone), b's photo was replaced.
    lake.append([
        factories.product("a", images=["u1", "u3"], created_at=later, content_hash="h2"),
        factories.product("b", images=["v2"], created_at=later, content_hash="h2"),
    ])  # fmt: skip
    lake.append([
        Look(look_id="L1", source="shop", url="https://shop.example/l/1", photo_url="l1.jpg", first_seen_at=T0),
        Look(look_id="L2", source="shop", url="https://shop.example/l/2", photo_url="l2.jpg", first_seen_at=T0),
    ])  # fmt: skip
    lake.append([
        _stored("product", "shop:a", "u1"),
        _stored("product", "shop:a", "u2"),
        _stored("product", "shop:b", "v2"),
        _stored("product", "shop:done", "x1"),
        _stored("look", "shop:L2", "l2.jpg"),
    ])  # fmt: skip

    planned = [(r.owner_kind, r.owner_id, r.url, r.position) for r in pending_image_requests(lake)]

    # a: only the newest row's URL without a row, at its position there; b: the superseded row's
    # missing v1 is not fetched; c: one request per URL, blanks skipped; the stored look is done.
    assert planned == [
        ("product", "shop:a", "u3", 1),
        ("product", "shop:c", "w1", 1),
        ("look", "shop:L1", "l1.jpg", 0),
    ]
    # Once they have rows, nothing is left to plan.
    lake.append(
        [
            _stored("product", "shop:a", "u3"),
            _stored("product", "shop:c", "w1"),
            _stored("look", "shop:L1", "l1.jpg"),
        ]
    )
    assert pending_image_requests(lake) == []
