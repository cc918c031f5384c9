"""A living ladder's balance: who has played how much, in which seats and beside whom; and a
matchmaking that keeps those even.

:func:`audit` is what ``arena ladder NAME --balance`` shows: per member its games, its games in
each seat and its co-seatings (games shared with each other member), and the spread of each
(largest less smallest) across the members.

:func:`choose_balanced` is the ``policy = "balanced"`` matchmaking (docs/RATINGS.md): the focus
is the member idle longest (a newcomer, who has never played, first; ties to fewer games), its
field chosen one at a time: the member that has sat least with those it would sit with in the
batch (the focus at two seats; the focus and the field chosen so far at three or more, where
field members share tables), ties to fewer games, then longest idle. Counting only the focus at
three or more seats let field members who keep meeting each other drift: eight bots at four
seats ended 288 games and 300 co-seatings apart after 600 batches, now 0-4 and 4-12. A batch is a
gauntlet that plays every deal in every seat rotation, so seats even out by themselves; table
sizes are the ladder's one size. A newcomer joins the next batch without stopping the others.
Pure functions, like :mod:`arena.ladder.matchmaking`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from math import comb

from .matchmaking import Candidate, Table, _author, pair_key


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


@dataclass(frozen=True)
class Stated:
    """The spread the balanced policy keeps among members present over the whole window."""

    batch: int  # B: the focus's games in one batch (seats x the tables of its field)
    games: int  # most games less fewest: at most 3B (6B at two seats, where the field plays one table each)
    together: int  # most games two members shared less fewest: at most 4B

    def holds(self, b: Balance) -> bool:
        return b.games_spread <= self.games and b.pair_spread <= self.together and b.seat_spread == 0


def stated_spread(seats: int, field_size: int, deals: int = 1) -> Stated:
    """What ``arena ladder NAME --balance`` holds a balanced ladder to (docs/RATINGS.md), checked by
    tests/test_balance.py for 2 to 6 seats; ``deals`` per table of a batch."""
    batch = seats * comb(max(field_size, seats - 1), seats - 1) * deals
    return Stated(batch, (6 if seats == 2 else 3) * batch, 4 * batch)


def ladder_stated(store, ladder) -> Stated:
    """The stated spread of a stored ladder: ``arena ladder run`` raises a batch's deals to fill its
    concurrent slots (ladder.run.plan_batch), so B is the focus's games in the largest batch stored
    (the file's deals before the first)."""
    from ..store.games import largest_batch
    fewest = stated_spread(ladder.seats, ladder.matchmaking.field_size(ladder.seats), ladder.matchmaking.deals)
    played = largest_batch(store.db, ladder.run_prefix)
    if played <= fewest.batch:
        return fewest
    return Stated(played, (6 if ladder.seats == 2 else 3) * played, 4 * played)


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
    who = _author if one_per_author else (lambda c: c.label)
    idle = {b.label: last_seen.get(b.label, -1) for b in bots}
    need = max(seats - 1, min(field_size, len(bots) - 1))
    for focus in sorted(bots, key=lambda c: (idle[c.label], c.games, c.label)):
        field: list[str] = []
        taken = {who(focus)}
        while len(field) < need:
            beside = [focus.label, *field] if seats > 2 else [focus.label]  # whom a newcomer to the field sits with
            left = [c for c in bots if c.label != focus.label and c.label not in field and who(c) not in taken]
            if not left:
                break
            pick = min(left, key=lambda c: (sum(pair_games.get(pair_key(t, c.label), 0) for t in beside), c.games,
                                            idle[c.label], c.label))
            field.append(pick.label)
            taken.add(who(pick))
        if len(field) >= seats - 1:
            return Table(focus.label, tuple(field), "new" if idle[focus.label] < 0 else "longest idle")
    return None


@dataclass(frozen=True)
class Joined:
    """The active member that joined last: the stated spread holds for members present over the whole
    window, so the audit of the ``games`` stored since its placement ended is the one to read."""

    bot: str
    games: int


def last_joined(store, ladder) -> Joined | None:
    """The active member whose placement ended last, and the ladder's games stored since; None when
    every active member is an initial one (or no placement of theirs is stored)."""
    from ..store.games import count_after_tournament
    from .tables import bot_statuses, members
    out = bot_statuses(store, ladder.name)
    since = []
    for m in members(store, ladder.name):
        if m.label in out or m.placement != ladder.placement_id(m.label):
            continue
        n = count_after_tournament(store.db, ladder.prefix, m.placement)
        if n is not None:
            since.append(Joined(m.label, n))
    return min(since, key=lambda j: j.games, default=None)


def ladder_balance(store, ladder, window: int = 0) -> Balance:
    """The audit of a stored ladder's active members over its games (the last ``window`` of them, if
    given): what ``arena ladder NAME --balance`` shows."""
    from ..store.games import recent_seats
    from .tables import bot_statuses, members
    out = bot_statuses(store, ladder.name)
    active = [m.label for m in members(store, ladder.name) if m.label not in out]
    return audit(recent_seats(store.db, ladder.prefix, last=window), active, ladder.seats)
