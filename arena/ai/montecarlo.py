"""Flat Monte Carlo: try every legal action on many determinizations, keep the best average.

Each round deals one fresh determinization and plays every candidate action on it,
followed by a heuristic playout for all seats, so actions are compared on the same
hidden cards (common random numbers): the noise of the deal cancels out of the
comparison, which matters when a decision gets only tens of playouts.
"""

from __future__ import annotations

import random
import time

from arena.engine.game import apply_action

from .observe import Observer
from .simulate import playout, result_scores

TIE_BONUS = 0.01  # the heuristic's own choice wins near-ties: fewer noisy deviations


def monte_carlo(obs: Observer, actions, rng: random.Random, deadline: float,
                iterations: int | None, policy, horizon: int, favourite=None,
                infer: bool = True) -> tuple[int, list]:
    """Index of the best of ``actions`` (engine actions legal for the observer) and the
    per-action (mean, playouts) table. ``iterations`` counts rounds over all actions.
    ``infer=False`` deals hidden cards uniformly instead of through the resampler."""
    me = obs.seat
    n = len(actions)
    total = [0.0] * n
    count = [0] * n
    rounds = 0
    deal = obs.resample if infer else obs.sample
    while True:
        det = deal(rng)
        for j, a in enumerate(actions):
            s = apply_action(det, a, check=False)[0]
            if s.result is None:
                s = playout(s, policy, horizon)
            total[j] += result_scores(s)[me]
            count[j] += 1
        rounds += 1
        if iterations is not None and rounds >= iterations:
            break
        if time.perf_counter() >= deadline:
            break
    means = [(total[j] / count[j] if count[j] else 0.0, count[j]) for j in range(n)]
    best = max(range(n), key=lambda j: means[j][0] + (TIE_BONUS if j == favourite else 0.0))
    return best, means
