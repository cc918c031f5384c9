"""Per-bot start-up cost of each containment level, and of the default one against a plain start.

    python bench/bench_botstart.py [rounds]

One sample = start a trivial Python bot, one handshake line each way, close
(kill + reap + clean up).  Modes run interleaved, round by round, so drift on a
shared machine hits them alike.  Prints mean and median ms per bot and the ratio
of means to "plain" (a bare subprocess.Popen, no limits at all).
Also the CPU each start costs (user + system of this process and of every child it reaped: the
bot, bwrap, its init), mean per bot: what a suite or a tournament starting many bots pays.
Modes the machine cannot do are reported and skipped.  The last line compares the mode
``arena`` uses by default here (arena.bots.launch.Launcher: bubblewrap where it works, else
namespaces) with the plain start; the target is under ~3x.
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from arena.bots.containment import RunAs  # noqa: E402
from arena.bots.launch import Containment, ContainmentError, Launcher  # noqa: E402
from arena.limits import Limits  # noqa: E402
from arena.bots.probes import capabilities  # noqa: E402
from arena.bots.spawn import DEFAULT_PATH  # noqa: E402
from arena.bots.start import start_bot  # noqa: E402

PY = shutil.which("python3", path=DEFAULT_PATH)
BOT = [PY, "-c", "import sys; sys.stdout.write(sys.stdin.readline()); sys.stdout.flush(); sys.stdin.read()"]
CWD = Path(__file__).resolve().parent


def plain() -> None:
    proc = subprocess.Popen(BOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    proc.stdin.write(b"hello\n")
    proc.stdin.flush()
    assert proc.stdout.readline() == b"hello\n"
    proc.kill()
    proc.wait()
    proc.stdin.close()
    proc.stdout.close()


def managed(**kw):
    def sample() -> None:
        with start_bot(BOT, CWD, limits=Limits(), **kw) as bot:
            bot.send_line("hello")
            assert bot.receive_line(10) == "hello"
    return sample


def cpu_now() -> float:
    """CPU seconds of this process and of the children it has reaped."""
    own, reaped = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime


def main(rounds: int) -> None:
    caps = capabilities()
    root = os.geteuid() == 0
    modes = {
        "plain (Popen)": plain,
        "rlimits, same uid": managed(run_as=RunAs.REFEREE, cgroup=False),
    }
    if root:
        modes["rlimits + private uid"] = managed(cgroup=False)
    if caps["cgroup"]:
        modes["+ cgroup" if root else "rlimits + cgroup"] = managed(cgroup=True)
    if caps["namespaces"] == "ok":
        modes["+ cgroup + namespaces" if caps["cgroup"] else "+ namespaces"] = managed(containment=Containment.NAMESPACES)
    if caps["bwrap"] == "ok":
        modes["+ cgroup + bwrap" if caps["cgroup"] else "+ bwrap"] = managed(containment=Containment.BUBBLEWRAP)
    try:
        default = Launcher().mode_now()
    except ContainmentError as e:
        default = f"none ({e})"
    default_row = {Containment.BUBBLEWRAP: "bwrap", Containment.NAMESPACES: "namespaces"}.get(default)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
          f"root={root}")
    print(f"cgroup: {caps['cgroup'] or caps['cgroup_note']}")
    print(f"bwrap: {caps['bwrap']}; namespaces: {caps['namespaces']}; default containment: {default}")
    for sample in modes.values():  # warm-up: imports, page cache, first cgroup mkdir
        for _ in range(3):
            sample()
    times: dict[str, list[float]] = {name: [] for name in modes}
    cpu: dict[str, list[float]] = {name: [] for name in modes}
    for _ in range(rounds):
        for name, sample in modes.items():
            c = cpu_now()
            t = time.perf_counter()
            sample()
            times[name].append((time.perf_counter() - t) * 1000)
            cpu[name].append((cpu_now() - c) * 1000)
    base = statistics.mean(times["plain (Popen)"])
    print(f"\n{rounds} bots per mode: start + 1 line round trip + close")
    print(f"{'mode':26} {'mean ms':>8} {'median':>8} {'stdev':>7} {'x plain':>8} {'CPU ms':>7}")
    for name, ts in times.items():
        mean = statistics.mean(ts)
        print(f"{name:26} {mean:8.1f} {statistics.median(ts):8.1f} "
              f"{statistics.stdev(ts):7.1f} {mean / base:8.2f} {statistics.mean(cpu[name]):7.1f}")
    rows = [name for name in times if default_row and name.endswith(default_row)]
    if rows:
        ratio = statistics.mean(times[rows[0]]) / base
        print(f"\ndefault mode ({default}, row '{rows[0]}'): {ratio:.2f}x a plain start (target: under ~3x)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 30)
