"""Embeddings are held as one float32 matrix: what keeps a 100,000-image month under 4 GB.

A month of ~100k images × 1,836 baseline dims read through Python floats took 9.7 GB
(docs/benchmarks.md); these tests pin the behaviour that keeps it near one matrix.
tracemalloc sees numpy's buffers and Python objects (not Arrow's own pool), so a regression
to per-value Python objects or per-subset copies shows up as a multiple of the matrix size.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pyarrow as pa
import pytest

from lookbench_live.evaluation.metrics import normalize, normalize_rows, retrieve
from lookbench_live.evaluation.vectors import (
    WRITE_BATCH,
    EmbeddingsError,
    Vectors,
    load_cache,
    read_vectors,
    save_cache,
)
from lookbench_live.warehouse.lake import Lake

V = "v20261101"


def _shas(n: int) -> list[str]:
    return [f"{i:064x}" for i in range(n)]


def _random(n: int, d: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)


def test_read_vectors_gives_one_float32_matrix_with_row_views():
    matrix = _random(50, 8)
    table = pa.table({"sha256": _shas(50), "embedding": pa.array(list(matrix), pa.list_(pa.float32()))})
    vectors = read_vectors(table, "test")
    assert isinstance(vectors, Vectors)
    assert vectors.matrix.dtype == np.float32 and vectors.matrix.shape == (50, 8)
    np.testing.assert_array_equal(vectors.matrix, matrix)
    row = vectors[_shas(50)[7]]
    assert isinstance(row, np.ndarray) and np.shares_memory(row, vectors.matrix)
    np.testing.assert_array_equal(vectors.rows(_shas(50)[::-1]), np.arange(49, -1, -1))


def test_loading_a_cache_allocates_about_one_matrix(tmp_path):
    n, d = 20_000, 256  # a 20 MB matrix; as Python floats it would be ~160 MB
    lake = Lake(tmp_path / "home")
    save_cache(lake, V, "m", Vectors(_shas(n), _random(n, d)))
    tracemalloc.start()
    try:
        vectors = load_cache(lake, V, "m")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(vectors) == n
    matrix_bytes = n * d * 4
    assert peak < 1.6 * matrix_bytes, f"peak {peak / 1e6:.1f} MB for a {matrix_bytes / 1e6:.1f} MB matrix"


def test_cache_round_trip_over_several_row_groups_is_exact_and_sorted(tmp_path):
    n = WRITE_BATCH + 37
    lake = Lake(tmp_path / "home")
    shas = _shas(n)[::-1]  # written sorted whatever the input order
    matrix = _random(n, 4, seed=3)
    save_cache(lake, V, "m", {s: matrix[i] for i, s in enumerate(shas)})
    back = load_cache(lake, V, "m")
    assert back.shas == sorted(shas)
    for i in (0, 5, n - 1):
        np.testing.assert_array_equal(back[shas[i]], matrix[i])


def test_merged_prefers_new_rows_and_checks_width():
    base = Vectors(["a", "b"], np.array([[1, 0], [0, 1]], np.float32))
    merged = base.merged({"b": np.array([2, 2], np.float32), "c": np.array([3, 3], np.float32)})
    assert sorted(merged) == ["a", "b", "c"]
    np.testing.assert_array_equal(merged["b"], [2, 2])
    with pytest.raises(EmbeddingsError, match="width"):
        base.merged({"d": np.zeros(3, np.float32)})


def test_normalize_rows_in_place_equals_normalize_bytewise():
    matrix = _random(10_000, 33, seed=1)
    matrix[17] = 0.0  # a zero row stays zero
    expected = normalize(matrix.copy())
    out = normalize_rows(matrix)
    assert out is matrix
    assert matrix.tobytes() == expected.tobytes()


def test_retrieve_over_row_indices_equals_retrieve_over_a_copied_corpus():
    rng = np.random.default_rng(2)
    release = normalize(_random(3_000, 16, seed=4))
    release[10] = release[20]  # a tie, broken by corpus order
    rows = rng.permutation(3_000)[:2_500]
    queries = normalize(_random(40, 16, seed=5))
    copied = retrieve(queries, release[rows], 20, corpus_chunk=700)
    indexed = retrieve(queries, release, 20, corpus_chunk=700, corpus_rows=rows)
    assert copied.indices.tobytes() == indexed.indices.tobytes()
    assert copied.scores.tobytes() == indexed.scores.tobytes()
