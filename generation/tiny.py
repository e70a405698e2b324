"""A tiny random Stable Diffusion pipeline, built offline from configs.

No model hub is reachable on the project's machines, yet the generation stage must
run end to end (tests, the embedded default of the monthly job). This module builds
a pipeline with the real component classes (UNet2DConditionModel, AutoencoderKL,
CLIPTextModel, a CLIPTokenizer with a vocabulary built here, DDIMScheduler) and
random weights, and saves it in the diffusers folder layout, so the runner loads it
by path through the same `DiffusionPipeline.from_pretrained` call a real model id uses.

Its images are noise-like: they exercise every step of the pipeline (hashing, dedup,
annotation, release) but depict nothing. Rows made with it carry
`Generation.model_is_tiny_local = True`, and the release manifest says so.

A caller may rely on: the same `words` give byte-identical weights and the same
`tiny_model_name`; `ensure_tiny_pipeline` builds at most once per folder and never
leaves a half-written folder under the final name.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path

# Bump when anything below changes the saved pipeline: the name is recorded in every
# `generations` row and enters each generation_id.
TINY_VERSION = "2"  # 2: the VAE downsamples 8x, as Stable Diffusion's does (1: 2x)
SPECIAL_TOKENS = ("<|startoftext|>", "<|endoftext|>")
# Always known to the tokenizer, besides the templates' and the taxonomy's words.
BASE_WORDS = tuple(
    [
        "a",
        "an",
        "and",
        "the",
        "of",
        "with",
        "in",
        "on",
        "at",
        "by",
        "for",
        "to",
        "photo",
        "image",
        "picture",
        "garment",
        "clothing",
        "fashion",
        "outfit",
        "woman",
        "man",
        "model",
        "wearing",
        "worn",
        "red",
        "orange",
        "yellow",
        "green",
        "blue",
        "purple",
        "pink",
        "brown",
        "black",
        "white",
        "grey",
        "gray",
        "beige",
        "navy",
        "cotton",
        "denim",
        "leather",
        "silk",
        "wool",
        "linen",
        "knit",
        "lace",
        "sequin",
        "print",
        "printed",
        "striped",
        "floral",
        "short",
        "long",
        "sleeve",
        "sleeves",
        "collar",
        "neck",
        "pocket",
        "button",
        "zip",
        "belt",
    ]
)


# The tiny UNet's config: the tiny IP-Adapter is shaped from it (`build_tiny_ip_adapter`).
TINY_UNET: dict[str, object] = {
    "sample_size": 8,  # 64 px images through the 8x VAE
    "in_channels": 4,
    "out_channels": 4,
    "layers_per_block": 1,
    "block_out_channels": (32, 64),
    "down_block_types": ("DownBlock2D", "CrossAttnDownBlock2D"),
    "up_block_types": ("CrossAttnUpBlock2D", "UpBlock2D"),
    "cross_attention_dim": 32,
    "attention_head_dim": 8,
    "norm_num_groups": 8,
}


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2/CLIP byte-to-character table: every byte gets a printable stand-in."""
    bs = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    cs = bs[:]
    extra = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + extra)
            extra += 1
    return dict(zip(bs, [chr(c) for c in cs], strict=True))


def tiny_vocabulary(words: Iterable[str]) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """A CLIP-style BPE vocabulary: all 256 byte symbols (so any text encodes) plus merges
    that assemble each known word whole (so prompts stay within 77 tokens and differ)."""
    symbols = list(bytes_to_unicode().values())
    vocab: dict[str, int] = {}
    for symbol in symbols:
        vocab.setdefault(symbol, len(vocab))
    for symbol in symbols:
        vocab.setdefault(symbol + "</w>", len(vocab))
    merges: list[tuple[str, str]] = []
    seen_merges: set[tuple[str, str]] = set()
    for word in sorted({w.lower() for w in words if re.fullmatch(r"[a-z]{2,}", w.lower())}):
        pieces = [*word[:-1], word[-1] + "</w>"]
        current = pieces[0]
        for piece in pieces[1:]:
            pair = (current, piece)
            current = current + piece
            if pair not in seen_merges:
                seen_merges.add(pair)
                merges.append(pair)
            vocab.setdefault(current, len(vocab))
    for token in SPECIAL_TOKENS:
        vocab.setdefault(token, len(vocab))
    return vocab, merges


