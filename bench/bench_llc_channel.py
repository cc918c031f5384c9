"""How many bits per second two seats pass through the processor's shared last-level cache across
their turns, with the seat off its turn frozen.

    python bench/bench_llc_channel.py [games] [move_ms] [evict_mb] [probe_mb] [--gvisor] [--burn]

Freezing takes the CPU from a seat off its turn, so two seats never run at once and no seat can
time the other's work. What one seat's turn leaves behind in the hardware can still be read at the
other's next turn: the last-level cache (32 MiB, shared by every CPU here). At each of its
requests the receiver times one pass over its own ``probe_mb`` buffer (warm in the cache from its
last turn) and notes the time; the sender, for a 1, reads ``evict_mb`` of its own memory in its
turn (reads it once, pushing the receiver's lines out), for a 0 does nothing. No memory is shared: a seat reads
only its own pages, and under ``--gvisor`` each seat has a kernel of its own. Both seats at a
2-seat table on a fixed schedule (the rules a ladder for strangers sets), through the arena's
blocking referee; the bench decodes with the best threshold (what a pair could learn in a first
game, and, held out, fitted to the first half of the bits and scored on the second) and prints the error rate, the capacity per decision (1 - H(error)) and per second of play.
``--burn``: the sender's 1 is instead a spin through 70% of its move time, and the receiver
times a fixed loop of arithmetic: whether the other seat's full use of the CPU (its heat, its
clock frequency, the host's scheduler) is still felt at the receiver's next turn.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from arena.bots.containment import Containment  # noqa: E402
from arena.bots.launch import Launcher  # noqa: E402
from arena.referee import TimeControl  # noqa: E402
from bench.channel import bot_folder, capacity, decision_gaps, held_out_error, medians_ms, threshold_error  # noqa: E402

BOT = r'''
import json, random, sys, time
role, evict_mb, probe_mb, burn_s = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
bits, rng = random.Random(1), random.Random(2)
probe = b"\1" * (probe_mb << 20)  # real pages (a zeroed buffer maps one shared page)
evict = b"\1" * (evict_mb << 20) if role == "sender" else None
spent = 0.0  # the receiver reports the running sum of its probe times: a gap is one probe
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("type") == "hello":
        print(json.dumps({"type": "hello", "protocol": 1, "name": role, "version": "1"}), flush=True)
    elif msg.get("type") == "request":
        pick = rng.randrange(len(msg["actions"]))
        if role == "receiver":
            t = time.perf_counter()
            if burn_s:  # a fixed piece of work on the CPU: is it slower after the other seat's burn?
                x = 0
                for i in range(100_000):
                    x += i * i
            else:
                probe.find(2)  # one pass over its own buffer (memchr), allocating nothing
            spent += time.perf_counter() - t
            print(f"GOT {msg['id']} {spent:.9f}", file=sys.stderr, flush=True)
        else:
            bit = bits.getrandbits(1)
            print(f"SENT {msg['id']} {bit}", file=sys.stderr, flush=True)
            if bit and burn_s:  # the CPU at full work through most of its move time
                end = time.perf_counter() + burn_s
                while time.perf_counter() < end:
                    pass
            elif bit:
                evict.find(2)
        print(json.dumps({"type": "action", "request": msg["id"], "action": pick}), flush=True)
    elif msg.get("type") == "shutdown":
        break
'''


def make_bot(base: Path, role: str, game: int, evict_mb: int, probe_mb: int, burn_s: float) -> Path:
    return bot_folder(base / f"{role}-{game}", "bot.py", BOT,
                      f'name = "{role}"\nversion = "1"\nauthor = "{role}"\n'
                      f'command = ["python3", "bot.py", "{role}", "{evict_mb}", "{probe_mb}", "{burn_s}"]\n')


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    games = int(args[0]) if args else 2
    move_ms = int(args[1]) if len(args) > 1 else 100
    evict_mb = int(args[2]) if len(args) > 2 else 64
    probe_mb = int(args[3]) if len(args) > 3 else 8
    containment = Containment.GVISOR if "--gvisor" in sys.argv else Containment.AUTO
    burn_s = move_ms * 0.7 / 1000 if "--burn" in sys.argv else 0.0
    clock = TimeControl(move_ms=move_ms, bank_ms=0, handshake_ms=30_000)
    base = Path(tempfile.mkdtemp(prefix="arena-llc-channel-"))
    base.chmod(0o755)
    launcher = Launcher(containment=containment)
    print(f"containment: {launcher.describe_now()}")
    try:
        pairs, seconds, faults = decision_gaps(lambda role, g: make_bot(base, role, g, evict_mb, probe_mb, burn_s), games, clock,
                                               launcher, 900, "llc", adjacent=True, max_turns=200, fixed_schedule=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    if not pairs:
        print(f"no decodable probes (faults: {faults})")
        return
    best = threshold_error(pairs)
    held = held_out_error(pairs)
    after_0, after_1 = medians_ms(pairs)
    per_decision = capacity(best)
    rate = len(pairs) / seconds
    what = f"burn {burn_s * 1000:g} ms" if burn_s else f"evict {evict_mb} MiB, probe {probe_mb} MiB"
    print(f"move {move_ms} ms, fixed schedule, {games} games, {what}, {len(pairs)} bits; "
          f"median probe after a 0: {after_0:.3f} ms, after a 1: {after_1:.3f} ms; error {best:.3f} with the threshold "
          f"fitted to all, {held:.3f} on the second half with it fitted to the first; {per_decision:.3f} bits a decision x "
          f"{rate:.2f} decisions/s = {per_decision * rate:.2f} bits/s (held out: {capacity(held) * rate:.2f}); faults {faults}")
    print(f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
