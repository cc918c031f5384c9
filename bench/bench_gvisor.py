"""gVisor (``runsc do``) against bubblewrap for one bot: start-up and per-decision cost, in one run.

    python bench/bench_gvisor.py [rounds] [lines]

One sample = start an echo bot in the sandbox, wait for its first line (start-up), then send
``lines`` request-sized lines one at a time and wait for each answer (per decision), then close.
The bubblewrap sample uses the arena's own command line (``bwrap.bwrap_argv``, with the
system-call filter and the covered /proc) run by plain ``subprocess`` as the referee's user, so
both sides skip the arena's uid, cgroup and kill machinery alike; ``arena`` adds those on top
(bench_botstart.py measures them). Modes alternate round by round, so drift on a shared machine
hits them alike. Prints mean and median ms per start and µs per decision.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from arena.bots import seccomp  # noqa: E402
from arena.bots.bwrap import bwrap_argv  # noqa: E402
from arena.bots.spawn import BASE_ENV, HOST_ENV  # noqa: E402

ECHO = ("import sys\nprint('ready', flush=True)\n"
        "for line in sys.stdin:\n    sys.stdout.write(line)\n    sys.stdout.flush()\n")
REQUEST = '{"type":"request","id":7,"view":{"hand":["4H","5C","AH"]},"actions":[' + ",".join(
    f'{{"id":{i},"kind":"play","cards":["4H"],"from":"hand"}}' for i in range(12)) + "]}\n"


def sample(argv: list[str], lines: int, pass_fds=()) -> tuple[float, float]:
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         env=HOST_ENV, pass_fds=pass_fds, text=True, bufsize=1)
    assert p.stdout.readline().strip() == "ready"
    started = time.perf_counter()
    for _ in range(lines):
        p.stdin.write(REQUEST)
        p.stdin.flush()
        p.stdout.readline()
    done = time.perf_counter()
    p.stdin.close()
    p.wait(timeout=30)
    return (started - t0) * 1000, (done - started) / lines * 1e6


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    lines = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    runsc, bwrap = shutil.which("runsc"), shutil.which("bwrap")
    if not runsc or not bwrap:
        sys.exit(f"needs runsc and bwrap (found runsc={runsc}, bwrap={bwrap})")
    bot_dir = Path(os.path.realpath(Path(__file__).parent / "_gvisor_echo"))
    bot_dir.mkdir(exist_ok=True)
    (bot_dir / "echo.py").write_text(ECHO)
    python = "/usr/bin/python3"
    results: dict[str, list[tuple[float, float]]] = {"bubblewrap (arena's argv)": [], "gVisor runsc do": []}
    try:
        for _ in range(rounds):
            fd = seccomp.memfd()
            try:
                argv = bwrap_argv(bwrap, [python, "echo.py"], bot_dir, tmp_bytes=64 << 20,
                                  env={**BASE_ENV, "HOME": "/tmp"}, seccomp_fd=fd)
                results["bubblewrap (arena's argv)"].append(sample(argv, lines, pass_fds=(fd,)))
            finally:
                os.close(fd)
            argv = [runsc, "--network=none", "do", "--cwd", str(bot_dir),
                    python, "echo.py"]
            results["gVisor runsc do"].append(sample(argv, lines))
    finally:
        shutil.rmtree(bot_dir, ignore_errors=True)
    print(f"{rounds} rounds, {lines} decisions each; load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"{'mode':28} {'start mean ms':>14} {'median':>8} {'decision mean µs':>17} {'median':>8}")
    for mode, got in results.items():
        starts, per = [g[0] for g in got], [g[1] for g in got]
        print(f"{mode:28} {statistics.mean(starts):14.1f} {statistics.median(starts):8.1f} "
              f"{statistics.mean(per):17.1f} {statistics.median(per):8.1f}")


if __name__ == "__main__":
    main()
