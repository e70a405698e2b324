"""Image embedders: the weight-free baseline and the model families the paper reports.

An embedder has a `name` (what results are filed under) and `embed(list of image
bytes) -> float32 [n, d]`; rows are L2-normalised by the evaluator, not here.

`load_embedder(spec)` (spec syntax: evaluation/model_spec.py) picks the family from the files,
the same way for a local folder and for a Hub id (its snapshot in the Hugging Face cache,
the layout `models pull` writes; nothing is downloaded here):
- `None` or `"baseline"`: the baseline (`baseline:hsv-hog-v1`);
- `open_clip:<architecture>/<pretrained tag>`, or a folder with `open_clip_config.json`
  (Marqo-FashionCLIP, Marqo-FashionSigLIP): open_clip (evaluation/openclip.py);
- a GR-Lite folder (`model.safetensors` of a DINOv3 ViT beside `gr_lite.pt` or the publisher's
  own config.json): the weights in transformers' DINOv3 with RoPE (evaluation/gr_lite.py;
  options `size`, `dim`); with only the pickled
  `gr_lite.pt` (or any `.pt`/`.pth` file): `torch.load`, behind `trust_remote_code` because
  unpickling runs code from the file;
- anything else: `transformers` `AutoModel` and `AutoImageProcessor` (CLIP, SigLIP, DINOv2,
  DINOv3, ViT; InternViT with `trust_remote_code`). CLIP/SigLIP-style models give
  `get_image_features`; others their pooled output, else the first token of the last hidden state.
A model that cannot load raises `EmbedderError` with one line naming it and why.
Nothing is ever downloaded by the tests: they build tiny models in a folder.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from PIL import Image

from lookbench_live.evaluation import gr_lite
from lookbench_live.evaluation.baseline import BASELINE_NAME, BaselineEmbedder
from lookbench_live.evaluation.model_spec import (
    OPEN_CLIP_PREFIX,
    ModelSpec,
    ModelSpecError,
    parse_model_spec,
    resolve_folder,
)
from lookbench_live.evaluation.openclip import OpenClipEmbedder, OpenClipError, is_open_clip_folder


class EmbedderError(RuntimeError):
    """A model cannot be loaded or run; the message names it."""


class ImageEmbedder(Protocol):
    name: str

    def embed(self, images: Sequence[bytes]) -> np.ndarray: ...


def _open_rgb(data: bytes) -> Image.Image:
    with Image.open(io.BytesIO(data)) as image:
        return image.convert("RGB")


def _importable(module: str) -> bool:
    try:
        __import__(module)
    except Exception:  # absent, or present but broken beside this torch: unusable either way
        return False
    return True


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
    """A `transformers` vision model in a folder (a local one or a Hub id's cached snapshot)."""

    def __init__(
        self,
        model: str,
        *,
        name: str | None = None,
        trust_remote_code: bool = False,
        batch_size: int = 32,
        device: str = "cpu",
    ):
        import torch
        from transformers import AutoImageProcessor, AutoModel

        self.name = name or model
        self.batch_size = batch_size
        self.device = device
        try:
            self.processor = AutoImageProcessor.from_pretrained(model, trust_remote_code=trust_remote_code)
            self.model = AutoModel.from_pretrained(model, trust_remote_code=trust_remote_code)
        except Exception as exc:
            # The usual cause besides missing files: a package the processor or remote code needs
            # (DINOv3's image processor needs torchvision; InternViT's code timm and einops).
            missing = getattr(exc, "name", None) if isinstance(exc, ImportError) else None
            hint = ""
            if missing or not _importable("torchvision"):
                hint = f"; {missing or 'torchvision'} may be what is missing: pip install 'lookbench-live[models]'"
            text = " ".join(str(exc).split())[:300]
            raise EmbedderError(
                f"cannot load model {self.name!r} with transformers ({type(exc).__name__}: {text}){hint}"
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


def embedder_name(model: str | None) -> str:
    """The name `load_embedder(model)` files results under, without loading anything."""
    if model is None or model in ("baseline", BASELINE_NAME):
        return BASELINE_NAME
    return model


# GR-Lite's pickled module (`gr_lite.pt`), loaded only when its folder lacks `model.safetensors`.
TORCH_MODULE_FILES = ("gr_lite.pt",)


def torch_module_file(folder: Path) -> Path | None:
    """The pickled-module file a path names: the `.pt`/`.pth` file itself or one in its folder."""
    if folder.is_file() and folder.suffix in (".pt", ".pth"):
        return folder
    for name in TORCH_MODULE_FILES:
        if (folder / name).is_file():
            return folder / name
    return None


class TorchModuleEmbedder:
    """A whole torch module saved with `torch.save(module)` (GR-Lite's `gr_lite.pt`).

    Its `search(image_paths=[PIL images], feature_dim=D)` (LookBench's example) is called with
    `dim` (default: the card's 1024); a module without it gets `size`-pixel images (default 336,
    the card's), ImageNet-normalised, as GRLiteEmbedder prepares them.
    """

    def __init__(
        self,
        model: str,
        file: Path,
        *,
        input_size: int | None = None,
        feature_dim: int | None = None,
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
        self.input_size = input_size or int(getattr(module, "input_size", gr_lite.DEFAULT_INPUT_SIZE))
        self.feature_dim = feature_dim or SEARCH_FEATURE_DIM
        self._torch = torch

    def _pixels(self, images: list[Image.Image]) -> Any:
        size = (self.input_size, self.input_size)
        arrays = [
            (
                np.asarray(img.resize(size, Image.Resampling.BILINEAR), np.float32) / 255.0
                - gr_lite.IMAGENET_MEAN
            )
            / gr_lite.IMAGENET_STD
            for img in images
        ]
        return self._torch.from_numpy(np.stack(arrays).transpose(0, 3, 1, 2).copy()).to(self.device)

    def _batch(self, images: list[Image.Image]) -> Any:
        if hasattr(self.module, "search"):
            # LookBench's interface: returns (something, embeddings) for a list of PIL images.
            _, embeddings = self.module.search(image_paths=images, feature_dim=self.feature_dim)
            return self._torch.as_tensor(embeddings)
        return _tensor_of(self.module(self._pixels(images)))[:, : self.feature_dim]

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


# The card's width: what `search` is asked for unless the spec says `dim` (LookBench's example: 256).
SEARCH_FEATURE_DIM = 1024


def load_embedder(
    model: str | None, *, trust_remote_code: bool = False, batch_size: int = 32, device: str = "cpu"
) -> ImageEmbedder:
    """The embedder for a model spec (see module docstring); raises `EmbedderError`, one line."""
    if model is None or model in ("baseline", BASELINE_NAME):
        return BaselineEmbedder()
    try:
        if model.startswith(OPEN_CLIP_PREFIX):
            return OpenClipEmbedder(model, batch_size=batch_size, device=device)
        spec = parse_model_spec(model)
        folder = resolve_folder(spec.source)
        return _load_folder(
            spec, folder, trust_remote_code=trust_remote_code, batch_size=batch_size, device=device
        )
    except (ModelSpecError, OpenClipError, gr_lite.GRLiteError) as exc:
        raise EmbedderError(f"cannot load model {model!r}: {exc}") from exc


# What each family imports beyond the core dependencies, as the distributions that provide it:
# the worker image must install these for every model deploy/lookbench.toml names
# (tests/deploy/test_worker_models.py). DINOv3's transformers image processor needs torchvision.
FAMILY_DISTRIBUTIONS = {
    "open_clip": ("open_clip_torch", "ftfy", "timm", "torchvision"),
    "gr_lite": ("transformers", "safetensors"),
    "torch_module": ("torch",),
    "transformers": ("transformers",),
    "transformers+torchvision": ("transformers", "torchvision"),
}


def family_of(folder: Path) -> str:
    """Which loader a model folder gets, from its files alone (nothing is loaded)."""
    if is_open_clip_folder(folder):
        return "open_clip"
    if gr_lite.is_gr_lite_folder(folder):
        return "gr_lite"
    if torch_module_file(folder) is not None:
        return "torch_module"
    processor = folder / "preprocessor_config.json"
    if processor.is_file() and "DINOv3ViTImageProcessor" in processor.read_text(encoding="utf-8"):
        return "transformers+torchvision"
    return "transformers"


def _load_folder(
    spec: ModelSpec, folder: Path, *, trust_remote_code: bool, batch_size: int, device: str
) -> ImageEmbedder:
    size, dim = spec.option("size"), spec.option("dim")
    family = family_of(folder)
    if family == "open_clip":
        _no_options(spec, "open_clip")
        return OpenClipEmbedder(spec.text, folder=folder, batch_size=batch_size, device=device)
    if family == "gr_lite":
        return gr_lite.GRLiteEmbedder(
            spec.text, folder, input_size=size, feature_dim=dim, batch_size=batch_size, device=device
        )
    file = torch_module_file(folder)
    if file is not None:
        return TorchModuleEmbedder(
            spec.text,
            file,
            input_size=size,
            feature_dim=dim,
            trust_remote_code=trust_remote_code,
            batch_size=batch_size,
            device=device,
        )
    _no_options(spec, "transformers")
    return TransformersEmbedder(
        str(folder), name=spec.text, trust_remote_code=trust_remote_code, batch_size=batch_size, device=device
    )


def _no_options(spec: ModelSpec, family: str) -> None:
    if spec.options:
        raise ModelSpecError(f"options {sorted(spec.options)} apply to GR-Lite, not to {family} models")
