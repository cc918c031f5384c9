"""How many bits per second think time carries between two seats of one table.

    python bench/bench_think_channel.py [games] [delays_ms...]

No sandbox closes this channel: one seat (the sender) answers at once for a 0 and after
``delay`` ms for a 1; the other (the receiver) notes when each of its requests arrives. Between
two of the receiver's requests that hold exactly one of the sender's decisions, the gap says
the bit. Both bots run contained, as a tournament runs them (the default containment here),
at a 2-seat table; the bench decodes with the best threshold for each delay (what a pair could
learn in a first game) and prints the error rate, the capacity of that binary channel per
decision (1 - H(error)) and per second of game.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from arena.bots.launch import Launcher  # noqa: E402
from arena.referee import TimeControl  # noqa: E402
from bench.channel import bot_folder, capacity, decision_gaps, threshold_error  # noqa: E402

BOT = r'''
import json, random, sys, time
role, delay = sys.argv[1], float(sys.argv[2]) / 1000
bits, rng = random.Random(1), random.Random(2)
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("type") == "hello":
        print(json.dumps({"type": "hello", "protocol": 1, "name": role, "version": "1"}), flush=True)
    elif msg.get("type") == "request":
        if role == "receiver":
            print(f"GOT {msg['id']} {time.monotonic():.6f}", file=sys.stderr, flush=True)
        else:
            bit = bits.getrandbits(1)
            if bit:
                time.sleep(delay)
            print(f"SENT {msg['id']} {bit}", file=sys.stderr, flush=True)
        print(json.dumps({"type": "action", "request": msg["id"],
                          "action": rng.randrange(len(msg["actions"]))}), flush=True)
    elif msg.get("type") == "shutdown":
        break
'''
CLOCK = TimeControl(move_ms=1000, bank_ms=5000, handshake_ms=30_000)


def make_bot(base: Path, role: str, delay: float, game: int) -> Path:
    return bot_folder(base / f"{role}-{game}-{delay:g}".replace(".", "_"), "bot.py", BOT,
                      f'name = "{role}"\nversion = "1"\ncommand = ["python3", "bot.py", "{role}", "{delay}"]\n')


def play(base: Path, delay: float, games: int, launcher: Launcher):
    """(gap seconds, bit) for every receiver gap that spans exactly one sender decision; game seconds."""
    pairs, seconds, _ = decision_gaps(lambda role, g: make_bot(base, role, delay, g), games, CLOCK, launcher, 500,
                                      "think", max_turns=300)
    return pairs, seconds


def main() -> None:
    games = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    delays = [float(x) for x in sys.argv[2:]] or [2.0, 5.0, 10.0, 20.0]
    base = Path(tempfile.mkdtemp(prefix="arena-think-"))
    base.chmod(0o755)
    launcher = Launcher()
    print(f"containment: {launcher.describe_now()}")
    print(f"{'delay ms':>8} {'bits':>6} {'error':>7} {'bits/decision':>14} {'decisions/s':>12} {'bits/s':>8}")
    try:
        for delay in delays:
            pairs, seconds = play(base, delay, games, launcher)
            best = threshold_error(pairs)
            per_decision = capacity(best)
            rate = len(pairs) / seconds
            print(f"{delay:8g} {len(pairs):6d} {best:7.3f} {per_decision:14.3f} {rate:12.1f} {per_decision * rate:8.1f}")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
