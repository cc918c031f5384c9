"""Engine speed: complete games per second on one core, per preset and player count.

Two policies, both on the engine directly (no referee, no JSON):

* random: a uniform pick from ``legal_actions(state)`` then ``apply_action(state, a, check=False)``;
* lowest-first: the lowest legal play (2s, 10s and jokers last), picking up only when it
  must. Uniformly random games are about ten times longer (random play picks up a lot),
  so games/s alone misleads; decisions/s (turns/s) is the engine's real rate.

    python bench/bench_engine.py                  # every preset at 2, 4 and 6 players
    python bench/bench_engine.py --seconds 3 --presets classic shithead
    python bench/bench_engine.py --compare        # and the Python sources, for the speed-up

The header says which engine ran: the mypyc-compiled modules an install builds, or the
Python sources (no compiler, a stale build, or ARENA_PURE_ENGINE=1). Prints figures only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from arena.engine import IMPLEMENTATION, PRESETS, apply_action, legal_actions, start_game  # noqa: E402
from arena.engine.compiled import WHY  # noqa: E402
from arena.engine.model import Play, SetFaceUp  # noqa: E402

POWER = {2: 20, 10: 21, 15: 22}  # rank -> ladder value: powers are kept for last (15: joker)


def _value(card: int) -> int:
    rank = card >> 2
    return POWER.get(rank, rank)


def random_policy(rng: random.Random):
    rand = rng.random

    def choose(actions):
        # uniform like rng.choice, without its two Python-level calls per pick
        return actions[int(rand() * len(actions))]
    return choose


def lowest_first(_rng: random.Random):
    def choose(actions):
        best = None
        best_key = None
        for a in actions:
            if isinstance(a, Play):
                key = (0, _value(a.cards[0]), -len(a.cards))
            elif isinstance(a, SetFaceUp):  # keep the strongest cards face up
                key = (1, -sum(_value(c) for s in a.stacks for c in s), 0)
            elif a.kind in ("flip", "done", "stack"):
                key = (2, 0, 0)
            else:  # pick up: only when nothing else is legal
                key = (3, 0, 0)
            if best_key is None or key < best_key:
                best, best_key = a, key
        return best
    return choose


POLICIES = {"random": random_policy, "lowest": lowest_first}


def play(rules, players: int, seed: int, choose) -> tuple[int, str]:
    state, _ = start_game(rules, players, seed)
    turns = 0
    while state.result is None:
        state, _ = apply_action(state, choose(legal_actions(state)), check=False)
        turns += 1
    return turns, state.result.reason


def measure(rules, players: int, policy: str, seconds: float) -> dict[str, float]:
    rng = random.Random(12345)
    choose = POLICIES[policy](rng)
    games = turns = capped = 0
    seed = 0
    t0 = time.perf_counter()
    deadline = t0 + seconds
    while True:
        n, reason = play(rules, players, seed, choose)
        games += 1
        turns += n
        capped += reason == "turn_cap"
        seed += 1
        now = time.perf_counter()
        if now >= deadline and games >= 3:
            break
    dt = now - t0
    return {"games_s": games / dt, "turns_s": turns / dt, "avg_len": turns / games, "games": games,
            "capped": capped / games}


def measure_python_sources(name: str, players: int, policy: str, seconds: float) -> dict[str, float]:
    """The same measurement in a child process that runs the engine's Python sources."""
    out = subprocess.run([sys.executable, __file__, "--row", name, str(players), policy, "--seconds", str(seconds)],
                         env={**os.environ, "ARENA_PURE_ENGINE": "1"}, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=1.0, help="time per (preset, players, policy)")
    ap.add_argument("--presets", nargs="*", default=list(PRESETS))
    ap.add_argument("--players", nargs="*", type=int, default=[2, 4, 6])
    ap.add_argument("--compare", action="store_true",
                    help="also time random games on the Python sources (ARENA_PURE_ENGINE=1), for the ratio")
    ap.add_argument("--row", nargs=3, metavar=("PRESET", "PLAYERS", "POLICY"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        try:
            os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core
        except OSError:
            pass
    if args.row:
        name, n, policy = args.row
        print(json.dumps(measure(PRESETS[name], int(n), policy, args.seconds)))
        return
    print(f"engine benchmark: Python {platform.python_version()} on {platform.machine()}, one core, "
          f"{args.seconds:g}s per row; engine: {IMPLEMENTATION}" + ("" if IMPLEMENTATION == "compiled" else f" ({WHY})"))
    extra = f" | {'python src games/s':>18} {'speed-up':>8}" if args.compare else ""
    print(f"{'preset':10} {'n':>2} | {'random games/s':>14} {'turns/s':>9} {'avg len':>8} {'capped':>6} | "
          f"{'lowest games/s':>14} {'turns/s':>9} {'avg len':>8} | {'len ratio':>9}{extra}")
    for name in args.presets:
        rules = PRESETS[name]
        for n in args.players:
            if not rules.min_players <= n <= rules.max_players:
                continue
            r = measure(rules, n, "random", args.seconds)
            low = measure(rules, n, "lowest", args.seconds)
            line = (f"{name:10} {n:>2} | {r['games_s']:14.1f} {r['turns_s']:9.0f} {r['avg_len']:8.1f} "
                    f"{100 * r['capped']:5.0f}% | {low['games_s']:14.1f} {low['turns_s']:9.0f} "
                    f"{low['avg_len']:8.1f} | {r['avg_len'] / low['avg_len']:8.1f}x")
            if args.compare:
                py = measure_python_sources(name, n, "random", args.seconds)
                line += f" | {py['games_s']:18.1f} {r['turns_s'] / py['turns_s']:7.2f}x"
            print(line, flush=True)
    print("capped: share of random games that hit the turn cap (2000 turns) and end as draws")
    if args.compare:
        print("speed-up: random-play turns/s of this engine over the Python sources, same seeds")


if __name__ == "__main__":
    main()
