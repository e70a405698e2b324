"""Images/s of the tiny local diffusion pipeline on CPU against batch size.

Peer, in the same run: a plain diffusers call (`pipe(prompts, generator=..., output_type="pil")`)
on the same loaded pipeline, same prompts, seeds, steps and size. Ours adds what the
stage needs per image (per-image CPU generators, NaN check, deterministic PNG bytes).
The ratio ours/plain shows that overhead; the batch-size column shows what batching buys
on CPU (on these 2-core machines: little; batching pays on GPUs).

    HF_HUB_OFFLINE=1 .venv/bin/python bench/generation_bench.py --images 16 --size 64 --steps 10 --threads 1
"""

from __future__ import annotations

import argparse
import tempfile
import time

import torch

from lookbench_live.config import GenerationSettings
from lookbench_live.generation.plan import GenerationRequest
from lookbench_live.generation.prompts import ItemSpec, load_templates
from lookbench_live.generation.runner import ImageGenerator
from lookbench_live.generation.synthesis import choose_model
from lookbench_live.generation.tiny import ensure_tiny_pipeline
from lookbench_live.schema.taxonomy import default_taxonomy


def requests(count: int, size: int, steps: int) -> list[GenerationRequest]:
    item = ItemSpec("aigen:bench", "dress", (("color", "red"),))
    return [
        GenerationRequest(
            subset="aigen_studio",
            role="gallery",
            item_ids=(item.item_id,),
            mode="text2img",
            prompt=f"a product photo of a red dress, plain white backdrop, view {n}",
            negative_prompt="blurry, lowres",
            template_version="bench",
            seed=n,
            steps=steps,
            guidance=5.0,
            width=size,
            height=size,
            scheduler="default",
            dtype="float32",
            model="bench",
            requested=(item,),
        )
        for n in range(count)
    ]


def plain(pipe, batch: list[GenerationRequest]) -> None:
    first = batch[0]
    pipe(
        [r.prompt for r in batch],
        negative_prompt=[r.negative_prompt for r in batch],
        num_inference_steps=first.steps,
        guidance_scale=first.guidance,
        height=first.height,
        width=first.width,
        generator=[torch.Generator("cpu").manual_seed(r.seed) for r in batch],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=16)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch-sizes", default="1,2,4,8")
    parser.add_argument("--repeats", type=int, default=3, help="best of N (the machines are noisy)")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    choice = choose_model(GenerationSettings(), default_taxonomy(), load_templates())
    with tempfile.TemporaryDirectory() as cache:
        started = time.perf_counter()
        path, name = ensure_tiny_pipeline(cache, choice.words)
        built = time.perf_counter() - started
        generator = ImageGenerator(str(path), device="cpu", cpu_threads=args.threads)
        started = time.perf_counter()
        pipe = generator.pipeline
        loaded = time.perf_counter() - started
        work = requests(args.images, args.size, args.steps)
        generator.generate(work[:1])  # warm-up
        print(f"model {name}: built in {built:.2f} s, loaded by path in {loaded:.2f} s")
        print(
            f"{args.images} images {args.size}x{args.size}, {args.steps} steps, {args.threads} thread(s), CPU"
        )
        print(
            "| batch | ours img/s (wall) | plain img/s (wall) | ours / plain (wall) | ours CPU ms/img | plain CPU ms/img | ours / plain (CPU) | ours vs batch 1 (wall) |"
        )
        print("|---|---|---|---|---|---|---|---|")
        base = None
        for batch_size in (int(b) for b in args.batch_sizes.split(",")):
            batches = [work[i : i + batch_size] for i in range(0, len(work), batch_size)]
            best = {"ours": (float("inf"), float("inf")), "plain": (float("inf"), float("inf"))}
            for _ in range(args.repeats):
                spent = {"ours": [0.0, 0.0], "plain": [0.0, 0.0]}
                # Interleaved batch by batch, so load swings hit both sides alike.
                for batch in batches:
                    for side in ("ours", "plain"):
                        wall, cpu = time.perf_counter(), time.process_time()
                        if side == "ours":
                            assert all(o.ok for o in generator.generate(batch))
                        else:
                            plain(pipe, batch)
                        spent[side][0] += time.perf_counter() - wall
                        spent[side][1] += time.process_time() - cpu
                for side in spent:
                    best[side] = (min(best[side][0], spent[side][0]), min(best[side][1], spent[side][1]))
            ours, peer = args.images / best["ours"][0], args.images / best["plain"][0]
            ours_cpu, peer_cpu = 1000 * best["ours"][1] / args.images, 1000 * best["plain"][1] / args.images
            base = base or ours
            print(
                f"| {batch_size} | {ours:.2f} | {peer:.2f} | {ours / peer:.2f} | {ours_cpu:.0f} | {peer_cpu:.0f} "
                f"| {ours_cpu / peer_cpu:.2f} | {ours / base:.2f} |"
            )


if __name__ == "__main__":
    main()
