"""A month's steps read the month, not the lake's history (issue 28): with 1 and with 6 earlier
months in the lake, dedup, annotation planning, `Lake.append`, the evidence checks, the release's
assembly (`stage`) and the label rules (`labels`) read the same rows of the lake's tables
(`Lake.reads`), counted, not timed; a crawl's pipeline and its counts read the ids it meets and
the rows it wrote, not the site's catalogue."""

from __future__ import annotations

import datetime as dt
import json
import random
import shutil
from decimal import Decimal
from pathlib import Path
from typing import Any

import factories
import lakefill

from lookbench_live.annotation.run import run_annotation
from lookbench_live.config import AnnotationSettings, DedupSettings, EvidenceSettings
from lookbench_live.dedup import run_dedup
from lookbench_live.evaluation.look_check import run_look_check
from lookbench_live.schema.hashing import HASH_METHOD
from lookbench_live.schema.records import ImageRecord, Look, Product, product_key
from lookbench_live.schema.release import NOISE
from lookbench_live.schema.taxonomy import default_taxonomy
from lookbench_live.warehouse.freshness import record_baseline
from lookbench_live.warehouse.labels import LabelRules
from lookbench_live.warehouse.lake import Lake
from lookbench_live.warehouse.release import stage_release
from lookbench_live.warehouse.views import Window

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
PER_MONTH = 24
TAXONOMY = default_taxonomy()


def _seen(month: int) -> dt.datetime:
    return T0 + dt.timedelta(days=31 * month)


def _window(month: int) -> Window:
    return Window(_seen(month), _seen(month + 1))


