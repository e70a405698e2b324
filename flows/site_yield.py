"""A site that answers but yields far less than in its earlier runs (a changed layout, a block page
served with 200): the crawl finished, so it is marked done, but its outcome carries a flag.

    flag = yield_flag(previous_products(lake, "shop", run_key), products=0, pages=200)
"""

from __future__ import annotations

import json
import statistics

import pyarrow.dataset as pads

from lookbench_live.warehouse.lake import Lake

MIN_TYPICAL = 5  # earlier runs must have yielded at least this many (median) for a drop to mean anything
DROP_SHARE = 0.1  # flagged below this share of the earlier runs' median


def previous_products(lake: Lake, site: str, run_key: str) -> list[int]:
    """Products (new + changed) each earlier finished crawl of `site` yielded, from their markers."""
    found: list[int] = []
    # Only this site's crawl markers leave Arrow, not every stage's markers of every run.
    markers = lake.read(
        "completions",
        columns=["run_key", "detail"],
        where=(pads.field("stage") == "crawl") & (pads.field("shard") == site),
    )
    for row in markers.to_pylist():
        if row["run_key"] == run_key:
            continue
        try:
            outcome = json.loads(row["detail"] or "")
        except ValueError:
            continue  # a marker without an outcome (older runs) says nothing about the yield
        if isinstance(outcome, dict) and outcome.get("status") != "failed" and "products" in outcome:
            found.append(int(outcome["products"]))
    return found


def yield_flag(previous: list[int], *, products: int, pages: int) -> str | None:
    """The flag's text when a run that fetched pages yielded far less than the earlier runs' median."""
    if not previous or pages == 0:
        return None
    typical = statistics.median(previous)
    if typical < MIN_TYPICAL or products >= typical * DROP_SHARE:
        return None
    return (
        f"yield_drop: {products} products from {pages} pages, earlier runs gave {typical:g} (median of "
        f"{len(previous)}); check the site's layout or whether it serves a block page"
    )
