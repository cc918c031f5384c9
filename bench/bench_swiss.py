"""What the Swiss pairing costs and achieves on a club-sized field, round by round.

    python bench/bench_swiss.py [bots] [seats] [rounds] [seed] [--against CHECKOUT]

Defaults: 24 bots at 4-seat tables for 6 rounds. Between rounds each bot's score is its hidden
strength plus noise (as a fit over one round's games would give), so the pairing meets the
same kind of standings a real Swiss does. Prints per round: seconds, the repeat meetings
the pairing kept, the fewest any seating has where the search for them proved it ("-" where
it spent its budget), its score spread against the least any seating could have with repeats
ignored, and whether the search ended or stopped at its budget (then: best found).

``--against`` pairs every round a second time with another checkout's ``swiss.py`` (the
previous main's, say) on the same standings and history, one after the other in this process,
so the two rows of a round compare within one run. The history follows this checkout's
pairings. Timings are of this machine at this moment; the counts do not depend on the clock.
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from arena.tournament import swiss  # noqa: E402


def load(checkout: Path):
    """Another checkout's swiss module (pure: it imports the standard library only)."""
    spec = importlib.util.spec_from_file_location("swiss_against", checkout / "arena/tournament/swiss.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def row(label: str, r: int, module, order, scores, k, met, byes):
    t0 = time.perf_counter()
    p = module.pair_round(order, scores, k, met, byes)
    dt = time.perf_counter() - t0
    least = "-" if p.least is None else p.least
    print(f"{r + 1:>5} {label:>8} {dt:>8.2f} {p.repeats:>8} {least:>7} {p.spread:>8.0f} {p.least_spread:>8.0f}  "
          f"{'ended' if p.optimal else 'budget: best found'}", flush=True)
    return p, dt


def main(n: int = 24, k: int = 4, rounds: int = 6, seed: int = 1, against: Path | None = None) -> None:
    rnd = random.Random(seed)
    bots = [f"bot{i:02d}" for i in range(n)]
    strength = {b: rnd.gauss(1500, 200) for b in bots}
    scores = dict.fromkeys(bots, 1500.0)
    history: list[tuple[str, ...]] = []
    byes: Counter[str] = Counter()
    other = load(against) if against else None
    totals = {"this": 0.0, "against": 0.0}
    print(f"{n} bots, {k}-seat tables, {rounds} rounds (seed {seed})" + (f", against {against}" if against else ""))
    print(f"{'round':>5} {'code':>8} {'seconds':>8} {'repeats':>8} {'fewest':>7} {'spread':>8} {'least':>8}  search")
    for r in range(rounds):
        order = sorted(bots, key=lambda b: (-scores[b], b))
        met = swiss.meetings(history)
        if other:
            totals["against"] += row("against", r, other, order, scores, k, met, byes)[1]
        p, dt = row("this", r, swiss, order, scores, k, met, byes)
        totals["this"] += dt
        history += p.tables
        byes.update(p.byes)
        scores = {b: round(strength[b] + rnd.gauss(0, 150)) for b in bots}
    pairs = swiss.meetings(history)
    print(f"pairs met twice or more: {sum(1 for c in pairs.values() if c > 1)} of {len(pairs)} pairs that met; "
          f"byes per bot: {sorted(Counter(byes[b] for b in bots).items())}")
    print(f"seconds over {rounds} rounds: this {totals['this']:.2f}"
          + (f", against {totals['against']:.2f} ({totals['this'] / totals['against']:.2f}x)" if other else ""))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("numbers", nargs="*", type=int, help="bots seats rounds seed")
    parser.add_argument("--against", type=Path, help="another checkout whose swiss.py pairs the same rounds")
    args = parser.parse_args()
    main(*args.numbers, against=args.against)
