"""Swiss pairing for 2-6 seats: the invariants as properties, and minimality against brute force."""

from __future__ import annotations

import itertools
import random
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from arena.tournament.swiss import APART, _fewest_repeats, _search, choose_byes, meetings, pair_round


def names(n: int) -> list[str]:
    return [f"bot{i:02d}" for i in range(n)]


def partitions(players: list[str], k: int):
    """Every way to cut ``players`` into tables of k (the brute force the search is checked by)."""
    if not players:
        yield []
        return
    head, rest = players[0], players[1:]
    for combo in itertools.combinations(rest, k - 1):
        left = [p for p in rest if p not in combo]
        for tail in partitions(left, k):
            yield [(head, *combo), *tail]


def cost(tables, met, scores) -> tuple[int, float]:
    repeats = sum(met.get(frozenset(p), 0) for t in tables for p in itertools.combinations(t, 2))
    return repeats, sum(max(scores[b] for b in t) - min(scores[b] for b in t) for t in tables)


@st.composite
def fields(draw, max_bots: int = 24):
    """A field, its scores, and earlier meetings and byes drawn at random."""
    k = draw(st.integers(2, 6))
    n = draw(st.integers(k, max(k, max_bots)))
    bots = names(n)
    scores = {b: draw(st.integers(1300, 1700)) for b in bots}
    order = sorted(bots, key=lambda b: (-scores[b], b))
    pairs = list(itertools.combinations(bots, 2))
    met = {frozenset(p): draw(st.integers(0, 2)) for p in draw(st.lists(st.sampled_from(pairs), max_size=40))}
    byes = {b: draw(st.integers(0, 2)) for b in draw(st.lists(st.sampled_from(bots), max_size=8))}
    return k, order, scores, met, byes


@settings(max_examples=150, deadline=None)
@given(fields(max_bots=14))
def test_every_bot_plays_once_or_sits_out_and_byes_go_to_the_fewest(case):
    k, order, scores, met, byes = case
    p = pair_round(order, scores, k, met, byes, budget=20_000)
    seated = [b for t in p.tables for b in t]
    assert all(len(t) == k for t in p.tables)
    assert len(seated) == len(set(seated))  # no bot twice, at one table or two
    assert sorted(seated + list(p.byes)) == sorted(order)
    assert len(p.byes) == len(order) % k
    fewest = sorted(byes.get(b, 0) for b in order)
    # the byes are the bots with the fewest byes so far: none with more sits out while one with fewer plays
    assert sorted(byes.get(b, 0) for b in p.byes) == fewest[:len(p.byes)]
    assert p.repeats == cost(p.tables, met, scores)[0]
    assert abs(p.spread - cost(p.tables, met, scores)[1]) < 1e-9
    assert p.spread >= p.least_spread - 1e-9


@settings(max_examples=200, deadline=None)
@given(fields(max_bots=10))
def test_small_fields_are_searched_to_the_end_and_match_brute_force(case):
    k, order, scores, met, byes = case
    p = pair_round(order, scores, k, met, byes)
    assert p.optimal
    players = [b for b in order if b not in p.byes]
    best = min(cost(t, met, scores) for t in partitions(players, k))
    got = cost(p.tables, met, scores)
    assert got[0] == best[0]  # repeat meetings: the fewest any seating of these bots has
    assert abs(got[1] - best[1]) < 1e-9  # then the least score spread among those


@settings(max_examples=30, deadline=None)  # byes given by standing alone fail 10 runs of 10 at 15 examples
@given(st.integers(2, 6), st.integers(0, 12), st.integers(0, 2**32 - 1))
def test_rounds_spread_byes_and_avoid_meetings_while_they_can(k, extra, seed):
    """Whole Swisses with random results: byes differ by at most one between any two bots after
    every round, and no pair meets twice in a round where brute force finds a seating without it.
    Both searches get small budgets: an 18-bot field at 6 seats can spend the default 3M-table search
    for the fewest repeats (seconds a round, from its fifth round) without proving it, and the assertions here
    read only the byes and the fields small enough for brute force."""
    n = k + extra
    rnd = random.Random(seed)
    bots = names(n)
    scores = {b: 1500.0 for b in bots}
    history: list[tuple[str, ...]] = []
    byes: Counter[str] = Counter()
    for _ in range(5):
        order = sorted(bots, key=lambda b: (-scores[b], b))
        met = meetings(history)
        p = pair_round(order, scores, k, met, byes, budget=50_000, repeats_budget=50_000)
        byes.update(p.byes)
        assert max(byes[b] for b in bots) - min(byes[b] for b in bots) <= 1
        if p.optimal and n <= 10:
            players = [b for b in order if b not in p.byes]
            assert p.repeats == min(cost(t, met, scores)[0] for t in partitions(players, k))
        history += p.tables
        for t in p.tables:
            for b in t:
                scores[b] += rnd.choice((-20, 0, 20))


