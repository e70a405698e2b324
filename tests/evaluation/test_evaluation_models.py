"""The transformers path with tiny random models built locally (never downloaded)."""

from __future__ import annotations

import os

import numpy as np
import pytest
from evaluation_fixtures import make_release, sample_rows
from model_fixtures import tiny_clip, tiny_dinov2, tiny_vit

from lookbench_live.evaluation.embedders import EmbedderError, TransformersEmbedder, load_embedder
from lookbench_live.evaluation.evaluate import evaluate_release
from lookbench_live.evaluation.vectors import load_cache
from lookbench_live.warehouse.lake import Lake

os.environ.setdefault("HF_HUB_OFFLINE", "1")
V = "v20261101"


@pytest.mark.parametrize(("build", "width"), [(tiny_clip, 16), (tiny_vit, 32), (tiny_dinov2, 32)])
def test_tiny_models_embed_and_evaluate(tmp_path, build, width):
    model_dir = build(tmp_path / "model")
    embedder = load_embedder(model_dir)
    assert isinstance(embedder, TransformersEmbedder)
    lake = Lake(tmp_path / "lake")
    make_release(lake, V, sample_rows())
    result = evaluate_release(lake, V, model=model_dir)
    assert result["model"] == model_dir
    assert result["overall"]["queries"] == 12
    vectors = load_cache(lake, V, model_dir)
    assert len(vectors) == 44 and {len(v) for v in vectors.values()} == {width}
    # Deterministic: the same model gives the same vectors again.
    sha = sorted(vectors)[0]
    data = next(r["image"]["bytes"] for rows in sample_rows().values() for r in rows if r["sha256"] == sha)
    assert np.allclose(embedder.embed([data])[0], vectors[sha], atol=1e-5)


def test_submitted_embeddings_of_a_model_score_like_the_model(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    model_dir = tiny_clip(tmp_path / "clip")
    lake = Lake(tmp_path / "lake")
    make_release(lake, V, sample_rows(shift=2))
    by_model = evaluate_release(lake, V, model=model_dir)
    # What a submitter would run: their model over every image, by sha256.
    embedder = load_embedder(model_dir)
    rows = [r for split in sample_rows(shift=2).values() for r in split]
    vectors = embedder.embed([r["image"]["bytes"] for r in rows])
    file = tmp_path / "submission.parquet"
    pq.write_table(
        pa.table(
            {
                "sha256": [r["sha256"] for r in rows],
                "embedding": pa.array(vectors.tolist(), pa.list_(pa.float32())),
            }
        ),
        file,
    )
    submitted = evaluate_release(lake, V, embeddings=str(file), model=model_dir, write=False)
    for name, entry in by_model["subsets"].items():
        for key, value in entry.items():
            assert submitted["subsets"][name][key] == pytest.approx(value, abs=1e-6), (name, key)


def test_unknown_model_is_a_clear_error(tmp_path):
    with pytest.raises(EmbedderError, match="cannot load model"):
        load_embedder(str(tmp_path / "nothing-here"))


def test_open_clip_missing_is_a_clear_error():
    try:
        import open_clip  # noqa: F401
    except ImportError:
        with pytest.raises(EmbedderError, match="open_clip"):
            load_embedder("open_clip:ViT-B-32/laion2b_s34b_b79k")
    else:  # pragma: no cover - open_clip is not installed here
        pytest.skip("open_clip is installed; its weights cannot be fetched offline")
