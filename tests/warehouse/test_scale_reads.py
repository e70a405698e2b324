"""A month's steps read the month, not the lake's history (issue 28): with 1 and with 6 earlier
months in the lake, dedup, annotation planning and `Lake.append` read the same rows and
fragments of the lake's tables (`Lake.reads`), counted, not timed."""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path
from typing import Any

from lookbench_live.annotation.run import run_annotation
from lookbench_live.config import AnnotationSettings, DedupSettings
from lookbench_live.dedup import run_dedup
from lookbench_live.schema.hashing import HASH_METHOD
from lookbench_live.schema.records import ImageRecord, Product, product_key
from lookbench_live.schema.taxonomy import default_taxonomy
from lookbench_live.warehouse.lake import Lake

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
PER_MONTH = 24
TAXONOMY = default_taxonomy()


def _write_month(lake: Lake, month: int, rng: random.Random) -> None:
    seen = T0 + dt.timedelta(days=31 * month)
    products, images = [], []
    for k in range(PER_MONTH):
        pid = f"m{month}-{k}"
        products.append(
            Product(
                product_id=pid,
                source="shop",
                platform="shopify",
                url=f"https://shop.example/p/{pid}",
                title="blue cotton dress",
                category_path=["Women", "Dresses"],
                first_seen_at=seen,
                content_hash=f"h{pid}",
            )
        )
        images.append(
            ImageRecord(
                source_url=f"https://shop.example/img/{pid}.jpg",
                owner_kind="product",
                owner_id=product_key("shop", pid),
                source="shop",
                status="ok",
                sha256=f"{month:02d}{k:062x}",
                width=300,
                height=400,
                phash=f"{rng.getrandbits(64):016x}",
                phash_mirror=f"{rng.getrandbits(64):016x}",
                dhash=f"{rng.getrandbits(64):016x}",
                hash_method=HASH_METHOD,
                fetched_at=seen,
                first_seen_at=seen,
            )
        )
    lake.append(products)
    lake.append(images)


def _month_reads(tmp_path: Path, earlier: int) -> dict[str, Any]:
    rng = random.Random(earlier)
    home = tmp_path / f"lake-{earlier}"
    for month in range(earlier):
        lake = Lake(home)
        _write_month(lake, month, rng)
        run_dedup(lake, DedupSettings(), f"dedup-{month}")
        run_annotation(lake, AnnotationSettings(), TAXONOMY, f"annotate-{month}")

    appender = Lake(home)
    _write_month(appender, earlier, rng)  # this month's crawl: products and images appended
    dedup = Lake(home)
    decided = run_dedup(dedup, DedupSettings(), "dedup-now")
    annotator = Lake(home)
    annotated = run_annotation(annotator, AnnotationSettings(), TAXONOMY, "annotate-now")
    assert decided.kept == PER_MONTH and annotated.images == PER_MONTH and annotated.ok == PER_MONTH
    return {
        "append": (dict(appender.reads.rows), dict(appender.reads.fragments)),
        "dedup": (dict(dedup.reads.rows), dict(dedup.reads.fragments)),
        "annotate": dict(annotator.reads.rows),
        "segments": (sum(appender.reads.key_segments.values()), sum(annotator.reads.key_segments.values())),
        "home": home,
    }


def test_a_months_reads_do_not_grow_with_earlier_months(tmp_path: Path) -> None:
    one, six = _month_reads(tmp_path, 1), _month_reads(tmp_path, 6)
    # Appending a month of new keys reads no row of any table: the key index answers.
    assert one["append"] == six["append"] == ({}, {})
    # Dedup reads this month's images and the previous run's decisions, however old the lake.
    assert one["dedup"] == six["dedup"]
    assert one["dedup"][0]["images"] == PER_MONTH
    # Annotation planning returns this month's images (the anti-join), and reads the rows of their
    # products and of their stored annotations only.
    assert one["annotate"] == six["annotate"]
    assert one["annotate"]["products"] == 2 * PER_MONTH  # found, then read whole: this month's only
    # The key index itself is read (one small segment per fragment): it grows, the rows do not.
    assert six["segments"][0] > one["segments"][0]

    # The test can fail: a lake whose dedup index is lost reads the whole history once.
    lake = Lake(six["home"])
    Path(lake.path("derived", "dedup_index", "manifest.json")).unlink()
    run_dedup(lake, DedupSettings(), "dedup-again")
    assert lake.reads.rows["images"] == 7 * PER_MONTH
