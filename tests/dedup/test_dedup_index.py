"""Exact Hamming range search: both engines equal a brute-force answer, radius inclusive."""

from __future__ import annotations

import numpy as np
import pytest

from lookbench_live.dedup.index import HashFormatError, pack, range_pairs, unpack
from lookbench_live.schema.hashing import hamming


def _brute(q: np.ndarray, t: np.ndarray, radius: int) -> set[tuple[int, int, int]]:
    a = q.view(">u8").reshape(-1).astype(np.uint64)
    b = t.view(">u8").reshape(-1).astype(np.uint64)
    d = np.bitwise_count(a[:, None] ^ b[None, :])
    qi, ti = np.nonzero(d <= radius)
    return {(int(i), int(j), int(d[i, j])) for i, j in zip(qi, ti, strict=True)}


def _random_with_near_copies(rng: np.random.Generator, n: int) -> np.ndarray:
    x = rng.integers(0, 256, (n, 8), dtype=np.uint8)
    bits = np.unpackbits(x, axis=1)
    # Every fifth row is a copy of the row before with 0..12 bits flipped, so each
    # distance around the radius occurs.
    for i in range(1, n, 5):
        row = bits[i - 1].copy()
        flips = rng.choice(64, size=int(rng.integers(0, 13)), replace=False)
        row[flips] ^= 1
        bits[i] = row
    return np.packbits(bits, axis=1)


@pytest.mark.parametrize("engine", ["flat", "mih"])
@pytest.mark.parametrize("radius", [0, 3, 8])
def test_engines_equal_brute_force(engine: str, radius: int) -> None:
    rng = np.random.default_rng(radius)
    data = _random_with_near_copies(rng, 600)
    queries, targets = data[:250], data[200:]
    pairs = range_pairs(queries, targets, radius, engine=engine, chunk=64)
    found = set(zip(pairs.query.tolist(), pairs.target.tolist(), pairs.distance.tolist(), strict=True))
    assert found == _brute(queries, targets, radius)
    assert len(found) >= 50  # the planted copies and self-overlap make the check meaningful


def test_radius_is_inclusive_and_distances_match_hamming() -> None:
    base = "0f0f0f0f0f0f0f0f"
    at_radius = f"{int(base, 16) ^ 0b11111111:016x}"  # 8 bits away
    beyond = f"{int(base, 16) ^ 0b111111111:016x}"  # 9 bits away
    for engine in ("flat", "mih"):
        pairs = range_pairs(pack([base]), pack([base, at_radius, beyond]), 8, engine=engine)
        assert pairs.target.tolist() == [0, 1]
        assert pairs.distance.tolist() == [0, hamming(base, at_radius)] == [0, 8]


def test_pack_round_trip_and_bad_hashes() -> None:
    hashes = ["00ff00ff00ff00ff", "8000000000000001"]
    assert unpack(pack(hashes)) == hashes
    with pytest.raises(HashFormatError, match="'xyz'"):
        pack(["00ff00ff00ff00ff", "xyz"])
    with pytest.raises(ValueError, match="radius"):
        range_pairs(pack(hashes), pack(hashes), 65)
    assert len(range_pairs(pack([]), pack(hashes), 8)) == 0


@pytest.mark.parametrize("radius", [0, 4, 8])
def test_persisted_bands_equal_brute_force_with_mirrors(radius: int) -> None:
    from lookbench_live.dedup import bands

    rng = np.random.default_rng(radius + 100)
    phash, mirror = (rng.integers(0, 2**64, 300, dtype=np.uint64) for _ in range(2))
    # Copies of pHashes and mirrors with 0..radius + 2 bits flipped anywhere (a part boundary or
    # the leading bits included), and random hashes.
    queries = rng.integers(0, 2**64, 300, dtype=np.uint64)
    for k in range(200):
        source = phash if k % 2 else mirror
        value = int(source[rng.integers(300)])
        for bit in rng.choice(64, size=int(rng.integers(0, radius + 3)), replace=False):
            value ^= 1 << int(bit)
        queries[k] = value
    hashed = rng.random(300) < 0.9  # rows without usable hashes are never found
    q, r, d = bands.search(queries, phash, mirror, bands.build(phash, mirror, hashed), radius)
    both = np.minimum(
        np.bitwise_count(queries[:, None] ^ phash[None, :]),
        np.bitwise_count(queries[:, None] ^ mirror[None, :]),
    )
    qi, ti = np.nonzero((both <= radius) & hashed[None, :])
    expected = {(int(i), int(j), int(both[i, j])) for i, j in zip(qi, ti, strict=True)}
    assert set(zip(q.tolist(), r.tolist(), d.tolist(), strict=True)) == expected
    assert len(q) == len(expected) and (radius == 0 or len(expected) >= 20)
