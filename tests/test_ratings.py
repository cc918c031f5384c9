"""Tests for arena.ratings: fitted PL Elo, head-to-head stats, SPRT, provisional table."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import brentq

from arena.ratings import (
    ELO_PER_NAT,
    PAIR_NAMES,
    Outcome,
    PairSprt,
    ProvisionalRatings,
    Rating,
    Sprt,
    elo_difference,
    fit_elo,
    likelihood_of_superiority,
    los,
    los_matrix,
    neighbour_los,
    pair_elo,
    pair_index,
    rate_interval,
    score_interval,
    score_to_elo,
    wilson,
)
from arena.ratings import Verdict
from arena.ratings.pairs import bootstrap_over_deals

K = ELO_PER_NAT


def sig(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def simulate(true_elo: np.ndarray, seats: int, n_games: int, seed: int) -> list[Outcome]:
    """Plackett-Luce games (Gumbel-max trick: sorting theta + Gumbel noise is a PL draw)."""
    rng = np.random.default_rng(seed)
    theta = true_elo / K
    names = [f"b{i:02d}" for i in range(len(true_elo))]
    out = []
    for _ in range(n_games):
        table = rng.choice(len(true_elo), size=seats, replace=False)
        order = table[np.argsort(-(theta[table] + rng.gumbel(size=seats)))]
        out.append(Outcome.order(*(names[i] for i in order)))
    return out


def diffs(r, names):
    return np.array([r[n].elo for n in names]) - r[names[0]].elo


# ---------------------------------------------------------------- Outcome


def test_outcome_constructors_are_canonical():
    assert Outcome.order("a", ("c", "b"), "d") == Outcome.order("a", ["b", "c"], "d")
    assert Outcome.order("a", ("c", "b")).groups == (("a",), ("b", "c"))
    w = Outcome.winner_only("x", ["z", "y"])
    assert w.partial and w.groups == (("x",), ("y", "z")) and w.winners == ("x",)
    d = Outcome.draw(["q", "p"])
    assert d.is_draw and d.winners == () and d.groups == (("p", "q"),)
    assert Outcome.from_ranks({"a": 2, "b": 1, "c": 2}) == Outcome.order("b", ("a", "c"))
    assert hash(Outcome.order("a", "b")) == hash(Outcome.order("a", "b"))


@pytest.mark.parametrize(
    "make",
    [
        lambda: Outcome.order(["a", "b", "c"]),  # forgot to unpack: would be a silent draw
        lambda: Outcome.order("a", "a"),
        lambda: Outcome.order("a"),
        lambda: Outcome.winner_only("a", []),
        lambda: Outcome((("a",), ("b",), ("c",)), partial=True),
        lambda: Outcome((("a",), ()),),
    ],
)
def test_outcome_rejects_bad_input(make):
    with pytest.raises(ValueError):
        make()


# ---------------------------------------------------------------- hand-computed two-player fits


def test_two_player_mle_is_the_elo_logistic():
    games = [Outcome.order("A", "B")] * 3 + [Outcome.order("B", "A")]
    r = fit_elo(games, prior=0)
    assert r["A"].elo - r["B"].elo == pytest.approx(400 * math.log10(3), abs=1e-6)
    assert (r["A"].elo + r["B"].elo) / 2 == pytest.approx(1500.0, abs=1e-9)
    # observed information of the difference: n p (1-p) = 4 * 3/16 = 3/4 (nats^-2)
    assert r.diff_se("A", "B") == pytest.approx(K * math.sqrt(4 / 3), rel=1e-6)
    assert r["A"].se == pytest.approx(K * math.sqrt(1 / 3), rel=1e-6)  # half the difference
    assert r["A"].ci_high - r["A"].ci_low == pytest.approx(2 * 1.959964 * r["A"].se, rel=1e-6)
    assert r["A"].games == r["B"].games == 4


def test_two_player_with_prior_matches_hand_solution():
    games = [Outcome.order("A", "B")] * 3 + [Outcome.order("B", "A")]
    # d/dD of 3 log s(D) + log s(-D) + [log s(D/2) + log s(-D/2)]  (one virtual draw each vs pool mean)
    root = brentq(lambda x: 3 * sig(-x) - sig(x) + 0.5 * (sig(-x / 2) - sig(x / 2)), 0.01, 5)
    r = fit_elo(games)  # prior=1 by default
    assert r["A"].elo - r["B"].elo == pytest.approx(K * root, abs=1e-6)
    assert r["A"].elo - r["B"].elo < 400 * math.log10(3)  # pulled toward the pool


def test_all_wins_is_finite_with_prior_and_refused_without():
    games = [Outcome.order("A", "B")] * 10 + [Outcome.order("B", "C"), Outcome.order("C", "B")]
    r = fit_elo(games)
    assert all(math.isfinite(x.elo) and math.isfinite(x.se) for x in r.values())
    assert r["A"].elo > r["B"].elo
    with pytest.raises(ValueError, match="prior"):
        fit_elo(games, prior=0)


# ---------------------------------------------------------------- draws and ties


def brute_fit(games: list[Outcome], prior_lambda: bool = True) -> tuple[dict[str, float], dict[int, float]]:
    """Reference for the tie model, written out stage by stage and maximised by scipy (prior=0 on
    the strengths): at each stage one bot goes out (weight exp theta) or all who can still tie do
    (weight delta * exp(mean theta)); bots placed below a tie (forfeits) cannot be in it.
    Returns theta (sum zero) and delta by tie size."""
    from scipy.optimize import minimize
    names = sorted({b for o in games for b in o.bots})
    sizes = sorted({len(g) for o in games for g in (o.groups[:1] if o.partial else o.groups) if len(g) > 1})
    n = len(names)

    def nll(x):
        th = dict(zip(names, x[:n]))
        lam = dict(zip(sizes, x[n:]))
        total = 0.0
        for o in games:
            ties = [g for g, grp in enumerate(o.groups) if len(grp) > 1]
            below = set() if o.partial or not ties else {b for h in o.groups[ties[0] + 1:] for b in h}
            for g in range(1 if o.partial else len(o.groups)):
                rest = [b for h in o.groups[g:] for b in h]
                if len(rest) < 2:
                    continue
                tie = list(o.groups[g]) if len(o.groups[g]) > 1 else [b for b in rest if b not in below]
                scores = [th[b] for b in rest]
                if len(tie) in lam:
                    scores.append(np.mean([th[b] for b in tie]) + lam[len(tie)])
                chosen = (np.mean([th[b] for b in o.groups[g]]) + lam[len(o.groups[g])] if len(o.groups[g]) > 1
                          else th[o.groups[g][0]])
                total -= chosen - np.logaddexp.reduce(scores)
        if prior_lambda:
            total += sum(np.logaddexp(0, -v) + np.logaddexp(0, v) for v in x[n:])
        return total + 1e3 * np.sum(x[:n]) ** 2

    res = minimize(nll, np.zeros(n + len(sizes)), method="BFGS", options={"gtol": 1e-9})
    th = res.x[:n] - res.x[:n].mean()
    return dict(zip(names, th)), {t: math.exp(v) for t, v in zip(sizes, res.x[n:])}


def test_draws_count_and_pull_together():
    base = [Outcome.order("A", "B")] * 6 + [Outcome.order("B", "A")] * 2 + [Outcome.order("A", "C"), Outcome.order("C", "A")]
    with_draws = base + [Outcome.draw(["A", "B"])] * 8
    r0, r1 = fit_elo(base), fit_elo(with_draws)
    assert (r1["A"].games, r1["A"].draws, r1["B"].draws, r1["C"].draws) == (18, 8, 8, 0)
    assert 0 < r1["A"].elo - r1["B"].elo < r0["A"].elo - r0["B"].elo  # a draw is evidence they are close
    assert r1.diff_se("A", "B") < r0.diff_se("A", "B")  # and it is evidence: the interval narrows
    assert r1.ties[2] > 0 and not r0.ties


def test_two_seat_tie_model_matches_davidson_by_hand():
    games = [Outcome.order("A", "B")] * 3 + [Outcome.draw(["A", "B"])] * 2 + [Outcome.order("B", "A")]
    r = fit_elo(games, prior=0)
    theta, ties = brute_fit(games)
    d = theta["A"] - theta["B"]
    assert r.ties[2] == pytest.approx(ties[2], rel=1e-4)
    # reported on the Elo scale whose slope at equality is the logistic's: K * 2 / (2 + delta)
    assert r["A"].elo - r["B"].elo == pytest.approx(K * 2 / (2 + ties[2]) * d, abs=1e-3)
    # Davidson's MLE matches the expected score: 3 + 2/2 of 6 at the fitted gap
    e = 0.5 + math.sinh(d / 2) / (2 * math.cosh(d / 2) + ties[2])
    assert e == pytest.approx(4 / 6, abs=0.02)  # not exact: delta_2 has its weak prior


def test_multi_seat_ties_match_the_enumerated_model():
    games = ([Outcome.order("a", ("b", "c")), Outcome.order("b", "a", "c"), Outcome.order("c", "b", "a"),
              Outcome.order("a", "c", "b"), Outcome.draw("abc"), Outcome.order(("a", "b"), "c", "d"),
              Outcome.order("d", ("a", "b", "c")), Outcome.order("c", "d", "a", "b"), Outcome.draw("bd"),
              Outcome.winner_only("d", ["a", "b", "c"]), Outcome.order("b", "d"),
              Outcome.order("c", ("a", "d"), "b"),  # a tie, then a seat that had forfeited
              Outcome.order(("a", "c"), "d", "b")] * 2)
    r = fit_elo(games, prior=0)
    theta, ties = brute_fit(games)
    assert set(r.ties) == {2, 3} and all(r.ties[t] == pytest.approx(ties[t], rel=1e-4) for t in ties)
    for x in "abcd":
        assert (r[x].elo - 1500) / r.scale == pytest.approx(theta[x], abs=1e-5)


def test_a_draw_heavy_bot_is_rated_by_its_score():
    """The issue's case: a bot that never wins but draws two thirds of its games against a strong
    bot is about 115 Elo below it (its score is 34%), not a thousand."""
    games = [Outcome.draw(["h", "l"])] * 66 + [Outcome.order("l", "h")] * 34
    r = fit_elo(games)
    assert -160 < r["h"].elo - r["l"].elo < -80
    assert score_to_elo(0.33) - 60 < r["h"].elo - r["l"].elo < score_to_elo(0.33) + 60


def test_winner_only_matches_choix_top1():
    import choix  # here, not at the top: it imports scipy.stats, about 0.3 s of CPU at every worker's collection
    rng = np.random.default_rng(7)
    theta = np.array([0.8, 0.3, 0.0, -0.4, -0.7])
    names = list("vwxyz")
    data, outcomes = [], []
    for _ in range(600):
        table = rng.choice(5, size=int(rng.integers(2, 6)), replace=False)
        order = table[np.argsort(-(theta[table] + rng.gumbel(size=len(table))))]
        data.append((int(order[0]), tuple(int(i) for i in order[1:])))
        outcomes.append(Outcome.winner_only(names[order[0]], [names[i] for i in order[1:]]))
    r = fit_elo(outcomes, prior=0)
    ref = choix.ilsr_top1(5, data, alpha=0.0, max_iter=10_000, tol=1e-12)
    np.testing.assert_allclose(diffs(r, names), K * (ref - ref[0]), atol=1e-4)


def test_full_orders_match_choix_rankings():
    import choix
    true = np.array([150.0, 60.0, 0.0, -40.0, -170.0, 0.0])
    names = [f"b{i:02d}" for i in range(6)]
    outs = simulate(true, 4, 500, seed=3) + simulate(true, 6, 200, seed=4)
    data = [tuple(names.index(b) for b in o.bots) for o in outs]
    ref = choix.ilsr_rankings(6, data, alpha=0.0, max_iter=10_000, tol=1e-12)
    np.testing.assert_allclose(diffs(fit_elo(outs, prior=0), names), K * (ref - ref[0]), atol=1e-4)


# ---------------------------------------------------------------- synthetic recovery


@pytest.mark.parametrize("seats,n_games", [(2, 6000), (4, 3000), (6, 2000)])
def test_recovers_known_strengths(seats, n_games):
    true = np.linspace(330, -330, 12)  # 60 Elo apart, best first
    names = [f"b{i:02d}" for i in range(12)]
    r = fit_elo(simulate(true, seats, n_games, seed=seats))
    assert r.standings() == names
    centred = true - true.mean() + 1500.0
    inside = [r[n].ci_low <= t <= r[n].ci_high for n, t in zip(names, centred)]
    assert sum(inside) >= 9  # 95% intervals: expect ~11.4 of 12
    gap_ok = [
        abs((r[a].elo - r[b].elo) - (ta - tb)) <= 1.96 * r.diff_se(a, b)
        for (a, ta), (b, tb) in zip(zip(names, true), zip(names[1:], true[1:]))
    ]
    assert sum(gap_ok) >= 8  # of 11 neighbour gaps (expect ~10.5)
    z = [(r[n].elo - t) / r[n].se for n, t in zip(names, centred)]
    assert 0.2 < np.mean(np.square(z)) < 3.0  # errors are of the size the CIs claim


def test_mixed_seat_pool_recovers_order():
    true = np.array([300.0, 180.0, 60.0, -60.0, -180.0, -300.0])
    outs = simulate(true, 2, 1500, 1) + simulate(true, 4, 800, 2) + simulate(true, 6, 500, 3)
    r = fit_elo(outs)
    assert r.standings() == [f"b{i:02d}" for i in range(6)]
    assert all(p > 0.99 for _, _, p in neighbour_los(r))


# ---------------------------------------------------------------- order independence, anchor


names_st = st.sampled_from(["ann", "bob", "cy", "dee", "eve"])


@st.composite
def outcomes_st(draw):
    bots = draw(st.lists(names_st, min_size=2, max_size=5, unique=True))
    kind = draw(st.sampled_from(["order", "ties", "winner", "draw"]))
    if kind == "order":
        return Outcome.order(*bots)
    if kind == "winner":
        return Outcome.winner_only(bots[0], bots[1:])
    if kind == "draw":
        return Outcome.draw(bots)
    cuts = sorted(draw(st.sets(st.integers(1, len(bots) - 1), min_size=1)))
    groups = [bots[i:j] for i, j in zip([0] + cuts, cuts + [len(bots)])]
    return Outcome.order(*groups)


@settings(max_examples=60, deadline=None)
@given(st.lists(outcomes_st(), min_size=1, max_size=40), st.randoms(use_true_random=False))
def test_order_independent(games, rnd):
    shuffled = list(games)
    rnd.shuffle(shuffled)
    a, b = fit_elo(games), fit_elo(shuffled)
    assert dict(a) == dict(b)  # bit-identical, not just close
    assert np.array_equal(a.covariance, b.covariance)


def test_anchor_is_a_gauge():
    outs = simulate(np.array([100.0, 0.0, -50.0, -200.0]), 4, 400, seed=11)
    free = fit_elo(outs)
    fixed = fit_elo(outs, anchor="b02", anchor_elo=2000.0)
    assert fixed["b02"].elo == 2000.0 and fixed["b02"].se == 0.0
    for n in free:
        assert fixed[n].elo - 2000.0 == pytest.approx(free[n].elo - free["b02"].elo, abs=1e-9)
        assert fixed.diff_se(n, "b02") == pytest.approx(free.diff_se(n, "b02"), rel=1e-9)
        if n != "b02":
            assert fixed[n].se == pytest.approx(free.diff_se(n, "b02"), rel=1e-9)
    assert np.mean([free[n].elo for n in free]) == pytest.approx(1500.0, abs=1e-9)
    with pytest.raises(ValueError):
        fit_elo(outs, anchor="nobody")


def test_empty_input():
    assert dict(fit_elo([])) == {}


# ---------------------------------------------------------------- LOS


def test_los_helpers():
    a = Rating(elo=1600, se=20, ci_low=0, ci_high=0, games=10)
    b = Rating(elo=1550, se=30, ci_low=0, ci_high=0, games=10)
    p = likelihood_of_superiority(a, b)
    assert p == pytest.approx(0.5 * math.erfc(-50 / math.sqrt(1300) / math.sqrt(2)))
    assert p + likelihood_of_superiority(b, a) == pytest.approx(1.0)
    assert likelihood_of_superiority(a, b, covariance=500) > p  # correlated -> sharper
    r = fit_elo(simulate(np.array([200.0, 0.0, -200.0]), 2, 300, seed=5))
    names, m = los_matrix(r)
    assert names == r.standings()
    np.testing.assert_allclose(m + m.T, 1.0)
    assert m[0, 2] > 0.99
    assert [(x, y) for x, y, _ in neighbour_los(r)] == list(zip(names, names[1:]))
    i, j = r.names.index(names[0]), r.names.index(names[1])
    with_cov = likelihood_of_superiority(r[names[0]], r[names[1]], covariance=r.covariance[i, j])
    assert m[0, 1] == pytest.approx(with_cov, rel=1e-12)
    _, plain = los_matrix(dict(r))  # plain mapping: independence approximation
    assert plain[0, 1] == pytest.approx(likelihood_of_superiority(r[names[0]], r[names[1]]), rel=1e-12)


# ---------------------------------------------------------------- head to head


def test_elo_difference_known_numbers():
    assert elo_difference(3, 0, 1)[0] == pytest.approx(190.8485, abs=1e-4)
    assert elo_difference(3, 0, 1)[1] == math.inf  # the +1.96 sd bound passes score 1
    assert elo_difference(10, 0, 10) == (0.0, pytest.approx(163.321, abs=1e-3))  # s = .5 +- .2191
    elo, err = elo_difference(30, 20, 10)  # score 2/3, per-game sd sqrt(5/36)
    assert elo == pytest.approx(120.412, abs=1e-3)
    assert err == pytest.approx(75.260, abs=1e-3)
    assert elo_difference(10, 20, 30)[0] == pytest.approx(-elo)
    assert elo_difference(0, 0, 0) == (0.0, math.inf)
    assert elo_difference(5, 0, 0)[0] == math.inf


def test_los_known_numbers():
    assert los(10, 10) == 0.5
    assert los(0, 0) == 0.5
    assert los(30, 10) == pytest.approx(0.5 + 0.5 * math.erf(20 / math.sqrt(80)))
    assert los(60, 40) == pytest.approx(0.97725, abs=1e-4)  # z = 2


def _fishtest_style_llr(w, d, l, elo0, elo1):
    """Independent bisection version of fishtest's LLR_logistic (trinomial)."""
    counts = [c if c else 1e-3 for c in (l, d, w)]
    n = sum(counts)
    pdf = [(0.0, counts[0] / n), (0.5, counts[1] / n), (1.0, counts[2] / n)]

    def mle(s):
        x = [(a - s, p) for a, p in pdf]
        lo, hi = -1 / max(a for a, _ in x) + 1e-12, -1 / min(a for a, _ in x) - 1e-12
        for _ in range(200):
            mid = (lo + hi) / 2
            if sum(p * a / (1 + mid * a) for a, p in x) > 0:
                lo = mid
            else:
                hi = mid
        return [p / (1 + lo * (a - s)) for a, p in pdf]

    s0, s1 = (1 / (1 + 10 ** (-e / 400)) for e in (elo0, elo1))
    q0, q1 = mle(s0), mle(s1)
    return n * sum(p * math.log(b / a) for (_, p), a, b in zip(pdf, q0, q1))


