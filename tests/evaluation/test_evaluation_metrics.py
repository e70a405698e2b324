"""Metric values against hand-computed cases, ties, and brute-force references."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest

from lookbench_live.evaluation.labels import encode_labels
from lookbench_live.evaluation.metrics import (
    LabelCodes,
    ideal_dcg,
    normalize,
    per_query_scores,
    retrieve,
    score,
)


def labels_table(rows: list[tuple[str, str, str, dict[str, str]]]) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "category": c,
                "main_attribute": m,
                "item_ID": i,
                "attributes": [{"key": k, "value": v} for k, v in a.items()],
            }
            for c, m, i, a in rows
        ]
    )


def unit(deg: float) -> list[float]:
    return [math.cos(math.radians(deg)), math.sin(math.radians(deg))]


NV = "not_visible"
CORPUS = [  # (category, main_attribute, item_ID, attributes), at angles 10°, 20°, … from the query
    ("A", "y", "o1", {"g1": "a", "g2": "c", "g3": NV}),  # coarse hit, rel 1/2
    ("B", "x", "o2", {"g1": "a", "g2": "b"}),  # other category: rel 0 although values match
    ("A", "x", "o3", {"g1": "d", "g2": "c", "g3": NV}),  # first fine hit (rank 3), rel 0
    ("A", "x", "iq", {"g1": "a", "g2": "b", "g3": "red"}),  # same item (rank 4), not strict, rel 1
    ("A", "x", "o4", {"g1": "a", "g2": "b", "g3": NV}),  # first strict hit (rank 5), rel 1
    ("noise data", "", "n1", {}),
]
QUERIES = [
    ("A", "x", "iq", {"g1": "a", "g2": "b", "g3": NV}),  # 2 visible values
    ("C", "x", "zz", {"g1": "a"}),  # nothing relevant in the corpus
]


@pytest.fixture()
def hand_case():
    corpus = normalize(np.array([unit(10), unit(20), unit(30), unit(40), unit(50), unit(90)]))
    queries = normalize(np.array([unit(0), unit(0)]))
    q_codes, c_codes = encode_labels([labels_table(QUERIES), labels_table(CORPUS)])
    return queries, corpus, q_codes, c_codes


def test_hand_computed_case(hand_case):
    queries, corpus, q_codes, c_codes = hand_case
    retrieval = retrieve(queries, corpus, 20)
    assert retrieval.indices[0].tolist() == [0, 1, 2, 3, 4, 5]
    per_query = per_query_scores(q_codes, c_codes, retrieval)
    first = {k: v[0] for k, v in per_query.items()}
    assert first["coarse_recall@1"] == 1
    assert first["fine_recall@1"] == 0 and first["fine_recall@5"] == 1
    assert first["strict_recall@1"] == 0 and first["strict_recall@5"] == 1
    assert first["item_recall@1"] == 0 and first["item_recall@5"] == 1
    assert first["mrr"] == pytest.approx(1 / 3)
    # gains in rank order: 1/2, 0, 0, 1, 1, 0; the ideal order of the corpus: 1, 1, 1/2, 0, …
    assert first["ndcg@1"] == pytest.approx(0.5 / 1.0)
    dcg5 = 0.5 + 1 / math.log2(5) + 1 / math.log2(6)
    idcg5 = 1 + 1 / math.log2(3) + 0.5 / math.log2(4)
    assert first["ndcg@5"] == pytest.approx(dcg5 / idcg5)
    assert first["ndcg@20"] == pytest.approx(dcg5 / idcg5)
    # A query with no relevant item scores 0 everywhere (and nDCG does not divide by 0).
    assert {k: v[1] for k, v in per_query.items() if v[1] != 0} == {}
    means = score(q_codes, c_codes, retrieval)
    assert means["coarse_recall@1"] == pytest.approx(50.0)
    assert means["mrr"] == pytest.approx(100 / 6)
    assert means["ndcg@5"] == pytest.approx(50 * dcg5 / idcg5)


def test_query_without_visible_attributes_counts_same_category_as_fully_relevant():
    q, c = encode_labels(
        [
            labels_table([("A", "x", "q", {"g1": NV})]),
            labels_table([("B", "x", "1", {}), ("A", "z", "2", {"g1": "a"})]),
        ]
    )
    retrieval = retrieve(normalize(np.array([unit(0)])), normalize(np.array([unit(5), unit(10)])), 20)
    ndcg = per_query_scores(q, c, retrieval)["ndcg@1"]
    # rank 1 is another category (gain 0); the ideal puts the category-A item first (gain 1).
    assert ndcg[0] == 0
    assert ideal_dcg(q, c, 2)[0].tolist() == [1.0, 1.0]


def test_ties_broken_by_corpus_row_order_across_chunks_and_blocks():
    corpus = np.array([unit(45)] * 3 + [unit(0)] * 5 + [unit(45)] * 4, dtype=np.float32)
    queries = np.array([unit(0)] * 3, dtype=np.float32)
    for chunk in (1, 2, 3, 5, 100):
        got = retrieve(queries, corpus, 7, query_block=2, corpus_chunk=chunk)
        assert got.indices.tolist() == [[3, 4, 5, 6, 7, 0, 1]] * 3, chunk


def test_retrieval_matches_a_full_stable_sort():
    rng = np.random.default_rng(3)
    # Coarse rounding makes many exact ties.
    corpus = np.round(rng.standard_normal((997, 8)) * 2) / 2
    queries = np.round(rng.standard_normal((41, 8)) * 2) / 2
    got = retrieve(queries, corpus, 20, query_block=16, corpus_chunk=100)
    sims = queries.astype(np.float32) @ corpus.astype(np.float32).T
    cols = np.broadcast_to(np.arange(997), sims.shape)
    expected = np.lexsort((cols, -sims), axis=1)[:, :20]
    assert (got.indices == expected).all()
    assert np.allclose(got.scores, np.take_along_axis(sims, expected, 1))


def test_ideal_dcg_equals_brute_force_over_the_whole_corpus():
    rng = np.random.default_rng(7)
    n_q, n_c, groups = 30, 400, 4
    values = np.array(["a", "b", "c", NV])

    def rows(n: int, prefix: str) -> list[tuple[str, str, str, dict[str, str]]]:
        out = []
        for i in range(n):
            cat = "ABC"[rng.integers(3)]
            out.append((cat, "m", f"{prefix}{i}", {f"g{g}": str(rng.choice(values)) for g in range(groups)}))
        return out

    q_rows, c_rows = rows(n_q, "q"), rows(n_c, "c")
    q, c = encode_labels([labels_table(q_rows), labels_table(c_rows)])
    got = ideal_dcg(q, c, 20)
    disc = 1 / np.log2(np.arange(2, 22))
    for i, (cat, _, _, attrs) in enumerate(q_rows):
        visible = {g: v for g, v in attrs.items() if v != NV}
        gains = []
        for c_cat, _, _, c_attrs in c_rows:
            if c_cat != cat:
                gains.append(0.0)
            elif not visible:
                gains.append(1.0)
            else:
                gains.append(sum(c_attrs.get(g) == v for g, v in visible.items()) / len(visible))
        best = np.sort(np.array(gains))[::-1][:20]
        assert np.allclose(got[i], np.cumsum(best * disc)), i


def test_labels_must_agree_in_length():
    with pytest.raises(ValueError, match="fine"):
        LabelCodes(np.zeros(3, np.int64), np.zeros(2, np.int64), np.zeros(3, np.int64), np.zeros(3, np.int64))


def test_mismatched_widths_are_refused():
    with pytest.raises(ValueError, match="do not match"):
        retrieve(np.zeros((2, 3)), np.zeros((4, 5)))
