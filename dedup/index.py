"""Exact Hamming range search over 64-bit hashes, without an all-pairs Python loop.

Two engines return the same pairs (every query/target pair at distance <= radius):

- `flat`: faiss `IndexBinaryFlat.range_search`, exact, run over query chunks so memory stays
  bounded. Cost grows with queries x targets (about 6 s for 100k x 100k on 2 cores).
- `mih`: multi-index hashing as a prefilter, then the exact distance of every candidate.
  The 64 bits are cut into 3 parts; two hashes within `radius` bits differ in at most
  `radius // 3` bits of some part (pigeonhole), so probing every part value within that many
  flips of the query's finds every true pair. Fast while `radius // 3` is small (radius <= 8)
  and hashes are spread out; `auto` picks it for large searches only.

Hashes are 16-character lowercase hex strings (as imagehash prints them) or their packed
form: `(n, 8)` uint8 rows, big-endian, which is what faiss binary indexes take.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

import faiss
import numpy as np

Engine = Literal["auto", "flat", "mih"]

HASH_BITS = 64
# auto: below this many query x target pairs the flat scan is fast enough (about 4 s here).
AUTO_MIH_MIN_PAIRS = 5_000_000_000
MIH_MAX_RADIUS = 8


class HashFormatError(ValueError):
    """A hash is not 16 hex digits; the message names it."""


@dataclass(frozen=True, slots=True)
class Pairs:
    """Matches as parallel arrays: `query[k]` is within `distance[k]` bits of `target[k]`."""

    query: np.ndarray  # int64 row numbers into the queries
    target: np.ndarray  # int64 row numbers into the targets
    distance: np.ndarray  # int32 Hamming distances

    def __len__(self) -> int:
        return int(self.query.shape[0])

    @staticmethod
    def empty() -> Pairs:
        return Pairs(np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int32))


def pack(hashes: Sequence[str]) -> np.ndarray:
    """Hex hashes as `(n, 8)` uint8 rows; raises `HashFormatError` naming the first bad one."""
    if not hashes:
        return np.empty((0, 8), dtype=np.uint8)
    try:
        raw = bytes.fromhex("".join(hashes))
    except ValueError:
        raw = b""
    if len(raw) != 8 * len(hashes):
        bad = next((h for h in hashes if not _is_hex64(h)), hashes[0])
        raise HashFormatError(f"hash {bad!r} is not 16 hexadecimal digits (a 64-bit hash)")
    return np.frombuffer(raw, dtype=np.uint8).reshape(-1, 8).copy()


def unpack(packed: np.ndarray) -> list[str]:
    """Inverse of `pack`."""
    return [row.tobytes().hex() for row in np.ascontiguousarray(packed, dtype=np.uint8)]


def _is_hex64(value: object) -> bool:
    return isinstance(value, str) and len(value) == 16 and all(c in "0123456789abcdefABCDEF" for c in value)


def is_hash(value: object) -> bool:
    """Whether `value` is a 64-bit hash as 16 hex digits."""
    return _is_hex64(value)


def range_pairs(
    queries: np.ndarray,
    targets: np.ndarray,
    radius: int,
    *,
    engine: Engine = "auto",
    chunk: int | None = None,
) -> Pairs:
    """Every (query, target) pair at Hamming distance <= `radius` (inclusive), exactly.

    Pairs come sorted by query, then target. Both engines give the same pairs; `auto` uses
    `mih` when the search is large and the radius allows it.
    """
    queries = as_packed(queries, "queries")
    targets = as_packed(targets, "targets")
    if radius < 0 or radius > HASH_BITS:
        raise ValueError(f"radius {radius} is outside 0..{HASH_BITS}")
    if len(queries) == 0 or len(targets) == 0:
        return Pairs.empty()
    if engine == "auto":
        large = len(queries) * len(targets) >= AUTO_MIH_MIN_PAIRS
        engine = "mih" if large and radius <= MIH_MAX_RADIUS else "flat"
    # Chunks bound memory; mih pays a fixed cost per chunk and flip mask, so it takes big ones.
    if engine == "flat":
        parts = list(_flat_chunks(queries, targets, radius, chunk or 65_536))
    elif engine == "mih":
        parts = list(_mih_chunks(queries, targets, radius, chunk or 1 << 20))
    else:
        raise ValueError(f"unknown search engine {engine!r}; use auto, flat or mih")
    return merge_pairs(parts)


def as_packed(array: np.ndarray, name: str) -> np.ndarray:
    array = np.ascontiguousarray(array)
    if array.dtype != np.uint8 or array.ndim != 2 or array.shape[1] != HASH_BITS // 8:
        raise ValueError(
            f"{name} must be packed 64-bit hashes, shape (n, 8) uint8; got {array.dtype} {array.shape}"
        )
    return array


def merge_pairs(parts: list[Pairs]) -> Pairs:
    parts = [p for p in parts if len(p)]
    if not parts:
        return Pairs.empty()
    query = np.concatenate([p.query for p in parts])
    target = np.concatenate([p.target for p in parts])
    distance = np.concatenate([p.distance for p in parts])
    order = np.lexsort((target, query))
    return Pairs(query[order], target[order], distance[order])


# ---------------------------------------------------------------------- flat (faiss)
def _flat_chunks(queries: np.ndarray, targets: np.ndarray, radius: int, chunk: int) -> Iterator[Pairs]:
    index = faiss.IndexBinaryFlat(HASH_BITS)
    index.add(targets)
    for start in range(0, len(queries), chunk):
        block = queries[start : start + chunk]
        # faiss keeps results strictly below the radius it is given.
        lims, distances, labels = index.range_search(block, radius + 1)
        counts = np.diff(lims).astype(np.int64)
        query = np.repeat(np.arange(start, start + len(block), dtype=np.int64), counts)
        yield Pairs(query, labels.astype(np.int64), distances.astype(np.int32))


# ---------------------------------------------------------------------- multi-index hashing
MIH_PARTS = ((42, 22), (21, 21), (0, 21))  # (shift, bits): 22 + 21 + 21 = 64


def as_u64(packed: np.ndarray) -> np.ndarray:
    return packed.view(">u8").reshape(-1).astype(np.uint64)


def part_values(u64: np.ndarray, shift: int, bits: int, dtype: type = np.int64) -> np.ndarray:
    """The `bits`-bit part of each 64-bit hash that starts `shift` bits from the right."""
    return ((u64 >> np.uint64(shift)) & np.uint64((1 << bits) - 1)).astype(dtype)


def flip_masks(bits: int, max_flips: int) -> np.ndarray:
    masks = [0]
    for weight in range(1, max_flips + 1):
        for positions in itertools.combinations(range(bits), weight):
            masks.append(sum(1 << p for p in positions))
    return np.asarray(masks, dtype=np.int64)


def _mih_chunks(queries: np.ndarray, targets: np.ndarray, radius: int, chunk: int) -> Iterator[Pairs]:
    if radius > MIH_MAX_RADIUS:
        raise ValueError(f"the mih engine handles radius <= {MIH_MAX_RADIUS}; use engine='flat' for {radius}")
    q64 = as_u64(queries)
    t64 = as_u64(targets)
    part_radius = radius // len(MIH_PARTS)
    tables = []
    for shift, bits in MIH_PARTS:
        values = part_values(t64, shift, bits)
        order = np.argsort(values, kind="stable")
        starts = np.zeros((1 << bits) + 1, dtype=np.int64)
        np.cumsum(np.bincount(values, minlength=1 << bits), out=starts[1:])
        tables.append((shift, bits, order, starts, flip_masks(bits, part_radius)))
    for start in range(0, len(q64), chunk):
        block = q64[start : start + chunk]
        found: list[Pairs] = []
        for shift, bits, order, starts, masks in tables:
            values = part_values(block, shift, bits)
            for mask in masks:
                probe = values ^ mask
                first = starts[probe]
                count = starts[probe + 1] - first
                hit = np.nonzero(count)[0]
                if hit.size == 0:
                    continue
                count = count[hit]
                total = int(count.sum())
                # Expand each query's bucket into (query, target) candidates without a loop.
                q_local = np.repeat(hit, count)
                offset = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(count) - count, count)
                target = order[np.repeat(first[hit], count) + offset]
                distance = np.bitwise_count(block[q_local] ^ t64[target]).astype(np.int32)
                keep = distance <= radius
                if keep.any():
                    found.append(Pairs(q_local[keep] + start, target[keep], distance[keep]))
        if not found:
            continue
        merged = merge_pairs(found)
        # A pair close in several parts is found several times; keep one.
        key = merged.query * len(t64) + merged.target
        _, first_index = np.unique(key, return_index=True)
        yield Pairs(merged.query[first_index], merged.target[first_index], merged.distance[first_index])
