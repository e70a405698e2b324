"""Image embedders: the weight-free baseline, Hugging Face `transformers`, open_clip.

An embedder has a `name` (what results are filed under) and `embed(list of image
bytes) -> float32 [n, d]`; rows are L2-normalised by the evaluator, not here.

Model specs accepted by `load_embedder`:
- `None` or `"baseline"`: the baseline (`baseline:hsv-hog-v1`);
- `"open_clip:<architecture>/<pretrained tag>"`: open_clip, when installed;
- anything else: a Hugging Face id or a local folder, loaded with `AutoModel` and
  `AutoImageProcessor`. CLIP/SigLIP-style models give `get_image_features`; others
  (ViT, DINOv2) their pooled output, else the first token of the last hidden state.
  `trust_remote_code=True` is needed for models such as GR-Lite that ship their code.
Nothing is ever downloaded by the tests: they save tiny models to a folder.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
from PIL import Image

from lookbench_live.evaluation.baseline import BASELINE_NAME, BaselineEmbedder


class EmbedderError(RuntimeError):
    """A model cannot be loaded or run; the message names it."""


class ImageEmbedder(Protocol):
    name: str

    def embed(self, images: Sequence[bytes]) -> np.ndarray: ...


def _open_rgb(data: bytes) -> Image.Image:
    with Image.open(io.BytesIO(data)) as image:
        return image.convert("RGB")


def _tensor_of(output: Any) -> Any:
    """The image embedding inside whatever a model returned (tensor, tuple or ModelOutput)."""
    import torch

    if isinstance(output, torch.Tensor):
        return output
    for attribute in ("image_embeds", "pooler_output"):
        value = getattr(output, attribute, None)
        if isinstance(value, torch.Tensor):
            return value
    hidden = getattr(output, "last_hidden_state", None)
    if isinstance(hidden, torch.Tensor):
        return hidden[:, 0]
    if isinstance(output, tuple | list) and output and isinstance(output[0], torch.Tensor):
        first = output[0]
        return first[:, 0] if first.ndim == 3 else first
    raise EmbedderError(f"cannot find an image embedding in a {type(output).__name__}")


class TransformersEmbedder:
    """A `transformers` vision model; `model` is a Hub id or a local folder."""

    def __init__(
        self, model: str, *, trust_remote_code: bool = False, batch_size: int = 32, device: str = "cpu"
    ):
        try:
            import torch
            from transformers import AutoImageProcessor, AutoModel
        except ImportError as exc:  # pragma: no cover - transformers is a dependency
            raise EmbedderError(f"transformers is needed for model {model!r}: {exc}") from exc
        self.name = model
        self.batch_size = batch_size
        self.device = device
        try:
            self.processor = AutoImageProcessor.from_pretrained(model, trust_remote_code=trust_remote_code)
            self.model = AutoModel.from_pretrained(model, trust_remote_code=trust_remote_code)
        except Exception as exc:
            raise EmbedderError(
                f"cannot load model {model!r} with transformers ({type(exc).__name__}: {exc}); "
                "give a local folder or a Hub id available offline"
            ) from exc
        self.model.eval().to(device)
        self._torch = torch

    def _forward(self, pixel_values: Any) -> Any:
        if hasattr(self.model, "get_image_features"):
            return _tensor_of(self.model.get_image_features(pixel_values=pixel_values))
        return _tensor_of(self.model(pixel_values=pixel_values))

    def embed(self, images: Sequence[bytes]) -> np.ndarray:
        rows: list[np.ndarray] = []
        with self._torch.inference_mode():
            for start in range(0, len(images), self.batch_size):
                batch = [_open_rgb(b) for b in images[start : start + self.batch_size]]
                inputs = self.processor(images=batch, return_tensors="pt")
                features = self._forward(inputs["pixel_values"].to(self.device))
                rows.append(features.float().cpu().numpy())
        if not rows:
            return np.zeros((0, 0), np.float32)
        return np.concatenate(rows).astype(np.float32)


class OpenClipEmbedder:
    """An open_clip model, `open_clip:<architecture>/<pretrained>` (optional dependency)."""

    def __init__(self, spec: str, *, batch_size: int = 32, device: str = "cpu"):
        try:
            import open_clip  # type: ignore[import-not-found]
            import torch
        except ImportError as exc:
            raise EmbedderError(
                f"model {spec!r} needs open_clip, which is not installed: pip install open_clip_torch"
            ) from exc
        architecture, _, pretrained = spec.removeprefix("open_clip:").partition("/")
        try:
            model, _, preprocess = open_clip.create_model_and_transforms(
                architecture, pretrained=pretrained or None
            )
        except Exception as exc:
            raise EmbedderError(f"cannot load open_clip model {spec!r}: {exc}") from exc
        self.name = spec
        self.model = model.eval().to(device)
        self.preprocess = preprocess
        self.batch_size = batch_size
        self.device = device
        self._torch = torch

    def embed(self, images: Sequence[bytes]) -> np.ndarray:
        rows = []
        with self._torch.inference_mode():
            for start in range(0, len(images), self.batch_size):
                batch = self._torch.stack(
                    [self.preprocess(_open_rgb(b)) for b in images[start : start + self.batch_size]]
                )
                rows.append(self.model.encode_image(batch.to(self.device)).float().cpu().numpy())
        return np.concatenate(rows).astype(np.float32) if rows else np.zeros((0, 0), np.float32)


def embedder_name(model: str | None) -> str:
    """The name `load_embedder(model)` files results under, without loading anything."""
    if model is None or model in ("baseline", BASELINE_NAME):
        return BASELINE_NAME
    return model


def load_embedder(
    model: str | None, *, trust_remote_code: bool = False, batch_size: int = 32, device: str = "cpu"
) -> ImageEmbedder:
    """The embedder for a model spec (see module docstring); raises `EmbedderError` naming it."""
    if model is None or model in ("baseline", BASELINE_NAME):
        return BaselineEmbedder()
    if model.startswith("open_clip:"):
        return OpenClipEmbedder(model, batch_size=batch_size, device=device)
    return TransformersEmbedder(
        model, trust_remote_code=trust_remote_code, batch_size=batch_size, device=device
    )