def test_no_repeats_while_a_fresh_seating_exists():
    """Four bots at two-seat tables: three rounds can be played with nobody meeting twice."""
    bots = names(4)
    history: list[tuple[str, ...]] = []
    for _ in range(3):
        p = pair_round(bots, dict.fromkeys(bots, 1500.0), 2, meetings(history), {})
        assert p.repeats == 0 and p.optimal
        history += p.tables
    assert sorted(meetings(history).values()) == [1] * 6  # every pair exactly once
    fourth = pair_round(bots, dict.fromkeys(bots, 1500.0), 2, meetings(history), {})
    assert fourth.repeats == 2  # now every seating repeats: the least is two pairs once each


def test_similar_scores_sit_together():
    bots = names(8)
    scores = {b: 1500.0 + 100 * i for i, b in enumerate(bots)}
    order = sorted(bots, key=lambda b: -scores[b])
    p = pair_round(order, scores, 4, {}, {})
    assert p.tables == (tuple(order[:4]), tuple(order[4:]))
    assert p.spread == p.least_spread == 600


def test_byes_lowest_standing_first_among_the_fewest():
    order = names(5)
    assert choose_byes(order, 2, {}) == ("bot04", "bot03")
    assert choose_byes(order, 2, {"bot04": 1}) == ("bot03", "bot02")


def test_bots_of_one_author_sit_apart_while_a_pairing_allows_it():
    """The top two share an author: by score they would meet; apart, each meets another."""
    order = names(4)
    scores = {b: 1800.0 - 100 * i for i, b in enumerate(order)}
    apart = frozenset({frozenset(order[:2])})
    assert set(pair_round(order, scores, 2, {}, {}).tables[0]) == set(order[:2])
    p = pair_round(order, scores, 2, {}, {}, apart=apart)
    assert all(not frozenset(t) <= set(order[:2]) for t in p.tables) and p.clashes == 0
    # a clash outweighs every repeat: with both cross pairings met, the repeat is taken
    met = meetings([(order[0], order[2]), (order[1], order[3]), (order[0], order[3]), (order[1], order[2])])
    p = pair_round(order, scores, 2, met, {}, apart=apart)
    assert p.clashes == 0 and p.repeats == 2
    assert "one author" not in p.summary()


def test_a_clash_no_pairing_avoids_is_counted_and_said():
    """Three of four bots by one author at two seats: one table must seat two of them."""
    order = names(4)
    apart = frozenset(frozenset(p) for p in itertools.combinations(order[:3], 2))
    p = pair_round(order, dict.fromkeys(order, 1500.0), 2, {}, {}, apart=apart)
    assert p.clashes == 1 and p.repeats == 0
    assert "1 pairs of one author seated together" in p.summary()
    # proved the fewest, in a few steps: the search's limit jumps to the forced clash's cost. (It rose
    # by one repeat a try, so it spent its whole budget, seconds, before it gave up on the proof.)
    assert p.least == APART
    meet = [[APART if frozenset((a, b)) in apart else 0 for b in order] for a in order]
    assert _fewest_repeats(meet, 2, 100) == (APART, [(0, 3), (1, 2)])


def test_a_running_swiss_carried_round_to_round_pairs_as_one_recomputed_from_the_store():
    """A 6-round Swiss of 14 bots at 3 seats (two byes a round), staged as ``arena tournament``
    stages it (the stages so far carried to the next call) and, at every step, from the stored
    games alone (a resumed run): the same stages, tables, byes and pairing reports."""
    from arena.tournament.config import TournamentConfig
    from arena.tournament.formats import pending, stages

    bots = names(14)
    cfg = TournamentConfig(bots=bots, format="swiss", seats=3, deals=1, seed=5, rounds=6)
    stored: dict = {}
    known: list = []
    for _ in range(7):
        known = stages(cfg, bots, b"s" * 32, stored, known=known)
        assert known == stages(cfg, bots, b"s" * 32, stored)
        stage = pending(known)
        if stage is None:
            break
        for g in stage.games:  # a fixed strength order with each deal's luck
            luck = {b: (g.seed >> (3 * i)) % 8 for i, b in enumerate(bots)}
            order = sorted(range(len(g.seats)), key=lambda s: bots.index(g.seats[s]) - luck[g.seats[s]])
            stored[g.index] = (list(g.seats), {"order": [[s] for s in order], "draw": False,
                                                     "complete": True, "reason": "played_out"})
    assert len(known) == 6 and all(s.points for s in known) and pending(known) is None
    byes = Counter(b for s in known for b in s.byes)
    assert sum(byes.values()) == 12 and max(byes.values()) == 1  # 12 byes over 14 bots: nobody sits out twice