@pytest.mark.parametrize("w,d,l", [(100, 50, 80), (520, 0, 480), (7, 1, 2), (3, 0, 0)])
def test_sprt_llr_matches_reference_and_approximation(w, d, l):
    s = Sprt(elo0=0, elo1=10)
    s.add(w, d, l)
    assert s.llr == pytest.approx(_fishtest_style_llr(w, d, l, 0, 10), rel=1e-6, abs=1e-9)
    if w + d + l >= 200:
        assert s.llr == pytest.approx(s.llr_approx, rel=0.05, abs=0.02)


def test_sprt_bounds_and_decisions():
    s = Sprt(elo0=0, elo1=10, alpha=0.05, beta=0.05)
    assert s.lower == pytest.approx(math.log(0.05 / 0.95))
    assert s.upper == pytest.approx(math.log(0.95 / 0.05))
    assert s.status == "continue" and s.llr == 0.0
    for _ in range(3):
        s.update("win")
    assert s.status == "continue"  # three straight wins prove nothing yet

    rng = np.random.default_rng(1)
    strong = Sprt(elo0=0, elo1=10)
    while strong.status is Verdict.CONTINUE:  # true score 0.7 (~ +147 Elo): clearly H1
        strong.update(1 if rng.random() < 0.7 else 0)
    assert strong.status is Verdict.ACCEPT_H1 and strong.wins + strong.losses < 2000

    even = Sprt(elo0=0, elo1=10)
    cycle = ["win", "draw", "loss", "loss", "draw", "win"]
    i = 0
    while even.status == "continue":
        even.update(cycle[i % len(cycle)])
        i += 1
    assert even.status is Verdict.ACCEPT_H0
    assert even.wins == pytest.approx(even.losses, abs=1)

    with pytest.raises(ValueError):
        s.update("resign")
    with pytest.raises(ValueError):
        Sprt(elo0=5, elo1=0)


