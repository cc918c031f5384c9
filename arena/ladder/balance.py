"""A living ladder's balance: who has played how much, in which seats and beside whom; and a
matchmaking that keeps those even.

:func:`audit` is what ``arena ladder NAME --balance`` shows: per member its games, its games in
each seat and its co-seatings (games shared with each other member), and the spread of each
(largest less smallest) across the members.

:func:`choose_balanced` is the ``policy = "balanced"`` matchmaking (docs/RATINGS.md): the focus
is the member idle longest (a newcomer, who has never played, first; ties to fewer games), its
field the members it has sat with least (ties to fewer games, then longest idle). A batch is a
gauntlet that plays every deal in every seat rotation, so seats even out by themselves; table
sizes are the ladder's one size. A newcomer joins the next batch without stopping the others.
Pure functions, like :mod:`arena.ladder.matchmaking`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

from .matchmaking import Candidate, Table, _author, _distinct, pair_key


@dataclass(frozen=True)
class BotBalance:
    bot: str
    games: int
    seats: tuple[int, ...]  # games in seat 0, 1, ...
    together: dict[str, int]  # games shared with each other member


@dataclass(frozen=True)
class Balance:
    rows: tuple[BotBalance, ...]
    games_spread: int  # most games less fewest, over the members
    seat_spread: int  # over the members, the largest of (its most-played seat less its least)
    pair_low: int  # fewest games any two members shared
    pair_high: int  # most games any two members shared

    @property
    def pair_spread(self) -> int:
        return self.pair_high - self.pair_low


def audit(games: Iterable[Sequence[str]], members: Sequence[str], seats: int) -> Balance:
    """The balance of ``games`` (each its seats, in order) among ``members``; others' seats are ignored."""
    keep = set(members)
    count: Counter[str] = Counter()
    seat: dict[str, list[int]] = {m: [0] * seats for m in members}
    pairs: Counter[tuple[str, str]] = Counter()
    for g in games:
        for s, b in enumerate(g):
            if b in keep:
                count[b] += 1
                if s < seats:
                    seat[b][s] += 1
        for a, b in combinations([b for b in g if b in keep], 2):
            pairs[pair_key(a, b)] += 1
    rows = tuple(BotBalance(m, count[m], tuple(seat[m]),
                            {o: pairs[pair_key(m, o)] for o in members if o != m}) for m in members)
    together = [pairs[p] for p in combinations(sorted(members), 2)] or [0]
    return Balance(rows, (max(count[m] for m in members) - min(count[m] for m in members)) if members else 0,
                   max((max(r.seats) - min(r.seats) for r in rows), default=0), min(together), max(together))


def choose_balanced(bots: Sequence[Candidate], pair_games: Mapping[tuple[str, str], int],
                    last_seen: Mapping[str, int], *, seats: int, field_size: int,
                    one_per_author: bool = False) -> Table | None:
    """The next batch: the longest-idle member against the members it has sat with least.

    ``last_seen``: label -> the number of the ladder's last game the bot played (absent: never).
    With ``one_per_author`` no table seats two bots of one author (the next idle bot with a whole
    table is the focus)."""
    if len(bots) < seats:
        return None
    by_label = {b.label: b for b in bots}
    who = _author if one_per_author else (lambda c: c.label)
    idle = {b.label: last_seen.get(b.label, -1) for b in bots}
    need = max(seats - 1, min(field_size, len(bots) - 1))
    for focus in sorted(bots, key=lambda c: (idle[c.label], c.games, c.label)):
        others = sorted((c for c in bots if c.label != focus.label),
                        key=lambda c: (pair_games.get(pair_key(focus.label, c.label), 0), c.games, idle[c.label],
                                       c.label))
        field = _distinct([c.label for c in others], by_label, who, {who(focus)})
        if len(field) >= seats - 1:
            return Table(focus.label, tuple(field[:need]), "new" if idle[focus.label] < 0 else "longest idle")
    return None


def ladder_balance(store, ladder, window: int = 0) -> Balance:
    """The audit of a stored ladder's active members over its games (the last ``window`` of them, if
    given): what ``arena ladder NAME --balance`` shows."""
    from ..store.games import recent_seats
    from .tables import bot_statuses, members
    out = bot_statuses(store, ladder.name)
    active = [m.label for m in members(store, ladder.name) if m.label not in out]
    return audit(recent_seats(store.db, ladder.prefix, last=window), active, ladder.seats)
