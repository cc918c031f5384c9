"""Standings: per-bot tallies from stored games, with fitted Elo where there is data for it.

This module is the one place a standings table's numbers come from: `arena standings`,
`arena tournament`, `arena report --html`, `arena ladder` and the web pages all call
:func:`summarise` (through :func:`from_store` or :func:`arena.ladder.ladder_standings`), so
they show the same Elo, intervals, rates, LOS and ms/decision for the same games.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..store.games import game_results, think_by_bot


class Rates:
    """What a standings row derives from its counts: shared by a tournament's :class:`Line` and a
    ladder's row (arena.ladder.standings.Row), so both show the same rates."""

    games: int
    wins: int
    draws: int
    think_ms: float
    decisions: int
    elo_low: float | None
    elo_high: float | None

    @property
    def win_rate(self) -> float:
        return self.wins / self.games if self.games else 0.0

    @property
    def draw_rate(self) -> float:
        return self.draws / self.games if self.games else 0.0

    @property
    def ms_per_decision(self) -> float:
        return self.think_ms / self.decisions if self.decisions else 0.0

    @property
    def margin(self) -> float | None:
        return None if self.elo_low is None or self.elo_high is None else (self.elo_high - self.elo_low) / 2


@dataclass
class Line(Rates):
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
    rated: bool = False  # enough games to show the rating (ratings.MIN_RATED_GAMES)
    los_next: float | None = None  # P(stronger than the bot ranked just below)
    win_low: float | None = None  # 95% intervals of the rates (Wilson, at the effective games over deals)
    win_high: float | None = None
    draw_low: float | None = None
    draw_high: float | None = None

    @property
    def avg_place(self) -> float:
        return self.place_sum / self.games if self.games else 0.0

    def as_json(self) -> dict[str, Any]:
        r = lambda x, k=4: None if x is None else round(x, k)  # noqa: E731
        return {"bot": self.bot, "games": self.games, "wins": self.wins, "win_rate": round(self.win_rate, 4),
                "win_rate_low": r(self.win_low), "win_rate_high": r(self.win_high),
                "lasts": self.lasts, "draws": self.draws, "draw_rate": round(self.draw_rate, 4),
                "draw_rate_low": r(self.draw_low), "draw_rate_high": r(self.draw_high),
                "avg_place": round(self.avg_place, 4), "faults": dict(self.faults),
                "ms_per_decision": round(self.ms_per_decision, 3) if self.decisions else None,
                "elo": r(self.elo, 1), "elo_low": r(self.elo_low, 1), "elo_high": r(self.elo_high, 1),
                "rated": self.rated, "los_next": r(self.los_next)}


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


Game = tuple[str, int, list[str], dict[str, Any]]  # (tournament, deal seed, seats, result)


def summarise(games: list[Game], think: dict[str, tuple[float, int]] | None = None, *, anchor: str | None = None,
              anchor_elo: float = 1500.0, strict: bool = False):
    """Every number of a standings table, from games and each bot's (think ms, decisions).

    Returns (lines best first, the fit or None).  A deal is a (tournament, seed): its seat
    rotations share the cards, so rate intervals count it as one cluster.  ``anchor`` fixes that
    bot at ``anchor_elo`` (else the pool mean is there).  Without ``strict`` a fit that fails
    leaves the table unrated rather than losing it."""
    from ..ratings import fit_elo, neighbour_los, rate_interval
    pairs = [(seats, result) for _, _, seats, result in games]
    lines = tally(pairs)
    for bot, (ms, n) in (think or {}).items():
        if bot in lines:
            lines[bot].think_ms, lines[bot].decisions = ms, n
    ratings = None
    if len(lines) >= 2:
        try:
            ratings = fit_elo(outcomes(pairs), anchor=anchor, anchor_elo=anchor_elo)
        except Exception:
            if strict:
                raise
    if ratings is not None:
        for bot, r in ratings.items():
            line = lines[bot]
            line.elo, line.elo_low, line.elo_high, line.rated = r.elo, r.ci_low, r.ci_high, r.rated
        for a, _, p in neighbour_los(ratings):
            lines[a].los_next = p
    per_deal: dict[str, dict[tuple[str, int], list[int]]] = {}
    for tid, seed, seats, result in games:
        won, drew = _won_drew(seats, result)
        for s, bot in enumerate(seats):
            cell = per_deal.setdefault(bot, {}).setdefault((tid, seed), [0, 0, 0])
            cell[0] += s in won
            cell[1] += s in drew
            cell[2] += 1
    for bot, deals in per_deal.items():
        cells = [deals[k] for k in sorted(deals)]
        g = [c[2] for c in cells]
        _, lines[bot].win_low, lines[bot].win_high = rate_interval([c[0] for c in cells], g)
        _, lines[bot].draw_low, lines[bot].draw_high = rate_interval([c[1] for c in cells], g)
    return ranked(lines), ratings