# ---------------------------------------------------------------- provisional (openskill)


def test_provisional_moves_the_right_way():
    p = ProvisionalRatings()
    p.update(Outcome.order("a", "b", "c"))
    rows = {row.name: row for row in p.table()}
    assert rows["a"].mu > 25.0 > rows["c"].mu
    assert all(row.sigma < 25 / 3 for row in rows.values())
    for _ in range(20):
        p.update(Outcome.order("a", "b", "c"))
        p.update(Outcome.winner_only("a", ["b", "c"]))
    p.update(Outcome.draw(["a", "b", "c"]))
    table = p.table()
    assert [row.name for row in table] == ["a", "b", "c"]
    assert table[0].elo > table[1].elo > table[2].elo
    assert all(row.elo_ordinal < row.elo for row in table)
    assert table[0].games == 42


def test_provisional_scale_is_the_small_sigma_two_seat_limit():
    p = ProvisionalRatings()
    assert p.elo_per_mu() == pytest.approx(K / (p.model.beta * math.sqrt(2)))
    p.update(Outcome.order("a", "b", "c", "d"))
    assert p.elo_per_mu() == pytest.approx(K / (p.model.beta * 2))


# --------------------------------------------------------------------------- duplicate-deal pairs

def _reference_llr(counts, values, elo0, elo1):
    """Independent bisection version of fishtest's generalised LLR for any outcome values."""
    counts = [c if c else 1e-3 for c in counts]
    n = sum(counts)
    pdf = [(a, c / n) for a, c in zip(values, counts)]

    def mle(s):
        x = [(a - s, p) for a, p in pdf]
        lo, hi = -1 / max(a for a, _ in x) + 1e-12, -1 / min(a for a, _ in x) - 1e-12
        for _ in range(200):
            mid = (lo + hi) / 2
            if sum(p * a / (1 + mid * a) for a, p in x) > 0:
                lo = mid
            else:
                hi = mid
        return [p / (1 + lo * (a - s)) for a, p in pdf]

    s0, s1 = (1 / (1 + 10 ** (-e / 400)) for e in (elo0, elo1))
    q0, q1 = mle(s0), mle(s1)
    return n * sum(p * math.log(b / a) for (_, p), a, b in zip(pdf, q0, q1))


