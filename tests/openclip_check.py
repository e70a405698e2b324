"""Run by tests/evaluation/test_evaluation_openclip.py inside the `.venv-openclip` stack (torchvision, timm,
open_clip, ftfy beside the main venv): each family that needs torchvision, built tiny from a
config, laid out in a Hugging Face cache as `models pull` leaves it, loaded by our production
path and by the reference implementation on the same weights, then scored on the small release.
Prints one JSON object; the test asserts on it. Usage: python openclip_check.py WORKDIR
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

WORK = Path(sys.argv[1])
os.environ["HF_HUB_CACHE"] = str(WORK / "hub")  # before huggingface_hub is imported
os.environ["HF_HUB_OFFLINE"] = "1"
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from evaluation_fixtures import make_release, sample_rows  # noqa: E402
from model_fixtures import in_hub_cache, tiny_dinov3, tiny_gr_lite  # noqa: E402
from PIL import Image  # noqa: E402

from lookbench_live.evaluation.embedders import _open_rgb, load_embedder  # noqa: E402
from lookbench_live.evaluation.evaluate import evaluate_release  # noqa: E402
from lookbench_live.evaluation.vectors import load_cache  # noqa: E402
from lookbench_live.warehouse.lake import Lake  # noqa: E402

V = "v20261101"
IMAGES = [r["image"]["bytes"] for rows in sample_rows().values() for r in rows][:6]
TEXT = {"context_length": 16, "vocab_size": 64, "width": 32, "heads": 2, "layers": 1}
# Marqo-FashionCLIP's open_clip_config.json: open_clip's own ViT (ViT-B-16), OpenAI's mean/std.
FASHION_CLIP = {
    "model_cfg": {
        "embed_dim": 16,
        "vision_cfg": {"image_size": 32, "layers": 2, "width": 32, "head_width": 16, "patch_size": 8},
        "text_cfg": TEXT,
    },
    "preprocess_cfg": {
        "mean": [0.48145466, 0.4578275, 0.40821073],
        "std": [0.26862954, 0.26130258, 0.27577711],
    },
}
# Marqo-FashionSigLIP's: a timm SigLIP tower (attention-pool "map", no projection), custom text
# tower, squash resize with bicubic interpolation, mean/std 0.5. timm's `test_vit3` is the tiny
# model of that kind (map pooling, no class token).
FASHION_SIGLIP = {
    "model_cfg": {
        "embed_dim": 96,
        "init_logit_bias": -10,
        "custom_text": True,
        "vision_cfg": {
            "image_size": 160,  # test_vit3's own size (timm keeps it)
            "timm_model_name": "test_vit3",
            "timm_model_pretrained": False,
            "timm_pool": "map",
            "timm_proj": "none",
        },
        "text_cfg": {
            **TEXT,
            "width": 96,
            "heads": 2,
            "no_causal_mask": True,
            "proj_bias": True,
            "pool_type": "last",
            "norm_kwargs": {"eps": 1e-6},
        },
    },
    "preprocess_cfg": {
        "mean": [0.5, 0.5, 0.5],
        "std": [0.5, 0.5, 0.5],
        "interpolation": "bicubic",
        "resize_mode": "squash",
    },
}


def open_clip_folder(path: Path, config: dict) -> Path:
    import open_clip
    from safetensors.torch import save_file

    path.mkdir(parents=True)
    (path / "open_clip_config.json").write_text(json.dumps(config))
    torch.manual_seed(0)
    model = open_clip.create_model(f"local-dir:{path}")  # random weights, from the config
    save_file(
        {k: v.contiguous() for k, v in model.state_dict().items()}, str(path / "open_clip_model.safetensors")
    )
    return path


def open_clip_reference(repo: str) -> np.ndarray:
    import open_clip

    model, _, preprocess = open_clip.create_model_and_transforms(f"hf-hub:{repo}")
    with torch.no_grad():
        batch = torch.stack([preprocess(_open_rgb(b)) for b in IMAGES])
        return model.eval().encode_image(batch).numpy()


def dinov3_reference(folder: Path) -> np.ndarray:
    from transformers import DINOv3ViTImageProcessor, DINOv3ViTModel

    processor = DINOv3ViTImageProcessor.from_pretrained(folder)
    model = DINOv3ViTModel.from_pretrained(folder).eval()
    with torch.no_grad():
        pixels = processor(images=[_open_rgb(b) for b in IMAGES], return_tensors="pt")["pixel_values"]
        return model(pixel_values=pixels).pooler_output.numpy()


def gr_lite_card_reference(folder: Path, size: int) -> np.ndarray:
    """The model card's code: torchvision Resize((size, size)), ToTensor, Normalize, pooler_output."""
    from torchvision import transforms
    from transformers import DINOv3ViTModel

    transform = transforms.Compose(
        [
            transforms.Resize((size, size)),
            transforms.ToTensor(),
            transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
        ]
    )
    model = DINOv3ViTModel.from_pretrained(folder).eval()
    with torch.no_grad():
        return model(
            pixel_values=torch.stack([transform(_open_rgb(b)) for b in IMAGES])
        ).pooler_output.numpy()


def main() -> None:
    from transformers import DINOv3ViTImageProcessor

    hub = WORK / "hub"
    hub.mkdir(parents=True)
    in_hub_cache(hub, "Marqo/marqo-fashionCLIP", open_clip_folder(WORK / "fclip", FASHION_CLIP))
    in_hub_cache(hub, "Marqo/marqo-fashionSigLIP", open_clip_folder(WORK / "fsiglip", FASHION_SIGLIP))
    dinov3 = WORK / "dinov3"
    tiny_dinov3(dinov3)
    DINOv3ViTImageProcessor(size={"height": 32, "width": 32}).save_pretrained(dinov3)
    in_hub_cache(hub, "facebook/dinov3-vitl16-pretrain-lvd1689m", dinov3)
    in_hub_cache(hub, "srpone/gr-lite", tiny_gr_lite(WORK / "grlite"))

    lake = Lake(WORK / "lake")
    make_release(lake, V, sample_rows())
    out: dict = {}
    references = {
        "Marqo/marqo-fashionCLIP": lambda: open_clip_reference("Marqo/marqo-fashionCLIP"),
        "Marqo/marqo-fashionSigLIP": lambda: open_clip_reference("Marqo/marqo-fashionSigLIP"),
        "facebook/dinov3-vitl16-pretrain-lvd1689m": lambda: dinov3_reference(dinov3),
        "srpone/gr-lite?size=32": lambda: gr_lite_card_reference(WORK / "grlite" / "dinov3", 32),
    }
    for spec, reference in references.items():
        embedder = load_embedder(spec)
        ours = embedder.embed(IMAGES)
        expected = reference()
        result = evaluate_release(lake, V, model=spec)
        out[spec] = {
            "family": type(embedder).__name__,
            "shape": list(ours.shape),
            "max_abs_diff": float(np.abs(ours - expected).max()),
            "queries": result["overall"]["queries"],
            "cache_width": sorted({len(v) for v in load_cache(lake, V, spec).values()}),
        }
    print(json.dumps(out))


if __name__ == "__main__":
    Image.init()
    main()
