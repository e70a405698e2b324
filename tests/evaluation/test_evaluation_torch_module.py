"""GR-Lite's published format: a whole torch module pickled in `gr_lite.pt`, loaded only when trusted."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch_modules
from evaluation_fixtures import make_release, sample_rows
from PIL import Image
from torch_modules import UNPICKLED, TinySearchModel, TinyTensorModel

from lookbench_live.evaluation.embedders import EmbedderError, TorchModuleEmbedder, load_embedder
from lookbench_live.evaluation.evaluate import evaluate_release
from lookbench_live.warehouse.lake import Lake

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _jpeg(color: tuple[int, int, int], stripe: tuple[int, int, int]) -> bytes:
    image = Image.new("RGB", (40, 60), color)
    image.paste(stripe, (0, 20, 40, 30))
    out = io.BytesIO()
    image.save(out, "JPEG")
    return out.getvalue()


IMAGES = [
    _jpeg((200, 20, 20), (255, 255, 255)),
    _jpeg((20, 20, 200), (0, 0, 0)),
    _jpeg((20, 160, 20), (90, 90, 90)),
]


def _gr_lite_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "gr-lite"
    folder.mkdir()
    torch.save(TinySearchModel(), folder / "gr_lite.pt")
    return folder


def test_a_pickled_module_is_refused_without_trust_and_nothing_is_unpickled(tmp_path: Path) -> None:
    folder = _gr_lite_folder(tmp_path)
    UNPICKLED["count"] = 0
    with pytest.raises(EmbedderError, match=r"pickled torch module \(gr_lite\.pt\).*--trust-remote-code"):
        load_embedder(str(folder))
    assert UNPICKLED["count"] == 0  # refused before torch.load ran any of the file's code


def test_a_trusted_gr_lite_file_embeds_through_its_search_method(tmp_path: Path) -> None:
    folder = _gr_lite_folder(tmp_path)
    embedder = load_embedder(str(folder), trust_remote_code=True, batch_size=2)
    assert isinstance(embedder, TorchModuleEmbedder) and UNPICKLED["count"] >= 1
    vectors = embedder.embed(IMAGES)
    assert vectors.shape == (3, 256) and vectors.dtype == np.float32
    assert not np.allclose(vectors[0], vectors[1])
    assert np.allclose(embedder.embed(IMAGES[:1])[0], vectors[0], atol=1e-6)  # batches do not matter


def test_a_module_without_search_gets_normalised_pixels_at_its_input_size(tmp_path: Path) -> None:
    file = tmp_path / "model.pt"
    torch.save(TinyTensorModel(), file)
    vectors = load_embedder(str(file), trust_remote_code=True).embed(IMAGES)
    assert vectors.shape == (3, 8)


def test_a_hub_id_is_found_in_the_pre_pulled_cache_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import huggingface_hub.constants

    cache = tmp_path / "hub"
    snapshot = cache / "models--srpone--gr-lite" / "snapshots" / ("a" * 40)
    snapshot.mkdir(parents=True)
    torch.save(TinySearchModel(), snapshot / "gr_lite.pt")
    (cache / "models--srpone--gr-lite" / "refs").mkdir()
    (cache / "models--srpone--gr-lite" / "refs" / "main").write_text("a" * 40)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    assert load_embedder("srpone/gr-lite", trust_remote_code=True).embed(IMAGES[:1]).shape == (1, 256)
    with pytest.raises(EmbedderError, match="trust"):
        load_embedder("srpone/gr-lite")


def test_a_state_dict_or_a_missing_class_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    weights = tmp_path / "weights.pt"
    torch.save(TinySearchModel().state_dict(), weights)
    with pytest.raises(EmbedderError, match="not a torch module"):
        load_embedder(str(weights), trust_remote_code=True)
    # A module pickled from code this process does not have (the publisher's package).
    code = tmp_path / "code"
    code.mkdir()
    (code / "gr_lite_private_code.py").write_text(
        "import torch\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
    )
    monkeypatch.syspath_prepend(str(code))
    import gr_lite_private_code  # type: ignore[import-not-found]

    folder = tmp_path / "private"
    folder.mkdir()
    torch.save(gr_lite_private_code.Net(), folder / "gr_lite.pt")
    monkeypatch.delitem(sys.modules, "gr_lite_private_code")
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(code)])
    with pytest.raises(EmbedderError, match="needs the Python module 'gr_lite_private_code'"):
        load_embedder(str(folder), trust_remote_code=True)


def test_evaluate_scores_a_release_with_the_trusted_module(tmp_path: Path) -> None:
    folder = _gr_lite_folder(tmp_path)
    lake = Lake(tmp_path / "lake")
    make_release(lake, "v20261101", sample_rows())
    with pytest.raises(EmbedderError, match="trust"):
        evaluate_release(lake, "v20261101", model=str(folder))
    result = evaluate_release(lake, "v20261101", model=str(folder), trust_remote_code=True)
    assert result["overall"]["queries"] == 12 and torch_modules.UNPICKLED["count"] >= 1
