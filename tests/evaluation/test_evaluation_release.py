"""evaluate_release on releases written to the contract: noise merge, --after, cache, submissions."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from evaluation_fixtures import BLUE, GREEN, RED, T0, make_release, row, sample_rows

from lookbench_live.evaluation.baseline import BASELINE_NAME, BaselineEmbedder
from lookbench_live.evaluation.evaluate import evaluate_release, metric_names
from lookbench_live.evaluation.vectors import EmbeddingsError, cache_path, load_cache
from lookbench_live.warehouse.lake import Lake
from lookbench_live.warehouse.release import ReleaseError

V = "v20261101"


def test_result_shape_and_evaluations_rows(lake):
    make_release(lake, V, sample_rows())
    result = evaluate_release(lake, "latest")
    assert result["release"] == V and result["model"] == BASELINE_NAME
    assert set(result["subsets"]) == {
        "real_studio_flat",
        "aigen_studio",
        "real_streetlook",
        "aigen_streetlook",
    }
    for entry in [*result["subsets"].values(), result["overall"]]:
        for name in metric_names():
            assert 0.0 <= entry[name] <= 100.0, name
    assert result["overall"]["queries"] == 12
    assert result["subsets"]["aigen_studio"]["corpus"] == 6 + 8  # own gallery + noise
    rows = lake.read("evaluations").to_pylist()
    assert sorted(r["subset"] for r in rows) == sorted([*result["subsets"], "overall"])
    overall = next(r for r in rows if r["subset"] == "overall")
    metrics = {kv["key"]: float(kv["value"]) for kv in overall["metrics"]}
    assert metrics["fine_recall@1"] == pytest.approx(result["overall"]["fine_recall@1"], abs=1e-4)
    # A rerun writes nothing twice.
    evaluate_release(lake, V)
    assert lake.read("evaluations").num_rows == len(rows)


def _two_query_release(lake: Lake, *, noise_twin: bool) -> None:
    late = T0 + dt.timedelta(days=40)
    q1 = row("s:1", "dress", "sequin", {"colour": "red"}, colour=RED, stripes=1, seed=1)
    q2 = row("s:2", "coat", "leather", {"colour": "blue"}, colour=BLUE, stripes=2, seed=2, first_seen=late)
    gallery = [
        row("s:1", "dress", "sequin", {"colour": "red"}, colour=RED, stripes=1, seed=11),
        row("s:2", "coat", "leather", {"colour": "blue"}, colour=BLUE, stripes=2, seed=12),
    ]
    noise = [row("n:1", "noise data", "", {}, colour=GREEN, stripes=3, seed=21)]
    if noise_twin:
        # A distractor that is the query's own image: it must rank first and count as a miss.
        noise.append(
            {**q1, "item_ID": "n:twin", "category": "noise data", "main_attribute": "", "attributes": []}
        )
    make_release(
        lake,
        V,
        {"real_studio_flat/query": [q1, q2], "real_studio_flat/gallery": gallery, "noise/gallery": noise},
    )


def test_noise_is_merged_into_every_corpus(lake):
    _two_query_release(lake, noise_twin=True)
    subset = evaluate_release(lake, V, write=False)["subsets"]["real_studio_flat"]
    assert subset["corpus"] == 2 + 2
    # q1's top hit is its noise twin (cosine 1): a miss at 1, its gallery image second.
    assert subset["coarse_recall@1"] == pytest.approx(50.0)
    assert subset["coarse_recall@5"] == pytest.approx(100.0)
    assert subset["mrr"] == pytest.approx(100 * (0.5 + 1.0) / 2)


def test_after_keeps_only_later_queries(lake):
    _two_query_release(lake, noise_twin=True)
    result = evaluate_release(lake, V, after=(T0 + dt.timedelta(days=1)).date())
    subset = result["subsets"]["real_studio_flat"]
    assert subset["queries"] == 1  # only q2 (first seen 40 days after T0)
    assert subset["coarse_recall@1"] == 100.0  # q1 and its noise twin no longer count
    assert result["after"] == (T0 + dt.timedelta(days=1)).date().isoformat()
    nobody = evaluate_release(lake, V, after=dt.date(2030, 1, 1))["subsets"]["real_studio_flat"]
    assert nobody["queries"] == 0 and nobody["fine_recall@1"] is None
    afters = {r["after"] for r in lake.read("evaluations").to_pylist()}
    assert afters == {"2026-10-02", "2030-01-01"}


def test_after_uses_the_earlier_of_published_and_first_seen(lake):
    early = T0 - dt.timedelta(days=300)
    q = row("s:1", "dress", "sequin", {}, colour=RED, first_seen=T0 + dt.timedelta(days=5), published=early)
    g = row("s:1", "dress", "sequin", {}, colour=RED, seed=3)
    make_release(lake, V, {"aigen_studio/query": [q], "aigen_studio/gallery": [g]})
    # Published long before the cutoff: a model trained then may have seen it.
    assert evaluate_release(lake, V, after=T0.date(), write=False)["subsets"]["aigen_studio"]["queries"] == 0


def test_second_run_reads_the_embedding_cache(lake, monkeypatch):
    make_release(lake, V, sample_rows())
    evaluate_release(lake, V, write=False)
    cached = load_cache(lake, V, BASELINE_NAME)
    assert len(cached) == 12 + 24 + 8
    calls = []
    original = BaselineEmbedder.embed
    monkeypatch.setattr(
        BaselineEmbedder, "embed", lambda self, images: calls.append(len(images)) or original(self, images)
    )
    evaluate_release(lake, V, write=False)
    assert calls == []


def _export(lake: Lake, path, model: str = BASELINE_NAME, mutate=None) -> str:
    vectors = load_cache(lake, V, model)
    shas = sorted(vectors)
    rows = [vectors[s].tolist() for s in shas]
    if mutate:
        shas, rows = mutate(shas, rows)
    pq.write_table(pa.table({"sha256": shas, "embedding": pa.array(rows, pa.list_(pa.float32()))}), path)
    return str(path)


def test_submitted_embeddings_score_like_the_model(lake, tmp_path):
    make_release(lake, V, sample_rows(shift=1))
    by_model = evaluate_release(lake, V, write=False)
    # Unnormalised submissions are normalised the same way.
    file = _export(lake, tmp_path / "sub.parquet", mutate=lambda s, r: (s, [[v * 3 for v in x] for x in r]))
    submitted = evaluate_release(lake, V, embeddings=file, model="my-model", write=False)
    assert submitted["model"] == "my-model"
    assert submitted["subsets"] == by_model["subsets"] and submitted["overall"] == by_model["overall"]


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda s, r: (s[1:], r[1:]), "lacks image"),
        (lambda s, r: (s, [r[0], r[1][:-1], *r[2:]]), "has width"),
        (lambda s, r: (s, [r[0], [float("nan"), *r[1][1:]], *r[2:]]), "non-finite"),
    ],
)
def test_bad_submissions_name_the_first_offender(lake, tmp_path, mutate, message):
    make_release(lake, V, sample_rows())
    evaluate_release(lake, V, write=False)
    shas = sorted(load_cache(lake, V, BASELINE_NAME))
    file = _export(lake, tmp_path / "bad.parquet", mutate=mutate)
    with pytest.raises(EmbeddingsError, match=message) as info:
        evaluate_release(lake, V, embeddings=file)
    assert any(s in str(info.value) for s in shas[:2])
    assert lake.read("evaluations").num_rows == 0


def test_missing_release_and_staging_folder(lake, tmp_path):
    with pytest.raises(ReleaseError):
        evaluate_release(lake, "latest")
    staging = lake.path("releases", ".staging-x")
    make_release(lake, V, sample_rows(), base=staging, manifest=False)
    with pytest.raises(ReleaseError, match="does not exist"):
        evaluate_release(lake, V)  # not committed
    result = evaluate_release(lake, V, release_path=staging)
    assert result["overall"]["queries"] == 12


def test_corrupt_cache_is_rebuilt(lake):
    make_release(lake, V, sample_rows())
    first = evaluate_release(lake, V, write=False)
    path = cache_path(lake, V, BASELINE_NAME)
    pq.write_table(pa.table({"sha256": ["x"], "embedding": [[float("nan")]]}), path)
    assert evaluate_release(lake, V, write=False) == first
    assert len(load_cache(lake, V, BASELINE_NAME)) == 44


def test_baseline_is_deterministic():
    data = [
        row("a", "c", "m", colour=(10 * i, 100, 200 - 10 * i), stripes=i % 3, seed=i)["image"]["bytes"]
        for i in range(5)
    ]
    first = BaselineEmbedder().embed(data)
    assert np.array_equal(first, BaselineEmbedder().embed(data))
    assert np.allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-5)