@settings(max_examples=50, deadline=None)  # 50 find a reversed score-gap tie-break: 150 cost 3.6 s
@given(fields(max_bots=26))
def test_a_search_stopped_at_once_keeps_the_greedy_seating(case):
    """The search tries each head's tables fewest repeats first, then closest score, then in
    standing order, so on a budget of one (and no proved fewest repeats to hold it to) its answer
    is that greedy seating: the order a budget-stopped round of a large field depends on."""
    k, order, scores, met, byes = case
    out = choose_byes(order, len(order) % k, byes)
    rank = {b: i for i, b in enumerate(order)}
    rest = sorted((b for b in order if b not in out), key=lambda b: (-scores[b], rank[b]))
    meet = [[met.get(frozenset((a, b)), 0) for b in rest] for a in rest]
    groups, _, _, optimal = _search([float(scores[b]) for b in rest], k, meet, 1, None)
    tables = tuple(tuple(rest[i] for i in g) for g in groups)
    greedy = []
    while rest:
        head, others = rest[0], rest[1:]
        table = min(((head, *c) for c in itertools.combinations(others, k - 1)),
                    key=lambda t: (cost([t], met, scores)[0], scores[head] - scores[t[-1]],
                                   [rest.index(b) for b in t]))
        greedy.append(table)
        rest = [b for b in rest if b not in table]
    assert tables == tuple(greedy)


@settings(max_examples=150, deadline=None)
@given(fields(max_bots=10))
def test_a_search_stopped_at_once_still_has_the_fewest_repeats(case):
    """The fewest repeats are searched for on their own first, so even a round whose main search
    stops at once (a large field's, in small) repeats no meeting a seating could avoid, and says so."""
    k, order, scores, met, byes = case
    p = pair_round(order, scores, k, met, byes, budget=1)
    players = [b for b in order if b not in p.byes]
    assert p.fewest
    assert p.repeats == cost(p.tables, met, scores)[0] == min(cost(t, met, scores)[0] for t in partitions(players, k))
    assert abs(p.spread - cost(p.tables, met, scores)[1]) < 1e-9