def _won_drew(seats: list[str], result: dict[str, Any]) -> tuple[set[int], set[int]]:
    """Seats credited with a win and with a draw, by :func:`add_game`'s rule."""
    forfeits = result.get("forfeits", {})
    won, drew, place = set(), set(), 1
    for group in result["order"]:
        for s in group:
            if str(s) in forfeits:
                continue
            if len(group) == 1 and place == 1:
                won.add(s)
            elif len(group) > 1 and result["draw"]:
                drew.add(s)
        place += len(group)
    return won, drew


def read_games(store, *, tournament: str | None = None, prefix: str | None = None) -> tuple[list[Game], dict[str, tuple[float, int]]]:
    """A tournament's games (or those under a tournament-id prefix, or all) and per-bot think totals."""
    only = prefix if tournament is None else None
    games = list(game_results(store.db, tournament=tournament, prefix=only))
    think = think_by_bot(store.db, tournament=tournament, prefix=only)
    return games, think


def from_store(store, tournament: str | None = None) -> list[Line]:
    """The standings of a stored tournament (or of every game): what every view of it shows."""
    games, think = read_games(store, tournament=tournament)
    return summarise(games, think)[0]


def standings(games: list[tuple[list[str], dict[str, Any]]], *, with_elo: bool = True) -> list[Line]:
    """Standings of bare (seats, result) pairs, each game its own deal (no think times)."""
    if not with_elo:
        return ranked(tally(games))
    return summarise([("", i, seats, result) for i, (seats, result) in enumerate(games)])[0]


# -- how the numbers are written: the same text in every view ------------------------------------

def elo_text(elo: float | None, low: float | None, high: float | None, rated: bool, games: int) -> str:
    """``1512 ± 64``; ``too few games (4)`` below ratings.MIN_RATED_GAMES; ``1500 (anchor)`` for a
    ladder's anchor, whose rating is fixed rather than measured; ``-`` when unrated."""
    if elo is None:
        return "-"
    if not rated:
        return f"too few games ({games})"
    if low is None or high is None:
        return f"{elo:.0f}"
    if high <= low:  # the ladder's anchor: fixed by definition, every other interval is relative to it
        return f"{elo:.0f} (anchor)"
    return f"{elo:.0f} ± {(high - low) / 2:.0f}"


def rate_text(rate: float, low: float | None, high: float | None, games: int) -> str:
    """``37.5 [26, 50]``: a percentage with its 95% interval."""
    if not games:
        return "-"
    if low is None or high is None:
        return f"{100 * rate:.1f}"
    return f"{100 * rate:.1f} [{100 * low:.0f}, {100 * high:.0f}]"


def los_text(los: float | None) -> str:
    return "-" if los is None else f"{100 * los:.1f}%"


def ms_text(line: Line) -> str:
    return f"{line.ms_per_decision:,.1f}" if line.decisions else "-"
