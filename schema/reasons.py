"""Reason codes the flow records in `rejections`, one enumeration per stage.

A rejection's `reason` is one of these values (a `StrEnum`, so it is the plain code in the lake);
`summary.rejection_counts` and the manifest's `rejections_by_reason` count them by stage/reason.
The ingest, dedup, annotation and generation stages keep their own codes beside their records.
"""

from __future__ import annotations

from enum import StrEnum


class CrawlReason(StrEnum):
    """Why a site is recorded (stage "crawl", item `site:<name>`)."""

    SITE_FAILED = "site_failed"  # no page fetched, the host unreachable, or the crawl failed
    OVER_BUDGET = "over_budget"  # max_pages or max_duration reached; the rest is the next run's
    YIELD_DROP = "yield_drop"  # answered, but far less than its earlier months (flows/site_yield.py)


class ReleaseReason(StrEnum):
    """Why the flow holds back a release (stage "release", item: the version)."""

    CONTENT_SHORTFALL = "content_shortfall"  # an empty subset, or far fewer queries than the last


class EvaluateReason(StrEnum):
    """Why a model has no scores (stage "evaluate", item `<version>:<model>`)."""

    MODEL_FAILED = "model_failed"  # could not load or run (missing weights, no GPU)
