"""Swiss pairing for tables of k seats (2-6): pure functions of the standings and the rounds before.

A round sits out ``n mod k`` bots (byes) and seats the rest at tables of k. Byes go to the
bots with the fewest byes so far, the lowest-standing first, so no bot has a second bye while
another has none. The tables then minimise, in this order:

0. with ``one_seat_per_author``, pairs of one author seated together (``apart``): none while
   any pairing without one exists, and the report says how many were left when none does;
1. repeat meetings: over every pair seated together, how often that pair has already met
   (so no two bots meet again while a pairing without it exists);
2. score spread: over every table, its best score less its worst (bots of similar score meet).

The search is branch and bound over "the best unseated bot and which k-1 join it", candidates
tried fewest repeats first, then closest score, so its first answer is the greedy one; a lower
bound (the sorted scores cut into consecutive tables, which is the least spread any partition
of them can have) prunes the rest. It counts the candidate tables it scores and stops at
``budget``: small fields are always searched to the end (``Pairing.optimal``), a large one
keeps the best pairing found, and says so. Nothing depends on the clock, so a resumed
tournament pairs every round exactly as before.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

BUDGET = 1_000_000  # candidate tables scored per round before the search keeps what it has
APART = 10**9  # a pair kept apart costs more than every repeat a round can hold, so it is minimised first


@dataclass(frozen=True)
class Pairing:
    """One round's seating and what it minimised."""

    tables: tuple[tuple[str, ...], ...]  # each in standing order; the schedule rotates the seats
    byes: tuple[str, ...]
    repeats: int  # co-seated pairs' earlier meetings, summed over the round's tables
    spreads: tuple[float, ...]  # per table: best score less worst
    least_spread: float  # the spread of the same bots with repeats ignored (the lower bound)
    optimal: bool | None  # the search ended; False: stopped at its budget; None: read back, not searched
    clashes: int = 0  # pairs of one author seated together (one_seat_per_author): only when no draw avoids it

    @property
    def spread(self) -> float:
        return sum(self.spreads)

    def summary(self) -> str:
        """One line for the terminal and the report."""
        worst = max(self.spreads, default=0.0)
        byes = ", ".join(self.byes) or "none"
        return (f"{len(self.tables)} tables, repeat meetings {self.repeats}, score spread {self.spread:.0f} "
                f"(least possible {self.least_spread:.0f}, widest table {worst:.0f}), byes: {byes}"
                + (f"; {self.clashes} pairs of one author seated together: no pairing keeps them apart"
                   if self.clashes else "")
                + ("; search stopped at its budget: best found" if self.optimal is False else ""))


def meetings(tables: Iterable[Sequence[str]]) -> Counter[frozenset[str]]:
    """How often each pair of bots has sat at one table (each table counts once, whatever its games)."""
    met: Counter[frozenset[str]] = Counter()
    for table in tables:
        for a, b in itertools.combinations(table, 2):
            met[frozenset((a, b))] += 1
    return met


def choose_byes(order: Sequence[str], count: int, byes: Mapping[str, int]) -> tuple[str, ...]:
    """``count`` bots to sit out: fewest byes so far first, then the lowest in ``order`` (best first)."""
    rank = {b: i for i, b in enumerate(order)}
    return tuple(sorted(order, key=lambda b: (byes.get(b, 0), -rank[b]))[:count])


