"""Start-up time of `lookbench-live extract`, `--help` and `taxonomy` against a floor.

    .venv/bin/python bench/startup_bench.py [--runs 15] [--baseline /work/main/.venv/bin/python]

Each command runs as a fresh process (`python -m lookbench_live.cli …`, as the console script
does), interleaved with the floor `python -c "import lxml, extruct"` (what extraction needs) and
`python -c pass`, so a busy machine slows all of them alike. Reported: the median and the
minimum wall time of each, the median CPU time (user + system, which a busy machine inflates
much less than the wall time), and `extract`'s median excess over the floor (the issue's
budget: 0.15 s; `--help` and `taxonomy` under 0.3 s), and the load average before and after.
`--baseline PYTHON` adds the three commands run by another interpreter (another checkout's
venv, whose editable install imports that checkout), interleaved in the same runs: a before and
after under the same load. The extracted page is a real corpus page.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "tests" / "corpus" / "payloads" / "page_weekday-sale.html"
CLI = [sys.executable, "-m", "lookbench_live.cli"]
COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "import lxml, extruct": [sys.executable, "-c", "import lxml, extruct"],
    "extract PAGE": [*CLI, "extract", str(PAGE), "--url", "https://www.weekday.com/p"],
    "--help": [*CLI, "--help"],
    "taxonomy": [*CLI, "taxonomy"],
}


def wall(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + system of the child, from wait4). On a loaded machine
    the wall time grows with the wait for a core; the CPU time much less, so it is shown too."""
    start = time.perf_counter()
    child = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise subprocess.CalledProcessError(child.returncode, command)
    return time.perf_counter() - start, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--baseline", metavar="PYTHON", help="also run the commands with this interpreter")
    args = parser.parse_args()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "DO_NOT_TRACK": "1"}
    commands = dict(COMMANDS)
    if args.baseline:
        for name in ("extract PAGE", "--help", "taxonomy"):
            commands[f"{name} [baseline]"] = [args.baseline, *COMMANDS[name][1:]]
    load_before = os.getloadavg()
    for command in commands.values():  # warm the file cache and the bytecode
        wall(command, env)
    times: dict[str, list[float]] = {name: [] for name in commands}
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.runs):
        for name, command in commands.items():
            seconds, used = wall(command, env)
            times[name].append(seconds)
            cpu[name].append(used)
    print(
        f"{'command':28s} {'median s':>9s} {'min s':>7s} {'CPU median s':>13s}   ({args.runs} runs, interleaved)"
    )
    for name, values in times.items():
        print(
            f"{name:28s} {statistics.median(values):9.3f} {min(values):7.3f} {statistics.median(cpu[name]):13.3f}"
        )
    floor = statistics.median(times["import lxml, extruct"])
    excess = [e - f for e, f in zip(times["extract PAGE"], times["import lxml, extruct"], strict=True)]
    print(
        f"extract over the floor: median {statistics.median(excess):+.3f} s (budget +0.150 s; floor {floor:.3f} s)"
    )
    load_after = os.getloadavg()
    print(f"load average (1, 5, 15 min): before {_load(load_before)}, after {_load(load_after)}")


def _load(load: tuple[float, float, float]) -> str:
    return " / ".join(f"{x:.1f}" for x in load)


if __name__ == "__main__":
    main()
