"""How many bits per second the host's cache of names that do not exist carries between two seats.

    python bench/bench_dentry_channel.py [bits] [slot_ms] [names] [--gvisor] [--stranger] [--median] [--own]

Both seats of a referee see one folder of the host: the arena package's copy their Python bots
import (the same copy for every seat of a referee process; under the host view all of ``/usr`` and
``/etc`` too, and a ``system`` folder such as the JDK in every view). Looking up a name that is not
there leaves a negative entry in the host kernel's dentry cache, which every namespace shares, and
the next lookup of that name is faster. Per slot the sender looks up ``names`` names of that slot
for a 1 and nothing for a 0; late in the slot the receiver times a lookup of the same names
between two of names nobody looked up, and reads a 1 when the first is faster. The seats run
through the arena's own blocking start path (private uid, cgroup, filter) under bubblewrap
(``--stranger``: in the strangers' view) or ``--gvisor``; decoded with the best threshold (what a pair
could learn in a first game), which on pure noise still gets some bits right: compare with 50%.
``--median``: the receiver times each lookup alone and compares the medians of the three sets, not
their sums, so a pause from other work on the machine (which lands on a few lookups) moves nothing.
``--own``: the names are looked up in the seats' own folder instead, which two processes of one bot
share (one copy of the bot a referee process): the channel between a bot's process and its twin.
"""

from __future__ import annotations

import json
import math
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.channel import capacity, held_out_error, side_by_side  # noqa: E402

SEAT = r'''
import json, os, sys, time
role, start, slot, n, names, bits = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
median = sys.argv[7] == "median"
shared = os.getcwd() if sys.argv[8] == "own" else os.environ.get("PYTHONPATH", "")

def wait_until(t):
    d = t - time.time()  # the wall clock: gVisor's monotonic clock is its own
    if d > 0:
        time.sleep(d)

def look(prefix):
    if median:  # each lookup timed alone: the median is deaf to the pauses other work causes
        took = []
        for j in range(names):
            t = time.perf_counter()
            try:
                os.stat(f"{shared}/{prefix}-{j}")
            except OSError:
                pass
            took.append(time.perf_counter() - t)
        return sorted(took)[names // 2]
    t = time.perf_counter()
    for j in range(names):
        try:
            os.stat(f"{shared}/{prefix}-{j}")
        except OSError:
            pass
    return time.perf_counter() - t

tag = f"{start:.0f}"
seen = []
for i in range(n):
    begin = start + i * slot
    if role == "send":
        wait_until(begin)
        if bits[i] == "1":
            look(f"{tag}x{i}")
        continue
    wait_until(begin + slot * 0.6)
    before = look(f"{tag}r{i}")
    marked = look(f"{tag}x{i}")
    after = look(f"{tag}q{i}")
    seen.append(marked / ((before + after) / 2))
print(json.dumps({"shared": shared, "seen": seen}), flush=True)
'''


def run(bits: str, slot_ms: float, names: int, gvisor: bool, stranger: bool, median: bool = False,
        own: bool = False) -> tuple[str, list[float]]:
    from arena.bots.filesystem import SystemView
    from arena.bots.launch import Containment, Launcher
    d = Path(os.path.realpath(tempfile.mkdtemp(prefix="arena-dentry-channel-")))
    d.chmod(0o755)
    start = time.time() + (10.0 if gvisor else 4.0)  # both seats up by then
    launcher = Launcher(containment=Containment.GVISOR if gvisor else Containment.BUBBLEWRAP,
                        view=SystemView.STRANGER if stranger else SystemView.HOST)
    commands = {role: ["python3", "seat.py", role, str(start), str(slot_ms / 1000), str(len(bits)), str(names), bits,
                        "median" if median else "sum", "own" if own else "package"]
                for role in ("recv", "send")}
    out = json.loads(side_by_side(d, SEAT, commands, launcher, 60 + len(bits) * slot_ms / 1000, one_folder=own))
    return out["shared"], out["seen"]


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    n = int(args[0]) if args else 40
    slot_ms = float(args[1]) if len(args) > 1 else 100.0
    names = int(args[2]) if len(args) > 2 else 300
    gvisor, stranger, median = "--gvisor" in sys.argv, "--stranger" in sys.argv, "--median" in sys.argv
    own = "--own" in sys.argv
    rng = random.Random(5)
    bits = "".join(rng.choice("01") for _ in range(n))
    shared, seen = run(bits, slot_ms, names, gvisor, stranger, median, own)
    pairs = list(zip(seen, bits))
    error = min(sum((r < t) != (b == "1") for r, b in pairs) for t in sorted(seen) + [math.inf]) / n
    med = lambda xs: sorted(xs)[len(xs) // 2] if xs else float("nan")  # noqa: E731
    rate = capacity(error) * 1000 / slot_ms
    held = held_out_error([(r, int(b)) for r, b in pairs])
    mode = "gVisor" if gvisor else "bubblewrap, stranger view" if stranger else "bubblewrap"
    mode += ", median of single lookups" if median else ""
    print(f"{mode}: shared folder {shared}; slot {slot_ms:g} ms, {names} names per 1, {n} bits; time ratio "
          f"after a 1 {med([r for r, b in pairs if b == '1']):.3f}, after a 0 {med([r for r, b in pairs if b == '0']):.3f}; "
          f"error {error:.1%}: {rate:.1f} bits/s; held out (threshold fitted to the first half, scored on the second) "
          f"{held:.1%}: {capacity(held) * 1000 / slot_ms:.1f} bits/s; load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
