"""GR-Lite: the published checkpoint run as the DINOv3 ViT it is, with DINOv3's RoPE.

What the publisher ships (`srpone/gr-lite`): `model.safetensors` holding a DINOv3 ViT-L/16
in transformers' DINOv3 layout of the 4.x series (`embeddings.*`, `layer.<i>.*`, `norm.*`),
a `config.json` for its own modelling code (`trust_remote_code`), and `gr_lite.pt`, the same
model pickled. Its card: 336x336 squash resize, ImageNet mean/std, the L2-normalised CLS
token (`pooler_output`), 1024-d. LookBench's own example instead asks `search(...,
feature_dim=256)`. The publisher's reference code leaves out DINOv3's rotary position
embedding (reported to cost about 4 points of R@1), so we never run it: the weights load into
transformers' `DINOv3ViTModel`, which applies RoPE as DINOv3 defines it, and no code from the
repository runs (no `trust_remote_code`).

Options (model spec `...?size=N&dim=D`): `size`, the square input in pixels (default 336, the
card's); `dim`, how many leading features are kept (default: all, 1024 for ViT-L). Which of
1024-d and the example's 256-d reproduces the paper's 65.71 Fine R@1 is open: both are scored.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

WEIGHTS = "model.safetensors"
MARKER = "gr_lite.pt"  # the publisher's pickled module: how a GR-Lite folder is recognised
DEFAULT_INPUT_SIZE = 336  # the model card's
IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], np.float32)
# DINOv3's own (Meta's code) LayerNorm epsilon, used when the folder's config does not say.
DINOV3_LAYER_NORM_EPS = 1e-6
_CONFIG_KEYS = (
    "num_attention_heads",
    "layer_norm_eps",
    "rope_theta",
    "layerscale_value",
    "use_gated_mlp",
    "hidden_act",
    "pos_embed_rescale",
)


class GRLiteError(RuntimeError):
    """A GR-Lite folder that cannot be loaded; the message names the file and the reason."""


def is_gr_lite_folder(folder: Path) -> bool:
    """GR-Lite's files: `gr_lite.pt` beside `model.safetensors`, or DINOv3 ViT weights under a
    config.json that transformers' DINOv3 does not own (the publisher's own model type).

    A transformers DINOv3 folder (`model_type` "dinov3_vit", facebook/dinov3-*) is not GR-Lite:
    it keeps transformers' own processor and model."""
    weights = folder / WEIGHTS
    if not weights.is_file():
        return False
    if (folder / MARKER).is_file():
        return True
    config = folder / "config.json"
    try:
        model_type = (
            json.loads(config.read_text(encoding="utf-8")).get("model_type") if config.is_file() else None
        )
    except (OSError, ValueError):
        return False
    if model_type == "dinov3_vit":
        return False
    from safetensors import safe_open

    try:
        with safe_open(str(weights), framework="pt") as handle:  # reads the header only
            keys = set(handle.keys())
    except Exception:  # not a readable safetensors file: not ours to recognise
        return False
    return "embeddings.register_tokens" in keys and any(".attention.k_proj.weight" in k for k in keys)


