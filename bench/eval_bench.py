"""Evaluation speed and memory against look-bench 0.4.0 and the matmul+topk floor.

One command, one set of random features (written once, loaded by every contender in
its own subprocess so each one's peak memory is its own):

    .venv/bin/python bench/eval_bench.py                 # 1,011 × 62,226 × 1024-d + the 1M run
    .venv/bin/python bench/eval_bench.py --skip-large    # without 10,000 × 1,000,000 × 256-d
    .venv/bin/python bench/eval_bench.py --lookbench-families all   # also its MRR, nDCG, MAP runs

Contenders on the LookBench-sized problem:
- floor: one fp32 matmul of the whole query × corpus and one `torch.topk(20)`;
- ours: `evaluation.metrics.retrieve` + `per_query_scores` — every metric family
  (coarse/fine/strict/item Recall@1,5,10,20, nDCG@1,5,10,20 with exact IDCG, MRR),
  deterministic ties, corpus in chunks;
- look-bench 0.4.0 `RankEvaluator` (Recall@K on identity labels; argsort per query per K).
The identity-label Recall@K of ours (`item_recall@K`) must equal look-bench's.

Peak memory = the subprocess's peak RSS minus its RSS once the features are loaded and
L2-normalised (look-bench normalises inside its timed call, so its figure includes that copy).
Needs look-bench installed beside torch: `pip install --no-deps look-bench==0.4.0`.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

N_Q, N_C, DIM = 1011, 62226, 1024
LARGE = (10_000, 1_000_000, 256)
N_CAT, N_GROUPS, N_VALUES = 20, 8, 4


def rss_mb() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def make_problem(n_q: int, n_c: int, dim: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Queries near 1–4 gallery items of their own identity, the rest distractors; random labels."""
    rng = np.random.default_rng(seed)
    corpus = rng.standard_normal((n_c, dim), dtype=np.float32)
    item = np.arange(n_c, dtype=np.int64)  # each corpus row its own identity by default
    q_item = np.empty(n_q, np.int64)
    queries = np.empty((n_q, dim), np.float32)
    row = 0
    for i in range(n_q):
        k = int(rng.integers(1, 5))
        rows = np.arange(row, row + k) % n_c
        item[rows] = item[rows[0]]
        q_item[i] = item[rows[0]]
        queries[i] = corpus[rows[0]] + rng.standard_normal(dim, dtype=np.float32) * 6.5
        row += k
    category = rng.integers(0, N_CAT, n_c)
    main = rng.integers(0, 3, n_c)
    attrs = rng.integers(0, N_VALUES, (n_c, N_GROUPS)).astype(np.int32)
    first = np.array([np.flatnonzero(item == q)[0] for q in q_item]) if n_q <= 20_000 else None
    q_cat = category[first] if first is not None else rng.integers(0, N_CAT, n_q)
    q_main = main[first] if first is not None else rng.integers(0, 3, n_q)
    q_attrs = (
        attrs[first] if first is not None else rng.integers(0, N_VALUES, (n_q, N_GROUPS)).astype(np.int32)
    )
    return {
        "queries": queries,
        "corpus": corpus,
        "q_item": q_item,
        "c_item": item,
        "q_cat": q_cat,
        "c_cat": category,
        "q_main": q_main,
        "c_main": main,
        "q_attrs": q_attrs,
        "c_attrs": attrs,
    }


def _codes(p: dict[str, np.ndarray], side: str):
    from lookbench_live.evaluation.metrics import LabelCodes

    cat, main, attrs, item = p[f"{side}_cat"], p[f"{side}_main"], p[f"{side}_attrs"], p[f"{side}_item"]
    fine = cat * 10 + main
    weights = N_VALUES ** np.arange(N_GROUPS)
    strict = fine * N_VALUES**N_GROUPS + (attrs.astype(np.int64) * weights).sum(axis=1)
    return LabelCodes(cat, fine, strict, item, attrs)


