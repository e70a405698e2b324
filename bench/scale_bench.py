"""A LookBench-sized month on one machine (issue 14 §3): one refresh of a fresh lake on the
living sample store at 1×, 10× and 100× its default size, with wall time, peak RSS and the
time of each stage.

    .venv/bin/python bench/scale_bench.py [--scales 1,10,100] [--as-of 2026-12-01]
        [--base-per-week 4] [--json bench-scale.json] [--port 48951] [--keep]

Each scale runs `lookbench-live refresh --home <fresh dir> --as-of <as-of>` in its own process
with `crawl.sample_products_per_week = base × scale` (the store's size knob: weekly arrivals,
and as many monthly looks). The first refresh of a lake crawls what the store lists at the
as-of (the core, about nine weeks of drops, two months of looks), so the image count is
printed beside each run. Generation runs the tiny CPU pipeline on a small share: its fixed 8
studio items and 4 street looks, plus `--conditioned-share` (default 0.05, the embedded
default is 0.5) of the month's products redrawn image-to-image; on a real deployment it runs
on GPUs (docs/deployment.md), so its CPU seconds are reported, not optimised, here.

Stage seconds come from the refresh's own progress lines (`flows/progress.py`: one line per
step, `<stage>  <counts>  (<s> s)`; the two dedup and annotate passes are summed); "startup"
is the time before the first stage (imports, Prefect's embedded API, the store), "teardown"
what follows the last. Peak RSS: `max process` is the largest resident set of any process of
the refresh's tree (wait4's ru_maxrss, which covers reaped descendants); `tree` is the largest
sum of proportional set sizes (PSS: a page shared by n processes counts 1/n in each) over the
live tree, sampled every second with psutil (reading PSS costs the bench ~5% of a core while
Chromium runs): what the machine must hold at once, and the stage it peaked in.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil

STAGES = (
    "crawl", "ingest", "dedup", "annotate", "generate", "evidence", "stage", "check", "audit", "labels",
    "evaluate", "report", "commit", "summary",
)  # fmt: skip
# The refresh's steps in order (flows/refresh.py PIPELINE): the k-th progress line ends ORDER[k].
ORDER = (
    "crawl", "ingest", "dedup", "annotate", "generate", "dedup", "annotate", "evidence", "stage", "check",
    "audit", "labels", "evaluate", "report", "commit", "summary",
)  # fmt: skip
STAGE_LINE = re.compile(r"^(?P<name>[a-z]+)\s+.*\((?P<s>\d+(?:\.\d+)?) s\)\s*$")


class TreeSampler(threading.Thread):
    """Samples the summed RSS of a process and its descendants until stopped."""

    def __init__(self, pid: int, interval: float = 1.0):
        super().__init__(daemon=True)
        self.pid, self.interval = pid, interval
        self.peak_bytes = 0
        self.peak_stage: str | None = None
        self.stage: str | None = "crawl"
        self.stage_peaks: dict[str, int] = {}
        self._halt = threading.Event()

    def run(self) -> None:
        try:
            root = psutil.Process(self.pid)
        except psutil.NoSuchProcess:
            return
        while not self._halt.is_set():
            total = 0
            try:
                procs = [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                return
            for proc in procs:
                try:
                    # PSS: shared pages (forked workers, libraries) counted once across the tree.
                    total += proc.memory_full_info().pss
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
            stage = self.stage or "teardown"
            self.stage_peaks[stage] = max(self.stage_peaks.get(stage, 0), total)
            if total > self.peak_bytes:
                self.peak_bytes, self.peak_stage = total, stage
            self._halt.wait(self.interval)

    def stop(self) -> None:
        self._halt.set()


def run_refresh(cli: str, home: str, config: str, as_of: str, port: int, log: Path) -> dict[str, Any]:
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "DO_NOT_TRACK": "1",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    }
    command = [cli, "refresh", "--home", home, "--config", config, "--as-of", as_of, "--port", str(port)]
    stages: dict[str, float] = {}
    marks: list[tuple[str, float]] = []  # (stage, moment its line was printed)
    started = time.perf_counter()
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.PIPE, env=env)
        sampler = TreeSampler(process.pid)
        sampler.start()
        assert process.stderr is not None
        first_stage_at: float | None = None
        for raw in process.stderr:  # the progress lines arrive as each stage ends
            out.write(raw)
            out.flush()
            line = raw.decode(errors="replace").rstrip()
            # "… 1081 pages crawled  (20 s)" lines report a stage still running; only a stage's
            # last line (no ellipsis) ends it, else seconds add up and the stage order drifts.
            found = None if "…" in line else STAGE_LINE.match(line)
            if found and found["name"] in STAGES:
                name, seconds = found["name"], float(found["s"])
                now = time.perf_counter() - started
                if first_stage_at is None:
                    first_stage_at = now - seconds
                stages[name] = round(stages.get(name, 0.0) + seconds, 1)
                marks.append((name, now))
                running = len(marks)
                sampler.stage = ORDER[running] if running < len(ORDER) else "teardown"
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        sampler.stop()
        sampler.join(timeout=2)
    code = os.waitstatus_to_exitcode(status)
    last_mark = marks[-1][1] if marks else wall
    return {
        "exit": code,
        "wall_s": round(wall, 1),
        "startup_s": round(first_stage_at, 1) if first_stage_at is not None else None,
        "teardown_s": round(wall - last_mark, 1),
        "stages_s": stages,
        "peak_rss_max_process_mb": round(usage.ru_maxrss / 1024, 1),  # Linux: KiB
        "peak_pss_tree_mb": round(sampler.peak_bytes / 2**20, 1),
        "peak_pss_tree_during": sampler.peak_stage,
        # The tree's largest PSS seen while each stage ran: memory a process took stays taken, so
        # the first stage that reaches the peak is the one that grew it (teardown only keeps it).
        "peak_pss_tree_by_stage_mb": {k: round(v / 2**20, 1) for k, v in sampler.stage_peaks.items()},
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
    }


def lake_counts(home: str) -> dict[str, Any]:
    """What the month brought: images stored and rejected, products, looks, release rows."""
    from lookbench_live.warehouse.lake import Lake
    from lookbench_live.warehouse.release import committed_versions, read_manifest

    lake = Lake(home)
    statuses = lake.read("images", columns=["status"]).column("status").to_pylist()
    out: dict[str, Any] = {
        "images": len(statuses),
        "images_stored": sum(1 for s in statuses if s != "rejected"),
        "products": lake.read("products", columns=["created_at"]).num_rows,
        "looks": lake.read("looks", columns=["created_at"]).num_rows,
        "generations": lake.read("generations", columns=["created_at"]).num_rows,
    }
    versions = committed_versions(lake)
    if versions:
        rows = read_manifest(lake, versions[-1]).get("rows", {})
        out["release_rows"] = int(sum(rows.values()))
    size = 0
    for path in Path(home).rglob("*"):
        if path.is_file():
            size += path.stat().st_size
    out["lake_mb"] = round(size / 2**20, 1)
    return out


def markdown(results: list[dict[str, Any]]) -> str:
    shown = [s for s in ("startup", *STAGES, "teardown") if any(_stage(r, s) for r in results)]
    head = ["scale", "per week", "images", "release rows", "wall s", "s / 1k images", "peak PSS tree MB",
            "peak RSS 1 proc MB", *[f"{s} s" for s in shown]]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
    for r in results:
        per_k = r["wall_s"] / max(1, r.get("images", 0)) * 1000
        cells = [f"{r['scale']}×", r["per_week"], r.get("images", "–"), r.get("release_rows", "–"),
                 r["wall_s"], f"{per_k:.1f}", r["peak_pss_tree_mb"], r["peak_rss_max_process_mb"],
                 *[_stage(r, s) for s in shown]]  # fmt: skip
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def _stage(result: dict[str, Any], stage: str) -> Any:
    if stage == "startup":
        return result.get("startup_s")
    if stage == "teardown":
        return result.get("teardown_s")
    return result.get("stages_s", {}).get(stage)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scales", default="1,10,100", help="comma-separated multiples of --base-per-week")
    parser.add_argument("--base-per-week", type=int, default=4, help="the default store's weekly arrivals")
    parser.add_argument("--as-of", default="2026-12-01")
    parser.add_argument(
        "--conditioned-share",
        type=float,
        default=0.05,
        help="generation.conditioned_share: the share of the month's products the tiny pipeline redraws",
    )
    parser.add_argument("--port", type=int, default=48951)
    parser.add_argument(
        "--json", default="bench-scale.json", help="results file (rewritten after each scale)"
    )
    parser.add_argument("--workdir", default=None, help="where the lakes go (default: a temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep each scale's lake")
    args = parser.parse_args()
    cli = str(Path(sys.executable).parent / "lookbench-live")
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="scale-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()
    print(
        f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {os.cpu_count()} cpus", flush=True
    )
    results: list[dict[str, Any]] = []
    for scale in [int(s) for s in args.scales.split(",") if s.strip()]:
        per_week = args.base_per_week * scale
        home = workdir / f"home-{scale}x"
        shutil.rmtree(home, ignore_errors=True)
        config = workdir / f"scale-{scale}x.toml"
        config.write_text(
            f"[crawl]\nsample_products_per_week = {per_week}\n\n"
            f"[generation]\nconditioned_share = {args.conditioned_share}\n",
            encoding="utf-8",
        )
        log = workdir / f"refresh-{scale}x.log"
        print(f"scale {scale}× ({per_week} products a week): log {log}", flush=True)
        result: dict[str, Any] = {"scale": scale, "per_week": per_week, "as_of": args.as_of}
        result["load_before"] = round(os.getloadavg()[0], 2)
        result.update(run_refresh(cli, str(home), str(config), args.as_of, args.port, log))
        result["load_after"] = round(os.getloadavg()[0], 2)
        if result["exit"] == 0:
            result.update(lake_counts(str(home)))
        else:
            result["tail"] = log.read_text(errors="replace")[-1500:]
        results.append(result)
        print(json.dumps(result), flush=True)
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
        if not args.keep:
            shutil.rmtree(home, ignore_errors=True)
        if result["exit"] != 0:
            print(f"scale {scale}× failed; stopping", file=sys.stderr)
            break
    print()
    print(markdown(results))
    return 0 if all(r["exit"] == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
