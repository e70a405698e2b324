"""Tiny torch modules saved whole with `torch.save(module)`, the format of GR-Lite's `gr_lite.pt`.

Unpickling needs these classes importable by name, as the real file needs its own code.
`UNPICKLED` counts how often a module was rebuilt from a file: a refused load must leave it at 0.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

UNPICKLED = {"count": 0}


class _Counted(torch.nn.Module):
    def __setstate__(self, state: dict[str, Any]) -> None:
        UNPICKLED["count"] += 1
        super().__setstate__(state)


class TinySearchModel(_Counted):
    """LookBench's interface: `search(image_paths=[PIL images], feature_dim=D) -> (None, [n, D])`."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.project = torch.nn.Linear(6, 256)

    def search(self, image_paths: list[Any], feature_dim: int = 256) -> tuple[None, torch.Tensor]:
        stats = []
        for image in image_paths:
            pixels = np.asarray(image.convert("RGB"), np.float32) / 255.0
            stats.append(np.concatenate([pixels.mean(axis=(0, 1)), pixels.std(axis=(0, 1))]))
        features = self.project(torch.from_numpy(np.stack(stats)))
        return None, features[:, :feature_dim]


class TinyTensorModel(_Counted):
    """A module without `search`: ImageNet-normalised pixels in, one vector per image out."""

    input_size = 16

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(1)
        self.conv = torch.nn.Conv2d(3, 8, kernel_size=4, stride=4)

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        assert pixels.shape[1:] == (3, 16, 16), pixels.shape
        return self.conv(pixels).mean(dim=(2, 3))