def run_contender(name: str, folder: str, chunk: int) -> dict:
    import torch

    p = {f.stem: np.load(f) for f in Path(folder).glob("*.npy")}
    base = rss_mb()
    out: dict = {"contender": name, "threads": torch.get_num_threads()}
    if name == "floor":
        q = torch.nn.functional.normalize(torch.from_numpy(p["queries"]), dim=1)
        c = torch.nn.functional.normalize(torch.from_numpy(p["corpus"]), dim=1)
        base = rss_mb()  # as for ours: normalised copies are input, not working memory
        start = time.perf_counter()
        sims = q @ c.T
        _, idx = torch.topk(sims, 20, dim=1)
        out["seconds"] = time.perf_counter() - start
        hits = (torch.from_numpy(p["c_item"])[idx] == torch.from_numpy(p["q_item"])[:, None]).numpy()
        out["recall"] = {k: round(float(hits[:, :k].any(1).mean() * 100), 2) for k in (1, 5, 10, 20)}
    elif name == "ours":
        from lookbench_live.evaluation.metrics import normalize, per_query_scores, retrieve

        q, c = normalize(p["queries"]), normalize(p["corpus"])
        qc, cc = _codes(p, "q"), _codes(p, "c")
        base = rss_mb()
        start = time.perf_counter()
        retrieval = retrieve(q, c, 20, corpus_chunk=chunk)
        mid = time.perf_counter()
        scores = per_query_scores(qc, cc, retrieval)
        out["seconds"] = time.perf_counter() - start
        out["retrieve_seconds"] = mid - start
        out["metrics_seconds"] = out["seconds"] - out["retrieve_seconds"]
        out["families"] = sorted(scores)
        out["recall"] = {k: round(float(scores[f"item_recall@{k}"].mean() * 100), 2) for k in (1, 5, 10, 20)}
        out["fine_recall@1"] = float(scores["fine_recall@1"].mean() * 100)
        out["ndcg@10"] = float(scores["ndcg@10"].mean() * 100)
    elif name.startswith("lookbench"):
        import logging

        logging.disable(logging.CRITICAL)
        os.environ["TQDM_DISABLE"] = "1"
        from look_bench.metrics import MAPEvaluator, MRREvaluator, NDCGEvaluator, RankEvaluator

        family = name.split(":")[1]
        cls = {"rank": RankEvaluator, "mrr": MRREvaluator, "ndcg": NDCGEvaluator, "map": MAPEvaluator}[family]
        start = time.perf_counter()
        result = cls(rank_values=[1, 5, 10, 20]).evaluate(
            torch.from_numpy(p["queries"]), p["q_item"], torch.from_numpy(p["corpus"]), p["c_item"]
        )
        out["seconds"] = time.perf_counter() - start
        if family == "rank":
            out["recall"] = {int(k.split("@")[1]): v for k, v in result.items()}
    out["peak_extra_mb"] = round(peak_mb() - base, 1)
    return out