def _state_dict(folder: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    state = load_file(str(folder / WEIGHTS))
    # transformers 5 nests the blocks under `model.`; the published file predates that.
    return {re.sub(r"^layer\.", "model.layer.", k): v for k, v in state.items()}


def dinov3_config(folder: Path, state: dict[str, Any], image_size: int) -> Any:
    """A `DINOv3ViTConfig` for the weights: shapes from the tensors, the rest from config.json."""
    from transformers import DINOv3ViTConfig

    try:
        hidden = int(state["embeddings.cls_token"].shape[-1])
        patch = state["embeddings.patch_embeddings.weight"]
        layers = 1 + max(int(k.split(".")[2]) for k in state if k.startswith("model.layer."))
        intermediate = int(state["model.layer.0.mlp.up_proj.weight"].shape[0])
    except (KeyError, ValueError) as exc:
        raise GRLiteError(f"{folder / WEIGHTS} is not a DINOv3 ViT checkpoint (missing {exc})") from exc
    registers = state.get("embeddings.register_tokens")
    extra: dict[str, Any] = {}
    config_file = folder / "config.json"
    if config_file.is_file():
        written = json.loads(config_file.read_text(encoding="utf-8"))
        extra = {k: written[k] for k in _CONFIG_KEYS if k in written}
    extra.setdefault("num_attention_heads", max(1, hidden // 64))  # ViT-L: 16 heads of 64
    extra.setdefault("layer_norm_eps", DINOV3_LAYER_NORM_EPS)
    return DINOv3ViTConfig(
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_hidden_layers=layers,
        patch_size=int(patch.shape[-1]),
        num_channels=int(patch.shape[1]),
        num_register_tokens=0 if registers is None else int(registers.shape[1]),
        image_size=image_size,
        query_bias="model.layer.0.attention.q_proj.bias" in state,
        key_bias="model.layer.0.attention.k_proj.bias" in state,
        value_bias="model.layer.0.attention.v_proj.bias" in state,
        proj_bias="model.layer.0.attention.o_proj.bias" in state,
        mlp_bias="model.layer.0.mlp.up_proj.bias" in state,
        **extra,
    )


class GRLiteEmbedder:
    """GR-Lite's weights in transformers' DINOv3 (RoPE on), its card's preprocessing."""

    def __init__(
        self,
        name: str,
        folder: Path,
        *,
        input_size: int | None = None,
        feature_dim: int | None = None,
        batch_size: int = 32,
        device: str = "cpu",
    ):
        import torch
        from transformers import DINOv3ViTModel

        self.name = name
        self.input_size = input_size or DEFAULT_INPUT_SIZE
        state = _state_dict(folder)
        config = dinov3_config(folder, state, self.input_size)
        model = DINOv3ViTModel(config)
        missing, unexpected = model.load_state_dict(state, strict=False)
        # `mask_token` is used only for masked pre-training; everything else must be there.
        missing = [k for k in missing if k != "embeddings.mask_token"]
        if missing or unexpected:
            raise GRLiteError(
                f"{folder / WEIGHTS} does not fit a DINOv3 ViT: missing {missing[:3]}, unexpected {unexpected[:3]}"
            )
        if feature_dim is not None and feature_dim > config.hidden_size:
            raise GRLiteError(f"dim={feature_dim} exceeds the model's {config.hidden_size} features")
        self.feature_dim = feature_dim or config.hidden_size
        self.model = model.eval().to(device)
        self.batch_size = batch_size
        self.device = device
        self._torch = torch

    def pixels(self, images: Sequence[Image.Image]) -> Any:
        """Squash resize (bilinear), /255, ImageNet mean/std: torchvision's Resize, ToTensor,
        Normalize on a PIL image, as the card's transform does, without torchvision."""
        size = (self.input_size, self.input_size)
        arrays = [
            (
                np.asarray(img.convert("RGB").resize(size, Image.Resampling.BILINEAR), np.float32) / 255.0
                - IMAGENET_MEAN
            )
            / IMAGENET_STD
            for img in images
        ]
        return self._torch.from_numpy(np.stack(arrays).transpose(0, 3, 1, 2).copy())

    def embed_images(self, images: Sequence[Image.Image]) -> np.ndarray:
        rows: list[np.ndarray] = []
        with self._torch.inference_mode():
            for start in range(0, len(images), self.batch_size):
                batch = self.pixels(images[start : start + self.batch_size]).to(self.device)
                pooled = self.model(pixel_values=batch).pooler_output[:, : self.feature_dim]
                rows.append(pooled.float().cpu().numpy())
        return (
            np.concatenate(rows).astype(np.float32) if rows else np.zeros((0, self.feature_dim), np.float32)
        )

    def embed(self, images: Sequence[bytes]) -> np.ndarray:
        from lookbench_live.evaluation.embedders import _open_rgb

        return self.embed_images([_open_rgb(b) for b in images])