def test_pair_index_names_the_five_outcomes():
    assert [pair_index(*p) for p in [(0, 0), (0, 0.5), (1, 0), (0.5, 0.5), (1, 0.5), (1, 1)]] == [0, 1, 2, 2, 3, 4]
    assert PAIR_NAMES == ("LL", "LD", "DD/WL", "WD", "WW")
    with pytest.raises(ValueError):
        pair_index(0.3, 1)


def test_pair_elo_known_numbers():
    even = pair_elo([0, 0, 10, 0, 0])  # every deal split: no spread, score exactly 1/2
    assert even["score"] == 0.5 and even["elo"] == 0.0
    # no spread is not certainty: Wilson at the number of pairs, never a zero-width interval
    assert (even["score_low"], even["score_high"]) == pytest.approx(wilson(0.5, 10))
    assert even["score_low"] < 0.5 < even["score_high"]
    e = pair_elo([1, 2, 3, 4, 5])
    mean = (2 * 0.25 + 3 * 0.5 + 4 * 0.75 + 5 * 1.0) / 15
    var = sum(c * (s - mean) ** 2 for c, s in zip([1, 2, 3, 4, 5], [0, .25, .5, .75, 1])) / 15
    neff = min(30, max(15, mean * (1 - mean) / (var / 15)))
    assert e["score"] == pytest.approx(mean)
    assert (e["score_low"], e["score_high"]) == pytest.approx(wilson(mean, neff))
    assert e["elo"] == pytest.approx(score_to_elo(mean))
    assert e["nelo"] == pytest.approx(800 / math.log(10) * (mean - 0.5) / math.sqrt(2 * var))
    assert e["elo_low"] < e["elo"] < e["elo_high"]


