"""How quickly the command line answers, against the interpreter's own start, in one run.

    python bench/bench_cli.py [--runs 21] [--cpu 0] [--base OTHER/.venv/bin/python]

Runs ``python -c pass``, ``arena --version`` and ``arena --help`` interleaved (so load that
comes and goes hits all three alike), each as a fresh process, and prints the median wall time
of each and its ratio to ``python -c pass``. The targets: ``--version`` within 4x, ``--help``
within 6x. ``--cpu N`` pins every run to one core with taskset. The arena command is the
console script beside this Python (the one ``pip install`` wrote).

Then what a command pays before its work, as CPU (user + system of the process): ``arena
standings`` and ``arena tournament`` over a finished one-deal tournament (the second resumes
with nothing left to play: imports, the store, the rating fit, the table) and the web arena's
``import arena.serve.app``. With ``--base``, another checkout's environment (its Python, and the
``arena`` beside it) runs every case too, interleaved with this one's, each in its own store:
the medians side by side and their ratio.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def cpu_of(cmd: list[str], cwd: Path) -> float:
    """CPU seconds (user + system) of one run of ``cmd`` in ``cwd`` and whatever it waited for. Never in
    a checkout: ``python -c`` imports from its working directory first, whichever environment it is."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def command_cases(python: Path, folder: Path) -> dict[str, list[str]]:
    """The fixed cost of commands, for the environment of ``python``: a finished tournament in a
    store of its own (played here, once), then the commands that read it or resume it."""
    arena = str(python.with_name("arena"))
    store = str(folder / "arena.sqlite")
    tournament = [arena, "tournament", "--bot", "random", "--bot", "lowest", "--deals", "1", "--seed", "1",
                  "--store", store, "--plain"]
    subprocess.run(tournament, cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return {"arena standings": [arena, "standings", "demo", "--store", store],
            "arena tournament (done)": tournament,
            "import arena.serve.app": [str(python), "-c", "import arena.serve.app"]}


def compare_commands(runs: int, pin: list[str], base: Path | None) -> None:
    envs = {"this": Path(sys.executable)} | ({"base": base} if base else {})
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as tmp:
        cases = {}
        for env, python in envs.items():
            (Path(tmp) / env).mkdir()
            cases[env] = command_cases(python, Path(tmp) / env)
        cpu: dict[tuple[str, str], list[float]] = {}
        for _ in range(runs):
            for name in cases["this"]:
                for env in envs:
                    cpu.setdefault((name, env), []).append(cpu_of(pin + cases[env][name], Path(tmp) / env))
    print(f"\nCPU of a command before its work, median of {runs} interleaved runs; load average {os.getloadavg()[0]:.2f}")
    print(f"  {'':24} {'this ms':>9}" + (f" {'base ms':>9} {'this/base':>9}" if base else ""))
    for name in cases["this"]:
        mine = statistics.median(cpu[name, "this"])
        line = f"  {name:24} {1000 * mine:9.1f}"
        if base:
            theirs = statistics.median(cpu[name, "base"])
            line += f" {1000 * theirs:9.1f} {mine / theirs:9.2f}"
        print(line)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--cpu", type=int, default=None, help="pin every run to this core")
    ap.add_argument("--base", type=Path, default=None, help="another environment's Python (e.g. the previous "
                    "main's .venv/bin/python): its commands are measured too, interleaved")
    args = ap.parse_args()
    if args.base and not args.base.with_name("arena").exists():
        sys.exit(f"no console script beside {args.base}")
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
    compare_commands(args.runs, pin, args.base)


if __name__ == "__main__":
    main()
