"""Bits passed through the host's page cache between two seats of one bot served one copy of its
folder: the arena's checked copy (``launch.runnable``, one a referee process), as two bubblewrap
seats of the bot are served it now, and as per-seat hard links into it would serve gVisor seats.

    python bench/bench_twin_cache_channel.py [--size-mib 200] [--rounds 4] [--fill-mib 520]

The bot's folder holds ``data.bin`` (``--size-mib`` of random bytes); its units are 32 KiB at each
MiB, in pairs, one bit a pair. Both seats run in one process, as two seats of one bot in one
referee process do (two games of a worker, a deal and its duplicate), and take commands on their
stdin (this is no game: the channel, not a table's protocol). Steps:

1. Each seat reads every unit, then overfills its own memory cgroup in a child (``--fill-mib`` past
   its 512 MiB: the cgroup reclaims what is charged to it, then the child is killed): can a seat
   make the copy's pages cold by itself? The copy's pages are the referee's (it wrote them).
2. The copy's pages are dropped from the cache (``POSIX_FADV_DONTNEED`` after a sync: what the
   machine's memory pressure does to pages nobody reads), then, a round at a time, the sender
   reads the unit of each pair its bit names, the receiver times its first read of both and takes
   the faster; then each seat overfills its own cgroup again, so the units it brought in (charged
   to it) are cold for the next round. Rate: bits less twice the errors, over the whole rounds'
   time, the seats' fills included.

Needs bubblewrap and a root referee with the memory cgroup (the seats' own cgroups).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from arena.bots import pagecache
from arena.bots.containment import Containment
from arena.bots.launch import Launcher
from arena.bots.manifest import load_bot

MIB = 1 << 20

BOT = r'''
import json, mmap, os, sys, time
UNIT = 32 << 10
fd = os.open("data.bin", os.O_RDONLY)
for line in sys.stdin:
    cmd, *args = line.split()
    if cmd == "read":
        for u in map(int, args):
            os.pread(fd, UNIT, u << 20)
        print("ok", flush=True)
    elif cmd == "time":
        out = []
        for u in map(int, args):
            t = time.perf_counter_ns()
            os.pread(fd, UNIT, u << 20)
            out.append((time.perf_counter_ns() - t) / 1000)
        print(json.dumps(out), flush=True)
    elif cmd == "fill":  # past the cgroup's limit, in a child: its cache reclaimed, then the child killed
        n = int(args[0]) << 20
        pid = os.fork()
        if pid == 0:
            m = mmap.mmap(-1, n)
            for off in range(0, n, 4096):
                m[off] = 1
            os._exit(0)
        print("ok %d" % os.waitpid(pid, 0)[1], flush=True)
'''


def cold_units(path: str, units: int) -> int:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        cold = set(pagecache.cold_pages(fd, os.fstat(fd).st_size))
    finally:
        os.close(fd)
    return sum(1 for u in range(units) if (u * MIB) // pagecache.PAGE in cold)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mib", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--fill-mib", type=int, default=520)
    args = ap.parse_args()
    units, fill = args.size_mib, f"fill {args.fill_mib}"
    home = Path(tempfile.mkdtemp(prefix="bench-twin-"))
    try:
        bot = home / "bot"
        bot.mkdir()
        (bot / "bot.toml").write_text('name = "twin"\nversion = "1"\ncommand = ["python3", "bot.py"]\n')
        (bot / "bot.py").write_text(BOT)
        (bot / "data.bin").write_bytes(os.urandom(units * MIB))
        for p in (home, bot, *bot.iterdir()):
            p.chmod(0o755)
        spec = load_bot(bot)
        spec.files_hash()
        plan = Launcher(containment=Containment.BUBBLEWRAP).plan_now(spec)
        data = str(plan.workdir / "data.bin")
        print(f"both seats served {plan.workdir}; cold units after the copy: {cold_units(data, units)}/{units}")
        with plan.start() as a, plan.start() as b:
            def ask(seat, line: str) -> str:
                seat.send_line(line)
                return seat.receive_line(300.0)
            for seat, name in ((a, "A"), (b, "B")):
                ask(seat, "read " + " ".join(map(str, range(units))))
                said = ask(seat, fill)
                print(f"seat {name} read every unit and overfilled its cgroup ({said}): "
                      f"cold units {cold_units(data, units)}/{units}")
            os.sync()
            pagecache.evict(data)
            print(f"dropped from the cache: cold units {cold_units(data, units)}/{units}")
            pairs = [(2 * i, 2 * i + 1) for i in range(units // 2)]
            total = wrong = 0
            started = time.perf_counter()
            for r in range(args.rounds):
                bits = [random.getrandbits(1) for _ in pairs]
                before = cold_units(data, units)
                ask(a, "read " + " ".join(str(p[bit]) for p, bit in zip(pairs, bits)))
                times = json.loads(ask(b, "time " + " ".join(str(u) for p in pairs for u in p)))
                got = [int(times[2 * i + 1] < times[2 * i]) for i in range(len(pairs))]
                bad = sum(x != y for x, y in zip(got, bits))
                total, wrong = total + len(bits), wrong + bad
                sent = statistics.median(min(times[2 * i:2 * i + 2]) for i in range(len(pairs)))
                unsent = statistics.median(max(times[2 * i:2 * i + 2]) for i in range(len(pairs)))
                print(f"round {r}: {before} cold units before; {len(bits)} bits, {bad} wrong; median first read "
                      f"{sent:.0f} us (sent) against {unsent:.0f} us (not sent)")
                for seat in (a, b):
                    ask(seat, fill)
            spent = time.perf_counter() - started
        print(f"in all: {total} bits, {wrong} wrong, in {spent:.2f} s with the seats' fills: "
              f"{(total - 2 * wrong) / spent:.1f} bits/s (load {os.getloadavg()[0]:.1f})")
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
