"""The unit of ingestion work (`ImageRequest`) and what is still to do in the lake."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lookbench_live.schema.records import product_key
from lookbench_live.warehouse.lake import Lake, key_digests

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


_PRODUCT_COLUMNS = ["source", "product_id", "images", "first_seen_at", "published_at", "created_at"]
_BATCH = 65_536


def pending_image_requests(lake: Lake) -> list[ImageRequest]:
    """Image URLs of stored products (latest row per product) and looks that have no `images` row yet.

    A killed ingestion, rerun, therefore fetches only what is missing; rejected images have
    a row too and are not fetched again. Order: products, then looks, each by key and position.

    Bounded in memory at any lake size (issue 28): the products and looks are streamed in
    batches and each (owner, URL) is looked up by its 64-bit key digest in the lake's key index
    of `images` (derived/keys, 8 bytes a row), never as a Python set of the stored keys; only
    the owners with a URL missing from the index are kept, then their latest rows are read.
    A digest absent from the index is a key certainly not stored; a present one is taken as
    stored (two keys sharing a 64-bit digest: about 1e-8 a month at 1M images against 1M).
    """
    stored = lake.key_digest_index("images")
    missing_owners: set[tuple[str, str]] = set()
    for batch in lake.dataset("products").to_batches(
        columns=["source", "product_id", "images"], batch_size=_BATCH
    ):
        urls = batch.column("images")
        flat = pc.list_flatten(urls)
        if not len(flat):
            continue
        parents = pc.list_parent_indices(urls)
        source = pc.take(batch.column("source"), parents)
        product_id = pc.take(batch.column("product_id"), parents)
        owner = pc.binary_join_element_wise(source, product_id, ":")
        keys = pa.table(
            {"owner_kind": pa.array(["product"] * len(flat)), "owner_id": owner, "source_url": flat}
        )
        absent = _absent(stored, keys) & pc.fill_null(pc.not_equal(flat, ""), False).to_numpy(
            zero_copy_only=False
        )
        for i in np.nonzero(absent)[0]:
            missing_owners.add((source[int(i)].as_py(), product_id[int(i)].as_py()))
    requests: list[ImageRequest] = []
    if missing_owners:
        # A product's current images are those of its newest row (a changed product is a new
        # row): read every row of the owners with a missing URL and keep the newest.
        latest: dict[str, dict] = {}
        wanted_ids = sorted({pid for _, pid in missing_owners})
        rows = lake.read("products", columns=_PRODUCT_COLUMNS, where=pc.field("product_id").isin(wanted_ids))
        for row in rows.to_pylist():
            if (row["source"], row["product_id"]) not in missing_owners:
                continue
            key = product_key(row["source"], row["product_id"])
            if key not in latest or row["created_at"] >= latest[key]["created_at"]:
                latest[key] = row
        for key in sorted(latest):
            row = latest[key]
            seen: set[str] = set()
            for position, url in enumerate(row["images"] or []):
                if not url or url in seen:
                    continue
                seen.add(url)
                requests.append(
                    ImageRequest(
                        url=url,
                        owner_kind="product",
                        owner_id=key,
                        source=row["source"],
                        position=position,
                        first_seen_at=row["first_seen_at"],
                        published_at=row["published_at"],
                    )
                )
    looks = lake.read("looks", columns=["source", "look_id", "photo_url", "first_seen_at", "published_at"])
    for row in sorted(looks.to_pylist(), key=lambda r: (r["source"], r["look_id"])):
        if not row["photo_url"]:
            continue
        requests.append(
            ImageRequest(
                url=row["photo_url"],
                owner_kind="look",
                owner_id=f"{row['source']}:{row['look_id']}",
                source=row["source"],
                position=0,
                first_seen_at=row["first_seen_at"],
                published_at=row["published_at"],
            )
        )
    if not requests:
        return requests
    keys = pa.table(
        {
            "owner_kind": [r.owner_kind for r in requests],
            "owner_id": [r.owner_id for r in requests],
            "source_url": [r.url for r in requests],
        }
    )
    absent = _absent(stored, keys)
    return [r for r, missing in zip(requests, absent, strict=True) if missing]


def _absent(stored: np.ndarray, keys: pa.Table) -> np.ndarray:
    """Which rows of `keys` (the `images` key columns) have a digest the index does not hold."""
    digests = key_digests(keys)
    if not len(stored):
        return np.ones(len(digests), dtype=bool)
    pos = np.searchsorted(stored, digests).clip(0, len(stored) - 1)
    return stored[pos] != digests
