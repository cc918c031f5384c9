"""The learned setup table: how much each rank is worth face up rather than in hand.

The weights live in ``setup_table.json`` (data, written by :mod:`arena.ai.train_setup`)
so retraining never touches code. A face-up choice scores the sum of its cards' rank
weights plus a bonus for every extra card of a rank already face up (several
same-rank face-up cards leave together under ``face_up_multi`` or stacking). Rule sets
not in the table use its ``default`` entry, trained over all presets.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

TABLE_PATH = Path(__file__).with_name("setup_table.json")
RANK_KEYS = ("2", "3", "4", "5", "6", "7", "8", "9", "T", "J", "Q", "K", "A", "X")
_RANK_OF_KEY = {k: i + 2 for i, k in enumerate(RANK_KEYS)}

# Before any training: high cards and power cards face up, as ``strategies.lowest_first`` does.
FALLBACK = {"ranks": {k: float(r) for k, r in _RANK_OF_KEY.items()} | {"2": 20.0, "T": 21.0, "X": 22.0},
            "pair": 0.0}


class SetupTable:
    def __init__(self, tables: dict[str, dict]):
        self.tables = tables
        self._weights: dict[str, tuple[list[float], float]] = {}

    @classmethod
    def load(cls, path: Path | str = TABLE_PATH) -> SetupTable:
        try:
            data = json.loads(Path(path).read_text())
        except FileNotFoundError:
            return cls({"default": FALLBACK})
        return cls(data["tables"])

    def weights(self, rules) -> tuple[list[float], float]:
        name = rules.name.rstrip("+")
        hit = self._weights.get(name)
        if hit is None:
            entry = self.tables.get(name) or self.tables.get("default") or FALLBACK
            w = [0.0] * 16
            for key, v in entry["ranks"].items():
                w[_RANK_OF_KEY[key]] = float(v)
            hit = (w, float(entry.get("pair", 0.0)))
            self._weights[name] = hit
        return hit

    def score(self, rules, stacks) -> float:
        w, pair = self.weights(rules)
        total = 0.0
        seen: set[int] = set()
        for stack in stacks:
            for i, c in enumerate(stack):
                r = c >> 2
                total += w[r]
                if i or r in seen:
                    total += pair
                seen.add(r)
        return total

    def choose_face_up(self, rules, actions):
        """The ``SetFaceUp`` action with the best table score (ties: the first listed)."""
        return max(actions, key=lambda a: self.score(rules, a.stacks))


@cache
def default_table() -> SetupTable:
    """The shipped data, read once per process."""
    return SetupTable.load()


def fallback_table() -> SetupTable:
    """The untrained 'high cards face up' table, for comparisons."""
    return SetupTable({"default": FALLBACK})
