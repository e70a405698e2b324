"""Which items a release may call new, and the evidence that dates each one (rules v1).

The first crawl of a site sees its whole catalogue, years of it, at once: `first_seen_at` then
says when *we* looked, not when the item appeared. So a release row needs evidence that the
item is new in the release's window (docs/release.md, "Freshness"):

- `platform_published` (strong): the platform's own publication/creation date (Shopify
  `published_at`/`created_at`, WooCommerce `date_created`, schema.org `datePublished`) lies in
  the window. An item whose platform date is before the window is never fresh, whenever we
  first saw it.
- `first_seen_after_baseline`: an undated item first seen by a crawl after the site's baseline
  (its first crawl). Undated items present at the baseline are never fresh: nothing dates them.
- `generated`: an AIGen image made by this pipeline in the window.
- Weak evidence (`updated_at`, which carries sitemap `lastmod` / HTTP `Last-Modified` /
  the platform's modification date): a change, not a creation. It never makes an item fresh;
  an undated baseline item that has it is held back as `weak_evidence_only`, so the manifest
  shows how many items only weak evidence could have dated.

Items without evidence stay in the lake, eligible again when evidence appears (a later
crawl that finds a platform date in a later window). Every held-back item is counted by reason.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from lookbench_live.schema.records import Look, Product, SiteBaseline
from lookbench_live.warehouse.lake import Lake
from lookbench_live.warehouse.views import Window

FRESHNESS_RULES_VERSION = "freshness-v1"
DEFAULT_CADENCE_DAYS = 30


class Evidence(StrEnum):
    """What dates a released row (the `freshness_evidence` column)."""

    PLATFORM_PUBLISHED = "platform_published"
    FIRST_SEEN_AFTER_BASELINE = "first_seen_after_baseline"
    GENERATED = "generated"


class HeldBack(StrEnum):
    """Why an item is not fresh in this window (the manifest's `held_back` keys)."""

    PUBLISHED_BEFORE_WINDOW = "published_before_window"
    PUBLISHED_AFTER_WINDOW = "published_after_window"
    BASELINE_UNDATED = "baseline_undated"
    WEAK_EVIDENCE_ONLY = "weak_evidence_only"
    FIRST_SEEN_OUTSIDE_WINDOW = "first_seen_outside_window"
    NO_BASELINE = "no_baseline"


@dataclass(frozen=True, slots=True)
class Decision:
    """One item's freshness in one window: its evidence and when it dates it, or why not."""

    evidence: Evidence | None
    at: dt.datetime | None
    held: HeldBack | None = None
    detail: str = ""

    @property
    def fresh(self) -> bool:
        return self.evidence is not None


def _utc(moment: dt.datetime) -> dt.datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


def decide(
    *,
    published_at: dt.datetime | None,
    first_seen_at: dt.datetime,
    updated_at: dt.datetime | None,
    baseline_at: dt.datetime | None,
    window: Window,
) -> Decision:
    """The rules, in order: a platform date decides alone; an undated item needs a first
    sighting after its site's baseline, inside the window."""
    if published_at is not None:
        published = _utc(published_at)
        if window.start is not None and published < window.start:
            return Decision(
                None, None, HeldBack.PUBLISHED_BEFORE_WINDOW, f"published {published.isoformat()}"
            )
        if window.end is not None and published >= window.end:
            return Decision(None, None, HeldBack.PUBLISHED_AFTER_WINDOW, f"published {published.isoformat()}")
        return Decision(Evidence.PLATFORM_PUBLISHED, published)
    first = _utc(first_seen_at)
    if not window.contains(first):
        return Decision(None, None, HeldBack.FIRST_SEEN_OUTSIDE_WINDOW, f"first seen {first.isoformat()}")
    if baseline_at is None:
        return Decision(None, None, HeldBack.NO_BASELINE, "its site has no recorded baseline crawl")
    if first <= _utc(baseline_at):
        if updated_at is not None and window.contains(_utc(updated_at)):
            # A change inside the window is not a creation: recorded, never enough.
            return Decision(
                None, None, HeldBack.WEAK_EVIDENCE_ONLY, f"undated, modified {_utc(updated_at).isoformat()}"
            )
        return Decision(None, None, HeldBack.BASELINE_UNDATED, f"undated, present at baseline {baseline_at}")
    return Decision(Evidence.FIRST_SEEN_AFTER_BASELINE, first)


@dataclass(frozen=True, slots=True)
class FreshnessRules:
    """The rules bound to one window and the lake's site baselines (source -> baseline time)."""

    window: Window
    baselines: dict[str, dt.datetime]

    def product(self, product: Product) -> Decision:
        return decide(
            published_at=product.published_at,
            first_seen_at=product.first_seen_at,
            updated_at=product.updated_at,
            baseline_at=self.baselines.get(product.source),
            window=self.window,
        )

    def look(self, look: Look) -> Decision:
        return decide(
            published_at=look.published_at,
            first_seen_at=look.first_seen_at,
            updated_at=None,
            baseline_at=self.baselines.get(look.source),
            window=self.window,
        )

    def generated(self, first_seen_at: dt.datetime) -> Decision:
        if self.window.contains(_utc(first_seen_at)):
            return Decision(Evidence.GENERATED, _utc(first_seen_at))
        return Decision(None, None, HeldBack.FIRST_SEEN_OUTSIDE_WINDOW, f"generated {first_seen_at}")


def default_window(
    as_of: dt.datetime, cadence_days: int = DEFAULT_CADENCE_DAYS, *, previous_end: dt.datetime | None = None
) -> Window:
    """The refresh's window: from the previous counted release's end (or, for the first
    release, `cadence_days` before the as-of day: never "since the beginning of time") to the
    end of the as-of day."""
    day = dt.datetime(as_of.year, as_of.month, as_of.day, tzinfo=dt.UTC)
    end = day + dt.timedelta(days=1)
    start = previous_end if previous_end is not None else day - dt.timedelta(days=cadence_days)
    return Window(start, end)


# ---------------------------------------------------------------------- site baselines
def recorded_baselines(lake: Lake) -> dict[str, SiteBaseline]:
    """The baselines the lake records, by site (the earliest record of a site wins)."""
    found: dict[str, SiteBaseline] = {}
    for record in lake.records(SiteBaseline.__table__):
        assert isinstance(record, SiteBaseline)
        current = found.get(record.source)
        if current is None or record.baseline_at < current.baseline_at:
            found[record.source] = record
    return found


def derived_baselines(lake: Lake) -> dict[str, dt.datetime]:
    """Each site's first crawl as the lake shows it: the earliest `first_seen_at` of its
    products and looks. A lake written before these rules recorded no baseline, but its first
    crawl stamped the whole catalogue with that moment, so this is where the baseline was."""
    first: dict[str, dt.datetime] = {}
    for table in (Product.__table__, Look.__table__):
        rows = lake.read(table, columns=["source", "first_seen_at"]).to_pylist()
        for row in rows:
            moment = _utc(row["first_seen_at"])
            if row["source"] not in first or moment < first[row["source"]]:
                first[row["source"]] = moment
    return first


def site_baselines(lake: Lake) -> dict[str, dt.datetime]:
    """Every site's baseline. A lake that records none was written before these rules: its
    baselines are derived (so `release build` on a lake not yet upgraded applies the same
    rules). Otherwise only recorded ones count: a site without one has not finished its first
    crawl, and its undated items are held back (`no_baseline`)."""
    recorded = recorded_baselines(lake)
    if not recorded:
        return derived_baselines(lake)
    return {source: rec.baseline_at for source, rec in recorded.items()}


def upgrade_lake(lake: Lake, *, run_key: str = "lake-upgrade") -> list[SiteBaseline]:
    """Record the derived baseline of every site of a lake written before rules v1 (one that
    records no baseline at all). Nothing is re-dated or re-keyed: only `site_baselines` rows are
    added. Idempotent: a lake that records baselines is left as it is."""
    recorded = recorded_baselines(lake)
    if recorded:
        # A lake that records baselines was written under the rules: a site without one has
        # not finished its first crawl yet, and its next crawl is its baseline.
        return []
    new = [
        SiteBaseline(
            source=source,
            baseline_at=moment,
            run_key=run_key,
            origin="upgrade",
            rules=FRESHNESS_RULES_VERSION,
        )
        for source, moment in sorted(derived_baselines(lake).items())
        if source not in recorded
    ]
    if new:
        lake.append(new)
    return new


def record_baseline(lake: Lake, source: str, at: dt.datetime, run_key: str) -> None:
    """A site's first crawl is its baseline (a second record of a site is ignored by its key)."""
    lake.append(
        [
            SiteBaseline(
                source=source,
                baseline_at=at,
                run_key=run_key,
                origin="first_crawl",
                rules=FRESHNESS_RULES_VERSION,
            )
        ]
    )


def held_back_counts(decisions: Iterable[Decision]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for decision in decisions:
        if decision.held is not None:
            counts[decision.held.value] = counts.get(decision.held.value, 0) + 1
    return dict(sorted(counts.items()))
