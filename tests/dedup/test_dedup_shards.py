"""Issue 14 §4: the dedup search sharded by hash-prefix buckets finds exactly the unsharded pairs,
so `run_dedup` decides exactly the same, and each shard receives only its buckets' rows."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from test_dedup_decide import add, decisions, photo

from lookbench_live.config import DedupSettings
from lookbench_live.dedup import run_dedup
from lookbench_live.dedup.index import range_pairs
from lookbench_live.dedup.shards import parts_for, searcher, shard_inputs, sharded_range_pairs
from lookbench_live.testing.calibration import jpeg, transform
from lookbench_live.warehouse.lake import Lake


def near_copies(base: np.ndarray, max_flips: int, rng: np.random.Generator) -> np.ndarray:
    """Each hash with 0..max_flips random bits flipped."""
    values = base.view(">u8").reshape(-1).copy()
    for i in range(len(values)):
        for bit in rng.choice(64, size=int(rng.integers(0, max_flips + 1)), replace=False):
            values[i] ^= np.uint64(1) << np.uint64(int(bit))
    return values.astype(">u8").view(np.uint8).reshape(-1, 8)


@pytest.mark.parametrize("radius", [0, 1, 4, 8, 13])
def test_sharded_search_finds_exactly_the_flat_searchs_pairs(radius: int) -> None:
    rng = np.random.default_rng(radius)
    base = rng.integers(0, 256, (400, 8), dtype=np.uint8)
    alike = np.repeat(base[:4], 40, axis=0)  # many equal hashes (flat images): one crowded bucket
    queries = np.concatenate([base, alike])
    # Copies up to one bit past the radius: the pairs at exactly `radius` are found, the next are not.
    targets = np.concatenate([near_copies(base, radius + 1, rng), base[::-1], alike])
    expected = range_pairs(queries, targets, radius, engine="flat")
    assert len(expected) > len(queries)  # the planted pairs are there to be found
    for count in (1, 2, 3, 8):
        got = sharded_range_pairs(queries, targets, radius, count)
        assert np.array_equal(got.query, expected.query), count
        assert np.array_equal(got.target, expected.target), count
        assert np.array_equal(got.distance, expected.distance), count


def test_a_shard_gets_only_the_rows_of_its_buckets() -> None:
    rng = np.random.default_rng(7)
    hashes = rng.integers(0, 256, (4000, 8), dtype=np.uint8)
    inputs = shard_inputs(hashes, hashes, 4, 8)
    sent = [len(args[0]) for args in inputs]
    # 5 parts: a row is in up to 5 of the 8 buckets, about 1 - (7/8)^5 = 49% of rows per shard.
    assert all(0.35 * len(hashes) < n < 0.65 * len(hashes) for n in sent), sent
    assert len(parts_for(4)) == 5 and sum(bits for _, bits in parts_for(4)) == 64


def fill(lake: Lake) -> None:
    """Copies of three dresses among distinct ones, and a copy of a released image across owners."""
    add(lake, jpeg(photo(0)), "shop:a", hours=0)
    for i, name in enumerate(["resize50", "jpeg30", "mirror", "resize150+jpeg75"]):
        add(lake, transform(photo(i % 3), name), f"shop:copy-{i}", hours=1 + i)
    for k in (1, 2):
        add(lake, jpeg(photo(k)), f"shop:other-{k}", hours=10 + k)
    add(lake, transform(photo(1), "resize50+jpeg50"), "shop:other-1", hours=20)  # the same owner's copy


def test_run_dedup_with_the_sharded_search_decides_the_same(tmp_path: Path) -> None:
    plain, sharded = Lake(tmp_path / "plain"), Lake(tmp_path / "sharded")
    fill(plain)
    shutil.copytree(tmp_path / "plain", tmp_path / "sharded", dirs_exist_ok=True)
    calls: list[int] = []

    def run(inputs: list) -> list:  # what the flow does over its task runner, here in turn
        from lookbench_live.dedup.shards import shard_pairs

        calls.append(len(inputs))
        return [shard_pairs(*args) for args in inputs]

    first = run_dedup(plain, DedupSettings(), "run-1")
    second = run_dedup(sharded, DedupSettings(), "run-1", search=searcher(3, run))
    assert calls and all(n == 3 for n in calls)
    assert first.dropped and first.kept
    assert (second.kept, second.dropped) == (first.kept, first.dropped)

    def stable(lake: Lake) -> dict:  # all but the row's own timestamp
        return {s: {k: v for k, v in r.items() if k != "created_at"} for s, r in decisions(lake).items()}

    assert stable(sharded) == stable(plain)