@pytest.mark.parametrize("pairs", [[10, 20, 40, 25, 12], [0, 0, 30, 5, 1], [3, 0, 0, 0, 0], [40, 5, 100, 8, 60]])
def test_pair_sprt_llr_matches_reference(pairs):
    s = PairSprt(elo0=0, elo1=10)
    scores = {0: (0, 0), 1: (0, 0.5), 2: (1, 0), 3: (1, 0.5), 4: (1, 1)}
    for i, c in enumerate(pairs):
        for _ in range(c):
            s.update(*scores[i])
    assert s.pairs == pairs
    assert s.llr == pytest.approx(_reference_llr(pairs, [0, .25, .5, .75, 1], 0, 10), rel=1e-6, abs=1e-9)


def test_pair_sprt_decides():
    s = PairSprt(0, 50)
    while s.status == "continue":
        s.update(1, 1)  # WW every deal
    assert s.status == "accept_h1" and sum(s.pairs) < 30
    s = PairSprt(0, 50)
    while s.status == "continue":
        s.update(0, 0.5)
    assert s.status == "accept_h0"
    with pytest.raises(ValueError):
        PairSprt(10, 0)


def _simulated_match(rng, q: float, rho: float, deals: int) -> tuple[list[int], tuple[int, int, int]]:
    """A's results over ``deals`` duplicate deals: with probability rho a deal decides both games the
    same way (A wins both with probability q), otherwise the two games are independent coin flips
    with P(A wins) = q.  Every game's expected score is q; games of a deal are positively correlated."""
    pairs = [0, 0, 0, 0, 0]
    wins = losses = 0
    for _ in range(deals):
        if rng.random() < rho:
            g1 = g2 = float(rng.random() < q)
        else:
            g1, g2 = float(rng.random() < q), float(rng.random() < q)
        pairs[pair_index(g1, g2)] += 1
        wins += int(g1) + int(g2)
        losses += 2 - int(g1) - int(g2)
    return pairs, (wins, 0, losses)


