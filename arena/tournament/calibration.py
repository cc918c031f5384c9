"""How well a bot's stated win probabilities (``info.win_prob``) match how its games ended.

The Brier score is the mean of ``(p - o)²`` over every decision that carried a ``win_prob``
``p``, where ``o`` is 1 if the bot's seat finished first alone and 0 otherwise. 0 is perfect,
0.25 is what always saying 50% scores, and lower than the bot's own base rate ``r(1 - r)``
means its figures carry information. Read from the stored game logs: only bots that send
``win_prob`` get a figure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..referee.protocol import check_info


@dataclass
class Calibration:
    bot: str
    decisions: int = 0  # decisions with a win_prob
    games: int = 0  # games with at least one
    squared_error: float = 0.0
    wins: int = 0  # of those games, the ones it won outright

    @property
    def brier(self) -> float | None:
        return self.squared_error / self.decisions if self.decisions else None

    def as_json(self) -> dict[str, Any]:
        b = self.brier
        return {"bot": self.bot, "decisions": self.decisions, "games": self.games,
                "brier": None if b is None else round(b, 4), "won": self.wins}


def winner(result: dict[str, Any]) -> int | None:
    """The seat that finished first alone, or None (a shared first place, or no result)."""
    order = result.get("order") or []
    return order[0][0] if order and len(order[0]) == 1 else None


def calibration(games: Iterable[tuple[list[str], dict[str, Any]]]) -> dict[str, Calibration]:
    """Per bot label: the Brier score of its ``win_prob`` over ``(seats, record)`` games."""
    out: dict[str, Calibration] = {}
    for seats, record in games:
        result = record.get("result") or {}
        first = winner(result)
        seen: set[int] = set()
        for step in record.get("steps", []):
            if "info" not in step:
                continue
            p = check_info(step["info"]).get("info", {}).get("win_prob")  # a stored log is checked again
            seat = step.get("seat")
            if p is None or not isinstance(seat, int) or not 0 <= seat < len(seats):
                continue
            c = out.setdefault(seats[seat], Calibration(seats[seat]))
            c.decisions += 1
            c.squared_error += (p - (1.0 if seat == first else 0.0)) ** 2
            if seat not in seen:
                seen.add(seat)
                c.games += 1
                c.wins += seat == first
    return out


def stored_calibration(store: Any, tournament: str | None = None) -> dict[str, Calibration]:
    """:func:`calibration` over the games of a store (all, or one tournament's)."""
    def games() -> Iterable[tuple[list[str], dict[str, Any]]]:
        for g in store.games(tournament=tournament, limit=10**9):
            record = store.game_record(g["id"])
            if record is not None:
                yield g["seats"], record
    return calibration(games())
