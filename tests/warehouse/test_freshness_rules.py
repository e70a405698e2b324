"""The freshness rules (warehouse/freshness.py) and upgrading a lake written before them
(issue 22 §1, §6)."""

from __future__ import annotations

import datetime as dt
import tarfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from lakefill import fill

from lookbench_live.warehouse.freshness import (
    FRESHNESS_RULES_VERSION,
    Evidence,
    HeldBack,
    decide,
    default_window,
    recorded_baselines,
    site_baselines,
    upgrade_lake,
)
from lookbench_live.warehouse.lake import Lake
from lookbench_live.warehouse.release import build_release, read_manifest, verify_release
from lookbench_live.warehouse.views import Window

UTC = dt.UTC
AS_OF = dt.datetime(2026, 10, 1, tzinfo=UTC)
WINDOW = default_window(AS_OF, 30)
BASELINE = dt.datetime(2026, 9, 1, 6, tzinfo=UTC)


def test_the_first_window_starts_one_cadence_before_the_as_of_day_and_later_ones_at_the_previous_end() -> (
    None
):
    assert WINDOW.start == dt.datetime(2026, 9, 1, tzinfo=UTC)
    assert WINDOW.end == dt.datetime(2026, 10, 2, tzinfo=UTC)
    later = default_window(AS_OF, 30, previous_end=dt.datetime(2026, 9, 15, tzinfo=UTC))
    assert later.start == dt.datetime(2026, 9, 15, tzinfo=UTC)


@pytest.mark.parametrize(
    ("published", "first_seen", "updated", "evidence", "held"),
    [
        # A platform date inside the window dates the item, whenever we first saw it.
        (dt.datetime(2026, 9, 20, tzinfo=UTC), BASELINE, None, Evidence.PLATFORM_PUBLISHED, None),
        # A platform date before the window: never fresh, even first seen this month.
        (dt.datetime(2021, 3, 1, tzinfo=UTC), dt.datetime(2026, 9, 25, tzinfo=UTC), None, None,
         HeldBack.PUBLISHED_BEFORE_WINDOW),
        # Undated and present at the site's baseline crawl: never fresh.
        (None, BASELINE, None, None, HeldBack.BASELINE_UNDATED),
        # Undated at the baseline, modified inside the window: weak evidence, still held back.
        (None, BASELINE, dt.datetime(2026, 9, 20, tzinfo=UTC), None, HeldBack.WEAK_EVIDENCE_ONLY),
        # Undated, first seen by a later crawl: fresh from that sighting.
        (None, dt.datetime(2026, 9, 25, tzinfo=UTC), None, Evidence.FIRST_SEEN_AFTER_BASELINE, None),
        # Undated, first seen after the baseline but before this window: an earlier month's.
        (None, dt.datetime(2026, 8, 20, tzinfo=UTC), None, None, HeldBack.FIRST_SEEN_OUTSIDE_WINDOW),
    ],
)  # fmt: skip
def test_each_item_is_fresh_only_with_evidence(published, first_seen, updated, evidence, held) -> None:
    baseline = BASELINE if first_seen >= BASELINE else dt.datetime(2026, 8, 1, tzinfo=UTC)
    decision = decide(
        published_at=published,
        first_seen_at=first_seen,
        updated_at=updated,
        baseline_at=baseline,
        window=WINDOW,
    )
    assert (decision.evidence, decision.held) == (evidence, held)
    assert decision.fresh == (evidence is not None)
    if evidence is not None:
        assert WINDOW.contains(decision.at)


def test_an_undated_item_of_a_site_without_a_baseline_is_held_back() -> None:
    decision = decide(
        published_at=None, first_seen_at=dt.datetime(2026, 9, 25, tzinfo=UTC), updated_at=None,
        baseline_at=None, window=WINDOW,
    )  # fmt: skip
    assert decision.held is HeldBack.NO_BASELINE


# ---------------------------------------------------------------------- upgrading a lake
T0 = dt.datetime(2026, 11, 1, tzinfo=UTC)

