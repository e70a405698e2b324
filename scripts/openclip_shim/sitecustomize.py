"""Test-machine shim for `.venv-openclip` only; never part of the worker image.

This machine has the CPU torch 2.13.0 but PyPI only has CUDA builds of torchvision 0.28.0,
whose C extension cannot load beside it; torchvision then fails at import registering fake
kernels for `torchvision::nms`/`qnms`, operators its extension would have defined. Defining
their schemas first lets torchvision import; open_clip, timm and the image processors use its
pure-torch transforms, never those operators. The worker image installs a matching torchvision
from the torch index (deploy/worker.Dockerfile) and needs none of this.
"""

import contextlib

import torch

for _name in ("nms", "qnms"):
    with contextlib.suppress(RuntimeError):  # already defined: a torchvision whose extension loaded
        torch.library.define(
            f"torchvision::{_name}", "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor"
        )
