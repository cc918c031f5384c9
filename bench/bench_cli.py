"""How quickly the command line answers, against the interpreter's own start, in one run.

    python bench/bench_cli.py [--runs 21] [--cpu 0]

Runs ``python -c pass``, ``arena --version`` and ``arena --help`` interleaved (so load that
comes and goes hits all three alike), each as a fresh process, and prints the median wall time
of each and its ratio to ``python -c pass``. The targets: ``--version`` within 4x, ``--help``
within 6x. ``--cpu N`` pins every run to one core with taskset. The arena command is the
console script beside this Python (the one ``pip install`` wrote).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--cpu", type=int, default=None, help="pin every run to this core")
    args = ap.parse_args()
    arena = Path(sys.executable).with_name("arena")
    if not arena.exists():
        sys.exit(f"no console script at {arena}: install the package into this environment first")
    pin = ["taskset", "-c", str(args.cpu)] if args.cpu is not None and shutil.which("taskset") else []
    cases = {"python -c pass": [sys.executable, "-c", "pass"],
             "arena --version": [str(arena), "--version"],
             "arena --help": [str(arena), "--help"]}
    times: dict[str, list[float]] = {name: [] for name in cases}
    for name, cmd in cases.items():  # warm the file cache once
        timed(pin + cmd)
    for _ in range(args.runs):
        for name, cmd in cases.items():
            times[name].append(timed(pin + cmd))
    base = statistics.median(times["python -c pass"])
    load = os.getloadavg()[0]
    print(f"{args.runs} interleaved runs each{' pinned to cpu ' + str(args.cpu) if pin else ''}; "
          f"load average {load:.2f}")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"  {name:18} median {1000 * med:7.1f} ms  (min {1000 * min(ts):6.1f})  {med / base:5.2f}x python -c pass")


if __name__ == "__main__":
    main()
