"""Retrieval metrics from one deterministic top-K selection per query (no I/O).

Inputs are L2-normalised embeddings (float32, one row per image) and integer label
codes (see `LabelCodes`, built by `evaluation.labels`). Every metric family comes from
the same top-`K_MAX` list, found once per query:

- similarity is computed in blocks of queries × chunks of the corpus, so memory is
  bounded by `query_block × corpus_chunk` floats whatever the corpus size;
- each chunk gives its top-K with `torch.topk`; chunks are merged; ties are broken by
  corpus row order (the lower row wins), so results are the same on every run and
  machine. `torch.topk` alone does not promise which of several equal scores it keeps,
  so a row whose K-th score is tied is re-selected exactly (rare with real features).

Metrics, all in percent (0–100), averaged over queries:

- `coarse_recall@k`: a corpus item of the same `category` is in the top k.
- `fine_recall@k`: same `category` and same `main_attribute` (the published score).
- `strict_recall@k`: same category and every attribute value equal (all groups,
  `not_visible` included); a multi-valued group (`"red|white"`) is equal when its
  value sets are equal, in any order.
- `item_recall@k`: the same `item_ID` (the identity label look-bench scores).
- `mrr`: mean reciprocal rank of the first *fine* hit, truncated at `K_MAX` (a query
  whose first fine hit is below rank 20, or that has none, contributes 0).
- `ndcg@k`: graded relevance. For a query q with V visible attribute values
  (values of groups whose answer is not `not_visible`; a multi-valued answer
  `"red|white"` counts as two values), an item's gain is `rel = shared / V` when it
  has q's category (shared = q's visible values the item has in the same group:
  colour `"red|white"` shares one value with `"white"` and two with `"white|red"`)
  and 0 otherwise; when V = 0 every same-category item has rel 1.
  `DCG@k = Σ_{r=1..k} rel_r / log2(r + 1)`; `IDCG@k` is the DCG of the best possible
  ordering of the *whole* corpus (computed exactly from the corpus labels, not from
  the retrieved list); `nDCG@k = DCG@k / IDCG@k`, and 0 when IDCG@k = 0 (no item
  shares anything with the query).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

K_MAX = 20
DEFAULT_KS: tuple[int, ...] = (1, 5, 10, 20)
# Attribute code of an absent group or a `not_visible` value: never equal to a visible value.
ABSENT = -1
NO_HIT = 1 << 30
NOT_VISIBLE = -2
# Bytes of corpus rows one similarity chunk gathers (`retrieve`): 18,271 rows of the baseline's
# 1,836 dims. At 65,536 such rows the gather and its scores took 0.6 GB at once (700×-shaped
# release, bench/eval_memory.py); smaller chunks only add cheap top-k merges.
BLOCK_BYTES = 128 * 2**20


@dataclass(frozen=True, slots=True)
class LabelCodes:
    """Integer label codes of a set of images; codes are comparable across query and corpus.

    `attrs[i, g]` is the code of image i's value for attribute group g (groups are
    global columns), `ABSENT` when its category has no such group and `NOT_VISIBLE`
    for "not_visible".
    """

    category: np.ndarray  # int64 [n]
    fine: np.ndarray  # int64 [n], one code per (category, main_attribute)
    strict: np.ndarray  # int64 [n], one code per (category, all attribute values)
    item: np.ndarray  # int64 [n], one code per item_ID
    attrs: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.int32))  # int32 [n, G]
    # overlap[a, b]: how many values codes a and b share ("red|white" and "white": 1; its
    # diagonal: a code's number of values). None: every code is one value and shares only
    # with itself. One table serves every set of one encode_labels call.
    overlap: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = len(self.category)
        for name in ("fine", "strict", "item"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"label array {name!r} has {len(getattr(self, name))} rows, expected {n}")
        if self.attrs.shape[0] not in (0, n) or self.attrs.ndim != 2:
            raise ValueError(f"attrs must be [n, groups] with n={n}, got shape {self.attrs.shape}")

    def __len__(self) -> int:
        return len(self.category)

    def attr_matrix(self) -> np.ndarray:
        if self.attrs.shape[0] == len(self):
            return self.attrs
        return np.full((len(self), 0), ABSENT, np.int32)

    def take(self, rows: np.ndarray) -> LabelCodes:
        return LabelCodes(
            self.category[rows],
            self.fine[rows],
            self.strict[rows],
            self.item[rows],
            self.attr_matrix()[rows],
            self.overlap,
        )


def shares(a: np.ndarray, b: np.ndarray, overlap: np.ndarray | None) -> np.ndarray:
    """Elementwise: how many values attribute codes `a` and `b` (broadcast) have in common.

    Negative codes (absent, not visible) share nothing. Without an overlap table a code
    is one value (1 when equal, else 0); with one, a multi-valued code counts each value.
    """
    # Small dtypes (bool, int8): callers sum over groups, and numpy sums these into int64.
    if overlap is None:
        return (a == b) & (a >= 0)
    a, b = np.broadcast_arrays(a, b)
    visible = (a >= 0) & (b >= 0)
    return np.where(visible, overlap[np.where(visible, a, 0), np.where(visible, b, 0)], 0)


def visible_values(attrs: np.ndarray, overlap: np.ndarray | None) -> np.ndarray:
    """Per row, the number of visible values (a multi-valued code counts each of its values)."""
    visible = attrs >= 0
    if overlap is None:
        return visible.sum(axis=1)
    sizes = np.diagonal(overlap).astype(np.int64)
    return np.where(visible, sizes[np.where(visible, attrs, 0)], 0).sum(axis=1)


@dataclass(frozen=True, slots=True)
class Retrieval:
    """The top-K of every query: corpus row indices and their cosine scores, best first."""

    indices: np.ndarray  # int64 [Q, K]
    scores: np.ndarray  # float32 [Q, K]


def _stable_topk(sims: torch.Tensor, k: int, offset: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k of each row of `sims` ordered by (-score, column); ties keep the lowest columns."""
    k = min(k, sims.shape[1])
    # One extra column tells, for free, whether more than k columns reach the k-th score
    # (the (k+1)-th equals the k-th): only then may topk have kept a later column over an
    # earlier tied one, and the row is re-selected exactly.
    extra = min(k + 1, sims.shape[1])
    vals, idx = torch.topk(sims, extra, dim=1, largest=True, sorted=True)
    if extra > k:
        crowded = vals[:, k] == vals[:, k - 1]
        vals, idx = vals[:, :k].contiguous(), idx[:, :k].contiguous()
    else:
        crowded = torch.zeros(sims.shape[0], dtype=torch.bool)
    kth = vals[:, -1:]
    if bool(crowded.any()):
        for row in torch.nonzero(crowded).flatten().tolist():
            candidates = torch.nonzero(sims[row] >= kth[row, 0]).flatten()  # ascending columns
            order = torch.argsort(-sims[row, candidates], stable=True)[:k]
            idx[row] = candidates[order]
            vals[row] = sims[row, idx[row]]
    # Sort the k kept by (-score, column): stable sort of a column-ascending list.
    by_col = torch.argsort(idx, dim=1)
    idx = torch.gather(idx, 1, by_col)
    vals = torch.gather(vals, 1, by_col)
    order = torch.argsort(-vals, dim=1, stable=True)
    return torch.gather(vals, 1, order), torch.gather(idx, 1, order) + offset


