"""Image embedders: the weight-free baseline, Hugging Face `transformers`, open_clip.

An embedder has a `name` (what results are filed under) and `embed(list of image
bytes) -> float32 [n, d]`; rows are L2-normalised by the evaluator, not here.

Model specs accepted by `load_embedder`:
- `None` or `"baseline"`: the baseline (`baseline:hsv-hog-v1`);
- `"open_clip:<architecture>/<pretrained tag>"`: open_clip, when installed;
- a pickled torch module: a `.pt`/`.pth` file, a folder holding `gr_lite.pt`, or a Hub id whose
  cached snapshot holds it (`srpone/gr-lite`, GR-Lite: LookBench's own example loads that file
  with `torch.load` and embeds with `model.search(image_paths=[PIL images], feature_dim=256)`).
  Unpickling runs code from the file, so it is loaded only with `trust_remote_code=True`
  (`--trust-remote-code`, `evaluation.trust_remote_code`); otherwise `EmbedderError` says so;
- anything else: a Hugging Face id or a local folder, loaded with `AutoModel` and
  `AutoImageProcessor`. CLIP/SigLIP-style models give `get_image_features`; others
  (ViT, DINOv2) their pooled output, else the first token of the last hidden state.
  `trust_remote_code=True` is needed for models such as GR-Lite that ship their code.
Nothing is ever downloaded by the tests: they save tiny models to a folder.
"""

from __future__ import annotations

import io
import os
from collections.abc import Sequence
from pathlib import Path
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


# Files of a Hub repo or folder that are a whole pickled torch module, not a transformers checkpoint.
TORCH_MODULE_FILES = ("gr_lite.pt",)
# GR-Lite's embedding width through `search`: what LookBench's example and its model wrapper ask for.
SEARCH_FEATURE_DIM = 256
# A module without `search` gets images resized to `input_size` (its attribute, else this: the
# size LookBench's GR-Lite transform uses), ImageNet-normalised.
DEFAULT_INPUT_SIZE = 518
_MEAN = np.array([0.485, 0.456, 0.406], np.float32)
_STD = np.array([0.229, 0.224, 0.225], np.float32)


def torch_module_file(model: str) -> Path | None:
    """The pickled-module file `model` names: the file itself, in its folder, or in the Hub cache."""
    path = Path(model)
    if path.is_file() and path.suffix in (".pt", ".pth"):
        return path
    if path.is_dir():
        for name in TORCH_MODULE_FILES:
            if (path / name).is_file():
                return path / name
        return None
    if model.count("/") != 1 or os.path.isabs(model):
        return None
    try:  # the cache only: no network (models are pre-pulled, runs stay offline)
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - a transformers dependency
        return None
    for name in TORCH_MODULE_FILES:
        try:
            found = try_to_load_from_cache(model, name)
        except Exception:  # an id the hub library refuses: not ours to decide here
            return None
        if isinstance(found, str) and os.path.isfile(found):
            return Path(found)
    return None


class TorchModuleEmbedder:
    """A whole torch module saved with `torch.save(module)` (GR-Lite's `gr_lite.pt`)."""

    def __init__(
        self,
        model: str,
        file: Path,
        *,
        trust_remote_code: bool = False,
        batch_size: int = 32,
        device: str = "cpu",
    ):
        if not trust_remote_code:
            raise EmbedderError(
                f"model {model!r} is a pickled torch module ({file.name}): loading it runs code stored in "
                "the file. Pass --trust-remote-code (or set [evaluation] trust_remote_code = true) if you "
                "trust its publisher"
            )
        import torch

        try:
            # weights_only=False unpickles arbitrary objects: allowed only behind the trust flag above.
            module = torch.load(file, map_location=device, weights_only=False)
        except ModuleNotFoundError as exc:
            raise EmbedderError(
                f"model {model!r} ({file}) needs the Python module {exc.name!r} that defined it; install it"
            ) from exc
        except Exception as exc:
            raise EmbedderError(
                f"cannot load model {model!r} from {file}: {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(module, torch.nn.Module) and not hasattr(module, "search"):
            raise EmbedderError(
                f"model {model!r} ({file}) holds a {type(module).__name__}, not a torch module "
                "(a state dict needs its architecture: give a transformers folder instead)"
            )
        if isinstance(module, torch.nn.Module):
            module = module.eval().to(device)
        self.name = model
        self.module = module
        self.batch_size = batch_size
        self.device = device
        self.input_size = int(getattr(module, "input_size", DEFAULT_INPUT_SIZE))
        self._torch = torch

    def _pixels(self, images: list[Image.Image]) -> Any:
        size = (self.input_size, self.input_size)
        arrays = [
            (np.asarray(img.resize(size, Image.Resampling.BICUBIC), np.float32) / 255.0 - _MEAN) / _STD
            for img in images
        ]
        return self._torch.from_numpy(np.stack(arrays).transpose(0, 3, 1, 2).copy()).to(self.device)

    def _batch(self, images: list[Image.Image]) -> Any:
        if hasattr(self.module, "search"):
            # LookBench's interface: returns (something, embeddings) for a list of PIL images.
            _, embeddings = self.module.search(image_paths=images, feature_dim=SEARCH_FEATURE_DIM)
            return self._torch.as_tensor(embeddings)
        return _tensor_of(self.module(self._pixels(images)))

    def embed(self, images: Sequence[bytes]) -> np.ndarray:
        rows: list[np.ndarray] = []
        with self._torch.inference_mode():
            for start in range(0, len(images), self.batch_size):
                batch = [_open_rgb(b) for b in images[start : start + self.batch_size]]
                features = self._batch(batch)
                if features.ndim != 2 or features.shape[0] != len(batch):
                    raise EmbedderError(
                        f"model {self.name!r} returned shape {tuple(features.shape)} for {len(batch)} images"
                    )
                rows.append(features.float().cpu().numpy())
        return np.concatenate(rows).astype(np.float32) if rows else np.zeros((0, 0), np.float32)


def load_embedder(
    model: str | None, *, trust_remote_code: bool = False, batch_size: int = 32, device: str = "cpu"
) -> ImageEmbedder:
    """The embedder for a model spec (see module docstring); raises `EmbedderError` naming it."""
    if model is None or model in ("baseline", BASELINE_NAME):
        return BaselineEmbedder()
    if model.startswith("open_clip:"):
        return OpenClipEmbedder(model, batch_size=batch_size, device=device)
    file = torch_module_file(model)
    if file is not None:
        return TorchModuleEmbedder(
            model, file, trust_remote_code=trust_remote_code, batch_size=batch_size, device=device
        )
    return TransformersEmbedder(
        model, trust_remote_code=trust_remote_code, batch_size=batch_size, device=device
    )
