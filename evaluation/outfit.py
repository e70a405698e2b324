"""Outfit-level retrieval on the StreetLook subsets (docs/evaluation.md, "Outfit-level retrieval").

A look is the query crops of one street photo that the release publishes: the query rows of a
subset that share a `raw_sha256` (crops the release held back are not rows, so not part of it).
A look is a hit at K when every one of its crops is a hit at K. Computed from the per-query hit
arrays `metrics.per_query_scores` already gives (`fine_recall@5` and so on): no second retrieval.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from lookbench_live.evaluation.metrics import DEFAULT_KS

# The subsets whose queries are crops of street photos (several per photo).
OUTFIT_SUBSETS = ("real_streetlook", "aigen_streetlook")
OUTFIT_FAMILIES = ("fine", "coarse", "strict")


def outfit_names(ks: Sequence[int] = DEFAULT_KS) -> list[str]:
    """The `--json` keys of a StreetLook subset, besides `outfit_looks` and `outfit_crops_per_look`."""
    return [f"outfit_{family}_recall@{k}" for family in OUTFIT_FAMILIES for k in ks]


def look_keys(query_rows: pa.Table) -> list[str]:
    """Per query row, the look it belongs to: its `raw_sha256` (the photo it was cut from). A row
    without one (not a crop) is a look of its own, keyed by its `sha256`."""
    shas = query_rows.column("sha256").to_pylist()
    if "raw_sha256" not in query_rows.column_names:
        return shas
    raws = query_rows.column("raw_sha256").to_pylist()
    return [raw if raw is not None else sha for raw, sha in zip(raws, shas, strict=True)]


def outfit_scores(
    looks: Sequence[str], per_query: Mapping[str, np.ndarray], ks: Sequence[int] = DEFAULT_KS
) -> dict[str, Any]:
    """Outfit recall (percent, 4 decimals) per family and K, the number of looks and the mean
    number of crops per look, from each query's look key and its per-query hit arrays (0/1).
    With no query, every score and the mean are None and `outfit_looks` is 0."""
    n = len(looks)
    if n == 0:
        return {**dict.fromkeys(outfit_names(ks)), "outfit_looks": 0, "outfit_crops_per_look": None}
    _, look = np.unique(np.asarray(looks, dtype=str), return_inverse=True)
    n_looks = int(look.max()) + 1
    out: dict[str, Any] = {}
    for family in OUTFIT_FAMILIES:
        for k in ks:
            hits = np.asarray(per_query[f"{family}_recall@{k}"])
            if len(hits) != n:
                raise ValueError(f"{len(hits)} {family}_recall@{k} values for {n} queries")
            # A look is a hit only when none of its crops misses.
            misses = np.bincount(look, weights=(hits < 1).astype(np.float64), minlength=n_looks)
            out[f"outfit_{family}_recall@{k}"] = round(float((misses == 0).mean()) * 100.0, 4)
    out["outfit_looks"] = n_looks
    out["outfit_crops_per_look"] = round(n / n_looks, 4)
    return out
