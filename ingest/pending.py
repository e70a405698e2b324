"""The unit of ingestion work (`ImageRequest`) and what is still to do in the lake."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Literal

from lookbench_live.schema.records import product_key
from lookbench_live.warehouse.lake import Lake

OwnerKind = Literal["product", "look"]


@dataclass(frozen=True, slots=True)
class ImageRequest:
    """One image URL of one owner (a product or a look); it ends as exactly one `images` row."""

    url: str
    owner_kind: OwnerKind
    owner_id: str  # product key "source:product_id", or "source:look_id"
    source: str
    position: int
    first_seen_at: dt.datetime
    published_at: dt.datetime | None = None

    def key(self) -> tuple[str, str, str]:
        """The `images` table key this request's outcome row gets."""
        return (self.owner_kind, self.owner_id, self.url)


def pending_image_requests(lake: Lake) -> list[ImageRequest]:
    """Image URLs of stored products (latest row per product) and looks that have no `images` row yet.

    A killed ingestion, rerun, therefore fetches only what is missing; rejected images have
    a row too and are not fetched again. Order: products, then looks, each by key and position.
    """
    done = {tuple(k) for k in lake.keys("images")}
    requests: list[ImageRequest] = []

    products = lake.read(
        "products", columns=["source", "product_id", "images", "first_seen_at", "published_at", "created_at"]
    ).to_pylist()
    latest: dict[str, dict] = {}
    for row in products:
        key = product_key(row["source"], row["product_id"])
        # A changed product is a new row; its current images are those of the newest row.
        if key not in latest or row["created_at"] >= latest[key]["created_at"]:
            latest[key] = row
    for key in sorted(latest):
        row = latest[key]
        seen: set[str] = set()
        for position, url in enumerate(row["images"] or []):
            if not url or url in seen:
                continue
            seen.add(url)
            request = ImageRequest(
                url=url,
                owner_kind="product",
                owner_id=key,
                source=row["source"],
                position=position,
                first_seen_at=row["first_seen_at"],
                published_at=row["published_at"],
            )
            if request.key() not in done:
                requests.append(request)

    looks = lake.read("looks", columns=["source", "look_id", "photo_url", "first_seen_at", "published_at"])
    for row in sorted(looks.to_pylist(), key=lambda r: (r["source"], r["look_id"])):
        if not row["photo_url"]:
            continue
        request = ImageRequest(
            url=row["photo_url"],
            owner_kind="look",
            owner_id=f"{row['source']}:{row['look_id']}",
            source=row["source"],
            position=0,
            first_seen_at=row["first_seen_at"],
            published_at=row["published_at"],
        )
        if request.key() not in done:
            requests.append(request)
    return requests
