"""Exact Hamming search against persisted, sorted band arrays (the dedup index's shards).

A shard of the dedup index (dedup/history.py) stores, besides its rows, the multi-index of
`dedup/index.py`'s `mih` engine already built: for each of the 3 parts of the 64 bits
(22 + 21 + 21), the part values of every pHash and mirrored pHash it holds, sorted, with the
row each came from. A month's search then costs a `searchsorted` per probe; nothing is sorted
or bucketed again, however many months the index holds.

Exact by pigeonhole, as `mih`: two hashes within `radius` bits differ in at most `radius // 3`
bits of some part, so probing every part value within that many flips of the query's finds
every pair (a near copy whose leading bits differ is found through another part); each
candidate is then kept by its exact popcount distance.
"""

from __future__ import annotations

import numpy as np

from lookbench_live.dedup.index import MIH_MAX_RADIUS, MIH_PARTS, flip_masks, part_values

PARTS = MIH_PARTS  # (shift, bits), most significant first: persisted shards depend on them
QUERY_CHUNK = 16_384  # queries probed at once: bounds the candidate arrays


def build(phash: np.ndarray, mirror: np.ndarray, hashed: np.ndarray) -> dict[str, np.ndarray]:
    """The sorted part values (`key<i>`) and their codes (`code<i>` = row * 2 + 1 for a mirror)
    of the rows with usable hashes."""
    rows = np.nonzero(hashed)[0].astype(np.uint32)
    codes = np.concatenate([rows * np.uint32(2), rows * np.uint32(2) + np.uint32(1)])
    values = np.concatenate([phash[rows], mirror[rows]]).astype(np.uint64)
    out: dict[str, np.ndarray] = {}
    for i, (shift, bits) in enumerate(PARTS):
        keys = part_values(values, shift, bits, np.uint32)
        order = np.argsort(keys, kind="stable")
        out[f"key{i}"] = keys[order]
        out[f"code{i}"] = codes[order]
    return out


def search(
    queries: np.ndarray,
    phash: np.ndarray,
    mirror: np.ndarray,
    bands: dict[str, np.ndarray],
    radius: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(query, row, distance) of every row whose pHash or mirrored pHash is within `radius`
    (inclusive) of a query's pHash, the smaller distance of the two, sorted by (query, row)."""
    if radius > MIH_MAX_RADIUS:
        raise ValueError(f"the band search handles radius <= {MIH_MAX_RADIUS}; got {radius}")
    found_q: list[np.ndarray] = []
    found_r: list[np.ndarray] = []
    found_d: list[np.ndarray] = []
    flips = radius // len(PARTS)
    for i, (shift, bits) in enumerate(PARTS):
        keys, codes = bands[f"key{i}"], bands[f"code{i}"]
        if not len(keys):
            continue
        masks = flip_masks(bits, flips).astype(np.uint32)
        for start in range(0, len(queries), QUERY_CHUNK):
            block = queries[start : start + QUERY_CHUNK]
            values = part_values(block, shift, bits, np.uint32)
            for mask in masks:
                # Probes in sorted order: numpy's binary search narrows from the previous answer,
                # 5x faster here than probing in query order.
                order = np.argsort(values ^ mask)
                probe = (values ^ mask)[order]
                first = np.searchsorted(keys, probe, side="left")
                count = np.searchsorted(keys, probe, side="right") - first
                hit = np.nonzero(count)[0]
                if not hit.size:
                    continue
                count = count[hit]
                total = int(count.sum())
                # Expand each probe's run of equal keys into (query, code) candidates without a loop.
                q_local = np.repeat(order[hit], count)
                offset = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(count) - count, count)
                code = codes[np.repeat(first[hit], count) + offset].astype(np.int64)
                row = code >> 1
                target = np.where(code & 1, mirror[row], phash[row])
                distance = np.bitwise_count(block[q_local] ^ target).astype(np.int32)
                keep = distance <= radius
                if keep.any():
                    found_q.append(q_local[keep].astype(np.int64) + start)
                    found_r.append(row[keep])
                    found_d.append(distance[keep])
    if not found_q:
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int32)
    q, r, d = np.concatenate(found_q), np.concatenate(found_r), np.concatenate(found_d)
    # One row per (query, row), at its smaller distance (pHash or mirror; found once per part).
    order = np.lexsort((d, r, q))
    q, r, d = q[order], r[order], d[order]
    first_of = np.ones(len(q), dtype=bool)
    first_of[1:] = (q[1:] != q[:-1]) | (r[1:] != r[:-1])
    return q[first_of], r[first_of], d[first_of]