def test_pair_intervals_cover_where_the_trinomial_model_does_not():
    """Correlated pairs (deals that suit one bot in both seats): the interval from pair counts holds
    the true score about 95% of the time; the trinomial one (games taken as independent) is too narrow."""
    rng = np.random.default_rng(20261201)
    q, trials = 0.6, 2000
    covered_pairs = covered_trinomial = 0
    for _ in range(trials):
        pairs, (w, d, l) = _simulated_match(rng, q, rho=0.6, deals=100)
        e = pair_elo(pairs)
        covered_pairs += e["score_low"] <= q <= e["score_high"]
        n = w + d + l
        s = (w + d / 2) / n
        sd = math.sqrt((w * (1 - s) ** 2 + d * (0.5 - s) ** 2 + l * s ** 2) / n / n)
        covered_trinomial += s - 1.96 * sd <= q <= s + 1.96 * sd
    assert 0.93 <= covered_pairs / trials <= 0.97
    assert covered_trinomial / trials < 0.91


def test_pair_intervals_are_right_for_independent_games_too():
    rng = np.random.default_rng(7)
    q, trials, covered = 0.45, 2000, 0
    for _ in range(trials):
        pairs, _ = _simulated_match(rng, q, rho=0.0, deals=100)
        e = pair_elo(pairs)
        covered += e["score_low"] <= q <= e["score_high"]
    assert 0.93 <= covered / trials <= 0.97


