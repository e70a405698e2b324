"""The near-duplicate search split into shards by hash-prefix buckets (one task each).

Cut the 64 bits into k = radius + 1 parts. Two hashes within `radius` bits differ in at most
`radius` parts, so they agree exactly on at least one (pigeonhole). A part's value falls in one
of `count` buckets by its leading bits (its prefix); shard s takes, for every part, the queries
and targets whose part value is in bucket s and pairs those with the same value, keeping the
pairs within `radius` by their exact distance. Every true pair agrees on some part, so its two
hashes meet in that part's bucket: the union of the shards' pairs is exactly `range_pairs`'s.

Per shard the work is a hash join (about queries x targets / 2**bits candidates per part), and
only the rows of its buckets travel to it. The decisions stay in the flow (`run_dedup(search=...)`):
they follow the canonical order one image at a time, which no shard can see.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from lookbench_live.dedup.index import HASH_BITS, Pairs, as_packed, as_u64, merge_pairs, part_values

# Candidate (query, target) pairs compared at once: bounds memory when many hashes share a part
# value (blank or flat images hash alike).
MAX_CANDIDATES = 1 << 22

ShardRunner = Callable[
    [list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, int, int]]], list[Pairs]
]


def parts_for(radius: int) -> list[tuple[int, int]]:
    """(shift, bits) of the radius + 1 parts of a 64-bit hash, most significant first."""
    if not 0 <= radius < HASH_BITS:
        raise ValueError(f"a sharded search needs 0 <= radius < {HASH_BITS}; got {radius}")
    k = radius + 1
    sizes = [HASH_BITS // k + (1 if i < HASH_BITS % k else 0) for i in range(k)]
    parts, shift = [], HASH_BITS
    for bits in sizes:
        shift -= bits
        parts.append((shift, bits))
    return parts


def _buckets(values: np.ndarray, bits: int, count: int) -> np.ndarray:
    # The value's leading bits pick the bucket: count equal ranges of the part's values.
    return (values.astype(np.float64) * count / float(1 << bits)).astype(np.int64).clip(0, count - 1)


def shard_rows(packed: np.ndarray, radius: int, shard: int, count: int) -> np.ndarray:
    """Row numbers of `packed` hashes that some part puts in bucket `shard`: what it needs."""
    u64 = as_u64(as_packed(packed, "hashes"))
    keep = np.zeros(len(u64), dtype=bool)
    for shift, bits in parts_for(radius):
        keep |= _buckets(part_values(u64, shift, bits), bits, count) == shard
    return np.nonzero(keep)[0]


def shard_pairs(
    queries: np.ndarray,
    targets: np.ndarray,
    query_rows: np.ndarray,
    target_rows: np.ndarray,
    radius: int,
    shard: int,
    count: int,
) -> Pairs:
    """The pairs within `radius` that meet in bucket `shard` of some part; row numbers are
    `query_rows`/`target_rows` (the rows' numbers in the full search)."""
    q64 = as_u64(as_packed(queries, "queries"))
    t64 = as_u64(as_packed(targets, "targets"))
    found: list[Pairs] = []
    for shift, bits in parts_for(radius):
        qv, tv = part_values(q64, shift, bits), part_values(t64, shift, bits)
        q_in = np.nonzero(_buckets(qv, bits, count) == shard)[0]
        t_in = np.nonzero(_buckets(tv, bits, count) == shard)[0]
        if not len(q_in) or not len(t_in):
            continue
        order = t_in[np.argsort(tv[t_in], kind="stable")]
        sorted_values = tv[order]
        first = np.searchsorted(sorted_values, qv[q_in], side="left")
        last = np.searchsorted(sorted_values, qv[q_in], side="right")
        counts = last - first
        for lo, hi in _groups(counts):
            q_local, c, f = q_in[lo:hi], counts[lo:hi], first[lo:hi]
            total = int(c.sum())
            if not total:
                continue
            q_pair = np.repeat(q_local, c)
            offset = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(c) - c, c)
            t_pair = order[np.repeat(f, c) + offset]
            distance = np.bitwise_count(q64[q_pair] ^ t64[t_pair]).astype(np.int32)
            near = distance <= radius
            if near.any():
                found.append(Pairs(query_rows[q_pair[near]], target_rows[t_pair[near]], distance[near]))
    return _unique(merge_pairs(found))


def _groups(counts: np.ndarray) -> list[tuple[int, int]]:
    """Consecutive query ranges of at most MAX_CANDIDATES candidates (one query alone may exceed it)."""
    groups, start, total = [], 0, 0
    for i, c in enumerate(counts.tolist()):
        if total and total + c > MAX_CANDIDATES:
            groups.append((start, i))
            start, total = i, 0
        total += c
    groups.append((start, len(counts)))
    return groups


def _unique(pairs: Pairs) -> Pairs:
    """One row per (query, target): a pair agreeing on several parts is found once per part."""
    if not len(pairs):
        return pairs
    keep = np.ones(len(pairs), dtype=bool)
    keep[1:] = (pairs.query[1:] != pairs.query[:-1]) | (pairs.target[1:] != pairs.target[:-1])
    return Pairs(pairs.query[keep], pairs.target[keep], pairs.distance[keep])


def shard_inputs(
    queries: np.ndarray, targets: np.ndarray, radius: int, count: int
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, int, int]]:
    """Per shard, the arguments of `shard_pairs`: only the rows its buckets hold travel."""
    out = []
    for shard in range(count):
        q_rows, t_rows = shard_rows(queries, radius, shard, count), shard_rows(targets, radius, shard, count)
        out.append((queries[q_rows], targets[t_rows], q_rows, t_rows, radius, shard, count))
    return out


def sharded_range_pairs(
    queries: np.ndarray, targets: np.ndarray, radius: int, count: int, run: ShardRunner | None = None
) -> Pairs:
    """`range_pairs(queries, targets, radius)`, computed as `count` shards.

    `run` takes the shards' argument tuples and returns their `Pairs` (the flow submits each as
    a task); by default they run here, one after the other."""
    queries = as_packed(queries, "queries")
    targets = as_packed(targets, "targets")
    if not len(queries) or not len(targets):
        return Pairs.empty()
    inputs = shard_inputs(queries, targets, radius, count)
    results = run(inputs) if run is not None else [shard_pairs(*args) for args in inputs]
    return _unique(merge_pairs(list(results)))


def searcher(count: int, run: ShardRunner | None = None) -> Callable[[np.ndarray, np.ndarray, int], Pairs]:
    """A `run_dedup(search=...)` that shards every range search into `count`."""

    def search(queries: np.ndarray, targets: np.ndarray, radius: int) -> Pairs:
        if radius >= HASH_BITS:  # every pair is near: nothing to shard by
            from lookbench_live.dedup.index import range_pairs

            return range_pairs(queries, targets, radius)
        return sharded_range_pairs(queries, targets, radius, count, run)

    return search


__all__: Sequence[str] = ("parts_for", "searcher", "shard_pairs", "sharded_range_pairs")
