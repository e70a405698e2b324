"""The paper's model families load through the production path from tiny local models.

Each tiny model is built from a config (no weights downloaded), laid out in a folder and in the
Hugging Face cache the way `models pull` leaves it, loaded with `load_embedder` and scored on the
shared small release. GR-Lite is checked against transformers' DINOv3 (RoPE included) with the
model card's preprocessing. open_clip and transformers' DINOv3 processor need torchvision, which
this environment lacks: tests/evaluation/test_evaluation_openclip.py runs them in the `.venv-openclip` stack.
"""

from __future__ import annotations

import numpy as np
import pytest
from evaluation_fixtures import make_release, sample_rows
from model_fixtures import in_hub_cache, tiny_clip, tiny_dinov3, tiny_gr_lite, tiny_internvit, tiny_siglip
from PIL import Image

from lookbench_live.evaluation.embedders import (
    EmbedderError,
    TorchModuleEmbedder,
    TransformersEmbedder,
    load_embedder,
)
from lookbench_live.evaluation.evaluate import evaluate_release
from lookbench_live.evaluation.gr_lite import GRLiteEmbedder, is_gr_lite_folder
from lookbench_live.evaluation.vectors import load_cache
from lookbench_live.warehouse.lake import Lake

V = "v20261101"
IMAGES = [r["image"]["bytes"] for rows in sample_rows().values() for r in rows][:6]


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    """An empty Hugging Face cache that offline lookups read (what `models pull` fills)."""
    from huggingface_hub import constants

    cache = tmp_path / "hub"
    cache.mkdir()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    return cache


def card_reference(model, data: bytes, size: int) -> np.ndarray:
    """GR-Lite's card: Resize((size, size)) bilinear, ToTensor, ImageNet Normalize, pooler_output
    of transformers' DINOv3 (written with torch ops, independently of our code)."""
    import io

    import torch

    with Image.open(io.BytesIO(data)) as image:
        resized = image.convert("RGB").resize((size, size), Image.Resampling.BILINEAR)
    pixels = torch.tensor(np.asarray(resized), dtype=torch.float32).permute(2, 0, 1) / 255.0
    mean = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)
    with torch.no_grad():
        return model(pixel_values=((pixels - mean) / std)[None]).pooler_output[0].numpy()


def test_gr_lite_is_transformers_dinov3_with_rope_from_the_hub_cache(tmp_path, hub_cache):
    import torch
    from transformers import DINOv3ViTModel

    in_hub_cache(hub_cache, "srpone/gr-lite", tiny_gr_lite(tmp_path / "tiny"))
    reference = DINOv3ViTModel.from_pretrained(tmp_path / "tiny" / "dinov3").eval()

    embedder = load_embedder("srpone/gr-lite?size=32")  # the Hub id, resolved in the cache
    assert isinstance(embedder, GRLiteEmbedder) and embedder.name == "srpone/gr-lite?size=32"
    ours = embedder.embed(IMAGES)
    assert ours.shape == (6, 32)
    expected = np.stack([card_reference(reference, data, 32) for data in IMAGES])
    np.testing.assert_allclose(ours, expected, atol=1e-5)
    # The card's defaults: 336 px and every feature.
    card = load_embedder("srpone/gr-lite")
    assert card.input_size == 336 and card.feature_dim == 32
    np.testing.assert_allclose(
        card.embed(IMAGES[:1])[0], card_reference(reference, IMAGES[0], 336), atol=1e-5
    )
    # RoPE is on: the same weights with an identity rotation (the publisher's reference code, which
    # leaves RoPE out) embed differently.
    rope = reference.rope_embeddings.forward
    reference.rope_embeddings.forward = lambda px: tuple(
        f(t) for f, t in zip((torch.ones_like, torch.zeros_like), rope(px), strict=True)
    )
    assert not np.allclose(card_reference(reference, IMAGES[0], 32), ours[0], atol=1e-3)
    # `dim` keeps the leading features.
    narrow = load_embedder("srpone/gr-lite?size=32&dim=8").embed(IMAGES)
    np.testing.assert_allclose(narrow, ours[:, :8], atol=1e-6)


def test_gr_lite_scores_a_release_in_both_widths(tmp_path):
    folder = str(tiny_gr_lite(tmp_path / "tiny"))
    lake = Lake(tmp_path / "lake")
    make_release(lake, V, sample_rows())
    for spec, width in ((f"{folder}?size=32", 32), (f"{folder}?size=32&dim=8", 8)):
        result = evaluate_release(lake, V, model=spec)
        assert result["model"] == spec and result["overall"]["queries"] == 12
        assert {len(v) for v in load_cache(lake, V, spec).values()} == {width}


