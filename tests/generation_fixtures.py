"""Shared helpers for the generation tests: small settings and one tiny pipeline per session.

The pipeline is built and loaded once per process (cached here, not in a fixture, so
every test module that imports these helpers shares it).
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

from lookbench_live.config import GenerationSettings
from lookbench_live.generation.prompts import load_templates
from lookbench_live.generation.runner import ImageGenerator, IPAdapterSpec
from lookbench_live.generation.synthesis import choose_model
from lookbench_live.generation.tiny import (
    TINY_IMAGE_ENCODER,
    TINY_IP_ADAPTER_SUBFOLDER,
    TINY_IP_ADAPTER_WEIGHT,
    ensure_tiny_ip_adapter,
    ensure_tiny_pipeline,
)
from lookbench_live.schema.taxonomy import Taxonomy, default_taxonomy


def small_settings(**overrides: object) -> GenerationSettings:
    """32×32 pixels, 2 steps: every code path, a fraction of a second per image."""
    values: dict[str, object] = {
        "width": 32,
        "height": 32,
        "steps": 2,
        "batch_size": 2,
        "studio_items": 2,
        "street_looks": 1,
        "gallery_per_item": 1,
        "device": "cpu",
        "cpu_threads": 1,
    }
    values.update(overrides)
    return GenerationSettings.model_validate(values)


@functools.cache
def taxonomy() -> Taxonomy:
    return default_taxonomy()


@functools.cache
def _cache() -> Path:
    cache = Path(tempfile.mkdtemp(prefix="lookbench-tiny-"))
    atexit.register(shutil.rmtree, cache, ignore_errors=True)
    return cache


@functools.cache
def tiny_dir() -> Path:
    """The tiny pipeline the embedded default would build, in a per-process folder."""
    choice = choose_model(GenerationSettings(), taxonomy(), load_templates())
    path, name = ensure_tiny_pipeline(_cache(), choice.words)
    assert name == choice.name
    return path


@functools.cache
def tiny_adapter() -> IPAdapterSpec:
    """The tiny IP-Adapter the embedded default would build, loaded by diffusers' own loader."""
    path, name = ensure_tiny_ip_adapter(_cache())
    return IPAdapterSpec(
        str(path), TINY_IP_ADAPTER_SUBFOLDER, TINY_IP_ADAPTER_WEIGHT, TINY_IMAGE_ENCODER, name
    )


@functools.cache
def tiny_generator() -> ImageGenerator:
    # One thread: on a busy 2-core machine two OpenMP threads spin-wait (measured 40× slower).
    generator = ImageGenerator(str(tiny_dir()), device="cpu", cpu_threads=1, ip_adapter=tiny_adapter())
    generator.pipeline  # noqa: B018 - load now, once
    return generator
