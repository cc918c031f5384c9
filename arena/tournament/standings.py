"""Standings: per-bot tallies from stored games, with fitted Elo where there is data for it."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Line:
    bot: str
    games: int = 0
    wins: int = 0
    lasts: int = 0
    draws: int = 0
    place_sum: float = 0.0
    faults: Counter = field(default_factory=Counter)
    think_ms: float = 0.0
    decisions: int = 0
    elo: float | None = None
    elo_low: float | None = None
    elo_high: float | None = None

    @property
    def avg_place(self) -> float:
        return self.place_sum / self.games if self.games else 0.0

    @property
    def win_rate(self) -> float:
        return self.wins / self.games if self.games else 0.0

    @property
    def ms_per_decision(self) -> float:
        return self.think_ms / self.decisions if self.decisions else 0.0

    def as_json(self) -> dict[str, Any]:
        return {"bot": self.bot, "games": self.games, "wins": self.wins, "win_rate": round(self.win_rate, 4),
                "lasts": self.lasts, "draws": self.draws, "avg_place": round(self.avg_place, 4),
                "faults": dict(self.faults), "ms_per_decision": round(self.ms_per_decision, 3),
                "elo": self.elo, "elo_low": self.elo_low, "elo_high": self.elo_high}


def tally(games: list[tuple[list[str], dict[str, Any]]]) -> dict[str, Line]:
    """Tally (seats, result) pairs by the rule in docs/RATINGS.md ("Places, wins and draws")."""
    lines: dict[str, Line] = {}
    for seats, result in games:
        add_game(lines, seats, result)
    return lines


def add_game(lines: dict[str, Line], seats: list[str], result: dict[str, Any]) -> None:
    """Fold one game into running tallies (a long tournament keeps these, not every result).

    A seat that went out on its own is credited with its place, and with a win when that place
    is first, even when the others then draw. Seats tied in one group share the average of
    the places they span; in a drawn game they are the ones credited with the draw."""
    forfeits = result.get("forfeits", {})
    n = len(seats)
    place = 1
    for group in result["order"]:
        shared = place + (len(group) - 1) / 2
        for s in group:
            line = lines.get(seats[s])
            if line is None:
                line = lines[seats[s]] = Line(seats[s])
            line.games += 1
            line.place_sum += shared
            if str(s) in forfeits:
                line.faults[forfeits[str(s)]] += 1
            elif len(group) == 1 and place == 1:
                line.wins += 1
            elif len(group) > 1 and result["draw"]:
                line.draws += 1
            if place == n and len(group) == 1 and str(s) not in forfeits and not result["draw"]:
                line.lasts += 1
        place += len(group)


def ranked(lines: dict[str, Line]) -> list[Line]:
    return sorted(lines.values(), key=lambda l: (-(l.elo if l.elo is not None else 0), l.avg_place, -l.wins, l.bot))


def outcomes(games: list[tuple[list[str], dict[str, Any]]]):
    """Stored results as rating outcomes: full orders where known, winner-only otherwise."""
    from ..ratings import Outcome
    out = []
    for seats, result in games:
        order = [tuple(seats[s] for s in g) for g in result["order"]]
        if result["draw"]:
            # forfeited seats still lose to those who drew
            out.append(Outcome(tuple(order), partial=False))
        elif result["complete"]:
            out.append(Outcome(tuple(order), partial=False))
        else:
            rest = tuple(b for g in order[1:] for b in g)
            out.append(Outcome.winner_only(order[0][0], rest) if len(order[0]) == 1 else Outcome(tuple(order), partial=False))
    return out


def standings(games: list[tuple[list[str], dict[str, Any]]], *, with_elo: bool = True) -> list[Line]:
    lines = tally(games)
    if with_elo and games and len(lines) >= 2:
        try:
            from ..ratings import fit_elo
            ratings = fit_elo(outcomes(games))
        except Exception:  # ratings are a bonus on the table, never a reason to lose it
            ratings = {}
        for bot, r in ratings.items():
            if bot in lines:
                lines[bot].elo, lines[bot].elo_low, lines[bot].elo_high = r.elo, r.ci_low, r.ci_high
    return ranked(lines)
