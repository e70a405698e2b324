"""Our metrics against look-bench 0.4.0's own classes (when it is installed): identity Recall@K on
random data, and recall, MRR and nDCG on a release through `evaluation.lookbench_glue`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from evaluation_fixtures import make_release
from street_fixtures import V, embeddings_file, street_rows

from lookbench_live.evaluation.evaluate import run_evaluation
from lookbench_live.evaluation.lookbench_glue import lookbench_inputs
from lookbench_live.evaluation.metrics import (
    DEFAULT_KS,
    K_MAX,
    LabelCodes,
    normalize,
    per_query_scores,
    retrieve,
)


def test_item_recall_equals_lookbench_rank_evaluator():
    metrics = pytest.importorskip("look_bench.metrics", reason="look-bench 0.4.0 is a bench-only peer")
    import torch

    rng = np.random.default_rng(5)
    corpus = rng.standard_normal((600, 32)).astype(np.float32)
    c_item = rng.integers(0, 200, 600)
    q_rows = rng.integers(0, 600, 80)
    queries = corpus[q_rows] + rng.standard_normal((80, 32)).astype(np.float32) * 1.5
    q_item = c_item[q_rows]
    theirs = metrics.RankEvaluator(rank_values=[1, 5, 10, 20]).evaluate(
        torch.from_numpy(queries), q_item, torch.from_numpy(corpus), c_item
    )
    zeros_q, zeros_c = np.zeros(80, np.int64), np.zeros(600, np.int64)
    q = LabelCodes(zeros_q, zeros_q, zeros_q, q_item)
    c = LabelCodes(zeros_c, zeros_c, zeros_c, c_item)
    ours = per_query_scores(q, c, retrieve(normalize(queries), normalize(corpus), 20))
    for k in (1, 5, 10, 20):
        assert round(float(ours[f"item_recall@{k}"].mean() * 100), 2) == theirs[f"recall@{k}"]
    assert 0 < theirs["recall@1"] < 100  # a case where ranking matters


def test_the_glue_runs_lookbench_classes_on_a_release(lake, tmp_path):
    """look-bench's RankEvaluator and MRREvaluator, given a release through the glue (corpus =
    gallery + noise, our label as theirs), give our recall and MRR; its nDCG is binary with IDCG
    from the count of relevant items, ours graded (docs/evaluation.md, "look-bench 0.4.0")."""
    metrics = pytest.importorskip("look_bench.metrics", reason="look-bench 0.4.0 is a bench-only peer")
    base = Path(make_release(lake, V, street_rows()))
    file, _ = embeddings_file(base, tmp_path / "emb.parquet")
    run = run_evaluation(lake, V, embeddings=file)

    def pct(values: np.ndarray) -> float:
        return round(float(np.mean(values)) * 100, 2)

    for subset in ("real_streetlook", "aigen_studio"):
        ours = run.subsets[subset].per_query
        for label in ("coarse", "fine", "strict", "item"):
            inputs = lookbench_inputs(lake, V, subset, file, label=label)
            theirs = metrics.RankEvaluator(rank_values=list(DEFAULT_KS)).evaluate(**inputs.as_kwargs())
            assert theirs == {f"recall@{k}": pct(ours[f"{label}_recall@{k}"]) for k in DEFAULT_KS}, (
                subset,
                label,
            )
        fine = lookbench_inputs(lake, V, subset, file, label="fine")
        assert metrics.MRREvaluator(rank_values=[K_MAX]).evaluate(**fine.as_kwargs()) == {
            "mrr@20": pct(ours["mrr"])
        }

    street = run.subsets["real_streetlook"]
    fine = lookbench_inputs(lake, V, "real_streetlook", file, label="fine")
    assert len(fine.gallery_labels) == len(street.corpus_sha)  # gallery + noise, in our order
    theirs = metrics.NDCGEvaluator(rank_values=list(DEFAULT_KS)).evaluate(**fine.as_kwargs())
    # Theirs, recomputed from our top 20: binary gain (a fine hit), IDCG from the number of fine
    # hits in the whole corpus.
    hit = street.corpus_labels.fine[street.retrieval.indices] == street.query_labels.fine[:, None]
    relevant = (street.corpus_labels.fine[None, :] == street.query_labels.fine[:, None]).sum(axis=1)
    disc = 1.0 / np.log2(np.arange(2, K_MAX + 2))
    for k in DEFAULT_KS:
        dcg = (hit[:, :k] * disc[:k]).sum(axis=1)
        idcg = np.array([disc[: min(n, k)].sum() for n in relevant])
        assert theirs[f"ndcg@{k}"] == pct(np.divide(dcg, idcg, out=np.zeros_like(dcg), where=idcg > 0))
    # Ours grades a near twin (same category and main attribute, another colour) at 1/2: lower.
    assert all(pct(street.per_query[f"ndcg@{k}"]) < theirs[f"ndcg@{k}"] for k in (5, 10))
    # look-bench's example ranks the gallery alone: the noise rows are left out.
    alone = lookbench_inputs(lake, V, "real_streetlook", file, label="fine", noise=False)
    gallery_rows = pq.read_metadata(base / "real_streetlook" / "gallery.parquet").num_rows
    assert len(alone.gallery_labels) == gallery_rows < len(street.corpus_sha)
