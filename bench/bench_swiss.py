"""What the Swiss pairing costs and achieves on a club-sized field, round by round.

    python bench/bench_swiss.py [bots] [seats] [rounds] [seed]

Defaults: 24 bots at 4-seat tables for 6 rounds. Between rounds each bot's score is its hidden
strength plus noise (as a fit over one round's games would give), so the pairing meets the
same kind of standings a real Swiss does. Prints per round: seconds, the repeat meetings
the pairing kept, its score spread against the least any seating could have with repeats
ignored, and whether the search ended or stopped at its budget (then: best found). Timings
are of this machine at this moment; the counts do not depend on the clock.
"""

from __future__ import annotations

import random
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from arena.tournament.swiss import meetings, pair_round  # noqa: E402


def main(n: int = 24, k: int = 4, rounds: int = 6, seed: int = 1) -> None:
    rnd = random.Random(seed)
    bots = [f"bot{i:02d}" for i in range(n)]
    strength = {b: rnd.gauss(1500, 200) for b in bots}
    scores = dict.fromkeys(bots, 1500.0)
    history: list[tuple[str, ...]] = []
    byes: Counter[str] = Counter()
    print(f"{n} bots, {k}-seat tables, {rounds} rounds (seed {seed})")
    print(f"{'round':>5} {'seconds':>8} {'repeats':>8} {'spread':>8} {'least':>8}  search")
    for r in range(rounds):
        order = sorted(bots, key=lambda b: (-scores[b], b))
        t0 = time.perf_counter()
        p = pair_round(order, scores, k, meetings(history), byes)
        dt = time.perf_counter() - t0
        print(f"{r + 1:>5} {dt:>8.2f} {p.repeats:>8} {p.spread:>8.0f} {p.least_spread:>8.0f}  "
              f"{'ended' if p.optimal else 'budget: best found'}")
        history += p.tables
        byes.update(p.byes)
        scores = {b: round(strength[b] + rnd.gauss(0, 150)) for b in bots}
    pairs = meetings(history)
    print(f"pairs met twice or more: {sum(1 for c in pairs.values() if c > 1)} of {len(pairs)} pairs that met; "
          f"byes per bot: {sorted(Counter(byes[b] for b in bots).items())}")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