def test_rate_interval_and_bootstrap_over_deals():
    rate, lo, hi = rate_interval([2, 0, 1, 2, 1, 1], [2] * 6)
    assert rate == pytest.approx(0.5833333) and lo < rate < hi
    assert rate_interval([], []) == (0.0, 0.0, 1.0)
    # four-seat deals: each deal holds the four rotations' results for the bot of interest
    deals = [[1, 0, 0, 1], [1, 1, 1, 1], [0, 0, 0, 0], [1, 0, 1, 0], [0, 1, 0, 0], [1, 1, 0, 1]] * 5
    mean = lambda ds: float(np.mean([x for d in ds for x in d]))  # noqa: E731
    a = bootstrap_over_deals(deals, mean, samples=500, seed=3)
    assert a == bootstrap_over_deals(deals, mean, samples=500, seed=3)  # seeded
    assert a[1] < a[0] < a[2] and a[0] == pytest.approx(mean(deals))
    # the same games taken as independent single-game "deals" give a narrower interval: the
    # correlation inside a deal (deal 2 and 3 are all wins / all losses) is what widens it
    flat = bootstrap_over_deals([[x] for d in deals for x in d], mean, samples=500, seed=3)
    assert (flat[2] - flat[1]) < (a[2] - a[1])
    assert all(math.isnan(x) for x in bootstrap_over_deals([], mean))


