"""Tiny random vision models, built locally (never downloaded): one definition for every test.

Each builder seeds torch so a model is the same every time it is built.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

SMALL = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64}


def _save(model: Any, processor: Any, path: Path | str) -> str:
    model.save_pretrained(path)
    processor.save_pretrained(path)
    return str(path)


def tiny_clip(path: Path | str) -> str:
    import torch
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel

    torch.manual_seed(0)
    config = CLIPConfig(
        text_config={**SMALL, "vocab_size": 64, "max_position_embeddings": 16},
        vision_config={**SMALL, "image_size": 32, "patch_size": 8},
        projection_dim=16,
    )
    processor = CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    return _save(CLIPModel(config), processor, path)


def tiny_vit(path: Path | str) -> str:
    import torch
    from transformers import ViTConfig, ViTImageProcessor, ViTModel

    torch.manual_seed(0)
    config = ViTConfig(**SMALL, image_size=32, patch_size=8)
    return _save(ViTModel(config), ViTImageProcessor(size={"height": 32, "width": 32}), path)


def tiny_dinov2(path: Path | str) -> str:
    import torch
    from transformers import BitImageProcessor, Dinov2Config, Dinov2Model

    torch.manual_seed(0)
    config = Dinov2Config(**SMALL, image_size=32, patch_size=8)
    processor = BitImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    return _save(Dinov2Model(config), processor, path)


def tiny_siglip(path: Path | str) -> str:
    import torch
    from transformers import SiglipConfig, SiglipImageProcessor, SiglipModel

    torch.manual_seed(0)
    config = SiglipConfig(
        text_config={**SMALL, "vocab_size": 64, "max_position_embeddings": 16},
        vision_config={**SMALL, "image_size": 32, "patch_size": 8},
    )
    return _save(SiglipModel(config), SiglipImageProcessor(size={"height": 32, "width": 32}), path)


def tiny_dinov3(path: Path | str) -> Any:
    """A tiny transformers DINOv3 ViT (RoPE, 4 registers), saved the transformers way; returns it."""
    import torch
    from transformers import DINOv3ViTConfig, DINOv3ViTModel

    torch.manual_seed(0)
    config = DINOv3ViTConfig(**SMALL, image_size=32, patch_size=8, num_register_tokens=4, layer_norm_eps=1e-6)
    model = DINOv3ViTModel(config).eval()
    # Random layer scales of 1 and zero biases hide mistakes; spread them so every weight counts.
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.05)
    model.save_pretrained(path)
    return model


def tiny_gr_lite(path: Path | str) -> Path:
    """A tiny DINOv3 in GR-Lite's published layout: `model.safetensors` with transformers 4.x
    keys (`layer.<i>.*`), a `config.json` for the publisher's own code, and `gr_lite.pt`, the
    same model pickled whole. Built from the tiny DINOv3 of `tiny_dinov3(path / "dinov3")`."""
    import json

    import torch
    from safetensors.torch import save_file

    path = Path(path)
    model = tiny_dinov3(path / "dinov3")
    folder = path / "gr-lite"
    folder.mkdir(parents=True)
    state = {k.removeprefix("model."): v.contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(folder / "model.safetensors"))
    config = {
        "architectures": ["GRLiteModel"],
        "auto_map": {
            "AutoConfig": "configuration_gr_lite.GRLiteConfig",
            "AutoModel": "modeling_gr_lite.GRLiteModel",
        },
        "model_type": "gr_lite",
        "is_crop": True,
        "num_attention_heads": SMALL["num_attention_heads"],
        "layer_norm_eps": 1e-6,
    }
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    torch.save(model, folder / "gr_lite.pt")
    return folder


def in_hub_cache(cache: Path, repo_id: str, folder: Path | str) -> Path:
    """Lay `folder` out as `models pull` (huggingface_hub's snapshot_download) leaves a repo in
    the hub cache: `models--ORG--NAME/refs/main` naming a commit, files under `snapshots/<commit>/`."""
    import shutil

    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = Path(cache) / f"models--{repo_id.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(commit, encoding="utf-8")
    shutil.copytree(folder, repo / "snapshots" / commit)
    return repo / "snapshots" / commit


def tiny_internvit(path: Path | str) -> str:
    """transformers' own InternViT (`InternVLVisionModel`, the `-hf` conversions of OpenGVLab's),
    with the CLIP image processor InternViT's repositories name."""
    import torch
    from transformers import CLIPImageProcessor, InternVLVisionConfig, InternVLVisionModel

    torch.manual_seed(0)
    config = InternVLVisionConfig(**SMALL, image_size=[32, 32], patch_size=[8, 8])
    processor = CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    return _save(InternVLVisionModel(config), processor, path)
