"""A month of lake history written as a fixture writes it (no crawl), for bench/year_bench.py.

`write_month(home, index, as_of, images)` adds `images` product photos to the lake at `home`:
per product two photos, as the project's records (`Product`, `ImageRecord` with the hashes
ingestion computes, `DedupDecision` kept, `Annotation` of the current taxonomy, prompt version
and model: copied from an annotation the lake's first real month wrote) and real bytes (distinct,
decodable JPEGs of random texture, stored with `Lake.put_image`). Sources and platforms are the
sites the lake already crawls; ids are `h<month>-<n>`, which the store never lists. Every item
is dated (published and first seen) in the 30 days before `dated`. The year bench dates its written
months a year before month 1: they have no committed releases of their own, so dated in their own
months they would fall in month 11's window (which runs from month 1's release) and month 11 would
release nine months at once; dated before month 1, every window sees them as old, dated items
(published before it: never fresh), as a real lake's history is once released. Deterministic for
(index, images).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from lookbench_live.schema.hashing import hash_bytes
from lookbench_live.schema.records import Annotation, DedupDecision, ImageRecord, Product
from lookbench_live.warehouse.lake import Lake

PHOTOS_PER_PRODUCT = 2
SIZE = (96, 128)  # width, height: a small portrait photo (the bytes stay real and decodable)
BATCH = 20_000  # records per Lake.append (one fragment per table per batch)


def _sites(lake: Lake) -> list[tuple[str, str]]:
    table = lake.read("products", columns=["source", "platform"])
    return sorted({(r["source"], r["platform"]) for r in table.to_pylist()}) or [
        ("sample-shopify", "shopify")
    ]


def _annotation_key(lake: Lake) -> dict[str, Any] | None:
    """(taxonomy_version, prompt_version, model, source) of the lake's whole-image attribute answers."""
    table = lake.read("annotations", columns=["task", "bbox", "status", "taxonomy_version", "prompt_version",
                                              "model", "source", "category", "main_attribute"])  # fmt: skip
    for row in table.to_pylist():
        if row["task"] == "attributes" and row["bbox"] == "" and row["status"] == "ok" and row["category"]:
            return row
    return None


def _jpeg(seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, (SIZE[1] // 8, SIZE[0] // 8, 3), dtype=np.uint8)
    image = Image.fromarray(pixels).resize(SIZE, Image.Resampling.BILINEAR)
    out = io.BytesIO()
    image.save(out, format="JPEG", quality=85)
    return out.getvalue()


def _picture(seed: int) -> tuple[bytes, str, Any]:
    """Bytes, sha256 and hashes of one picture (run in worker processes)."""
    data = _jpeg(seed)
    return data, hashlib.sha256(data).hexdigest(), hash_bytes(data)


def _store(lake: Lake, sha: str, data: bytes) -> None:
    """`Lake.put_image` without its fsync (a fixture's speed: the fsync was 80 % of the time);
    the same content-addressed path, so the refresh reads these bytes as any stored image."""
    path = lake.image_path(sha)
    if lake.local:
        local = Path(lake.fs._strip_protocol(path))
        if not local.exists():
            local.parent.mkdir(parents=True, exist_ok=True)
            local.write_bytes(data)
    else:
        lake.put_image(data)


def n_products_for(images: int) -> int:
    return max(1, images // PHOTOS_PER_PRODUCT)


def write_month(
    home: str | Path, index: int, dated: dt.date, images: int, workers: int = 1
) -> dict[str, Any]:
    lake = Lake(str(home))
    sites = _sites(lake)
    template = _annotation_key(lake)
    seeds = iter(range(index * 10_000_000, index * 10_000_000 + n_products_for(images) * PHOTOS_PER_PRODUCT))
    pool = ProcessPoolExecutor(max_workers=workers) if workers > 1 else None
    pictures = pool.map(_picture, seeds, chunksize=256) if pool else map(_picture, seeds)
    start = dt.datetime.combine(dated, dt.time(), dt.UTC) - dt.timedelta(days=30)
    run_id = f"history-{index:02d}"
    products: list[Product] = []
    rows: list[ImageRecord] = []
    decisions: list[DedupDecision] = []
    annotations: list[Annotation] = []
    n_products = n_products_for(images)
    written = {"products": 0, "images": 0, "dedup_decisions": 0, "annotations": 0}

    def flush() -> None:
        for name, batch in (("products", products), ("images", rows), ("dedup_decisions", decisions),
                            ("annotations", annotations)):  # fmt: skip
            written[name] += lake.append(batch)
            batch.clear()

    for n in range(n_products):
        source, platform = sites[n % len(sites)]
        product_id = f"h{index:02d}-{n}"
        when = start + dt.timedelta(seconds=int(n * 30 * 86_400 / n_products))
        urls = [f"https://history.invalid/{source}/{product_id}/{v}.jpg" for v in range(PHOTOS_PER_PRODUCT)]
        products.append(
            Product(
                product_id=product_id, source=source, platform=platform,
                url=f"https://history.invalid/{source}/{product_id}", title=f"History item {product_id}",
                category_path=["Women", "Dresses"], images=urls, published_at=when, updated_at=when,
                first_seen_at=when, content_hash=hashlib.sha256(product_id.encode()).hexdigest(),
            )
        )  # fmt: skip
        owner = f"{source}:{product_id}"
        for view, url in enumerate(urls):
            data, sha, hashes = next(pictures)
            _store(lake, sha, data)
            rows.append(
                ImageRecord(
                    source_url=url, owner_kind="product", owner_id=owner, source=source, position=view,
                    status="ok", sha256=sha, width=SIZE[0], height=SIZE[1], format="JPEG", byte_size=len(data),
                    phash=hashes.phash, phash_mirror=hashes.phash_mirror, dhash=hashes.dhash,
                    hash_method=hashes.method, fetched_at=when, first_seen_at=when, published_at=when,
                    run_id=run_id,
                )
            )  # fmt: skip
            decisions.append(
                DedupDecision(sha256=sha, hash_method=hashes.method, decision="kept", run_id=run_id,
                              canonical_owner_kind="product", canonical_owner_id=owner)
            )  # fmt: skip
            if template is not None:
                annotations.append(
                    Annotation(
                        sha256=sha, bbox="", task="attributes", taxonomy_version=template["taxonomy_version"],
                        prompt_version=template["prompt_version"], model=template["model"],
                        source=template["source"], status="ok", category=template["category"],
                        main_attribute=template["main_attribute"], run_id=run_id,
                    )
                )  # fmt: skip
        if len(rows) >= BATCH:
            flush()
    flush()
    if pool is not None:
        pool.shutdown()
    return {"month": index, "dated_before": dated.isoformat(), **written}


def count_images(home: str | Path) -> int:
    return Lake(str(home)).read("images", columns=["status"]).num_rows