def run_large(chunk: int) -> dict:
    """10,000 × 1,000,000 × 256-d, every metric family, corpus in chunks."""
    import torch

    from lookbench_live.evaluation.metrics import LabelCodes, normalize, per_query_scores, retrieve

    n_q, n_c, dim = LARGE
    rng = np.random.default_rng(1)
    corpus = np.empty((n_c, dim), np.float32)
    for s in range(0, n_c, 100_000):  # generated in pieces: no float64 copy of the whole corpus
        corpus[s : s + 100_000] = normalize(
            rng.standard_normal((min(100_000, n_c - s), dim), dtype=np.float32)
        )
    queries = normalize(
        corpus[rng.integers(0, n_c, n_q)] + rng.standard_normal((n_q, dim), dtype=np.float32) * 0.05
    )
    c_cat = rng.integers(0, 50, n_c)
    c_attrs = rng.integers(0, N_VALUES, (n_c, N_GROUPS)).astype(np.int32)
    q_cat = rng.integers(0, 50, n_q)
    q_attrs = rng.integers(0, N_VALUES, (n_q, N_GROUPS)).astype(np.int32)
    cc = LabelCodes(c_cat, c_cat * 3 + rng.integers(0, 3, n_c), np.arange(n_c), np.arange(n_c), c_attrs)
    qc = LabelCodes(
        q_cat, q_cat * 3 + rng.integers(0, 3, n_q), -np.ones(n_q, np.int64), np.zeros(n_q, np.int64), q_attrs
    )
    base = rss_mb()
    start = time.perf_counter()
    retrieval = retrieve(queries, corpus, 20, corpus_chunk=chunk)
    mid = time.perf_counter()
    scores = per_query_scores(qc, cc, retrieval)
    end = time.perf_counter()
    return {
        "contender": "ours-1M",
        "shape": LARGE,
        "threads": torch.get_num_threads(),
        "seconds": end - start,
        "retrieve_seconds": mid - start,
        "metrics_seconds": end - mid,
        "rss_before_mb": round(base, 1),
        "peak_rss_mb": round(peak_mb(), 1),
        "peak_extra_mb": round(peak_mb() - base, 1),
        "families": len(scores),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--skip-large", action="store_true")
    parser.add_argument("--lookbench-families", choices=["rank", "all", "none"], default="rank")
    parser.add_argument("--chunk", type=int, default=65536)
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of floor and ours (best kept)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        result = (
            run_large(args.chunk)
            if args.child == "large"
            else run_contender(args.child, args.folder, args.chunk)
        )
        print(json.dumps(result))
        return

    def child(name: str, folder: str = "") -> dict:
        cmd = [sys.executable, __file__, "--child", name, "--folder", folder, "--chunk", str(args.chunk)]
        done = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=3600)
        return json.loads(done.stdout.strip().splitlines()[-1])

    with tempfile.TemporaryDirectory() as folder:
        problem = make_problem(N_Q, N_C, DIM)
        for key, value in problem.items():
            np.save(Path(folder) / f"{key}.npy", value)
        results: dict[str, dict] = {}
        # Interleaved, best of `repeats`: on a shared machine load drifts between runs.
        runs: dict[str, list[dict]] = {"floor": [], "ours": []}
        for _ in range(args.repeats):
            for name in runs:
                runs[name].append(child(name, folder))
        for name, done in runs.items():
            results[name] = min(done, key=lambda r: r["seconds"])
            results[name]["all_seconds"] = [round(r["seconds"], 3) for r in done]
        families = {"rank": ["rank"], "all": ["rank", "mrr", "ndcg", "map"], "none": []}[
            args.lookbench_families
        ]
        for family in families:
            results[f"lookbench:{family}"] = child(f"lookbench:{family}", folder)
    if not args.skip_large:
        results["large"] = child("large")

    floor, ours = results["floor"]["seconds"], results["ours"]["seconds"]
    print(json.dumps(results, indent=2, default=str))
    print(f"\n{N_Q} × {N_C} × {DIM}-d, torch threads {results['ours']['threads']}")
    print(f"floor (matmul + topk 20): {floor:.2f} s, peak +{results['floor']['peak_extra_mb']} MB")
    print(
        f"ours, every family:       {ours:.2f} s = {ours / floor:.2f}× floor, peak +{results['ours']['peak_extra_mb']} MB "
        f"(retrieve {results['ours']['retrieve_seconds']:.2f} s, metrics {results['ours']['metrics_seconds']:.2f} s)"
    )
    lb = results.get("lookbench:rank")
    if lb:
        same = lb["recall"] == results["ours"]["recall"]
        print(
            f"look-bench RankEvaluator: {lb['seconds']:.2f} s = {lb['seconds'] / ours:.1f}× ours, peak +{lb['peak_extra_mb']} MB; "
            f"Recall@K identical: {same} ({lb['recall']} vs {results['ours']['recall']})"
        )
    if len(families) == 4:
        total = sum(results[f"lookbench:{f}"]["seconds"] for f in families)
        print(f"look-bench four families: {total:.2f} s = {total / ours:.1f}× ours")
    if "large" in results:
        large = results["large"]
        print(
            f"10,000 × 1,000,000 × 256-d: {large['seconds']:.1f} s (retrieve {large['retrieve_seconds']:.1f} s, "
            f"metrics {large['metrics_seconds']:.1f} s), peak RSS {large['peak_rss_mb']:.0f} MB "
            f"(+{large['peak_extra_mb']:.0f} MB over the loaded features)"
        )


if __name__ == "__main__":
    main()
