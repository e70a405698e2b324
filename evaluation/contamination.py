"""Scores across a range of releases, and a model's contamination gap.

A model trained on data up to a cutoff may have seen the items first seen before it. Its
contamination gap is its score on the queries first seen on or before the cutoff minus its
score on those first seen after it, pooled over the chosen releases, each side with its
query count (a gap over a handful of queries means little). When a query was first seen is
`query_moment`: the earlier of its `first_seen_at` and `published_at`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import numpy as np

from lookbench_live.evaluation.evaluate import EvaluationRun, metric_names, run_evaluation
from lookbench_live.evaluation.outfit import OUTFIT_SUBSETS, look_keys, outfit_scores
from lookbench_live.evaluation.release_data import query_moment
from lookbench_live.schema.committed import (
    ReleaseError,
    ReleaseWithdrawn,
    check_version,
    current_versions,
    resolve_version,
    withdrawal,
)
from lookbench_live.schema.release import version_key
from lookbench_live.warehouse.lake import Lake


def resolve_range(lake: Lake, spec: str) -> list[str]:
    """Committed versions named by `spec`: `vA..vB` (inclusive, either end may be `latest` or
    empty), `all`, a comma list, or one version; oldest first (`version_key`). Withdrawn
    releases are never chosen, not even by name."""
    versions = current_versions(lake)
    if not versions:
        raise ReleaseError(f"no committed release in {lake.home}")
    if spec == "all":
        return versions
    if ".." in spec:
        # The ends are bounds (a month with no release is fine); `latest` is the LATEST pointer.
        start, _, end = spec.partition("..")
        low = _bound(lake, start, versions[0])
        high = _bound(lake, end, versions[-1])
        chosen = [v for v in versions if version_key(low) <= version_key(v) <= version_key(high)]
        if not chosen:
            raise ReleaseError(f"no committed release in {spec} (committed: {', '.join(versions)})")
        return chosen
    named = [resolve_version(lake, v.strip()) for v in spec.split(",") if v.strip()]
    for version in named:
        record = withdrawal(lake, version)
        if record is not None:
            raise ReleaseWithdrawn(version, record)
    return sorted(named, key=version_key)


def _bound(lake: Lake, text: str, default: str) -> str:
    text = text.strip()
    if not text:
        return default
    return resolve_version(lake, "latest") if text == "latest" else check_version(text)


def _after_mask(query_rows: Any, cutoff: dt.date) -> np.ndarray:
    """Per query: first seen strictly after `cutoff` (as `--after` keeps it)."""
    moments = query_moment(query_rows)
    return np.array([m is not None and m.astimezone(dt.UTC).date() > cutoff for m in moments], dtype=bool)


def _split(run: EvaluationRun, cutoff: dt.date) -> dict[str, dict[str, list[np.ndarray]]]:
    """Per side ('before', 'after'): metric -> per-query score arrays, one per subset."""
    sides: dict[str, dict[str, list[np.ndarray]]] = {"before": {}, "after": {}}
    for sub in run.subsets.values():
        after = _after_mask(sub.query_rows, cutoff)
        for metric, values in sub.per_query.items():
            sides["after"].setdefault(metric, []).append(values[after])
            sides["before"].setdefault(metric, []).append(values[~after])
    return sides


def _result_after(run: EvaluationRun, cutoff: dt.date, parts: dict[str, list[np.ndarray]]) -> dict[str, Any]:
    """`run.result()` restricted to queries first seen after `cutoff` (as `--after` computes it)."""
    out: dict[str, Any] = {"release": run.release, "model": run.model, "after": cutoff.isoformat()}
    out["subsets"] = {}
    for i, name in enumerate(run.subsets):
        entry = _pooled({m: [arrays[i]] for m, arrays in parts.items()})
        out["subsets"][name] = {**entry, "corpus": run.corpus_sizes[name]}
        if name in OUTFIT_SUBSETS:  # the looks of the queries kept, as `--after` forms them
            sub = run.subsets[name]
            keep = _after_mask(sub.query_rows, cutoff)
            looks = [key for key, kept in zip(look_keys(sub.query_rows), keep, strict=True) if kept]
            out["subsets"][name].update(outfit_scores(looks, {m: v[keep] for m, v in sub.per_query.items()}))
    out["overall"] = {**_pooled(parts), "corpus": None}
    return out


def _pooled(parts: dict[str, list[np.ndarray]]) -> dict[str, Any]:
    names = metric_names()
    joined = {m: np.concatenate(parts[m]) if parts.get(m) else np.zeros(0) for m in names}
    n = len(next(iter(joined.values()))) if joined else 0
    out: dict[str, Any] = {"queries": n}
    for metric in names:
        out[metric] = round(float(joined[metric].mean()) * 100.0, 4) if n else None
    return out


def evaluate_range(
    lake: Lake,
    versions: Sequence[str],
    *,
    model: str | None = None,
    embeddings: str | None = None,
    after: dt.date | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """Each release's result (queries after `after` when given), and with `after` the gap.

    Returns `{"model", "after", "releases": [result, ...], "before": {...}, "after_cutoff":
    {...}, "gap": {metric: before - after}}`; the last three only when `after` is given.
    """
    results: list[dict[str, Any]] = []
    sides: dict[str, dict[str, list[np.ndarray]]] = {"before": {}, "after": {}}
    name = None
    for version in versions:
        run = run_evaluation(lake, version, model=model, embeddings=embeddings, **kwargs)
        name = run.model
        if after is None:
            results.append(run.result())
            continue
        split = _split(run, after)
        for side, parts in split.items():
            for metric, arrays in parts.items():
                sides[side].setdefault(metric, []).extend(arrays)
        results.append(_result_after(run, after, split["after"]))
    out: dict[str, Any] = {
        "model": name,
        "after": after.isoformat() if after else None,
        "releases": results,
    }
    if after is not None:
        before, later = _pooled(sides["before"]), _pooled(sides["after"])
        out["before"] = before
        out["after_cutoff"] = later
        out["gap"] = {
            m: (round(before[m] - later[m], 4) if before[m] is not None and later[m] is not None else None)
            for m in metric_names()
        }
    return out