def retrieve(
    queries: np.ndarray | torch.Tensor,
    corpus: np.ndarray | torch.Tensor,
    k: int = K_MAX,
    *,
    query_block: int = 1024,
    corpus_chunk: int = 65536,
    corpus_rows: np.ndarray | None = None,
    block_bytes: int = BLOCK_BYTES,
) -> Retrieval:
    """Top-k corpus rows by inner product for every query, ties broken by corpus row order.

    Embeddings must already be L2-normalised (inner product = cosine). A chunk holds at most
    `corpus_chunk` rows and at most `block_bytes` of gathered corpus rows (wide embeddings get
    fewer rows), so peak extra memory is about `block_bytes` plus the `query_block × chunk × 4`
    bytes of scores (twice that while merging), whatever the corpus size; the running top-k per
    query is all that is kept between chunks.
    `corpus_rows`: the corpus is `corpus[corpus_rows]` (indices into the result refer to this
    order), gathered one chunk at a time so a subset never copies the whole release matrix.
    """
    q = torch.as_tensor(queries, dtype=torch.float32)
    c = torch.as_tensor(corpus, dtype=torch.float32)
    if q.ndim != 2 or c.ndim != 2 or q.shape[1] != c.shape[1]:
        raise ValueError(f"query {tuple(q.shape)} and corpus {tuple(c.shape)} embeddings do not match")
    rows = None if corpus_rows is None else torch.as_tensor(np.asarray(corpus_rows, np.int64))
    n_q, n_c = q.shape[0], (c.shape[0] if rows is None else len(rows))
    k = min(k, n_c)
    corpus_chunk = max(1, min(corpus_chunk, block_bytes // max(1, 4 * int(c.shape[1]))))
    out_idx = np.zeros((n_q, k), np.int64)
    out_val = np.zeros((n_q, k), np.float32)
    if n_q == 0 or k == 0:
        return Retrieval(out_idx, out_val)
    with torch.inference_mode():
        for q0 in range(0, n_q, query_block):
            qb = q[q0 : q0 + query_block]
            best_val: torch.Tensor | None = None
            best_idx: torch.Tensor | None = None
            for c0 in range(0, n_c, corpus_chunk):
                block = c[c0 : c0 + corpus_chunk] if rows is None else c[rows[c0 : c0 + corpus_chunk]]
                sims = qb @ block.T
                del block
                vals, idx = _stable_topk(sims, k, c0)
                del sims
                if best_val is None or best_idx is None:
                    best_val, best_idx = vals, idx
                    continue
                # Earlier chunks hold lower rows, so a stable sort of [best, chunk]
                # by -score keeps row order among ties.
                all_val = torch.cat([best_val, vals], dim=1)
                all_idx = torch.cat([best_idx, idx], dim=1)
                order = torch.argsort(-all_val, dim=1, stable=True)[:, :k]
                best_val = torch.gather(all_val, 1, order)
                best_idx = torch.gather(all_idx, 1, order)
            assert best_val is not None and best_idx is not None
            out_idx[q0 : q0 + len(qb)] = best_idx.numpy()
            out_val[q0 : q0 + len(qb)] = best_val.numpy()
    return Retrieval(out_idx, out_val)


def _discounts(k: int) -> np.ndarray:
    return 1.0 / np.log2(np.arange(2, k + 2, dtype=np.float64))


def graded_relevance(query: LabelCodes, corpus: LabelCodes, indices: np.ndarray) -> np.ndarray:
    """Gain of each retrieved item (see module docstring), float64 [Q, K]."""
    qa = query.attr_matrix()
    ca = corpus.attr_matrix()
    same_cat = corpus.category[indices] == query.category[:, None]
    n_visible = visible_values(qa, query.overlap)  # [Q]
    if qa.shape[1]:
        shared = shares(ca[indices], qa[:, None, :], query.overlap).sum(axis=2)  # [Q, K]
    else:
        shared = np.zeros(indices.shape, np.int64)
    rel = (shared + (n_visible == 0)[:, None]) / np.maximum(n_visible, 1)[:, None]
    return np.where(same_cat, rel, 0.0)


def ideal_dcg(query: LabelCodes, corpus: LabelCodes, k: int = K_MAX, *, block: int = 4096) -> np.ndarray:
    """IDCG@1..k of every query over the whole corpus, float64 [Q, k] (column j = IDCG@(j+1)).

    Exact: per category, distinct query attribute rows are matched against distinct
    corpus attribute rows (with multiplicities), which gives each query the histogram
    of corpus gains; the ideal list takes the highest gains first.
    """
    qa, ca = query.attr_matrix(), corpus.attr_matrix()
    n_groups = qa.shape[1]
    n_vis_all = visible_values(qa, query.overlap)
    levels = int(n_vis_all.max(initial=0)) + 1  # number of shared values 0..max V
    out = np.zeros((len(query), k), np.float64)
    disc = _discounts(k)
    for cat in np.unique(query.category):
        q_rows = np.flatnonzero(query.category == cat)
        c_rows = np.flatnonzero(corpus.category == cat)
        if len(c_rows) == 0:
            continue
        uq, q_inv = np.unique(qa[q_rows], axis=0, return_inverse=True)
        uc, c_cnt = np.unique(ca[c_rows], axis=0, return_counts=True)
        q_inv = q_inv.reshape(-1)
        n_vis = visible_values(uq, query.overlap)
        hist = np.zeros((len(uq), levels), np.int64)  # corpus items per number of shared values
        step = max(1, block * 64 // max(1, len(uc)))
        for s in range(0, len(uq), step):
            part = uq[s : s + step]
            if n_groups:
                shared = shares(uc[None, :, :], part[:, None, :], query.overlap).sum(axis=2)
            else:
                shared = np.zeros((len(part), len(uc)), np.int64)
            flat = shared + levels * np.arange(len(part))[:, None]
            hist[s : s + step] = np.bincount(
                flat.ravel(),
                weights=np.broadcast_to(c_cnt, shared.shape).ravel(),
                minlength=len(part) * levels,
            ).reshape(len(part), levels)
        # Gains of each level; with no visible value every same-category item has gain 1.
        gain = np.arange(levels)[None, :] / np.maximum(n_vis, 1)[:, None]
        gain[n_vis == 0] = 1.0
        # Ideal list: levels from the most shared values down, each repeated by its count.
        desc_hist = hist[:, ::-1]
        desc_gain = gain[:, ::-1]
        ends = np.cumsum(desc_hist, axis=1)  # [U, L]
        ranks = np.arange(k)
        level_at = (ends[:, None, :] <= ranks[None, :, None]).sum(axis=2)  # [U, k]
        valid = level_at < levels
        g = np.where(valid, np.take_along_axis(desc_gain, np.minimum(level_at, levels - 1), axis=1), 0.0)
        idcg = np.cumsum(g * disc[None, :], axis=1)
        out[q_rows] = idcg[q_inv]
    return out


def score(
    query: LabelCodes,
    corpus: LabelCodes,
    retrieval: Retrieval,
    ks: Sequence[int] = DEFAULT_KS,
) -> dict[str, float]:
    """Every metric family from one retrieval, in percent; keys like `fine_recall@5`, `ndcg@10`, `mrr`."""
    per_query = per_query_scores(query, corpus, retrieval, ks)
    return {name: float(values.mean() * 100.0) if len(values) else 0.0 for name, values in per_query.items()}


def per_query_scores(
    query: LabelCodes,
    corpus: LabelCodes,
    retrieval: Retrieval,
    ks: Sequence[int] = DEFAULT_KS,
) -> dict[str, np.ndarray]:
    """Each metric for each query as a fraction (0–1); averaging gives `score`."""
    idx = retrieval.indices
    if len(query) != idx.shape[0]:
        raise ValueError(f"{len(query)} query labels for {idx.shape[0]} retrieved lists")
    k_have = idx.shape[1]
    if ks and max(ks) > K_MAX:
        raise ValueError(f"K up to {K_MAX} is supported, got {max(ks)}")
    hits = {
        "coarse": corpus.category[idx] == query.category[:, None],
        "fine": corpus.fine[idx] == query.fine[:, None],
        "strict": corpus.strict[idx] == query.strict[:, None],
        "item": corpus.item[idx] == query.item[:, None],
    }
    out: dict[str, np.ndarray] = {}
    for family, hit in hits.items():
        # first[q] = items ranked before the first hit; NO_HIT when none was retrieved
        # (the corpus may be shorter than K, so k_have itself is not a safe sentinel).
        first = np.full(len(query), NO_HIT, np.int64)
        if hit.size:
            first = np.where(hit.any(axis=1), hit.argmax(axis=1), NO_HIT)
        for k in ks:
            out[f"{family}_recall@{k}"] = (first < k).astype(np.float64)
        if family == "fine":
            out["mrr"] = np.where(first < K_MAX, 1.0 / (first + 1.0), 0.0)
    rel = graded_relevance(query, corpus, idx)
    k_top = max(ks) if ks else K_MAX
    disc = _discounts(k_have)
    dcg = np.cumsum(rel * disc[None, :], axis=1)
    idcg = ideal_dcg(query, corpus, max(k_top, 1))
    for k in ks:
        col_d = min(k, k_have) - 1
        d = dcg[:, col_d] if col_d >= 0 else np.zeros(len(query))
        i = idcg[:, k - 1]
        out[f"ndcg@{k}"] = np.divide(d, i, out=np.zeros_like(d), where=i > 0)
    return out


NORMALIZE_BLOCK = 4096  # rows normalised at once by `normalize_rows` (its temporary's bound)


def normalize_rows(matrix: np.ndarray) -> np.ndarray:
    """`normalize` in place on a writeable float32 matrix, `NORMALIZE_BLOCK` rows at a time
    (the same numbers: each row's norm depends only on that row); returns `matrix`."""
    if matrix.dtype != np.float32 or not matrix.flags.writeable or matrix.ndim != 2:
        raise ValueError("normalize_rows needs a writeable 2-d float32 matrix")
    for start in range(0, matrix.shape[0], NORMALIZE_BLOCK):
        block = matrix[start : start + NORMALIZE_BLOCK]
        norms = np.linalg.norm(block, axis=1, keepdims=True)
        zero = norms[:, 0] <= 0
        np.divide(block, norms, out=block, where=norms > 0)
        block[zero] = 0.0
    return matrix


def normalize(embeddings: np.ndarray) -> np.ndarray:
    """L2-normalise rows (float32); zero rows stay zero."""
    x = np.asarray(embeddings, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)