def tiny_words(extra: Iterable[str] = ()) -> list[str]:
    words = set(BASE_WORDS)
    for text in extra:
        words.update(re.findall(r"[a-z]+", text.lower()))
    return sorted(words)


def tiny_model_name(words: Iterable[str]) -> str:
    """The model name recorded in `generations`: version plus a digest of the vocabulary."""
    digest = hashlib.sha256("\n".join(sorted(set(words))).encode()).hexdigest()[:8]
    return f"tiny-sd-{TINY_VERSION}-{digest}"


def build_tiny_pipeline(path: str | os.PathLike[str], words: Iterable[str] = BASE_WORDS) -> Path:
    """Build the tiny text-to-image pipeline with seeded random weights and save it at `path`."""
    import torch
    from diffusers import AutoencoderKL, DDIMScheduler, StableDiffusionPipeline, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTokenizer

    vocab, merges = tiny_vocabulary(words)
    # transformers 5: `vocab=`/`merges=` objects; the old `vocab_file=` keyword is ignored silently.
    tokenizer = CLIPTokenizer(vocab=vocab, merges=merges, model_max_length=77)
    bos, eos = vocab[SPECIAL_TOKENS[0]], vocab[SPECIAL_TOKENS[1]]
    generator_state = torch.random.get_rng_state()
    try:
        torch.manual_seed(0)  # seeded weights: the same words give the same checkpoint
        unet = UNet2DConditionModel(**TINY_UNET)
        # Four blocks downsample 8x, as Stable Diffusion's VAE does: a 64 px image denoises as
        # an 8x8 latent. (Two blocks, 2x, made 32x32 latents and the UNet six times slower.)
        vae = AutoencoderKL(
            in_channels=3,
            out_channels=3,
            block_out_channels=(32, 64, 64, 64),
            down_block_types=("DownEncoderBlock2D",) * 4,
            up_block_types=("UpDecoderBlock2D",) * 4,
            latent_channels=4,
            norm_num_groups=8,
            sample_size=64,
        )
        text_encoder = CLIPTextModel(
            CLIPTextConfig(
                vocab_size=len(vocab),
                hidden_size=32,
                intermediate_size=64,
                num_attention_heads=4,
                num_hidden_layers=2,
                max_position_embeddings=77,
                bos_token_id=bos,
                eos_token_id=eos,
                pad_token_id=eos,
            )
        )
    finally:
        torch.random.set_rng_state(generator_state)
    scheduler = DDIMScheduler(
        beta_start=0.00085,
        beta_end=0.012,
        beta_schedule="scaled_linear",
        clip_sample=False,
        set_alpha_to_one=False,
        steps_offset=1,
    )
    pipeline = StableDiffusionPipeline(
        vae=vae,
        text_encoder=text_encoder,
        tokenizer=tokenizer,
        unet=unet,
        scheduler=scheduler,
        safety_checker=None,
        feature_extractor=None,
        requires_safety_checker=False,
    )
    target = Path(path)
    pipeline.save_pretrained(target, safe_serialization=True)
    return target


def ensure_tiny_pipeline(
    cache_dir: str | os.PathLike[str], words: Iterable[str] = BASE_WORDS
) -> tuple[Path, str]:
    """The tiny pipeline's folder under `cache_dir` (built once) and its model name."""
    word_list = tiny_words(words)
    name = tiny_model_name(word_list)
    target = Path(cache_dir) / name
    _build_once(target, "model_index.json", lambda scratch: build_tiny_pipeline(scratch, word_list))
    return target, name


def _build_once(target: Path, marker: str, build: Callable[[Path], object]) -> None:
    """Build into a scratch folder beside `target`, then rename: a killed build leaves only a
    `.tmp-*` folder, never a half-written model under the final name."""
    if (target / marker).exists():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = target.parent / f".tmp-{target.name}-{uuid.uuid4().hex[:8]}"
    try:
        build(scratch)
        try:
            os.replace(scratch, target)
        except OSError:
            if not (target / marker).exists():  # not a concurrent builder that won
                raise
    finally:
        if scratch.exists():
            shutil.rmtree(scratch, ignore_errors=True)


# ---------------------------------------------------------------------- tiny IP-Adapter
# Bump when the saved adapter changes: its name is recorded in `generations.ip_adapter`
# and enters the generation_id of every request conditioned through it.
TINY_IP_ADAPTER_VERSION = "1"
TINY_IP_ADAPTER_SUBFOLDER = "models"
TINY_IP_ADAPTER_WEIGHT = "ip-adapter_tiny.safetensors"
TINY_IMAGE_ENCODER = "image_encoder"
TINY_IMAGE_EMBED_DIM = 32


