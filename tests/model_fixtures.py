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
