"""Which table ``arena ladder run`` plays next: pure functions of the ratings and the game counts.

The rule (docs/RATINGS.md, "Matchmaking"), one batch at a time:

1. Only active members play: not retired, not suspended, files still there.
2. Every ``explore_every``-th batch is an *exploration* batch: the pair of active bots that has
   played together least (ties: the first such pair in label order) sits at the table, the one with the wider interval as the focus.  So every pairing is played
   again and again however the ratings look: after P exploration batches (P = number of pairs)
   every pair has met at least once more.
3. Otherwise the *focus* is the bot a game teaches most about: a **new** bot first (fewer than
   ``new_games`` games, fewest first), else the bot with the **widest 95% interval weighted by
   how informative its best game is**: width x 4 p(1-p), p its expected score against the
   nearest-rated other bot (1 between equals; an unrated bot counts as infinitely wide).  A bot
   that loses every game keeps a wide interval, but a game against anyone teaches little about
   it (p near 0), so it does not take every batch.  Ties go to fewer games, then label.  The focus
   of the previous batch is not the focus again when another bot can be.
4. The focus's opponents are the active bots of **nearest rating** (a two-seat game is most
   informative, p(1-p) largest, between equals), ties to the pair that met least, then label;
   ``field_size`` of them (at least seats - 1).
5. The batch is a gauntlet of the focus against that field: one table per (seats-1)-subset of
   the field, every deal in every seat rotation (duplicate deals, as in any tournament).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from itertools import combinations

__all__ = ["Candidate", "Table", "choose_table", "pair_key"]


@dataclass(frozen=True)
class Candidate:
    """An active member as matchmaking sees it."""

    label: str
    games: int = 0
    elo: float | None = None  # None: unrated (no games yet)
    lo: float | None = None
    hi: float | None = None
    author: str = ""  # the manifest's; with one_seat_per_author no table seats two of one author

    @property
    def width(self) -> float:
        return math.inf if self.lo is None or self.hi is None else self.hi - self.lo


@dataclass(frozen=True)
class Table:
    focus: str
    field: tuple[str, ...]
    why: str  # 'new', 'widest interval' or 'least-played pairing'


def pair_key(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a < b else (b, a)


def choose_table(bots: list[Candidate], pair_games: Mapping[tuple[str, str], int], *, seats: int,
                 field_size: int, new_games: int, explore: bool, previous: str | None = None,
                 one_per_author: bool = False) -> Table | None:
    """The next batch's focus and field, or None when fewer than ``seats`` bots are active (or, with
    ``one_per_author``, of distinct authors: a field never holds the focus's author, nor one twice)."""
    if len(bots) < seats:
        return None
    by_label = {b.label: b for b in bots}
    need = max(seats - 1, min(field_size, len(bots) - 1))
    who = (lambda c: _author(c)) if one_per_author else (lambda c: c.label)
    pairs = [p for p in combinations(sorted(by_label), 2) if who(by_label[p[0]]) != who(by_label[p[1]])]
    if explore and pairs:
        a, b = min(pairs, key=lambda p: (pair_games.get(p, 0), p))
        focus = max((by_label[a], by_label[b]), key=lambda c: (c.width, -c.games, c.label))
        first = b if focus.label == a else a
        rest = _distinct(_nearest(focus, [c for c in bots if c.label not in (a, b)], pair_games), by_label,
                         who, {who(by_label[a]), who(by_label[b])})
        if len(rest) >= seats - 2:
            return Table(focus.label, tuple([first] + rest[: need - 1]), "least-played pairing")
    eligible = [b for b in bots if b.label != previous] or bots
    new = [b for b in eligible if b.games < new_games]
    if new:
        ranked, why = sorted(new, key=lambda c: (c.games, c.label)), "new"
    else:
        ranked = sorted(eligible, key=lambda c: (-_weighted_width(c, bots), c.games, c.label))
        why = "widest interval"
    for focus in ranked:  # the first focus that has a whole table (every one, without the author rule)
        field = _distinct(_nearest(focus, [c for c in bots if c.label != focus.label], pair_games), by_label,
                          who, {who(focus)})
        if len(field) >= seats - 1:
            return Table(focus.label, tuple(field[:need]), why)
    return None


def _author(c: Candidate) -> str:
    from ..tournament.schedule import author_key
    return author_key(c.label, {c.label: c.author})


def _distinct(labels: list[str], by_label: Mapping[str, Candidate], who: Callable[[Candidate], str],
              taken: set[str]) -> list[str]:
    """``labels`` in order, without a bot whose ``who`` is already taken (by the table or an earlier one)."""
    out, seen = [], set(taken)
    for label in labels:
        key = who(by_label[label])
        if key not in seen:
            seen.add(key)
            out.append(label)
    return out


def _weighted_width(c: Candidate, bots: list[Candidate]) -> float:
    """Interval width x 4 p(1-p) of the bot's most even game (Fisher information of one game
    between equals is 1/4: the weight is 1 there)."""
    if c.elo is None:
        return math.inf
    rated = [o.elo for o in bots if o.label != c.label and o.elo is not None]
    if not rated:
        return c.width
    nearest = min(rated, key=lambda e: abs(e - c.elo))  # type: ignore[operator]
    p = 1.0 / (1.0 + 10.0 ** ((nearest - c.elo) / 400.0))
    return c.width * 4.0 * p * (1.0 - p)


def _nearest(focus: Candidate, others: list[Candidate], pair_games: Mapping[tuple[str, str], int]) -> list[str]:
    """Others by rating distance from the focus (unrated: distance 0), then fewest games together."""
    def distance(c: Candidate) -> float:
        if focus.elo is None or c.elo is None:
            return 0.0
        return abs(c.elo - focus.elo)
    return [c.label for c in sorted(others, key=lambda c: (distance(c), pair_games.get(pair_key(focus.label, c.label), 0),
                                                           c.label))]
