"""Marqo-FashionCLIP, Marqo-FashionSigLIP (open_clip), DINOv3 (transformers' processor needs
torchvision) and GR-Lite against the card's torchvision transform, in the `models` extra's stack.

tests/openclip_check.py builds each tiny model from a config, lays it out in a Hugging Face cache
as `models pull` leaves it, embeds through `load_embedder` (our path) and through the reference
(`open_clip.create_model_and_transforms("hf-hub:…")`, transformers' DINOv3 processor and model,
the card's torchvision transform), and scores the small release. It runs in a subprocess over
`.venv-openclip` (scripts/setup-openclip-env.sh: why it is separate). Skips only when that folder
is missing and LOOKBENCH_REQUIRE_OPENCLIP is unset; with it set (CI) a missing stack fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STACK = Path(os.environ.get("LOOKBENCH_OPENCLIP_ENV", ROOT / ".venv-openclip"))
SHIM = ROOT / "scripts" / "openclip_shim"


def test_open_clip_and_torchvision_families_match_their_references(tmp_path):
    if not (STACK / "open_clip").is_dir():
        if os.environ.get("LOOKBENCH_REQUIRE_OPENCLIP"):
            pytest.fail(
                f"LOOKBENCH_REQUIRE_OPENCLIP is set but {STACK} is missing: bash scripts/setup-openclip-env.sh"
            )
        pytest.skip(f"{STACK} is missing: bash scripts/setup-openclip-env.sh")
    env = {**os.environ, "PYTHONPATH": f"{SHIM}{os.pathsep}{STACK}", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "openclip_check.py"), str(tmp_path / "work")],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    families = {spec: r["family"] for spec, r in results.items()}
    assert families == {
        "Marqo/marqo-fashionCLIP": "OpenClipEmbedder",
        "Marqo/marqo-fashionSigLIP": "OpenClipEmbedder",
        "facebook/dinov3-vitl16-pretrain-lvd1689m": "TransformersEmbedder",
        "srpone/gr-lite?size=32": "GRLiteEmbedder",
    }
    widths = {"Marqo/marqo-fashionCLIP": 16, "Marqo/marqo-fashionSigLIP": 96}
    for spec, result in results.items():
        width = widths.get(spec, 32)
        assert result["shape"] == [6, width], spec
        assert result["max_abs_diff"] <= 1e-5, (spec, result["max_abs_diff"])  # same weights, same numbers
        assert result["queries"] == 12 and result["cache_width"] == [width], spec  # it scored the release