def _write_month(lake: Lake, month: int, rng: random.Random) -> None:
    """A month's products with one real photo each (a release writes their bytes), a look linking
    its first product by URL, and a generation conditioned on its second."""
    seen = _seen(month)
    if month == 0:
        record_baseline(lake, "shop", seen - dt.timedelta(days=1), "baseline")
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
                sha256=lake.put_image(lakefill.draw(month * PER_MONTH + k)),
                width=160,
                height=200,
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
    look = Look(
        look_id=f"look-{month}", source="shop", url=f"https://shop.example/look/{month}",
        photo_url=f"https://shop.example/img/look-{month}.jpg", product_refs=[products[0].url], first_seen_at=seen,
    )  # fmt: skip
    lake.append([look])
    linked = product_key("shop", products[1].product_id)
    gen = factories.generation(
        f"g{month:063d}", item_ids=[linked], prompt="a dress", seed=month, width=160, height=200,
        scheduler="DDIM", conditioned_on=linked, conditioned_on_sha256=images[1].sha256,
        conditioning_json=json.dumps([{"product_key": linked, "sha256": images[1].sha256}]),
        sha256=lake.put_image(lakefill.draw(1000 + month)), first_seen_at=seen,
    )  # fmt: skip
    lake.append([gen])


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

    # The release steps of the month, on its window, as the refresh runs them.
    window = _window(earlier)
    evidence = Lake(home)
    checked = run_look_check(evidence, EvidenceSettings(), "evidence-now", window=window)
    assert checked.looks == 1  # this month's conditioned generation, never an earlier month's
    version = f"v{_seen(earlier):%Y%m%d}"
    stager = Lake(home)
    staged = stage_release(stager, version=version, window=window, run_id="stage-now")
    labeller = Lake(home)
    rules = LabelRules.from_lake(
        labeller, on_wrong_main_attribute="hold_back", judge_model="judge", window=window
    )
    relabelled = stage_release(labeller, version=version, window=window, run_id="labels-now", labels=rules)
    noise = staged.files[f"{NOISE}/gallery.parquet"]["rows"]
    # Every product of the month but the one its look shows and the one its generation wears.
    assert noise == relabelled.files[f"{NOISE}/gallery.parquet"]["rows"] == PER_MONTH - 2
    shutil.rmtree(relabelled.path)  # (the second staging removed the first)
    return {
        "append": (dict(appender.reads.rows), dict(appender.reads.fragments)),
        "dedup": (dict(dedup.reads.rows), dict(dedup.reads.fragments)),
        "annotate": dict(annotator.reads.rows),
        "evidence": dict(evidence.reads.rows),
        "stage": dict(stager.reads.rows),
        "labels": dict(labeller.reads.rows),
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
    # The evidence checks read this month's generations, their annotations, stored outcomes and the
    # photos of the products they wear; assembly and the label rules read the window's images,
    # decisions and annotations, the products, looks and generations dated in it or named by them.
    for step in ("evidence", "stage", "labels"):
        assert one[step] == six[step], step
    # This month's products (found, then read with all their rows) and the one its look's URL names.
    assert one["stage"]["products"] == 2 * PER_MONTH + 2
    assert one["stage"]["looks"] == one["stage"]["generations"] == 1
    assert one["evidence"]["generations"] == 1 and one["evidence"]["images"] == 1
    # The key index itself is read (one small segment per fragment): it grows, the rows do not.
    assert six["segments"][0] > one["segments"][0]

    # The test can fail: a lake whose dedup index is lost reads the whole history once.
    lake = Lake(six["home"])
    Path(lake.path("derived", "dedup_index", "manifest.json")).unlink()
    run_dedup(lake, DedupSettings(), "dedup-again")
    assert lake.reads.rows["images"] == 7 * PER_MONTH


def _crawl_reads(tmp_path: Path, earlier: int) -> dict[str, Any]:
    """A month's crawl of `shop` on a lake holding `earlier` months of its products (a new
    content hash each month for `m0-0`, so it has a row per month): the pipeline's lookups and
    the run's counts, with the rows each read."""
    from lookbench_live.scrapers import crawl
    from lookbench_live.scrapers.extract.model import NormalizedProduct
    from lookbench_live.scrapers.items import CrawlItem
    from lookbench_live.scrapers.pipelines import LakePipeline

    home = tmp_path / f"crawl-{earlier}"

    def product(pid: str, price: str) -> NormalizedProduct:
        return NormalizedProduct(product_id=pid, url=f"https://shop.example/p/{pid}", platform="shopify",
                                 title="blue cotton dress", price=Decimal(price))  # fmt: skip

    history = Lake(home)
    for month in range(earlier):
        seen = _seen(month)
        rows = [product(f"m{month}-{k}", "10").to_record("shop", seen) for k in range(1, PER_MONTH)]
        rows.append(product("m0-0", str(10 + month)).to_record("shop", _seen(0)))
        history.append(rows)
        history.append([product(f"o{month}-{k}", "10").to_record("other", seen) for k in range(PER_MONTH)])
    before = crawl._snapshot(Lake(home), "shop")
    pipeline = LakePipeline(str(home), "shop", "run-now", str(tmp_path / "state"), batch_size=10)
    pipeline.open_spider()
    now = f"{_seen(earlier).isoformat()}"
    crawled = [product("m0-0", "99"), product("m0-1", "10")]  # changed, unchanged
    crawled += [product(f"new-{k}", "10") for k in range(PER_MONTH)]
    for item in crawled:
        pipeline.process_item(CrawlItem("product", item.to_json(), observed_at=now))
    pipeline.close_spider()
    counter = Lake(home)
    result = crawl._count(counter, "shop", "run-now", before, tmp_path / f"journal-{earlier}")
    rows = Lake(home).read("products", columns=["product_id", "first_seen_at"])
    first_seen = {r["product_id"]: r["first_seen_at"] for r in rows.to_pylist() if r["product_id"] == "m0-0"}
    return {
        "pipeline": dict(pipeline.lake.reads.rows),
        "count": dict(counter.reads.rows),
        "new": result.products_new,
        "changed": result.products_changed,
        "m0-0 first seen": first_seen["m0-0"],
    }


def test_a_months_crawl_reads_its_own_products_not_the_history(tmp_path: Path) -> None:
    one, six = _crawl_reads(tmp_path, 1), _crawl_reads(tmp_path, 6)
    for run in (one, six):
        # A changed product keeps its first_seen_at; the unchanged one writes nothing.
        assert (run["new"], run["changed"]) == (PER_MONTH, 1)
        assert run["m0-0 first seen"] == _seen(0)
    # The pipeline reads the rows of the ids it meets (m0-0 has a row per month) and the key
    # columns of the one fragment holding the unchanged key (a key-index match, confirmed), not
    # the site's catalogue; the counts read this run's rows and the earlier rows of its changed id.
    assert one["pipeline"]["products"] == 2 + PER_MONTH
    assert six["pipeline"]["products"] == one["pipeline"]["products"] + 5
    assert one["count"]["products"] == PER_MONTH + 1 + 1
    assert six["count"]["products"] == one["count"]["products"] + 5