def tiny_ip_adapter_name() -> str:
    return f"tiny-ip-adapter-{TINY_IP_ADAPTER_VERSION}"


def _ip_hidden_size(processor_name: str, block_out_channels: list[int]) -> int:
    # The rule of diffusers' `UNet2DConditionLoadersMixin._convert_ip_adapter_attn_to_diffusers`.
    if processor_name.startswith("mid_block"):
        return block_out_channels[-1]
    block_id = int(processor_name[len("up_blocks.")]) if processor_name.startswith("up_blocks") else None
    if block_id is not None:
        return list(reversed(block_out_channels))[block_id]
    return block_out_channels[int(processor_name[len("down_blocks.")])]


def build_tiny_ip_adapter(path: str | os.PathLike[str]) -> Path:
    """A tiny IP-Adapter for the tiny pipeline, in the layout of `h94/IP-Adapter`, so
    `pipe.load_ip_adapter(path, subfolder="models", weight_name="ip-adapter_tiny.safetensors")`
    loads it through diffusers' real loader:

    - `models/image_encoder/`: a `CLIPVisionModelWithProjection` (config + safetensors);
    - `models/ip-adapter_tiny.safetensors`: `image_proj.proj.{weight,bias}` and
      `image_proj.norm.{weight,bias}` (the plain IP-Adapter's image projection to 4 tokens),
      and `ip_adapter.<k>.to_{k,v}_ip.weight` for every cross-attention layer of the UNet,
      numbered 1, 3, 5, … in `unet.attn_processors` order, as the loader reads them.

    Weights are seeded random: conditioning changes the image, but it depicts nothing.
    """
    import torch
    from diffusers import UNet2DConditionModel
    from safetensors.torch import save_file
    from transformers import CLIPVisionConfig, CLIPVisionModelWithProjection

    cross = int(TINY_UNET["cross_attention_dim"])  # type: ignore[call-overload]
    blocks = [int(c) for c in TINY_UNET["block_out_channels"]]  # type: ignore[attr-defined]
    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(1)
        encoder = CLIPVisionModelWithProjection(
            CLIPVisionConfig(
                hidden_size=32,
                intermediate_size=64,
                projection_dim=TINY_IMAGE_EMBED_DIM,
                num_attention_heads=4,
                num_hidden_layers=2,
                image_size=32,
                patch_size=8,
                num_channels=3,
            )
        )
        tokens = 4  # the plain IP-Adapter projects one image embedding to 4 context tokens
        proj = torch.nn.Linear(TINY_IMAGE_EMBED_DIM, cross * tokens)
        tensors: dict[str, torch.Tensor] = {
            "image_proj.proj.weight": proj.weight.detach(),
            "image_proj.proj.bias": proj.bias.detach(),
            "image_proj.norm.weight": torch.ones(cross),
            "image_proj.norm.bias": torch.zeros(cross),
        }
        unet = UNet2DConditionModel(**TINY_UNET)  # only its attention layout is read
        key_id = 1
        for name in unet.attn_processors:  # type: ignore[attr-defined]  # a mixin property mypy does not see
            if name.endswith("attn1.processor"):  # self-attention: no image tokens
                continue
            hidden = _ip_hidden_size(name, blocks)
            for kind in ("to_k_ip", "to_v_ip"):
                layer = torch.nn.Linear(cross, hidden, bias=False)
                tensors[f"ip_adapter.{key_id}.{kind}.weight"] = layer.weight.detach()
            key_id += 2
    finally:
        torch.random.set_rng_state(state)
    target = Path(path) / TINY_IP_ADAPTER_SUBFOLDER
    encoder.save_pretrained(target / TINY_IMAGE_ENCODER, safe_serialization=True)
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(target / TINY_IP_ADAPTER_WEIGHT))
    return Path(path)


def ensure_tiny_ip_adapter(cache_dir: str | os.PathLike[str]) -> tuple[Path, str]:
    """The tiny IP-Adapter's folder under `cache_dir` (built once) and its name."""
    name = tiny_ip_adapter_name()
    target = Path(cache_dir) / name
    _build_once(target, f"{TINY_IP_ADAPTER_SUBFOLDER}/{TINY_IP_ADAPTER_WEIGHT}", build_tiny_ip_adapter)
    return target, name
