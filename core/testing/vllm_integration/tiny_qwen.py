"""Build a tiny, randomly initialised Qwen2.5-VL checkpoint that a real vLLM can serve.

No weights are downloaded: the config, a byte-level BPE tokenizer trained here with
`tokenizers`, Qwen2-VL's chat template, the image-processor config and random weights
are written into one folder (about 5 MB, a few seconds on 2 cores). The model answers
nonsense, but it exercises everything the annotator relies on in vLLM: the chat
template with image placeholders, the Qwen2-VL image processor, the vision tower,
M-RoPE, structured output (xgrammar over this tokenizer) and the OpenAI server.

What a caller may rely on:
- `build_tiny_qwen25_vl(folder)` writes a complete checkpoint and returns a `TinyQwen`
  describing it; calling it again on a finished folder is a no-op (a marker file is
  written last, so a half-written folder is rebuilt, not reused).
- The special tokens have Qwen's relative order, and the config's `image_token_id`,
  `video_token_id`, `vision_start_token_id`, `vision_end_token_id`, `bos_token_id`,
  `eos_token_id` name their real ids in this tokenizer.
- An image is resized by the processor to at most `max_pixels` (default 112×112), i.e. at
  most 16 image tokens, so prompts stay short on CPU.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["QWEN2_VL_CHAT_TEMPLATE", "QWEN_SPECIAL_TOKENS", "TinyQwen", "build_tiny_qwen25_vl"]

# Qwen2/2.5-VL's added tokens in their published order (ids 151643..151656 in the real
# vocabulary). Only the order matters here: vLLM reads the ids from the config.
QWEN_SPECIAL_TOKENS: tuple[str, ...] = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
)

# Qwen2-VL's chat template: each image part becomes <|vision_start|><|image_pad|><|vision_end|>,
# which vLLM's Qwen2-VL processor expands to one <|image_pad|> per merged patch.
QWEN2_VL_CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}"
    "{% if add_vision_id %}Picture {{ image_count.value }}: {% endif %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}"
    "{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}"
    "<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

# Text the BPE merges are learnt from: prompt words and JSON punctuation, so that prompts
# and answers take fewer tokens. Any byte still encodes (byte-level alphabet).
_BASE_CORPUS = (
    'You are a fashion product annotator. Answer with JSON only: {"category": "dress", '
    '"main_attribute": "color", "attributes": {"color": "red", "sleeve_length": "long", '
    '"neckline": "v_neck", "length": "midi", "pattern": "solid", "material": "cotton", '
    '"fit": "regular", "closure": "zip", "not_visible": "not_visible"}}. '
    "Category attributes values image crop bbox_2d grounding garment top skirt trousers "
    "shirt jacket coat shoes bag hat sweater jeans shorts blouse pattern floral striped "
    "plain black white blue green yellow pink purple brown grey beige orange"
)

_MARKER = "lookbench-tiny-qwen.json"


@dataclass(frozen=True, slots=True)
class TinyQwen:
    """A built checkpoint: where it is and the facts a test needs about it."""

    path: Path
    vocab_size: int
    image_token_id: int
    max_position_embeddings: int
    max_pixels: int


def _train_tokenizer(vocab_size: int, extra_texts: Iterable[str]) -> object:
    """A byte-level BPE with Qwen's special tokens appended in Qwen's order."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    trained_size = vocab_size - len(QWEN_SPECIAL_TOKENS)
    raw = Tokenizer(models.BPE())
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=trained_size,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    raw.train_from_iterator([_BASE_CORPUS, *extra_texts], trainer=trainer)
    # Added on the raw tokenizer, before wrapping: their ids then follow the trained vocab
    # in Qwen's order, which the config below repeats.
    raw.add_special_tokens(list(QWEN_SPECIAL_TOKENS))
    return raw