def test_gr_lite_pickle_only_folder_needs_trust_and_embeds_the_same(tmp_path):
    folder = tiny_gr_lite(tmp_path / "tiny")
    ours = load_embedder(f"{folder}?size=32").embed(IMAGES)
    # Without the pickle beside it, the safetensors under the publisher's config is still GR-Lite;
    # a transformers DINOv3 folder (its own model type) is not.
    (tmp_path / "gr_lite.pt").write_bytes((folder / "gr_lite.pt").read_bytes())
    (folder / "gr_lite.pt").unlink()
    assert isinstance(load_embedder(f"{folder}?size=32"), GRLiteEmbedder)
    assert not is_gr_lite_folder(tmp_path / "tiny" / "dinov3")
    (folder / "gr_lite.pt").write_bytes((tmp_path / "gr_lite.pt").read_bytes())
    (folder / "model.safetensors").unlink()  # only the publisher's pickled module is left
    with pytest.raises(EmbedderError, match="trust"):
        load_embedder(str(folder))
    pickled = load_embedder(f"{folder}?size=32", trust_remote_code=True)
    assert isinstance(pickled, TorchModuleEmbedder)
    np.testing.assert_allclose(pickled.embed(IMAGES), ours, atol=1e-5)


@pytest.mark.parametrize(
    ("build", "repo", "width"),
    [(tiny_clip, "openai/clip-vit-base-patch16", 16), (tiny_siglip, "google/siglip-base-patch16-224", 32)],
)
def test_transformers_models_load_from_the_hub_cache_like_from_a_folder(
    tmp_path, hub_cache, build, repo, width
):
    folder = build(tmp_path / "model")
    in_hub_cache(hub_cache, repo, folder)
    by_id = load_embedder(repo)
    assert isinstance(by_id, TransformersEmbedder) and by_id.name == repo
    vectors = by_id.embed(IMAGES)
    assert vectors.shape == (6, width)
    np.testing.assert_allclose(vectors, load_embedder(folder).embed(IMAGES), atol=1e-6)


def test_internvit_embeds_its_class_token_like_the_reference(tmp_path):
    """InternViT's own code pools with the first token; transformers' port returns no pooler."""
    import io

    import torch
    from transformers import AutoImageProcessor, InternVLVisionModel

    folder = tiny_internvit(tmp_path / "internvit")
    ours = load_embedder(folder).embed(IMAGES)
    processor = AutoImageProcessor.from_pretrained(folder)
    model = InternVLVisionModel.from_pretrained(folder).eval()
    images = [Image.open(io.BytesIO(b)).convert("RGB") for b in IMAGES]
    with torch.no_grad():
        hidden = model(
            pixel_values=processor(images=images, return_tensors="pt")["pixel_values"]
        ).last_hidden_state
    np.testing.assert_allclose(ours, hidden[:, 0].numpy(), atol=1e-5)


@pytest.mark.parametrize("build", [tiny_siglip, tiny_internvit])
def test_siglip_and_internvit_score_a_release(tmp_path, build):
    folder = build(tmp_path / "model")
    lake = Lake(tmp_path / "lake")
    make_release(lake, V, sample_rows())
    assert evaluate_release(lake, V, model=folder)["overall"]["queries"] == 12


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ("someone/not-pulled", "models pull"),
        ("srpone/gr-lite?width=3", "unknown option"),
        ("srpone/gr-lite?dim=x", "whole number"),
        ("/no/such/folder", "does not exist"),
    ],
)
def test_a_model_that_cannot_load_says_why_in_one_line(hub_cache, spec, reason):
    with pytest.raises(EmbedderError, match=reason) as caught:
        load_embedder(spec)
    assert "\n" not in str(caught.value)


def test_options_are_refused_where_they_mean_nothing(tmp_path):
    folder = tiny_clip(tmp_path / "clip")
    with pytest.raises(EmbedderError, match="apply to GR-Lite"):
        load_embedder(f"{folder}?dim=8")


def test_dinov3_without_torchvision_names_the_missing_package(tmp_path):
    pytest.importorskip("transformers")
    try:
        import torchvision  # noqa: F401
    except Exception:
        pass
    else:  # pragma: no cover - the openclip stack's test covers DINOv3 where torchvision imports
        pytest.skip("torchvision imports here: tests/evaluation/test_evaluation_openclip.py loads DINOv3")
    from transformers import DINOv3ViTImageProcessor

    folder = tmp_path / "dinov3"
    tiny_dinov3(folder)
    try:
        DINOv3ViTImageProcessor(size={"height": 32, "width": 32}).save_pretrained(folder)
    except ImportError:
        (folder / "preprocessor_config.json").write_text(
            '{"image_processor_type": "DINOv3ViTImageProcessor", "size": {"height": 32, "width": 32}}'
        )
    with pytest.raises(EmbedderError, match="torchvision") as caught:
        load_embedder(str(folder))
    assert "\n" not in str(caught.value)
    assert "lookbench-live[models]" in str(caught.value)
