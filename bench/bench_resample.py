"""What a sample costs: the resampler (with inferences) against the uniform deal.

    python bench/bench_resample.py --games 20

Plays mostly-lowest-first two-player games; at every decision of seat 0 in the play
phase it times ``Observer.resample`` and ``Observer.sample`` (the uniform deal), a few
draws each, and prints microseconds per sample and the ratio, per preset.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from arena.ai.observe import Observer  # noqa: E402
from arena.engine import IMPLEMENTATION, apply_action, legal_actions, preset, start_game  # noqa: E402
from arena.engine.views import action_json, event_for, seat_view  # noqa: E402
from arena.referee import protocol  # noqa: E402
from arena.referee import decision_name  # noqa: E402


def measure(name: str, games: int, draws: int) -> tuple[float, float, int, int]:
    rules = preset(name)
    t_new = t_old = 0.0
    n = limited = 0
    for seed in range(games):
        rng = random.Random(seed)
        state, events = start_game(rules, 2, seed)
        pending = [event_for(e, 0) for e in events]
        obs = Observer()
        obs.start(protocol.start("g", 0, 2, ["a", "b"], rules.options(), {"move_ms": 1000}, seed))
        while state.result is None:
            acts = legal_actions(state)
            if state.to_move == 0 and len(acts) > 1:
                obs.update(protocol.request(1, "g", decision_name(state), seat_view(state, 0), pending,
                                            [action_json(a) for a in acts], {"move_ms": 1000, "bank_ms": 0}))
                pending = []
                if state.phase == "play":
                    t0 = time.perf_counter()
                    for _ in range(draws):
                        obs.resample(rng)
                    t1 = time.perf_counter()
                    for _ in range(draws):
                        obs.sample(rng)
                    t_new += t1 - t0
                    t_old += time.perf_counter() - t1
                    n += draws
                    limited += any(s.mask != (1 << 16) - 4 for slots in obs.history.slots for s in slots)
            plays = [a for a in acts if a.kind == "play"]
            a = min(plays, key=lambda a: a.cards[0]) if plays and rng.random() < 0.8 else acts[rng.randrange(len(acts))]
            state, evs = apply_action(state, a, check=False)
            pending.extend(event_for(e, 0) for e in evs)
    return 1e6 * t_new / n, 1e6 * t_old / n, n, limited


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--games", type=int, default=20)
    p.add_argument("--draws", type=int, default=5)
    p.add_argument("--presets", default="classic,skip8,shithead")
    a = p.parse_args()
    print(f"{IMPLEMENTATION} engine; {a.games} games per preset, {a.draws} draws per decision")
    print("| preset | samples | decisions with limited slots | resample us | uniform us | ratio |\n|---|---|---|---|---|---|")
    for name in a.presets.split(","):
        new, old, n, limited = measure(name, a.games, a.draws)
        print(f"| {name} | {n} | {limited} | {new:.0f} | {old:.0f} | {new / old:.2f} |", flush=True)


if __name__ == "__main__":
    main()