def test_wilson_and_rates_are_never_certain():
    z2 = 1.959963984540054 ** 2
    assert wilson(0.0, 10) == pytest.approx((0.0, z2 / (10 + z2)))  # a one-sided bound, not [0, 0]
    assert wilson(1.0, 10) == pytest.approx((10 / (10 + z2), 1.0))
    assert wilson(0.5, 0) == (0.0, 1.0)
    lo, hi = wilson(0.3, 100)  # known value: 0.2189 to 0.3958
    assert (lo, hi) == pytest.approx((0.21887, 0.39576), abs=1e-4)
    # a winless bot over 20 deals of 2 games: 0 of 40, interval at the 20 deals (the cautious end)
    assert rate_interval([0] * 20, [2] * 20) == pytest.approx((0.0, *wilson(0.0, 20)))
    # deals that go all one way: the effective size is the deals, not the games
    assert rate_interval([2, 0] * 10, [2, 2] * 10) == pytest.approx((0.5, *wilson(0.5, 20)))
    # games of a deal that split evenly are worth more than the deals alone (up to the games)
    _, lo, hi = rate_interval([1] * 20, [2] * 20)
    assert (lo, hi) == pytest.approx(wilson(0.5, 20))  # no spread at all: the number of deals
    _, lo2, hi2 = rate_interval([1, 1, 2, 0, 1, 1] * 10, [2] * 60)
    assert hi2 - lo2 < wilson(0.5, 60)[1] - wilson(0.5, 60)[0]
    # a match's score: unbeaten is finite on one side, and never a point
    s, lo, hi = score_interval([0, 0, 0, 0, 20])
    assert (s, hi) == (1.0, 1.0) and 0.8 < lo < 1.0
    e = pair_elo([0, 0, 0, 0, 20])
    assert e["elo"] == math.inf and math.isfinite(e["elo_low"]) and e["elo_low"] > 0


def test_fit_takes_aggregated_counts():
    from collections import Counter
    games = [Outcome.order("a", "b")] * 30 + [Outcome.order("b", "a")] * 10 + [Outcome.order("c", "a")] * 7
    from_list = fit_elo(games)
    from_counts = fit_elo(Counter(games))
    assert {k: v.elo for k, v in from_list.items()} == {k: v.elo for k, v in from_counts.items()}


def test_bootstrap_rate_and_its_large_sample_form_agree():
    from arena.ratings.pairs import BOOTSTRAP_MAX_DEALS, bootstrap_rate
    rng = np.random.default_rng(11)
    # four-seat deals (4 games each); a deal suits the bot (3-4 wins) or not (0-1): correlated rotations
    good = rng.random(BOOTSTRAP_MAX_DEALS) < 0.3
    hits = np.where(good, rng.integers(3, 5, BOOTSTRAP_MAX_DEALS), rng.integers(0, 2, BOOTSTRAP_MAX_DEALS))
    games = np.full(BOOTSTRAP_MAX_DEALS, 4)
    boot = bootstrap_rate(hits, games, samples=2000, seed=1)
    normal = bootstrap_rate(np.tile(hits, 2), np.tile(games, 2))  # past the limit: the normal form
    assert boot[0] == pytest.approx(normal[0])
    # twice the deals: an interval about 1/sqrt(2) as wide
    assert (normal[2] - normal[1]) == pytest.approx((boot[2] - boot[1]) / math.sqrt(2), rel=0.1)
    assert bootstrap_rate([], []) == (0.0, 0.0, 1.0)