def build_tiny_qwen25_vl(
    folder: str | Path,
    *,
    vocab_size: int = 1024,
    max_position_embeddings: int = 8192,
    min_pixels: int = 56 * 56,
    max_pixels: int = 112 * 112,
    seed: int = 0,
    extra_corpus: Iterable[str] = (),
) -> TinyQwen:
    """Write a tiny random Qwen2.5-VL checkpoint (config, weights, tokenizer, processor) to `folder`.

    `vocab_size` counts the 14 special tokens; `extra_corpus` adds text to learn BPE merges
    from (e.g. the taxonomy's schema), which only shortens prompts. Deterministic for a seed.
    """
    import torch
    from transformers import PreTrainedTokenizerFast, Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    out = Path(folder)
    marker = out / _MARKER
    if marker.exists():
        facts = json.loads(marker.read_text())
        return TinyQwen(path=out, **facts)
    if vocab_size < 256 + len(QWEN_SPECIAL_TOKENS) + 1:
        raise ValueError(f"vocab_size={vocab_size} is below the byte alphabet plus Qwen's special tokens")
    out.mkdir(parents=True, exist_ok=True)

    raw = _train_tokenizer(vocab_size, extra_corpus)
    ids = {tok: raw.token_to_id(tok) for tok in QWEN_SPECIAL_TOKENS}
    actual_vocab = raw.get_vocab_size()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=raw,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
        model_max_length=max_position_embeddings,
    )
    tokenizer.chat_template = QWEN2_VL_CHAT_TEMPLATE
    tokenizer.save_pretrained(out)
    # transformers writes the template to chat_template.jinja; older readers look in
    # tokenizer_config.json, so it goes there too, with the class name Qwen's processor expects.
    config_path = out / "tokenizer_config.json"
    tok_cfg = json.loads(config_path.read_text())
    tok_cfg["chat_template"] = QWEN2_VL_CHAT_TEMPLATE
    tok_cfg["tokenizer_class"] = "Qwen2Tokenizer"
    tok_cfg["processor_class"] = "Qwen2_5_VLProcessor"
    config_path.write_text(json.dumps(tok_cfg, indent=2))

    head_dim = 64  # vLLM's CPU attention refuses 16; 64 works
    config = Qwen2_5_VLConfig(
        text_config={
            "vocab_size": actual_vocab,
            "hidden_size": 2 * head_dim,
            "intermediate_size": 256,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 2,
            "max_position_embeddings": max_position_embeddings,
            # M-RoPE sections (temporal, height, width) must sum to head_dim / 2.
            "rope_parameters": {"rope_type": "default", "mrope_section": [8, 12, 12], "rope_theta": 1e6},
            "bos_token_id": ids["<|endoftext|>"],
            "eos_token_id": ids["<|im_end|>"],
            "pad_token_id": ids["<|endoftext|>"],
            "tie_word_embeddings": False,
        },
        vision_config={
            "depth": 2,
            "hidden_size": 128,
            "intermediate_size": 256,
            "num_heads": 2,
            "patch_size": 14,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "window_size": 112,
            "out_hidden_size": 2 * head_dim,  # projects into the text hidden size
            "fullatt_block_indexes": [1],
            "tokens_per_second": 2,
        },
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
        tie_word_embeddings=False,
    )
    config.architectures = ["Qwen2_5_VLForConditionalGeneration"]
    torch.manual_seed(seed)
    model = Qwen2_5_VLForConditionalGeneration(config).to(torch.float32).eval()
    model.save_pretrained(out, safe_serialization=True)

    (out / "generation_config.json").write_text(
        json.dumps(
            {
                "bos_token_id": ids["<|endoftext|>"],
                "eos_token_id": [ids["<|im_end|>"], ids["<|endoftext|>"]],
                "pad_token_id": ids["<|endoftext|>"],
                "do_sample": False,
            },
            indent=2,
        )
    )
    mean, std = [0.48145466, 0.4578275, 0.40821073], [0.26862954, 0.26130258, 0.27577711]
    (out / "preprocessor_config.json").write_text(
        json.dumps(
            {
                "image_processor_type": "Qwen2VLImageProcessor",
                "processor_class": "Qwen2_5_VLProcessor",
                "min_pixels": min_pixels,
                "max_pixels": max_pixels,
                "size": {"shortest_edge": min_pixels, "longest_edge": max_pixels},
                "patch_size": 14,
                "temporal_patch_size": 2,
                "merge_size": 2,
                "image_mean": mean,
                "image_std": std,
                "do_convert_rgb": True,
                "do_normalize": True,
                "do_rescale": True,
                "do_resize": True,
                "resample": 3,
                "rescale_factor": 1 / 255,
            },
            indent=2,
        )
    )
    facts = {
        "vocab_size": actual_vocab,
        "image_token_id": ids["<|image_pad|>"],
        "max_position_embeddings": max_position_embeddings,
        "max_pixels": max_pixels,
    }
    # Written last: its presence means the folder is complete.
    marker.write_text(json.dumps(facts, indent=2))
    return TinyQwen(path=out, **facts)
