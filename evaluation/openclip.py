"""open_clip models: Marqo-FashionCLIP, Marqo-FashionSigLIP and open_clip's own names.

A folder holding `open_clip_config.json` (Marqo's Hub repositories, or their cached snapshot
that `models pull` writes) loads with open_clip's `local-dir:` schema: the model and its
preprocessing come from that file, exactly as `hf-hub:ORG/NAME` builds them, with no network.
Marqo's repositories also ship transformers remote code, which only wraps open_clip; we call
open_clip directly, so no repository code runs. `open_clip:ARCH/TAG` keeps open_clip's own
pretrained tags. open_clip needs torchvision and timm (its preprocessing and SigLIP towers)
and ftfy (its tokenizer module): the `models` extra, installed in the worker image.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

CONFIG_FILE = "open_clip_config.json"
INSTALL_HINT = "pip install 'lookbench-live[models]' (open_clip_torch, ftfy, timm, torchvision)"


class OpenClipError(RuntimeError):
    """open_clip is missing or cannot build the model; one line says which."""


def is_open_clip_folder(folder: Path) -> bool:
    return (folder / CONFIG_FILE).is_file()


def import_open_clip(name: str) -> Any:
    try:
        import open_clip  # type: ignore[import-not-found]
    except ImportError as exc:  # ModuleNotFoundError names the first missing module
        missing = getattr(exc, "name", None) or str(exc)
        raise OpenClipError(
            f"model {name!r} needs open_clip, which cannot import ({missing} missing): {INSTALL_HINT}"
        ) from exc
    return open_clip


class OpenClipEmbedder:
    """An open_clip image tower: `encode_image` on its own preprocessing."""

    def __init__(self, name: str, *, folder: Path | None = None, batch_size: int = 32, device: str = "cpu"):
        import torch

        open_clip = import_open_clip(name)
        if folder is not None:
            model_name, pretrained = f"local-dir:{folder}", None
        else:
            model_name, _, pretrained = name.removeprefix("open_clip:").partition("/")
        try:
            model, _, preprocess = open_clip.create_model_and_transforms(
                model_name, pretrained=pretrained or None
            )
        except Exception as exc:
            raise OpenClipError(
                f"cannot build open_clip model {name!r}: {type(exc).__name__}: {exc}"
            ) from exc
        self.name = name
        self.model = model.eval().to(device)
        self.preprocess = preprocess
        self.batch_size = batch_size
        self.device = device
        self._torch = torch

    def embed_images(self, images: Sequence[Image.Image]) -> np.ndarray:
        rows = []
        with self._torch.inference_mode():
            for start in range(0, len(images), self.batch_size):
                batch = self._torch.stack(
                    [self.preprocess(img) for img in images[start : start + self.batch_size]]
                )
                rows.append(self.model.encode_image(batch.to(self.device)).float().cpu().numpy())
        return np.concatenate(rows).astype(np.float32) if rows else np.zeros((0, 0), np.float32)

    def embed(self, images: Sequence[bytes]) -> np.ndarray:
        from lookbench_live.evaluation.embedders import _open_rgb

        return self.embed_images([_open_rgb(b) for b in images])
