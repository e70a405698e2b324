"""Identity-label Recall@K equals look-bench 0.4.0's RankEvaluator (when it is installed)."""

from __future__ import annotations

import numpy as np
import pytest

from lookbench_live.evaluation.metrics import LabelCodes, normalize, per_query_scores, retrieve


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
