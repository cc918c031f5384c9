"""The gVisor mode (``runsc run`` on the arena's OCI bundle) against bubblewrap for one bot:
start-up and per-decision cost, both through the arena's own start path.

    python bench/bench_gvisor.py [rounds] [lines]

One sample = ``start_bot`` an echo bot in the mode (private uid, cgroup, limits, as a tournament
starts it), wait for its first line (start-up), send ``lines`` request-sized lines one at a time
and wait for each answer (per decision), then close (kill the tree, reap, clean up; the close is
timed apart). Modes alternate round by round, so drift on a shared machine hits them alike.
"bubblewrap, strangers" is a bubblewrap seat in the small system view strangers' seats get
(``SystemView.STRANGER``). Prints mean and median ms per start and per close, and µs per decision. Needs a root referee;
a mode that cannot run here is reported with its reason and left out.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from arena.bots.containment import Containment  # noqa: E402
from arena.bots.filesystem import SystemView  # noqa: E402
from arena.bots.probes import gvisor_problem_now, sandbox_problem_now  # noqa: E402
from arena.bots.start import start_bot  # noqa: E402

ECHO = ("import sys\nprint('ready', flush=True)\n"
        "for line in sys.stdin:\n    sys.stdout.write(line)\n    sys.stdout.flush()\n")
REQUEST = '{"type":"request","id":7,"view":{"hand":["4H","5C","AH"]},"actions":[' + ",".join(
    f'{{"id":{i},"kind":"play","cards":["4H"],"from":"hand"}}' for i in range(12)) + "]}"
MODES = {"bubblewrap": {"containment": Containment.BUBBLEWRAP},
         "bubblewrap, strangers": {"containment": Containment.BUBBLEWRAP, "view": SystemView.STRANGER},
         "gVisor (runsc run)": {"containment": Containment.GVISOR}}
"""Strangers' seats outside gVisor see the small view, warmed before each start (docs/SANDBOX.md)."""


def sample(bot_dir: Path, lines: int, mode: dict) -> tuple[float, float, float]:
    t0 = time.perf_counter()
    proc = start_bot(["/usr/bin/python3", "echo.py"], bot_dir, **mode)
    with proc:
        assert proc.receive_line(60) == "ready"
        started = time.perf_counter()
        for _ in range(lines):
            proc.send_line(REQUEST)
            proc.receive_line(10)
        done = time.perf_counter()
    closed = time.perf_counter()
    return (started - t0) * 1000, (done - started) / lines * 1e6, (closed - done) * 1000


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    lines = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    problems = {"bubblewrap": sandbox_problem_now(), "bubblewrap, strangers": sandbox_problem_now(),
                "gVisor (runsc run)": gvisor_problem_now()}
    modes = {name: kw for name, kw in MODES.items() if problems[name] is None}
    for name, why in problems.items():
        if why is not None:
            print(f"{name}: left out, cannot run here: {why}")
    if not modes:
        sys.exit("no mode to measure")
    bot_dir = Path(tempfile.mkdtemp(prefix="palace-arena-bench-gvisor-"))
    bot_dir.chmod(0o755)
    (bot_dir / "echo.py").write_text(ECHO)
    (bot_dir / "echo.py").chmod(0o644)
    results: dict[str, list[tuple[float, float, float]]] = {name: [] for name in modes}

    def run() -> None:
        for _ in range(rounds):
            for name, kw in modes.items():
                results[name].append(sample(bot_dir, lines, kw))
    try:
        run()
    finally:
        shutil.rmtree(bot_dir, ignore_errors=True)
    print(f"{rounds} rounds, {lines} decisions each; load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"{'mode':22} {'start ms mean':>14} {'median':>8} {'decision µs mean':>17} {'median':>8} "
          f"{'close ms mean':>14} {'median':>8}")
    for name, got in results.items():
        starts, per, closes = ([g[i] for g in got] for i in range(3))
        print(f"{name:22} {statistics.mean(starts):14.1f} {statistics.median(starts):8.1f} "
              f"{statistics.mean(per):17.1f} {statistics.median(per):8.1f} "
              f"{statistics.mean(closes):14.1f} {statistics.median(closes):8.1f}")


if __name__ == "__main__":
    main()
