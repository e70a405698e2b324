"""deploy/lookbench.toml is a production config a person edits, and `models pull` fills the cache.

The pull cannot succeed here (no hub): it must fail clearly, naming the host and each model.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from lookbench_live.config import Settings, load_settings
from lookbench_live.flows.models import ModelPullError, ModelRef, configured_models, pull_models, register

ROOT = Path(__file__).resolve().parents[2]
TOML = ROOT / "deploy" / "lookbench.toml"


def _uncommented(text: str) -> str:
    """The file with its commented `[[crawl.sites]]` blocks switched on, as a user would edit it."""
    out, in_block = [], False
    for line in text.splitlines():
        if line.startswith("# [[crawl.sites]]"):
            in_block = True
        if in_block and re.match(r"^# (\[\[crawl\.sites\]\]|[a-z_]+ = )", line):
            out.append(line[2:])
            continue
        in_block = in_block and line.startswith("# ") and not line.startswith("# ---")
        out.append(line)
    # TOML tables must follow the [crawl] keys: move the site blocks after [crawl] is complete.
    return "\n".join(out) + "\n"


def test_production_config_loads_with_real_models() -> None:
    settings = load_settings(TOML)
    assert settings.crawl.sites == []  # shipped commented: nothing is crawled by accident
    assert re.match(r"^stabilityai/stable-diffusion-xl", settings.generation.model or "")
    assert settings.generation.device == "cuda" and settings.generation.dtype == "bfloat16"
    # Conditioned requests need an adapter that fits SDXL: planning refuses a model without one.
    assert (
        settings.generation.conditioning == "ip_adapter"
        and settings.generation.ip_adapter == "h94/IP-Adapter"
    )
    assert settings.generation.ip_adapter_subfolder == "sdxl_models"
    assert settings.generation.ip_adapter_weight == "ip-adapter_sdxl.safetensors"
    from lookbench_live.generation.plan import ConditioningProduct
    from lookbench_live.generation.synthesis import plan_generation
    from lookbench_live.schema.taxonomy import default_taxonomy

    products = [ConditioningProduct(f"shop:{n}", f"{n:064x}", "dress", {"color": "red"}) for n in range(4)]
    _, planned = plan_generation(settings.generation, default_taxonomy(), products)
    assert {r.adapter for r in planned if r.conditioning} == {
        "h94/IP-Adapter:sdxl_models/ip-adapter_sdxl.safetensors"
    }
    assert (settings.generation.width, settings.generation.height) == (1024, 1024)
    assert settings.annotation.base_url == "http://vllm:8000/v1"
    assert settings.annotation.model == "Qwen/Qwen2.5-VL-72B-Instruct"
    assert settings.judge.model == "gpt-5.1" and settings.judge.base_url
    assert settings.evaluation.models[0] == "srpone/gr-lite"  # GR-Lite, then the paper's baselines
    assert {
        "srpone/gr-lite?dim=256",
        "Marqo/marqo-fashionSigLIP",
        "Marqo/marqo-fashionCLIP",
        "openai/clip-vit-base-patch16",
        "facebook/dinov2-base",
    } <= set(settings.evaluation.models)
    # No model needs repository code: GR-Lite runs as transformers' DINOv3, Marqo's through open_clip.
    assert settings.evaluation.device == "cuda" and settings.evaluation.trust_remote_code is False


def test_the_commented_sites_are_valid_once_uncommented(tmp_path: Path) -> None:
    edited = tmp_path / "lookbench.toml"
    edited.write_text(_uncommented(TOML.read_text(encoding="utf-8")), encoding="utf-8")
    sites = load_settings(edited).crawl.sites
    assert sorted(s.platform for s in sites) == ["playwright", "schema_org", "shopify", "woocommerce"]
    for site in sites:
        assert site.base_url.startswith("https://") and not site.allow_private_addresses
        assert site.max_pages <= 300 and site.concurrency <= 2 and site.download_delay >= 1.0


def test_configured_models_lists_every_hub_id_once() -> None:
    models = configured_models(load_settings(TOML))
    assert [(m.repo_id, m.setting) for m in models] == [
        ("stabilityai/stable-diffusion-xl-base-1.0", "generation.model"),
        ("h94/IP-Adapter", "generation.ip_adapter"),
        ("Qwen/Qwen2.5-VL-72B-Instruct", "annotation.model"),
        ("srpone/gr-lite", "evaluation.models"),  # once for both of its variants
        ("Marqo/marqo-fashionSigLIP", "evaluation.models"),
        ("Marqo/marqo-fashionCLIP", "evaluation.models"),
        ("openai/clip-vit-base-patch16", "evaluation.models"),
        ("google/siglip-base-patch16-224", "evaluation.models"),
        ("facebook/dinov2-base", "evaluation.models"),
    ]
    # The embedded defaults (tiny local generator, no VLM) need nothing from the hub; local paths
    # and open_clip specs are not hub ids.
    assert configured_models(Settings()) == []
    local = Settings.model_validate(
        {
            "evaluation": {
                "models": [
                    "./models/mine",
                    "open_clip:ViT-B-32/openai",
                    "/abs/path",
                    "baseline:hsv-hog-v1",
                    "gpt2",
                    "org/gr?dim=8",
                    "org/gr?size=32",
                ]
            }
        }
    )
    assert [m.repo_id for m in configured_models(local)] == ["gpt2", "org/gr"]


def _refused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # closed on exit: connecting is refused at once


def test_pull_from_an_unreachable_hub_names_the_host_and_each_model(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    endpoint = f"http://127.0.0.1:{_refused_port()}"
    models = [
        ModelRef("openai/clip-vit-base-patch16", "evaluation.models"),
        ModelRef("a/b", "generation.model"),
    ]
    results = pull_models(models, cache_dir=str(tmp_path), endpoint=endpoint)  # the real snapshot_download
    assert [r.path for r in results] == [None, None]  # every model tried, none invented
    for result, model in zip(results, models, strict=True):
        assert result.error and model.repo_id in result.error and endpoint in result.error
        assert "cannot be reached" in result.error and model.setting in result.error


def test_pull_refuses_to_start_under_hf_hub_offline(monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    calls: list[str] = []
    with pytest.raises(ModelPullError, match=r"HF_HUB_OFFLINE is set.*https?://.*\(a/b\)"):
        pull_models(
            [ModelRef("a/b", "generation.model")], download=lambda repo, **kw: calls.append(repo) or ""
        )
    assert calls == []
    app = typer.Typer()
    register(app)
    result = CliRunner().invoke(app, ["models", "pull", "--config", str(TOML)])
    assert result.exit_code == 1
    assert (
        "HF_HUB_OFFLINE is set" in result.output
        and "stabilityai/stable-diffusion-xl-base-1.0" in result.output
    )


def test_pull_command_exits_1_and_names_each_model_and_host(tmp_path: Path) -> None:
    endpoint = f"http://127.0.0.1:{_refused_port()}"
    config = tmp_path / "c.toml"
    config.write_text('[evaluation]\nmodels = ["facebook/dinov2-base"]\n', encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env |= {"HF_ENDPOINT": endpoint, "HF_HOME": str(tmp_path / "hf"), "DO_NOT_TRACK": "1"}
    code = "from lookbench_live.cli import main; main()"
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            "models",
            "pull",
            "--config",
            str(config),
            "--to",
            str(tmp_path / "hub"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"cannot download facebook/dinov2-base (evaluation.models) from {endpoint}" in proc.stderr
    assert "1 of 1 models were not downloaded" in proc.stderr
