"""A year at LookBench scale (issue 28): month 12's refresh on a lake holding eleven months of
history against month 2's on a lake holding one, at the same rate, in one run.

    .venv/bin/python bench/year_bench.py [--scale 550] [--first 2026-03-01] [--workdir DIR]
        [--json bench-year.json] [--port 48961]

`--scale` multiplies the living store's default 4 products a week (scale_bench's knob; 550× is
the LookBench-sized month, ≈ 72,800 images). Develop at `--scale 2`.

The lakes:
1. Month 1 (`--first`): a real refresh of a fresh lake: the sites' baselines (their first whole
   crawl), evidence, the first release. The lake is then copied.
2. Month 2 on the copy: a real refresh, measured.
3. On the original, months 2–10 of history written as a fixture does (`history.write_month`, no
   crawl): per month `--history-images` images (default 72,833 × scale / 550, the LookBench-sized
   month) as the project's records (`Product`, `ImageRecord`, `DedupDecision`, `Annotation` of the
   lake's current taxonomy, prompt version and model) with real image bytes (distinct decodable
   JPEGs, hashed with `schema.hashing`) under the living store's own site names, dated (published,
   first seen) a year before their month, so every later window sees old, dated items (they have
   no releases of their own; bench/history.py).
4. Month 11: a real refresh, so the lake knows what the store lists before month 12 (its core and
   recent drops: without it month 12 would crawl two months of drops as new).
5. Month 12: a real refresh, measured.

Measured per refresh (scale_bench.run_refresh): wall time, the largest resident set of any process
of its tree (wait4's ru_maxrss), the largest PSS sum over the live tree (psutil, each second) and
the stage it peaked in, each stage's seconds; and the disk the history takes. Not in the written
months: looks and committed releases (months 1 and 11 release; the released-image index holds
those two).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# Run as a script, bench/ is on sys.path: its siblings import as ingest_ab imports ingest_bench.
import history
from scale_bench import run_refresh

LOOKBENCH_MONTH_IMAGES = 72_833  # the 550× month's images (docs/benchmarks.md)


def month_starts(first: dt.date, count: int) -> list[dt.date]:
    out, year, month = [], first.year, first.month
    for _ in range(count):
        out.append(dt.date(year, month, 1))
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    return out


def disk_mb(home: Path) -> float:
    return round(sum(p.stat().st_size for p in home.rglob("*") if p.is_file()) / 2**20, 1)


def refresh(cli: str, home: Path, config: Path, as_of: dt.date, port: int, log: Path) -> dict[str, Any]:
    result = run_refresh(cli, str(home), str(config), as_of.isoformat(), port, log)
    result["as_of"] = as_of.isoformat()
    if result["exit"] != 0:
        result["tail"] = log.read_text(errors="replace")[-1500:]
        print(json.dumps(result), flush=True)
        raise SystemExit(f"refresh {as_of} failed: see {log}")
    print(json.dumps(result), flush=True)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=int, default=550, help="multiple of --base-per-week")
    parser.add_argument("--base-per-week", type=int, default=4)
    # 2026-03-01: the measured months' windows are equally long, March 2026 for month 2 and January
    # 2027 for month 12 (31 days each; from 2026-02-01 month 2's window was February's 28 days), and
    # the store is in its steady state at both: its weekly drops start on 2026-01-19 and stay
    # listed eight weeks, its monthly looks start in February, so month 2's crawl lists eight
    # weeks of drops as month 12's does (from 2026-01-01, month 2 would bring two drops).
    parser.add_argument("--first", default="2026-03-01", help="month 1's as-of (the 1st of a month)")
    parser.add_argument("--history-images", type=int, default=None, help="images per written month")
    parser.add_argument(
        "--workers", type=int, default=2, help="processes drawing the written months' pictures"
    )
    parser.add_argument("--conditioned-share", type=float, default=0.05)
    parser.add_argument("--port", type=int, default=48961)
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--json", default="bench-year.json")
    args = parser.parse_args()
    cli = str(Path(sys.executable).parent / "lookbench-live")
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="year-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    per_week = args.base_per_week * args.scale
    per_month = args.history_images or round(LOOKBENCH_MONTH_IMAGES * args.scale / 550)
    config = workdir / "year.toml"
    config.write_text(
        f"[crawl]\nsample_products_per_week = {per_week}\n\n"
        f"[generation]\nconditioned_share = {args.conditioned_share}\n\n"
        # Month 11's window reaches back to month 1 (the written months 2-10 commit no release),
        # so its release holds ten months of arrivals; under the default content check (25% of
        # the previous release's queries) month 12, a normal month, would be held back unmeasured.
        "[release]\nmin_share_of_previous = 0.0\n",
        encoding="utf-8",
    )
    months = month_starts(dt.date.fromisoformat(args.first), 12)
    # A month's window runs from the previous refresh's as-of day to its own (both ends + 1 day).
    windows = {"month2": (months[1] - months[0]).days, "month12": (months[11] - months[10]).days}
    year, two = workdir / "year", workdir / "two"
    for home in (year, two):
        shutil.rmtree(home, ignore_errors=True)
    load = os.getloadavg()
    out: dict[str, Any] = {
        "scale": args.scale,
        "per_week": per_week,
        "history_images_per_month": per_month,
        "load_before": [round(x, 2) for x in load],
        "cpus": os.cpu_count(),
        "window_days": windows,
    }
    print(json.dumps(out), flush=True)

    def save() -> None:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")

    out["month1"] = refresh(cli, year, config, months[0], args.port, workdir / "m01.log")
    started = time.perf_counter()
    shutil.copytree(year, two, symlinks=True)
    out["copy_s"] = round(time.perf_counter() - started, 1)
    out["one_month_disk_mb"] = disk_mb(two)
    out["one_month_images"] = history.count_images(two)
    out["month2"] = refresh(cli, two, config, months[1], args.port, workdir / "m02-on-one-month.log")
    # What the month brought (image rows: its crawl's and its generations'): the two months compare
    # per month only when they bring about as much.
    out["month2"]["new_images"] = history.count_images(two) - out["one_month_images"]
    out["month2"]["window_days"] = windows["month2"]
    save()
    written = []
    for index, as_of in enumerate(months[1:10], start=2):
        started = time.perf_counter()
        # Dated a year earlier: old items to every window (bench/history.py says why).
        dated = dt.date(as_of.year - 1, as_of.month, 1)
        counts = history.write_month(year, index, dated, per_month, workers=args.workers)
        counts["seconds"] = round(time.perf_counter() - started, 1)
        written.append(counts)
        print(json.dumps(counts), flush=True)
    out["history_written"] = written
    out["month11"] = refresh(cli, year, config, months[10], args.port, workdir / "m11.log")
    out["history_disk_mb"] = disk_mb(year)
    out["history_images"] = history.count_images(year)
    save()
    out["month12"] = refresh(cli, year, config, months[11], args.port, workdir / "m12.log")
    out["month12"]["new_images"] = history.count_images(year) - out["history_images"]
    out["month12"]["window_days"] = windows["month12"]
    m2, m12 = out["month2"], out["month12"]
    images = m12["new_images"] / max(1, m2["new_images"])
    out["ratio"] = {
        # The months bring about as many images, not exactly as many: the wall ratio over the
        # images ratio is month 12's time per image over month 2's.
        "images": round(images, 2),
        "wall_per_image": round(m12["wall_s"] / m2["wall_s"] / images, 2),
        "wall": round(m12["wall_s"] / m2["wall_s"], 2),
        "peak_pss_tree": round(m12["peak_pss_tree_mb"] / m2["peak_pss_tree_mb"], 2),
        "peak_rss_max_process": round(m12["peak_rss_max_process_mb"] / m2["peak_rss_max_process_mb"], 2),
    }
    save()
    print()
    stages = list(dict.fromkeys([*m2["stages_s"], *m12["stages_s"]]))
    head = ["month", "window days", "history (images)", "new images", "wall s", "wall ms per new image", "peak PSS tree MB", "peak RSS 1 proc MB", "startup s",
            *[f"{s} s" for s in stages]]  # fmt: skip
    print("| " + " | ".join(head) + " |")
    print("|" + "---:|" * len(head))
    for name, r, hist in (
        ("2", m2, out["one_month_images"]),
        ("12", m12, out["history_images"]),
    ):
        per_image = round(1000 * r["wall_s"] / max(1, r["new_images"]), 1)
        cells = [name, r["window_days"], hist, r["new_images"], r["wall_s"], per_image, r["peak_pss_tree_mb"], r["peak_rss_max_process_mb"], r["startup_s"],
                 *[r["stages_s"].get(s, "–") for s in stages]]  # fmt: skip
        print("| " + " | ".join(str(c) for c in cells) + " |")
    print(
        json.dumps(
            {
                "ratio_12_over_2": out["ratio"],
                "history_disk_mb": out["history_disk_mb"],
                "one_month_disk_mb": out["one_month_disk_mb"],
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
