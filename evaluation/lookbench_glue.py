"""Run look-bench 0.4.0's own metric classes on a release (docs/evaluation.md, "look-bench 0.4.0").

look-bench's evaluators (`look_bench.metrics.RankEvaluator`, `MRREvaluator`, `NDCGEvaluator`)
take `evaluate(query_features, query_labels, gallery_features, gallery_labels)`: one label per
image, relevant when equal. `lookbench_inputs` builds those from a release and its embeddings,
with the corpus as ours (the subset's gallery, then the noise gallery) and one of our label
families as the label, so a user can check our numbers with the official code:

    from look_bench.metrics import RankEvaluator
    inputs = lookbench_inputs(lake, "latest", "real_streetlook", "emb.parquet", label="fine")
    RankEvaluator(rank_values=[1, 5, 10, 20]).evaluate(**inputs.as_kwargs())

look-bench itself is not imported here (a bench-only peer, installed without its dependencies).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from lookbench_live.evaluation.labels import encode_labels
from lookbench_live.evaluation.release_data import ReleaseReadError, load_release
from lookbench_live.evaluation.vectors import EmbeddingsError, Vectors, load_submitted
from lookbench_live.warehouse.lake import Lake

# Our label families, as the attribute of `LabelCodes` each reads: a look-bench "label".
LABELS = {"coarse": "category", "fine": "fine", "strict": "strict", "item": "item"}


@dataclass(frozen=True, slots=True)
class LookBenchInputs:
    """What look-bench's `BaseEvaluator.evaluate` takes. Features are the embeddings as given
    (look-bench L2-normalises them itself, `l2norm=True`); the gallery is our corpus."""

    query_features: Any  # torch.Tensor [n_query, d], float32
    query_labels: np.ndarray  # int64 [n_query]
    gallery_features: Any  # torch.Tensor [n_corpus, d], float32
    gallery_labels: np.ndarray  # int64 [n_corpus]

    def as_kwargs(self) -> dict[str, Any]:
        return {
            "query_features": self.query_features,
            "query_labels": self.query_labels,
            "gallery_features": self.gallery_features,
            "gallery_labels": self.gallery_labels,
        }


def lookbench_inputs(
    lake: Lake,
    version: str,
    subset: str,
    embeddings: str | Mapping[str, np.ndarray],
    *,
    label: str = "fine",
    noise: bool = True,
    release_path: str | None = None,
) -> LookBenchInputs:
    """look-bench's inputs for one subset of a release.

    `embeddings`: a submitted Parquet file (`sha256`, `embedding`; validated as `evaluate
    --embeddings` does) or a mapping sha256 -> vector covering the subset's images.
    `label`: which of our relevance rules becomes look-bench's one label (`coarse`: same
    category; `fine`: same category and main attribute, the published score; `strict`; `item`:
    same item_ID, what look-bench's own datasets carry). Codes are shared across query, gallery
    and noise, so a noise row (category `noise data`) is never relevant.
    `noise`: the corpus is the gallery followed by the noise gallery, as every score of ours;
    False gives the gallery alone (look-bench's example setup: higher numbers, not comparable).
    """
    import torch

    if label not in LABELS:
        raise ValueError(f"label {label!r} is not one of {sorted(LABELS)}")
    data = load_release(lake, version, release_path)
    query, gallery = data.query(subset), data.gallery(subset)
    if query is None or gallery is None:
        raise ReleaseReadError(f"release {data.version} has no {subset} query and gallery files")
    tables = [query, gallery, *([data.noise] if noise else [])]
    codes = encode_labels(tables)
    corpus_sha = gallery.column("sha256").to_pylist() + (
        data.noise.column("sha256").to_pylist() if noise else []
    )
    query_sha = query.column("sha256").to_pylist()
    if isinstance(embeddings, str):
        vectors = load_submitted(embeddings, query_sha + corpus_sha)
    else:
        vectors = Vectors.of(embeddings)
    try:
        q_rows, c_rows = vectors.rows(query_sha), vectors.rows(corpus_sha)
    except KeyError as exc:
        raise EmbeddingsError(f"no embedding for image {exc.args[0]}") from None
    attribute = LABELS[label]
    corpus_labels = np.concatenate([getattr(c, attribute) for c in codes[1:]])
    return LookBenchInputs(
        query_features=torch.from_numpy(np.ascontiguousarray(vectors.matrix[q_rows])),
        query_labels=np.asarray(getattr(codes[0], attribute), np.int64),
        gallery_features=torch.from_numpy(np.ascontiguousarray(vectors.matrix[c_rows])),
        gallery_labels=np.asarray(corpus_labels, np.int64),
    )
