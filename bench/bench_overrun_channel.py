"""How many bits per second the referee's own reading of an answer carries between two seats on a
fixed schedule.

    python bench/bench_overrun_channel.py [games] [move_ms] [--gvisor] [--allowed]

On a fixed schedule the next request goes one slot after the last was sent, or when the
referee's work on the answer ends if that runs past the slot (docs/SANDBOX.md). A sender that
answers near the end of its move time with a line that is costly to read (deeply nested arrays,
up to the 1 MiB a line may hold) for a 1, and a plain answer for a 0, moves the receiver's next
request by the referee's overrun; the receiver notes when each of its requests arrives. Between
two of the receiver's requests that hold exactly one of the sender's decisions, the gap says the
bit. Both seats run contained (bubblewrap, the default here; ``--gvisor``: the mode a ladder for
strangers names), at a 2-seat table with ``fixed_schedule``; the bench decodes with the best
threshold (what a pair could learn in a first game) and prints the error rate, the capacity per
decision (1 - H(error)) and per second of game. ``--allowed``: the sender's 1 is instead the
costliest line found within the caps a line now has (docs/SANDBOX.md): 4,000 keys of 250 digits,
about 1 MB, which the referee reads in about 3 ms.
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
from bench.channel import bot_folder, capacity, decision_gaps, medians_ms, threshold_error  # noqa: E402

BOT = r'''
import json, random, sys, time
role, wait, payload = sys.argv[1], float(sys.argv[2]) / 1000, sys.argv[3]
bits, rng = random.Random(1), random.Random(2)
if payload == "allowed":
    HEAVY = "{" + ",".join('"%0250d":0' % i for i in range(4000)) + "}"
else:
    HEAVY = ",".join(["[" * 30 + "0" + "]" * 30] * 16000)  # about 1 MB, 31 levels deep
for line in sys.stdin:
    got = time.monotonic()
    msg = json.loads(line)
    if msg.get("type") == "hello":
        print(json.dumps({"type": "hello", "protocol": 1, "name": role, "version": "1"}), flush=True)
    elif msg.get("type") == "request":
        pick = rng.randrange(len(msg["actions"]))
        if role == "receiver":
            print(f"GOT {msg['id']} {got:.6f}", file=sys.stderr, flush=True)
            print(json.dumps({"type": "action", "request": msg["id"], "action": pick}), flush=True)
            continue
        bit = bits.getrandbits(1)
        print(f"SENT {msg['id']} {bit}", file=sys.stderr, flush=True)
        time.sleep(max(0.0, got + wait - time.monotonic()))
        pad = ',"pad":[' + HEAVY + ']' if bit else ''
        sys.stdout.write('{"type":"action","request":%d,"action":%d%s}\n' % (msg["id"], pick, pad))
        sys.stdout.flush()
    elif msg.get("type") == "shutdown":
        break
'''


def make_bot(base: Path, role: str, wait_ms: float, game: int, payload: str) -> Path:
    return bot_folder(base / f"{role}-{game}", "bot.py", BOT,
                      f'name = "{role}"\nversion = "1"\nauthor = "{role}"\n'
                      f'command = ["python3", "bot.py", "{role}", "{wait_ms}", "{payload}"]\n')


def play(base: Path, games: int, clock: TimeControl, launcher: Launcher, payload: str):
    """(gap seconds, bit) for every receiver gap that spans exactly one sender decision; seconds of
    play; the sender's faults."""
    wait_ms = clock.move_ms * 0.6  # well inside the move time (0.9 of the slot) as the bot sees it
    return decision_gaps(lambda role, g: make_bot(base, role, wait_ms, g, payload), games, clock, launcher, 700,
                         "overrun", adjacent=True, max_turns=200, fixed_schedule=True)


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    games = int(args[0]) if args else 2
    move_ms = int(args[1]) if len(args) > 1 else 200
    containment = Containment.GVISOR if "--gvisor" in sys.argv else Containment.AUTO
    payload = "allowed" if "--allowed" in sys.argv else "nested"
    clock = TimeControl(move_ms=move_ms, bank_ms=0, handshake_ms=30_000)
    base = Path(tempfile.mkdtemp(prefix="arena-overrun-"))
    base.chmod(0o755)
    launcher = Launcher(containment=containment)
    print(f"containment: {launcher.describe_now()}")
    try:
        pairs, seconds, faults = play(base, games, clock, launcher, payload)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    if not pairs:
        print(f"no decodable gaps (sender faults: {faults})")
        return
    best = threshold_error(pairs)
    after_0, after_1 = medians_ms(pairs)
    per_decision = capacity(best)
    rate = len(pairs) / seconds
    print(f"{payload} payload, move {move_ms} ms, fixed schedule, {games} games, {len(pairs)} bits; median gap after a 0: "
          f"{after_0:.1f} ms, after a 1: {after_1:.1f} ms; error {best:.3f}; {per_decision:.3f} bits a "
          f"decision x {rate:.2f} decisions/s = {per_decision * rate:.2f} bits/s; sender faults {faults}")
    print(f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
