"""Issue 14 §4: a release's images embedded in shards (tasks on Dask workers in the flow), merged
into the model's cache, score exactly as the unsharded evaluation; scoring then loads no model."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from evaluation_fixtures import make_release, sample_rows
from model_fixtures import tiny_vit

from lookbench_live.evaluation import embedders
from lookbench_live.evaluation.baseline import BASELINE_NAME
from lookbench_live.evaluation.evaluate import evaluate_release
from lookbench_live.evaluation.release_data import load_release
from lookbench_live.evaluation.shards import embed_shard, merge_shards, part_path, shard_of
from lookbench_live.evaluation.vectors import cache_path, load_cache
from lookbench_live.warehouse.lake import Lake

V = "v20261101"


@pytest.mark.parametrize("model", [None, "vit"])
def test_sharded_embedding_scores_like_the_unsharded_run(
    tmp_path: Path, model: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = tiny_vit(tmp_path / "vit") if model else None
    plain = Lake(tmp_path / "plain")
    make_release(plain, V, sample_rows(shift=1))
    shutil.copytree(tmp_path / "plain", tmp_path / "sharded")
    sharded = Lake(tmp_path / "sharded")
    expected = evaluate_release(plain, V, model=spec, write=False)

    count = 3
    outcomes = [embed_shard(sharded, V, spec, index=i, count=count) for i in range(count)]
    name = outcomes[0].model
    assert name == (spec or BASELINE_NAME)
    everything = load_release(sharded, V).all_sha256()
    assert [o.wanted for o in outcomes] == [
        sum(shard_of(s, count) == i for s in everything) for i in range(count)
    ]
    assert all(0 < o.embedded == o.wanted for o in outcomes)
    # A rerun of a finished shard finds its part and embeds nothing.
    assert embed_shard(sharded, V, spec, index=1, count=count).embedded == 0
    assert merge_shards(sharded, V, name, count) == len(everything)
    assert not any(sharded.fs.exists(part_path(sharded, V, name, i, count)) for i in range(count))

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("scoring loaded a model although every vector was cached")

    monkeypatch.setattr("lookbench_live.evaluation.evaluate.load_embedder", refuse)
    got = evaluate_release(sharded, V, model=spec, write=False)
    assert got["subsets"] == expected["subsets"] and got["overall"] == expected["overall"]
    assert embedders.embedder_name(spec) == name


def test_a_missing_part_is_embedded_at_scoring_never_scored_without(lake: Lake) -> None:
    make_release(lake, V, sample_rows())
    expected = evaluate_release(lake, V, write=False)
    lake.fs.rm(cache_path(lake, V, BASELINE_NAME))
    embed_shard(lake, V, None, index=0, count=2)  # shard 1 never ran (a lost worker)
    merge_shards(lake, V, BASELINE_NAME, 2)
    assert 0 < len(load_cache(lake, V, BASELINE_NAME)) < len(load_release(lake, V).all_sha256())
    assert evaluate_release(lake, V, write=False) == expected
