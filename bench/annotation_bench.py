"""Annotation client speed and prompt cost.

    .venv/bin/python bench/annotation_bench.py [--requests 3000] [--concurrency 64]

1. Sustained requests/s of the annotator's client (`ChatEndpoint`: openai.AsyncOpenAI with
   our retry/budget/semaphore layer) against the zero-latency loopback server running in
   its own process (the 2 cores are shared: one for the server, one for the client). Peer
   in the same run: a bare `httpx.AsyncClient` posting the same JSON bodies (the floor of
   any Python HTTP client) — the ratio says what the openai client and our layer cost.
2. Tokens per image for the prompt design: the system prompt and the answer counted with
   the 4-characters-per-token estimate, image tokens by Qwen2.5-VL's rule (one per 28×28
   pixels of the resized image).
3. Images per hour on 4×H100 for the 72B model, estimated from vLLM's published recipe
   figure (docs/benchmarks.md states the arithmetic).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.request

import httpx
from PIL import Image, ImageDraw

from lookbench_live.annotation import prompts
from lookbench_live.annotation.endpoint import ChatEndpoint
from lookbench_live.annotation.images import prepare
from lookbench_live.schema.taxonomy import default_taxonomy
from lookbench_live.testing.loopback_server import LoopbackState, build_answer, free_port

# vLLM recipe for Qwen2.5-VL-72B, BF16, TP4 on 4×A100-80GB (shared/anchors.md).
RECIPE_REQ_S = 3.83
RECIPE_OUT_TOK_S = 437.0
H100_OVER_A100 = 3.35 / 2.04  # HBM bandwidth ratio: decoding is memory-bound


def photo(size: tuple[int, int]) -> Image.Image:
    image = Image.new("RGB", size, (200, 190, 180))
    draw = ImageDraw.Draw(image)
    for i in range(0, size[0], 40):
        draw.rectangle((i, 0, i + 20, size[1]), fill=(30 + i % 200, 60, 90))
    return image


def start_server(port: int) -> subprocess.Popen:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "lookbench_live.testing.loopback_server",
            "--port",
            str(port),
            "--model",
            "bench",
        ],
        env=dict(os.environ, HF_HUB_OFFLINE="1"),
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1).read()
            return process
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError("loopback server did not start")


async def run_client(
    base_url: str, messages: list, schema: dict, requests: int, concurrency: int
) -> tuple[float, float]:
    endpoint = ChatEndpoint(
        base_url=base_url, model="bench", api_key=None, timeout=30, max_retries=2, concurrency=concurrency
    )
    await endpoint.complete(
        messages, schema_name="dress", schema=schema, max_tokens=1024, request_id="warm||a"
    )
    started, cpu = time.perf_counter(), time.process_time()

    async def one(i: int) -> None:
        await endpoint.complete(
            messages, schema_name="dress", schema=schema, max_tokens=1024, request_id=f"{i}||a"
        )

    # Bounded in-flight tasks (the annotator's workers do the same).
    queue = iter(range(requests))

    async def worker() -> None:
        for i in queue:
            await one(i)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    await endpoint.close()
    return requests / elapsed, cpu * 1000 / requests


async def run_httpx(base_url: str, body: dict, requests: int, concurrency: int) -> tuple[float, float]:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=base_url, limits=limits, timeout=30) as client:
        await client.post("/chat/completions", json=body)
        started, cpu = time.perf_counter(), time.process_time()
        queue = iter(range(requests))

        async def worker() -> None:
            for _ in queue:
                response = await client.post("/chat/completions", json=body)
                json.loads(response.content)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return requests / (time.perf_counter() - started), (time.process_time() - cpu) * 1000 / requests


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--image-side", type=int, default=224, help="side of the bench image (payload size)")
    args = parser.parse_args()
    taxonomy = default_taxonomy()
    schema = taxonomy.json_schema("dress")

    # --- 1. client throughput
    small = prepare(
        photo((args.image_side, args.image_side)), max_pixels=1024 * 28 * 28, max_payload_bytes=8 << 20
    )
    messages = prompts.attributes_messages(taxonomy, "dress", small.data_url)
    body = {
        "model": "bench",
        "messages": messages,
        "response_format": {"type": "json_schema", "json_schema": {"name": "dress", "schema": schema}},
        "temperature": 0,
        "max_tokens": 1024,
    }
    port = free_port()
    server = start_server(port)
    try:
        base = f"http://127.0.0.1:{port}/v1"
        ours = asyncio.run(run_client(base, messages, schema, args.requests, args.concurrency))
        bare = asyncio.run(run_httpx(base, body, args.requests, args.concurrency))
    finally:
        server.terminate()
        server.wait(timeout=10)
    payload = len(json.dumps(body))

    # --- 2. tokens per image for the prompt design
    full = prepare(photo((800, 1000)), max_pixels=1024 * 28 * 28, max_payload_bytes=8 << 20)
    image_tokens = full.sent_width * full.sent_height // (28 * 28)
    system_tokens = len(prompts.attributes_system(taxonomy)) // 4
    user_tokens = len(messages[1]["content"][0]["text"]) // 4
    answer, _ = build_answer(body, LoopbackState(), "x", "x", None)
    output_tokens = len(answer) // 4
    grounding_system_tokens = len(prompts.grounding_system(taxonomy)) // 4

    # --- 3. images/hour on 4×H100 (estimate)
    out_tok_s = RECIPE_OUT_TOK_S * H100_OVER_A100
    images_per_hour = out_tok_s / output_tokens * 3600

    report = {
        "command": " ".join(["python", *sys.argv]),
        "load_average_1min_at_end": round(os.getloadavg()[0], 2),
        "requests": args.requests,
        "concurrency": args.concurrency,
        "request_body_bytes": payload,
        "annotator_client_req_per_s": round(ours[0], 1),
        "bare_httpx_req_per_s": round(bare[0], 1),
        "ratio_ours_over_bare_httpx": round(ours[0] / bare[0], 2),
        # CPU time of the client process per request: robust to other load on the machine.
        "annotator_client_cpu_ms_per_request": round(ours[1], 3),
        "bare_httpx_cpu_ms_per_request": round(bare[1], 3),
        "annotator_client_ceiling_req_per_s_per_core": round(1000 / ours[1]),
        "bare_httpx_ceiling_req_per_s_per_core": round(1000 / bare[1]),
        "tokens_per_image": {
            "system_prompt_shared_prefix": system_tokens,
            "user_text": user_tokens,
            "image_800x1000_at_max_pixels_802816": image_tokens,
            "output_attributes_json_dress": output_tokens,
            "grounding_system_prompt": grounding_system_tokens,
        },
        "estimate_4xH100_72B": {
            "output_tok_per_s": round(out_tok_s),
            "images_per_hour_output_bound": round(images_per_hour),
            "basis": f"recipe {RECIPE_OUT_TOK_S} output tok/s on 4xA100 x HBM ratio {H100_OVER_A100:.2f}",
        },
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