# A lake written by the tree before the freshness rules (commit 3b43d6c, in its own checkout and
# interpreter; tests/fixtures/README.md says how): its first crawl stamped the catalogue and a
# release was built on it. Committed bytes, so the test runs wherever the suite does.
OLD_LAKE = Path(__file__).parents[1] / "fixtures" / "lake-before-freshness.tar.gz"


def test_a_lake_written_before_the_rules_upgrades_without_re_dating_or_re_keying(tmp_path: Path) -> None:
    home = tmp_path / "lake"
    home.mkdir()
    with tarfile.open(OLD_LAKE) as tar:
        tar.extractall(home, filter="data")
    lake = Lake(home)
    assert "freshness_rules" not in read_manifest(lake, "v20261107")
    assert recorded_baselines(lake) == {}
    before = {
        t: lake.read(t).sort_by([(c, "ascending") for c in ("source", "first_seen_at")])
        for t in ("products", "looks")
    }
    fragments = sorted(p.name for p in (home / "tables" / "products").glob("*.parquet"))

    added = upgrade_lake(lake)
    assert [(b.source, b.baseline_at, b.origin) for b in added] == [("shop", T0, "upgrade")]
    assert upgrade_lake(lake) == []  # idempotent
    # Nothing re-dated or re-keyed: the same rows, the same fragments.
    for table, rows in before.items():
        now = lake.read(table).sort_by([(c, "ascending") for c in ("source", "first_seen_at")])
        assert now.equals(rows)
    assert sorted(p.name for p in (home / "tables" / "products").glob("*.parquet")) == fragments
    assert site_baselines(lake) == {"shop": T0}

    # The next crawl (this tree) finds new undated products: released as first seen after the
    # baseline; the release names the one built before the rules.
    fill(lake, products=6, looks=0, start=T0 + dt.timedelta(days=10), seed=1)
    result = build_release(
        lake, version="v20261120", window=Window(T0 + dt.timedelta(days=7), T0 + dt.timedelta(days=20))
    )
    manifest = read_manifest(lake, result.version)
    assert verify_release(lake, result.version) == []
    assert manifest["freshness_rules"] == FRESHNESS_RULES_VERSION
    assert manifest["releases_before_rules"] == ["v20261107"]
    assert manifest["site_baselines"] == {"shop": T0.isoformat()}
    studio = pq.read_table(
        home / "releases" / result.version / "real_studio_flat" / "gallery.parquet"
    ).to_pylist()
    noise = pq.read_table(home / "releases" / result.version / "noise" / "gallery.parquet").to_pylist()
    real = [r for r in studio + noise if r["source"] == "shop"]
    assert real and {r["freshness_evidence"] for r in real} == {"first_seen_after_baseline"}
    assert {r["item_ID"].split(":")[1].split("-")[0] for r in real} == {"p1"}  # only the new crawl's


def test_a_baseline_product_first_seen_in_the_window_is_held_back_and_counted(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake")
    fill(lake, products=8, looks=0, start=T0, seed=0)
    # All eight were seen by the site's first crawl: its baseline is the last of them.
    from lookbench_live.warehouse.freshness import record_baseline

    record_baseline(lake, "shop", T0 + dt.timedelta(hours=7), "test")
    fill(lake, products=6, looks=0, start=T0 + dt.timedelta(days=2), seed=1)
    result = build_release(lake, version="v20261110", window=Window(T0, T0 + dt.timedelta(days=10)))
    manifest = read_manifest(lake, result.version)
    assert manifest["held_back"]["baseline_undated"] == 8
    rows = []
    for rel in (
        "real_studio_flat/query.parquet",
        "real_studio_flat/gallery.parquet",
        "noise/gallery.parquet",
    ):
        rows += pq.read_table(tmp_path / "lake" / "releases" / result.version / rel).to_pylist()
    shop = {r["item_ID"] for r in rows if r["source"] == "shop"}
    assert shop and all(key.startswith("shop:p1-") for key in shop)
    rejected = [r for r in lake.read("rejections").to_pylist() if r["reason"] == "baseline_undated"]
    assert len(rejected) == 8
    card = (tmp_path / "lake" / "releases" / result.version / "README.md").read_text()
    assert "## Freshness (freshness-v1)" in card and "baseline_undated 8" in card
