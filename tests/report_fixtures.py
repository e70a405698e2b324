"""A crowded report for layout tests: many models with long names, many long categories, three
releases, and names that are markup (a model and a category), all of which must show as text."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

import numpy as np
from evaluation_fixtures import T0, make_release, row, sample_rows

from lookbench_live.evaluation.evaluate import EvaluationRun, evaluate_release_run
from lookbench_live.schema.records import Evaluation
from lookbench_live.schema.release import SUBSETS
from lookbench_live.warehouse.lake import Lake

XSS_MODEL = '<script>alert("model")</script>'
XSS_CATEGORY = '"><img src=x onerror=alert(1)>'
MODELS = [
    "organisation-with-a-really-long-name/fashion-siglip-so400m-patch14-384-finetuned-on-everything-v2",
    "Marqo/marqo-fashionSigLIP",
    "Marqo/marqo-fashionCLIP",
    "openai/clip-vit-base-patch16",
    "google/siglip2-base-patch16-224",
    "facebook/dinov2-large",
    "srpone/gr-lite",
    XSS_MODEL,
    "laion/CLIP-ViT-H-14-laion2B-s32B-b79K",
    "timm/vit_large_patch14_dinov2.lvd142m",
    "local:/models/a/b/c/d/e/f/g/h/very/deep/folder",
    "another-model-with-no-separators-at-all-abcdefghijklmnopqrstuvwxyz0123456789",
    "a-thirteenth-model-that-repeats-the-first-colour",
]
RELEASES = ("v20260901", "v20261001", "v20261101")


def crowded_rows(categories: int = 30) -> dict[str, list[dict[str, Any]]]:
    """One query and one gallery row per category, the categories spread over the subsets; every
    row first seen on one of three days."""
    names = [f"category-with-a-rather-long-name-number-{i:02d}" for i in range(categories - 1)]
    out: dict[str, list[dict[str, Any]]] = {f"{s}/{p}": [] for s in SUBSETS for p in ("query", "gallery")}
    for i, cat in enumerate([*names, XSS_CATEGORY]):
        subset = SUBSETS[i % len(SUBSETS)]
        colour = ((i * 53) % 256, (i * 97) % 256, (i * 151) % 256)
        seen = T0 + dt.timedelta(days=i % 3)
        for split, seed in (("query", 1 + i), ("gallery", 500 + i)):
            main = "sequin" if split == "query" or i % 3 else "leather"
            out[f"{subset}/{split}"].append(
                row(f"shop:{i}", cat, main, {"colour": "red"}, colour=colour, seed=seed, first_seen=seen)
            )
    out["noise/gallery"] = sample_rows()["noise/gallery"]
    return out


def crowded_lake(home: Any) -> tuple[Lake, str, list[EvaluationRun]]:
    """Releases `RELEASES` (the last one crowded), the baseline's run of the last and one run per
    model of `MODELS` (the baseline's retrieval with hits drawn per model, so the charts differ),
    and stored evaluations of every model on the earlier releases (outfit metrics on the middle one
    only: older evaluations have none)."""
    lake = Lake(home)
    *older, version = RELEASES
    for v in older:
        make_release(lake, v, sample_rows())
    make_release(lake, version, crowded_rows())
    run = evaluate_release_run(lake, version)
    rng = np.random.default_rng(0)
    runs = [run]
    for m, name in enumerate(MODELS):
        subsets = {}
        for key, sub in run.subsets.items():
            per_query = {
                k: (rng.random(len(v)) < 0.2 + 0.05 * m).astype(v.dtype) for k, v in sub.per_query.items()
            }
            subsets[key] = dataclasses.replace(sub, per_query=per_query)
        runs.append(dataclasses.replace(run, model=name, subsets=subsets))
    records = []
    for r, v in enumerate(older):
        for m, name in enumerate(MODELS):
            for subset in [*SUBSETS, "overall"]:
                metrics = {
                    "fine_recall@1": f"{20 + 5 * m + 3 * r:.4f}",
                    "coarse_recall@1": f"{40 + 4 * m:.4f}",
                }
                if subset == "real_streetlook" and r == 1:
                    metrics |= {"outfit_fine_recall@1": f"{10 + m:.4f}", "outfit_looks": "40"}
                records.append(
                    Evaluation(
                        release=v, model=name, subset=subset, after="", queries=10, corpus=20, metrics=metrics
                    )
                )
    lake.append(records)
    return lake, version, runs