def pair_round(order: Sequence[str], scores: Mapping[str, float], seats: int,
               met: Mapping[frozenset[str], int], byes: Mapping[str, int], *, budget: int = BUDGET,
               apart: frozenset[frozenset[str]] = frozenset()) -> Pairing:
    """The round's byes and tables for bots in standing ``order`` (best first) with their ``scores``.

    ``met`` counts earlier meetings (:func:`meetings`), ``byes`` earlier byes per bot; ``apart``:
    pairs not to seat together while any pairing avoids it (bots of one author)."""
    if len(set(order)) != len(order):
        raise ValueError("each bot may be listed once")
    if not 2 <= seats <= len(order):
        raise ValueError(f"{seats}-seat tables need at least {seats} bots, got {len(order)}")
    out = choose_byes(order, len(order) % seats, byes)
    rank = {b: i for i, b in enumerate(order)}
    players = sorted((b for b in order if b not in out), key=lambda b: (-scores.get(b, 0.0), rank[b]))
    cost = Counter(met)
    for pair in apart:
        cost[pair] += APART
    tables, weighed, spreads, optimal = _search(players, [float(scores.get(b, 0.0)) for b in players], seats,
                                                cost, budget)
    return Pairing(tuple(tables), out, weighed % APART, tuple(spreads), _least_spread(
        [float(scores.get(b, 0.0)) for b in players], seats), optimal, weighed // APART)


def seated(tables: Sequence[tuple[str, ...]], order: Sequence[str], scores: Mapping[str, float],
           met: Mapping[frozenset[str], int], apart: frozenset[frozenset[str]] = frozenset()) -> Pairing:
    """The same account of a round already seated (a played round read back from the store)."""
    seated_ = {b for t in tables for b in t}
    repeats = sum(met.get(frozenset(p), 0) for t in tables for p in itertools.combinations(t, 2))
    spreads = tuple(max(scores[b] for b in t) - min(scores[b] for b in t) for t in tables)
    values = sorted((float(scores[b]) for b in seated_), reverse=True)
    k = len(tables[0]) if tables else 2
    return Pairing(tuple(tables), tuple(b for b in reversed(order) if b not in seated_), repeats, spreads,
                   _least_spread(values, k), None,
                   sum(frozenset(p) in apart for t in tables for p in itertools.combinations(t, 2)))


def _least_spread(values: Sequence[float], k: int) -> float:
    """The least total spread of any partition of ``values`` (sorted, best first) into tables of k:
    consecutive tables, since a gap between neighbours is crossed by at least one table unless a
    table boundary falls on it."""
    return sum(values[i] - values[i + k - 1] for i in range(0, len(values) - k + 1, k))


CACHED = 20_000  # a head's candidate tables kept ranked for the whole search when there are at most this many


def _search(players: list[str], values: list[float], k: int, met: Mapping[frozenset[str], int],
            budget: int) -> tuple[list[tuple[str, ...]], int, list[float], bool]:
    n = len(players)
    meet = [[met.get(frozenset((a, b)), 0) for b in players] for a in players]
    best: list = [None, (float("inf"), float("inf"))]
    work = 0
    stopped = False
    ranked: dict[int, list[tuple[int, float, tuple[int, ...], int]]] = {}

    def rank(head: int, pool: Sequence[int]) -> list[tuple[int, float, tuple[int, ...], int]]:
        """Tables of ``head`` and k-1 of ``pool`` as (repeats, spread, members, bit mask), fewest
        repeats first, then closest score: the order the search tries them in."""
        row = meet[head]
        out = []
        for combo in itertools.combinations(pool, k - 1):
            r = sum(row[c] for c in combo)
            for a, b in itertools.combinations(combo, 2):
                r += meet[a][b]
            mask = 1 << head
            for c in combo:
                mask |= 1 << c
            out.append((r, values[head] - values[combo[-1]], (head, *combo), mask))
        out.sort()
        return out

    def candidates(head: int, others: list[int]) -> list[tuple[int, float, tuple[int, ...], int]]:
        """The ranked tables for ``head``; the bots still unseated are always later in the order than
        the head, so one ranking over every later bot, filtered, serves every node with that head."""
        if head not in ranked:
            if math.comb(n - 1 - head, k - 1) > CACHED:
                return rank(head, others)
            ranked[head] = rank(head, range(head + 1, n))
        return ranked[head]

    def bound(rest: list[int]) -> float:
        return _least_spread([values[i] for i in rest], k)

    unmet = [sum(1 << j for j in range(n) if j != i and not meet[i][j]) for i in range(n)]
    known = [n - 1 - m.bit_count() for m in unmet]  # how many bots each has met

    def must_repeat(rest: list[int], here: int) -> int:
        """Each bot needs k-1 companions; those beyond the bots it has not met are repeats,
        and a repeated pair is counted from both ends. A bot that has met at most
        len(rest) - k of them has k-1 unmet left, so only the others are counted."""
        limit = len(rest) - k
        short = sum(max(0, k - 1 - (unmet[i] & here).bit_count()) for i in rest if known[i] > limit)
        return -(-short // 2)

    def walk(rest: list[int], here: int, chosen: list[tuple[int, ...]], rep: int, spr: float,
             spreads: list[float]) -> None:
        nonlocal work, stopped
        if not rest:
            if (rep, spr) < best[1]:
                best[0], best[1] = (list(chosen), list(spreads)), (rep, spr)
            return
        head, others = rest[0], rest[1:]
        work += math.comb(len(others), k - 1)
        for r, s, group, mask in candidates(head, others):
            if stopped:
                return
            if rep + r > best[1][0]:
                break  # sorted by repeats: no later candidate can do better
            if mask & here != mask:
                continue  # a bot of this table is seated already
            left_mask = here & ~mask
            left = [i for i in others if left_mask >> i & 1]
            floor = rep + r + must_repeat(left, left_mask)
            if floor > best[1][0] or (floor, spr + s + bound(left)) >= best[1]:
                continue
            chosen.append(group)
            spreads.append(s)
            walk(left, left_mask, chosen, rep + r, spr + s, spreads)
            chosen.pop()
            spreads.pop()
            if work >= budget and best[0] is not None:
                stopped = True

    walk(list(range(n)), (1 << n) - 1, [], 0, 0.0, [])
    groups, spreads = best[0]
    return ([tuple(players[i] for i in g) for g in groups], int(best[1][0]), spreads, not stopped)
