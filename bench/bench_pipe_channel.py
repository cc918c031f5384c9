"""How many bits per second two contained seats pass through pipe inode numbers, the shared
counter the filter cannot close (a bot needs pipes).

    python bench/bench_pipe_channel.py [bits] [slot_ms] [pipes] [--gvisor] [--eventfd]

Every pipe takes its inode number from one machine-wide counter, handed out in per-CPU batches of
1024. Two bubblewrap-contained bots (the default mode) share a clock, cut time into slots, and
for each slot the sender either makes ``pipes`` pipes (a 1) or sleeps (a 0); at the end of the
slot the receiver makes pipes until its CPU takes a new batch, whose first number is the
counter's value then: what the counter moved beyond the receiver's own batch is the rest of the
machine's pipes (and other pseudo-files'), the sender's most of all. Prints the bits sent,
received, the error rate, the raw bits per second and what a code could carry at that error rate (a binary
symmetric channel's capacity, rate x (1 - H(p))). A bench, not a test: noise from other work on
the machine moves the counter too. ``--gvisor`` runs both seats under the gVisor mode instead
(the arena's blocking start path, ``Launcher(containment=Containment.GVISOR)``, a root referee), where each seat has a
kernel, and a counter, of its own.
``--eventfd`` measures the ``eventfd-id`` of /proc/self/fdinfo instead: the sender holds ``pipes``
eventfds through a 1-slot, the receiver reads the id a new eventfd gets (the lowest free one).
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from arena.bots import seccomp  # noqa: E402
from arena.bots.bwrap import bwrap_argv  # noqa: E402
from bench.channel import side_by_side  # noqa: E402

ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}  # fixed, as the arena gives bwrap and a bot

SEAT = r'''
import json, os, sys, time
role, start, slot, n, pipes = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
bits, channel = sys.argv[6], sys.argv[7]

def eventfd_id():
    fd = os.eventfd(0)
    with open(f"/proc/self/fdinfo/{fd}") as f:
        ids = [int(line.split()[1]) for line in f if line.startswith("eventfd-id")]
    os.close(fd)
    return ids[0] if ids else -1

def pipe_ino():
    r, w = os.pipe()
    ino = os.fstat(r).st_ino
    os.close(r); os.close(w)
    return ino

def wait_until(t):
    d = t - time.time()  # the wall clock: gVisor's monotonic clock is its own
    if d > 0:
        time.sleep(d)

seen = []
for i in range(n):
    begin = start + i * slot
    if role == "send":
        wait_until(begin)
        if bits[i] == "1" and channel == "eventfd":  # hold them: a new eventfd takes the lowest free id
            held = [os.eventfd(0) for _ in range(pipes)]
            wait_until(begin + slot * 0.9)
            for fd in held:
                os.close(fd)
        elif bits[i] == "1":
            for _ in range(pipes):
                r, w = os.pipe()
                os.close(r); os.close(w)
        continue
    wait_until(begin + slot * 0.8)
    seen.append(eventfd_id() if channel == "eventfd" else pipe_ino())
print(json.dumps(seen), flush=True)
'''


def run(bits: str, slot_ms: float, pipes: int, channel: str = "pipe") -> list:
    """Both seats under the arena's bubblewrap command line (filter, covered /proc), run by plain
    subprocess as in bench_gvisor.py: no uid lease or registry record for another run to reap."""
    d = Path(os.path.realpath(tempfile.mkdtemp(prefix="arena-pipe-channel-")))
    d.chmod(0o755)
    (d / "seat.py").write_text(SEAT)
    (d / "seat.py").chmod(0o644)
    bwrap = shutil.which("bwrap") or sys.exit("needs bwrap")
    start = time.time() + 3.0  # both seats up by then
    common = [str(start), str(slot_ms / 1000), str(len(bits)), str(pipes)]
    procs, fds = [], []
    tail = [bits, channel]
    try:
        for role in ("recv", "send"):
            fd = seccomp.memfd()
            fds.append(fd)
            argv = bwrap_argv(bwrap, ["/usr/bin/python3", "seat.py", role, *common, *tail], d, tmp_bytes=64 << 20,
                              env={**ENV, "HOME": "/tmp"}, seccomp_fd=fd)
            procs.append(subprocess.Popen(argv, stdout=subprocess.PIPE, env=ENV, pass_fds=(fd,), text=True))
        timeout = 30 + len(bits) * slot_ms / 1000
        out = [p.communicate(timeout=timeout)[0] for p in procs]
    finally:
        for fd in fds:
            os.close(fd)
        shutil.rmtree(d, ignore_errors=True)
    return json.loads(out[0])


def run_gvisor(bits: str, slot_ms: float, pipes: int, channel: str = "pipe") -> list:
    """Both seats through the arena's own blocking start path in the gVisor mode (private uid,
    cgroup): each seat a bot folder whose command is its role."""
    from arena.bots.launch import Containment, Launcher
    d = Path(os.path.realpath(tempfile.mkdtemp(prefix="arena-pipe-channel-")))
    d.chmod(0o755)
    start = time.time() + 8.0  # both runsc sandboxes up by then
    common = [str(start), str(slot_ms / 1000), str(len(bits)), str(pipes), bits, channel]
    commands = {role: ["/usr/bin/python3", "seat.py", role, *common] for role in ("recv", "send")}
    return json.loads(side_by_side(d, SEAT, commands, Launcher(containment=Containment.GVISOR), 30 + len(bits) * slot_ms / 1000))


def main() -> None:
    gvisor = "--gvisor" in sys.argv
    channel = "eventfd" if "--eventfd" in sys.argv else "pipe"
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    n = int(args[0]) if len(args) > 0 else 64
    slot_ms = float(args[1]) if len(args) > 1 else 100
    pipes = int(args[2]) if len(args) > 2 else 8192
    rng = random.Random(1)
    bits = "".join(rng.choice("01") for _ in range(n))
    seen = (run_gvisor if gvisor else run)(bits, slot_ms, pipes, channel)
    if channel == "eventfd":  # an id, the lowest free: the sender's held eventfds push it up
        moved = [b - min(seen) for b in seen[1:]]
    else:
        moved = [b - a - 1 for a, b in zip(seen, seen[1:])]
    threshold = pipes // 2
    got = "".join("1" if m > threshold else "0" for m in moved)
    sent = bits[1:]
    errors = sum(1 for s, g in zip(sent, got) if s != g)
    quiet = sorted(m for m, s in zip(moved, sent) if s == "0")
    busy = sorted(m for m, s in zip(moved, sent) if s == "1")
    print(f"{'gVisor' if gvisor else 'bubblewrap'}, {channel}: load {os.getloadavg()[0]:.1f}; slot {slot_ms:g} ms, {pipes} pipes per 1, {len(sent)} bits; the counter moved by others "
          f"per slot: median {quiet[len(quiet) // 2] if quiet else '-'} in 0 slots, "
          f"{busy[len(busy) // 2] if busy else '-'} in 1 slots")
    print(f"sent     {sent}\nreceived {got}")
    rate = len(sent) / (len(sent) * slot_ms / 1000)
    p = errors / len(sent)
    entropy = 0.0 if p in (0.0, 1.0) else -(p * math.log2(p) + (1 - p) * math.log2(1 - p))
    capacity = rate * max(0.0, 1 - entropy)
    if len(set(moved)) == 1:  # every reading the same whatever was sent: nothing to decode
        capacity = 0.0
        print(f"the receiver read the same {moved[0]} in every slot: no information")
    print(f"errors {errors}/{len(sent)} ({p:.0%}); raw rate {rate:.1f} bits/s; "
          f"capacity at that error rate {capacity:.1f} bits/s")


if __name__ == "__main__":
    main()
