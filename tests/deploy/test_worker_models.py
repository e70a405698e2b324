"""deploy/lookbench.toml's models load with what the worker image installs, not this venv.

The dependency set is read from deploy/worker.Dockerfile's `pip install` lines (packages and
the project's extras, expanded through pyproject.toml). Each configured model is laid out as a
tiny stand-in in a Hugging Face cache with the files its real repository holds (GR-Lite's
`gr_lite.pt` + `model.safetensors`, Marqo's `open_clip_config.json`, transformers folders), its
loader family is read from those files by the production code, and the distributions that
family imports must all be in the image.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import pytest
from model_fixtures import in_hub_cache, tiny_clip, tiny_dinov2, tiny_gr_lite, tiny_siglip

from lookbench_live.config import load_settings
from lookbench_live.evaluation.embedders import FAMILY_DISTRIBUTIONS, family_of
from lookbench_live.evaluation.model_spec import parse_model_spec, resolve_folder

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "worker.Dockerfile"


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement.strip(), maxsplit=1)[0].lower().replace("-", "_")


def worker_distributions() -> set[str]:
    """Every distribution the image's `pip install` lines name, the project's extras expanded."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    text = DOCKERFILE.read_text(encoding="utf-8").replace("\\\n", " ")
    found: set[str] = set()
    for command in re.findall(r"pip install ([^&\n]+)", text):
        args = shlex.split(command)
        skip = False
        for arg in args:
            if skip or arg.startswith("-"):
                skip = arg in ("-c", "--index-url", "-r", "--extra-index-url")
                continue
            extras = re.match(r"^/src\[([^\]]*)\]$", arg)
            if extras or arg == "/src":
                found |= {_name(r) for r in project["dependencies"]}
                for extra in extras.group(1).split(",") if extras else []:
                    found |= {_name(r) for r in project["optional-dependencies"][extra]}
            else:
                found.add(_name(arg))
    return found


def test_the_worker_image_installs_the_models_extra_beside_a_matching_torchvision():
    installed = worker_distributions()
    assert {
        "torch",
        "torchvision",
        "transformers",
        "safetensors",
        "open_clip_torch",
        "ftfy",
        "timm",
    } <= installed
    text = DOCKERFILE.read_text(encoding="utf-8")
    # torchvision from the torch index, in the same command as torch: a PyPI build would not match.
    assert re.search(r'--index-url "\$\{TORCH_INDEX_URL\}" torch==\S+ torchvision==\S+', text)


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    from huggingface_hub import constants

    cache = tmp_path / "hub"
    cache.mkdir()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    return cache


def _stand_in(repo: str, folder: Path) -> Path:
    """A tiny folder with the files `repo` holds on the Hub (what decides its loader)."""
    if repo == "srpone/gr-lite":
        return tiny_gr_lite(folder)
    if repo.startswith("Marqo/"):
        folder.mkdir(parents=True)  # open_clip_config.json (plus Marqo's transformers remote code)
        (folder / "open_clip_config.json").write_text('{"model_cfg": {}}', encoding="utf-8")
        (folder / "config.json").write_text(
            '{"auto_map": {"AutoModel": "modeling.MarqoModel"}}', encoding="utf-8"
        )
        return folder
    build = {"openai/clip": tiny_clip, "google/siglip": tiny_siglip, "facebook/dinov2": tiny_dinov2}
    for prefix, builder in build.items():
        if repo.startswith(prefix):
            return Path(builder(folder))
    raise AssertionError(f"no stand-in for {repo}: add one to this test with the files its repository holds")


def test_every_configured_model_has_its_family_in_the_worker_image(tmp_path, hub_cache):
    installed = worker_distributions()
    families = {}
    for spec in load_settings(ROOT / "deploy" / "lookbench.toml").evaluation.models:
        repo = parse_model_spec(spec).source
        if not (hub_cache / f"models--{repo.replace('/', '--')}").exists():
            in_hub_cache(hub_cache, repo, _stand_in(repo, tmp_path / repo))
        family = family_of(resolve_folder(repo))
        families[spec] = family
        missing = set(FAMILY_DISTRIBUTIONS[family]) - installed
        assert not missing, (
            f"{spec} ({family}) imports {sorted(missing)}, which the worker image does not install"
        )
    assert families["srpone/gr-lite"] == families["srpone/gr-lite?dim=256"] == "gr_lite"
    assert families["Marqo/marqo-fashionSigLIP"] == "open_clip"  # not its remote code
