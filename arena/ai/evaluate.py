"""A learned position evaluator, so playouts can stop after a few dozen turns.

Full playouts cost 100-300 engine steps; a search with tens of milliseconds per
decision then sees only a handful of them. Cutting playouts at a horizon and scoring
the position instead buys many more, less noisy samples. The score comes from a
logistic model over per-seat features (cards in each zone, power cards, low and high
hand cards, who faces the pile), fitted on heuristic self-play by
:mod:`arena.ai.train_eval`; its weights are data in ``eval_weights.json``.

For two players the model gives P(win) = sigmoid(w . (f_me - f_other)). With more
seats, every live pair is compared the same way and a seat's expected place is
1 + the sum of its chances of finishing behind each other live seat.
"""

from __future__ import annotations

import json
import math
from functools import cache
from pathlib import Path

WEIGHTS_PATH = Path(__file__).with_name("eval_weights.json")
FEATURES = ("hand", "hand_while_stock", "face_up", "face_down", "power_hand", "power_up",
            "low_hand", "high_hand", "to_move", "pile_to_move")
# Before training: fewer cards is better, and table cards cost more than hand cards.
FALLBACK = [-0.25, 0.15, -0.3, -0.35, 0.3, 0.2, -0.1, 0.05, 0.0, -0.02]


def seat_features(state, i: int, wild) -> list[float]:
    s = state.seats[i]
    hand = s.hand
    power = low = high = 0
    for c in hand:
        r = c >> 2
        if r in wild or r == 2 or r == 10 or r == 15:
            power += 1
        elif r <= 7:
            low += 1
        elif r >= 12:
            high += 1
    power_up = 0
    n_up = 0
    for st in s.face_up:
        n_up += len(st)
        r = st[0] >> 2
        if r in wild or r == 2 or r == 10 or r == 15:
            power_up += len(st)
    mover = 1.0 if state.to_move == i else 0.0
    return [len(hand), len(hand) if state.stock else 0, n_up, s.face_down_count, power, power_up,
            low, high, mover, mover * len(state.pile)]


class Evaluator:
    def __init__(self, tables: dict[str, list[float]]):
        self.tables = tables
        self._cache: dict[str, list[float]] = {}

    @classmethod
    def load(cls, path: Path | str = WEIGHTS_PATH) -> Evaluator:
        try:
            data = json.loads(Path(path).read_text())
        except FileNotFoundError:
            return cls({"default": FALLBACK})
        return cls(data["tables"])

    def weights(self, rules) -> list[float]:
        name = rules.name.rstrip("+")
        w = self._cache.get(name)
        if w is None:
            w = self._cache[name] = self.tables.get(name) or self.tables.get("default") or FALLBACK
        return w

    def strengths(self, state) -> list[float | None]:
        """w . features per live seat (None for seats already out)."""
        w = self.weights(state.rules)
        wild = state.rules.wild
        out: list[float | None] = []
        for i, s in enumerate(state.seats):
            if s.place is not None:
                out.append(None)
            else:
                f = seat_features(state, i, wild)
                out.append(sum(a * b for a, b in zip(w, f)))
        return out

    def scores(self, state) -> list[float]:
        """Expected place score per seat (1 first .. 0 last) of an unfinished game."""
        n = len(state.seats)
        out = [0.0] * n
        done = 0
        for i, s in enumerate(state.seats):
            if s.place is not None:
                out[i] = 0.0 if s.forfeit is not None else (n - s.place) / (n - 1)
                if s.forfeit is None:
                    done += 1
        v = self.strengths(state)
        live = [i for i in range(n) if v[i] is not None]
        for i in live:
            behind = 0.0
            for j in live:
                if j != i:
                    behind += 1.0 / (1.0 + math.exp(max(-50.0, min(50.0, v[i] - v[j]))))
            out[i] = (n - (done + 1 + behind)) / (n - 1)
        return out


@cache
def default_evaluator() -> Evaluator:
    """The shipped data, read once per process."""
    return Evaluator.load()
