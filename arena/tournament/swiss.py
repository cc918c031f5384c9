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

import functools
import itertools
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

BUDGET = 1_000_000  # candidate tables scored per round before the search keeps what it has
REPEATS_BUDGET = 3_000_000  # candidate tables the search for the fewest repeats may score before it gives up
APART = 10**9  # a pair kept apart costs more than every repeat a round can hold, so it is minimised first
INFINITE = 10**30  # more than any seating costs


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
    least: int | None = None  # the fewest repeats any seating has (clashes weigh APART), proved by the
    # search for them (again for a round read back); None: that search spent its budget

    @property
    def fewest(self) -> bool:
        """The repeats (and clashes) are the fewest any seating has."""
        return self.least is not None and self.least == self.repeats + self.clashes * APART

    @property
    def spread(self) -> float:
        return sum(self.spreads)

    def summary(self) -> str:
        """One line for the terminal as the round begins."""
        byes = ", ".join(self.byes) or "none"
        return f"{len(self.tables)} tables, {self.minimised()}, byes: {byes}"

    def minimised(self) -> str:
        """What the pairing minimised, in plain words: the report, the web page and the terminal's
        rounds table say the same (docs/FORMATS.md)."""
        return "; ".join(filter(None, (self.clashes_words(), self.repeats_words(), self.spread_words())))

    def clashes_words(self) -> str:
        return (f"{self.clashes} pairs of one author seated together: no pairing keeps them apart"
                if self.clashes else "")

    def repeats_words(self) -> str:
        """``repeats: 4, the fewest possible`` where a search proved it; else ``at most``."""
        if self.fewest or self.optimal:  # the main search, when it ended, proved repeats first
            return f"repeats: {self.repeats}, the fewest possible"
        if self.least is not None:  # a stored round seated with more than it needed
            return f"repeats: {self.repeats} (the fewest possible: {self.least % APART})"
        return f"repeats: at most {self.repeats} (the search for fewer stopped at its budget)"

    def spread_words(self) -> str:
        """The score spread, whether the search proved it least, and the bound no seating beats."""
        if self.spread <= self.least_spread + 1e-9:  # the bound itself: no seating at all has less
            how = ", the least possible"
        else:
            how = {True: ", the least possible with those repeats",
                   False: ", the least found before its search stopped at its budget"}.get(self.optimal, "")
        return (f"score spread: {self.spread:.0f}{how} (no seating has less than {self.least_spread:.0f}; "
                f"widest table {max(self.spreads, default=0.0):.0f})")


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
               repeats_budget: int = REPEATS_BUDGET, apart: frozenset[frozenset[str]] = frozenset()) -> Pairing:
    """The round's byes and tables for bots in standing ``order`` (best first) with their ``scores``.

    ``met`` counts earlier meetings (:func:`meetings`), ``byes`` earlier byes per bot; ``apart``:
    pairs not to seat together while any pairing avoids it (bots of one author). ``budget`` bounds the
    seating search, ``repeats_budget`` the search for the fewest repeats that guides it."""
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
    values = [float(scores.get(b, 0.0)) for b in players]
    meet = [[cost.get(frozenset((a, b)), 0) for b in players] for a in players]
    fewest = _fewest_repeats(meet, seats, repeats_budget)
    groups, weighed, spreads, optimal = _search(values, seats, meet, budget, fewest)
    return Pairing(tuple(tuple(players[i] for i in g) for g in groups), out, weighed % APART, tuple(spreads),
                   _least_spread(values, seats), optimal, weighed // APART, fewest[0] if fewest else None)


def seated(tables: Sequence[tuple[str, ...]], order: Sequence[str], scores: Mapping[str, float],
           met: Mapping[frozenset[str], int], apart: frozenset[frozenset[str]] = frozenset()) -> Pairing:
    """The same account of a round already seated (a played round read back from the store)."""
    seated_ = {b for t in tables for b in t}
    repeats = sum(met.get(frozenset(p), 0) for t in tables for p in itertools.combinations(t, 2))
    spreads = tuple(max(scores[b] for b in t) - min(scores[b] for b in t) for t in tables)
    values = sorted((float(scores[b]) for b in seated_), reverse=True)
    k = len(tables[0]) if tables else 2
    clashes = sum(frozenset(p) in apart for t in tables for p in itertools.combinations(t, 2))
    players = tuple(sorted(seated_))
    proved = _proved_fewest(players, k, frozenset((p, n) for p, n in met.items() if n and p <= seated_),
                            frozenset(p for p in apart if p <= seated_)) if repeats or clashes else 0
    return Pairing(tuple(tables), tuple(b for b in reversed(order) if b not in seated_), repeats, spreads,
                   _least_spread(values, k), None, clashes, proved)


@functools.lru_cache(maxsize=64)
def _proved_fewest(players: tuple[str, ...], k: int, met: frozenset[tuple[frozenset[str], int]],
                   apart: frozenset[frozenset[str]]) -> int | None:
    """The fewest repeats (clashes weighed by ``APART``) any seating of ``players`` has, or None when
    the search spent its budget: a played round read back says whether it had the fewest. Kept,
    since a page or report reads the same rounds back again and again."""
    cost = Counter(dict(met))
    for pair in apart:
        cost[pair] += APART
    meet = [[cost.get(frozenset((a, b)), 0) for b in players] for a in players]
    found = _fewest_repeats(meet, k, REPEATS_BUDGET)
    return None if found is None else found[0]


def _least_spread(values: Sequence[float], k: int) -> float:
    """The least total spread of any partition of ``values`` (sorted, best first) into tables of k:
    consecutive tables, since a gap between neighbours is crossed by at least one table unless a
    table boundary falls on it."""
    return sum(values[i] - values[i + k - 1] for i in range(0, len(values) - k + 1, k))


def _fewest_repeats(meet: Sequence[Sequence[int]], k: int, budget: int) -> tuple[int, list[tuple[int, ...]]] | None:
    """The fewest repeats (with clashes) any seating of bots ``0..n-1`` at tables of k has, and one
    seating with them; None when ``budget`` candidate tables were scored before that was proved.

    The main search must seat the best bot first, so a round whose repeats are hard to avoid can
    spend its whole budget before it finds the fewest. This search only counts repeats, so it can
    seat first the bot with the fewest unmet companions left, and it remembers every set of unseated
    bots it has solved or bounded (their best seating does not depend on how the others sat), trying
    limits from the lower bound up: each limit either finds a seating under it or proves none exists."""
    n = len(meet)
    unmet = [sum(1 << j for j in range(n) if j != i and not meet[i][j]) for i in range(n)]
    floor = _repeats_floor(meet, k)
    solved: dict[int, tuple[int, bool, tuple[int, ...]]] = {}  # unseated -> (least or bound, exact, its first table)
    work = 0

    def solve(here: int, limit: int) -> int:
        """The fewest repeats seating ``here`` when under ``limit``; else a lower bound of at least ``limit``."""
        if not here:
            return 0
        known = solved.get(here)
        if known is not None and (known[1] or known[0] >= limit):
            return known[0]
        low = max(floor(here), known[0] if known else 0)
        if low >= limit:
            solved[here] = (low, False, ())
            return low
        if work >= budget:
            raise _OutOfBudget
        m, pick, fewest = here, -1, n
        while m:  # the bot with the fewest unmet companions left
            i = (m & -m).bit_length() - 1
            m &= m - 1
            if (unmet[i] & here).bit_count() < fewest:
                pick, fewest = i, (unmet[i] & here).bit_count()
        pool = [j for j in range(n) if here >> j & 1 and j != pick]
        options: list[tuple[int, tuple[int, ...]]] = []
        cut = [INFINITE]  # the fewest repeats of a table cut off at the limit: a bound for all it would seat

        def tables(start: int, combo: tuple[int, ...], r: int) -> None:
            """The tables of ``pick`` under ``limit`` repeats, built a bot at a time and cut off there."""
            nonlocal work
            for at in range(start, len(pool)):
                j = pool[at]
                here_r = r + meet[pick][j] + sum(meet[c][j] for c in combo)
                work += 1
                if here_r >= limit:
                    cut[0] = min(cut[0], here_r)
                    continue
                if len(combo) == k - 2:
                    options.append((here_r, (*combo, j)))
                else:
                    tables(at + 1, (*combo, j), here_r)

        tables(0, (), 0)
        options.sort()
        # bound: the least any seating of ``here`` can have when none is under the limit; it may pass
        # the limit (a forced clash costs APART), so the caller's next limit jumps there, not by one
        best, table, bound = limit, (), cut[0]
        for r, combo in options:
            if r >= best:
                bound = min(bound, r)
                break
            left = here & ~(1 << pick)
            for c in combo:
                left &= ~(1 << c)
            got = r + solve(left, best - r)
            if got < best:
                best, table = got, tuple(sorted((pick, *combo)))
            bound = min(bound, got)
        if best < limit:
            solved[here] = (best, True, table)
            return best
        solved[here] = (max(low, limit if bound == INFINITE else bound), False, ())
        return solved[here][0]

    everyone = (1 << n) - 1
    limit = floor(everyone) + 1
    try:
        while (least := solve(everyone, limit)) >= limit:
            limit = least + 1
    except _OutOfBudget:
        return None
    tables, here = [], everyone
    while here:
        table = solved[here][2]
        tables.append(table)
        for c in table:
            here &= ~(1 << c)
    return least, sorted(tables)


def _repeats_floor(meet: Sequence[Sequence[int]], k: int) -> Callable[[int], int]:
    """A lower bound on the repeats of any seating of the bots in a bit mask at tables of k, the
    larger of two: the companions each bot needs beyond the bots it has not met, halved (a repeated
    pair counts from both ends); and the pairs of each clique of :func:`_cliques` that the tables
    must seat together, fewest when the clique is spread evenly over them."""
    n = len(meet)
    unmet = [sum(1 << j for j in range(n) if j != i and not meet[i][j]) for i in range(n)]
    cliques = [(members, count) for members, count in _cliques(meet) if members.bit_count() > 2]
    # a pair alone adds only at the last table, whose repeats the searches count themselves

    def floor(here: int) -> int:
        if not here:
            return 0
        short, m = 0, here
        while m:
            i = (m & -m).bit_length() - 1
            m &= m - 1
            short += max(0, k - 1 - (unmet[i] & here).bit_count())
        tables, crowded = here.bit_count() // k, 0
        for members, weight in cliques:
            q, r = divmod((members & here).bit_count(), tables)
            crowded += weight * (r * (q + 1) * q + (tables - r) * q * (q - 1)) // 2
        return max(-(-short // 2), crowded)

    return floor


def _cliques(meet: Sequence[Sequence[int]]) -> list[tuple[int, int]]:
    """The meetings cut into cliques: groups of bots (bit masks) that have all met one another,
    each with a count of meetings taken from every pair in it, so that no pair gives more than
    it had. A seating repeats at least each clique's count times the pairs of it seated together,
    and the tables left seat fewest of them when the clique is spread evenly over them: the sum
    bounds the round's repeats. A past table is such a clique; grown greedily, largest first."""
    n = len(meet)
    left = [list(row) for row in meet]
    out = []
    while True:
        linked = [sum(1 << j for j in range(n) if j != i and left[i][j]) for i in range(n)]
        first = max(range(n), key=lambda i: linked[i].bit_count())
        if not linked[first]:
            return out
        members, joinable = 1 << first, linked[first]
        while joinable:
            j = max((i for i in range(n) if joinable >> i & 1), key=lambda i: (linked[i] & joinable).bit_count())
            members |= 1 << j
            joinable &= linked[j]
        bots = [i for i in range(n) if members >> i & 1]
        count = min(left[a][b] for a in bots for b in bots if a != b)
        for a in bots:
            for b in bots:
                if a != b:
                    left[a][b] -= count
        out.append((members, count))


class _OutOfBudget(BaseException):
    """Control flow, not an error: unwinds the repeats search's recursion when its budget is spent,
    caught at its one entry (``_fewest_repeats``), never seen outside."""


CACHED = 20_000  # a head's candidate tables kept ranked for the whole search when there are at most this many


def _search(values: list[float], k: int, meet: Sequence[Sequence[int]], budget: int,
            fewest: tuple[int, list[tuple[int, ...]]] | None) -> tuple[list[tuple[int, ...]], int, list[float], bool]:
    """Branch and bound for the least (repeats, spread) seating of bots ``0..n-1`` (standing order).
    ``fewest``: the proved fewest repeats and a seating with them: seatings with more are not
    searched, and a search stopped at its budget keeps that seating if it found none as good."""
    n = len(values)
    cap = fewest[0] if fewest else math.inf
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

    must_repeat = _repeats_floor(meet, k)

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
            if rep + r > min(best[1][0], cap):
                break  # sorted by repeats: no later candidate can do better
            if mask & here != mask:
                continue  # a bot of this table is seated already
            left_mask = here & ~mask
            left = [i for i in others if left_mask >> i & 1]
            least = spr + s + bound(left)
            if (rep + r, least) >= best[1]:
                continue  # the same test as below with no repeats to come: cheaper, and most nodes end here
            floor = rep + r + must_repeat(left_mask)
            if floor > min(best[1][0], cap) or (floor, least) >= best[1]:
                continue
            chosen.append(group)
            spreads.append(s)
            walk(left, left_mask, chosen, rep + r, spr + s, spreads)
            chosen.pop()
            spreads.pop()
            if work >= budget and (best[0] is not None or fewest):
                stopped = True

    walk(list(range(n)), (1 << n) - 1, [], 0, 0.0, [])
    if fewest:
        spreads = [values[t[0]] - values[t[-1]] for t in fewest[1]]
        if best[0] is None or (fewest[0], sum(spreads)) < best[1]:
            return fewest[1], fewest[0], spreads, not stopped
    groups, spreads = best[0]
    return groups, int(best[1][0]), spreads, not stopped
