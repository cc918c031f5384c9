"""Time fit_elo on synthetic Plackett-Luce tournaments.

    python bench/bench_ratings.py

Games are 2-6 seats (uniform), seats drawn at random from the pool, finishing
orders sampled from the true PL model (Gumbel trick), ~5% draws and ~10%
winner-only results.  Prints fit time (best of 3, from Outcome
objects to Ratings, stage building included) and how well the fit did.

Then the case of a running two-seat ladder (``arena ladder run``): the outcomes
are kept aggregated as counts (``Counter``) and only new games are added, so a
refit is timed from the counts; also the time to add 100 new games to them.
"""

from __future__ import annotations

import gc
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from collections import Counter  # noqa: E402

from arena.ratings import ELO_PER_NAT, Outcome, fit_elo  # noqa: E402


def simulate(n_bots: int, n_games: int, seed: int = 0) -> tuple[list[Outcome], np.ndarray]:
    rng = np.random.default_rng(seed)
    true_elo = rng.normal(0.0, 200.0, n_bots)
    theta = true_elo / ELO_PER_NAT
    names = [f"bot{i:03d}" for i in range(n_bots)]
    outcomes = []
    for _ in range(n_games):
        k = int(rng.integers(2, 7))
        seats = rng.choice(n_bots, size=k, replace=False)
        order = seats[np.argsort(-(theta[seats] + rng.gumbel(size=k)))]
        u = rng.random()
        if u < 0.05:
            outcomes.append(Outcome.draw([names[i] for i in seats]))
        elif u < 0.15:
            outcomes.append(Outcome.winner_only(names[order[0]], [names[i] for i in order[1:]]))
        else:
            outcomes.append(Outcome.order(*(names[i] for i in order)))
    return outcomes, true_elo


def main() -> None:
    print(f"{'bots':>5} {'games':>7} {'fit s':>7} {'iters':>5} {'median se':>9} {'rmse vs truth':>13}")
    for n_bots in (20, 100):
        for n_games in (10_000, 100_000):
            outcomes, true_elo = simulate(n_bots, n_games)
            dt = math.inf
            for _ in range(3):  # best of 3, after a collection, to keep GC noise out
                gc.collect()
                t0 = time.perf_counter()
                ratings = fit_elo(outcomes)
                dt = min(dt, time.perf_counter() - t0)
            est = np.array([ratings[f"bot{i:03d}"].elo for i in range(n_bots)]) - 1500.0
            truth = true_elo - true_elo.mean()
            se = np.median([r.se for r in ratings.values()])
            rmse = float(np.sqrt(np.mean((est - truth) ** 2)))
            print(f"{n_bots:>5} {n_games:>7} {dt:>7.2f} {ratings.iterations:>5} {se:>9.1f} {rmse:>13.1f}")
    print()
    print("two-seat ladder, outcomes kept as counts (what arena ladder run refits from)")
    print(f"{'bots':>5} {'games':>7} {'distinct':>8} {'refit s':>8} {'add 100 games ms':>16}")
    for n_bots in (10, 100):
        for n_games in (10_000, 100_000):
            outcomes = two_seat(n_bots, n_games)
            counts = Counter(outcomes)
            dt = math.inf
            for _ in range(3):
                gc.collect()
                t0 = time.perf_counter()
                fit_elo(counts)
                dt = min(dt, time.perf_counter() - t0)
            t0 = time.perf_counter()
            counts.update(outcomes[:100])
            add_ms = 1000 * (time.perf_counter() - t0)
            print(f"{n_bots:>5} {n_games:>7} {len(counts):>8} {dt:>8.3f} {add_ms:>16.2f}")


def two_seat(n_bots: int, n_games: int, seed: int = 1) -> list[Outcome]:
    rng = np.random.default_rng(seed)
    theta = rng.normal(0.0, 200.0, n_bots) / ELO_PER_NAT
    names = [f"bot{i:03d}" for i in range(n_bots)]
    out = []
    for _ in range(n_games):
        a, b = rng.choice(n_bots, size=2, replace=False)
        if rng.random() < 0.05:
            out.append(Outcome.draw([names[a], names[b]]))
        elif rng.random() < 1 / (1 + math.exp(theta[b] - theta[a])):
            out.append(Outcome.order(names[a], names[b]))
        else:
            out.append(Outcome.order(names[b], names[a]))
    return out


if __name__ == "__main__":
    main()