@st.composite
def crowded(draw, max_bots: int = 10):
    """A field late in an event: most pairs have met, some more than once."""
    k = draw(st.integers(2, 5))
    n = draw(st.integers(2, max_bots // k)) * k
    players = names(n)
    pairs = list(itertools.combinations(players, 2))
    counts = draw(st.lists(st.sampled_from((0, 0, 1, 1, 1, 2)), min_size=len(pairs), max_size=len(pairs)))
    return k, players, {frozenset(p): c for p, c in zip(pairs, counts) if c}


@settings(max_examples=150, deadline=None)
@given(crowded(), st.integers(0, 2))
def test_the_fewest_repeats_search_matches_brute_force(case, same_author):
    """Repeats (and clashes of one author, weighed above them) counted alone, against every seating."""
    k, players, met = case
    scores = dict.fromkeys(players, 1500.0)
    cost_ = dict(met)
    for a, b in itertools.combinations(players[:same_author + 1], 2):
        cost_[frozenset((a, b))] = cost_.get(frozenset((a, b)), 0) + 1000
    meet = [[cost_.get(frozenset((a, b)), 0) for b in players] for a in players]
    least, tables = _fewest_repeats(meet, k, 10**9)
    assert sorted(i for t in tables for i in t) == list(range(len(players))) and all(len(t) == k for t in tables)
    assert least == sum(meet[a][b] for t in tables for a, b in itertools.combinations(t, 2))
    assert least == min(cost(t, cost_, scores)[0] for t in partitions(players, k))
    assert _fewest_repeats(meet, k, 0) is None  # out of budget: nothing claimed


def test_a_stopped_search_seats_the_top_bot_with_the_closest_scores_it_has_not_met():
    """Six bots at three seats, the second has met the third and the fourth. Two seatings repeat
    nothing: the top bot with the third and fourth (spreads 30 and 290) or with the second and
    fifth (200 and 280). A round whose search stops before it can compare them (a large field's,
    here in small) must still seat bots of similar score together: fewest repeats first, then
    the closest score, not the first bots in standing order."""
    order = names(6)
    scores = dict(zip(order, (1600.0, 1590.0, 1580.0, 1570.0, 1400.0, 1300.0)))
    met = meetings([(order[1], order[2]), (order[1], order[3])])
    stopped = pair_round(order, scores, 3, met, {}, budget=1)
    ended = pair_round(order, scores, 3, met, {})
    assert stopped.optimal is False and ended.optimal
    best = ((order[0], order[2], order[3]), (order[1], order[4], order[5]))
    assert stopped.tables == ended.tables == best
    assert stopped.repeats == 0 and stopped.spread == 320


def test_what_a_round_minimised_is_said_in_plain_words_also_when_read_back():
    """Six bots at two seats after two rounds: the fewest repeats a third round can have is proved
    again for the round read back from the store (``seated``), so the report and the web page say
    "the fewest possible" as the live round did; a stored seating with more says how few were
    possible, and a search stopped by its budget says "at most"."""
    from arena.tournament import swiss
    bots = names(6)
    scores = {b: 1500.0 - 10 * i for i, b in enumerate(bots)}
    history = [("bot00", "bot01"), ("bot02", "bot03"), ("bot04", "bot05"),
               ("bot00", "bot02"), ("bot01", "bot04"), ("bot03", "bot05")]
    met = meetings(history)
    live = pair_round(bots, scores, 2, met, {})
    assert live.repeats == 0 and "repeats: 0, the fewest possible" in live.minimised()
    assert "score spread: 70, the least possible with those repeats (no seating has less than 30;" in live.minimised()
    back = swiss.seated(live.tables, bots, scores, met)
    assert back.fewest and back.minimised().startswith("repeats: 0, the fewest possible; score spread: 70 (no seating")
    crowded = meetings(history + [("bot00", "bot03"), ("bot01", "bot05"), ("bot02", "bot04")]
                       + [("bot00", "bot04"), ("bot01", "bot02"), ("bot03", "bot04")])
    forced = pair_round(bots, scores, 2, crowded, {})
    assert forced.repeats == 1
    again = swiss.seated(forced.tables, bots, scores, crowded)
    assert again.fewest and again.repeats_words() == "repeats: 1, the fewest possible"
    worse = swiss.seated((("bot00", "bot01"), ("bot02", "bot03"), ("bot04", "bot05")), bots, scores, crowded)
    assert worse.repeats == 3 and worse.repeats_words() == "repeats: 3 (the fewest possible: 1)"
    level = swiss.seated((("bot00", "bot01"), ("bot02", "bot03"), ("bot04", "bot05")), bots,
                         dict.fromkeys(bots, 1500.0), {})
    assert level.spread_words().startswith("score spread: 0, the least possible (no seating")  # read back, at the bound
    stopped = pair_round(bots, scores, 2, crowded, {}, budget=1, repeats_budget=1)
    assert stopped.optimal is False and stopped.least is None
    assert stopped.repeats_words().startswith(f"repeats: at most {stopped.repeats} (the search for fewer stopped")
    assert "the least found before its search stopped at its budget" in stopped.spread_words()


def test_a_third_round_of_eighteen_at_six_seats_is_proved_fewest_in_a_small_budget():
    """Eighteen bots met at six-seat tables twice: by rows of a 3x3 grid with two bots a cell,
    then by its columns. A table of six then seats at least two bots of some row in each row or
    two of one cell (met twice), so every seating repeats 18 at least, 6 a table, and one has
    18. Counting only how many bots each has not met proves nothing (each has 8 left); the
    past tables, cut from the meetings as cliques each spread over the three tables, bound it
    at 18 at once. The old search spent its whole 3M-table budget here without proving it."""
    bots = names(18)
    cell = {b: (i // 6, i % 3) for i, b in enumerate(bots)}  # row i // 6, column i % 3: two bots a cell
    rows = [tuple(b for b in bots if cell[b][0] == r) for r in range(3)]
    columns = [tuple(b for b in bots if cell[b][1] == c) for c in range(3)]
    assert sorted(len(t) for t in rows + columns) == [6] * 6
    scores = dict.fromkeys(bots, 1500.0)
    second = pair_round(bots, scores, 6, meetings(rows), {}, budget=20_000, repeats_budget=20_000)
    assert second.fewest and second.repeats == 9 and second.least == 9  # two of each row a table: 3 x 3
    third = pair_round(bots, scores, 6, meetings(rows + columns), {}, budget=20_000, repeats_budget=20_000)
    assert third.fewest and third.least == 18 and third.repeats == 18
    assert "repeats: 18, the fewest possible" in third.summary()
