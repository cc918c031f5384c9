"""Statistics that respect duplicate deals: pentanomial pair counts, and a bootstrap over deals.

The two games of a deal (seats swapped) share their cards, so they are not independent: a deal
that suits the stronger bot in both seats makes WW or LL more likely than two coin flips would.
Counting the *pair* as one observation with five outcomes - LL, LD, DD or WL, WD, WW, pair score
0, ½, 1, 1½, 2 - is what fishtest and fastchess do ("pentanomial"); the variance of the mean then
comes from the spread of pair scores, which is right whatever the correlation inside a pair.
The trinomial model (W/D/L per game) assumes independent games and gets the interval wrong: too
narrow when deals favour one bot in both seats, too wide when they favour one seat.

* :func:`pair_elo` - Elo difference and its 95% interval from pair counts (score ± 1.96 sd of
  the pair mean, mapped through the logistic curve), plus normalized Elo as fishtest/fastchess
  define it (``800/ln 10 · (score - ½) / sd per game``).
* :class:`PairSprt` - the generalised SPRT (fishtest's ``LLR_logistic``) on pentanomial counts.
* :func:`rate_interval` - a proportion with its 95% interval over deals.
* :func:`bootstrap_over_deals` - for tables of more seats: resample whole deals (every rotation
  of a deal together) to get an interval for any statistic of the games.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .headtohead import Verdict, WaldTest, _constrained_mle, elo_to_score, score_to_elo

__all__ = ["PAIR_NAMES", "PairSprt", "bootstrap_over_deals", "bootstrap_rate", "pair_elo", "pair_index",
           "rate_interval", "score_interval", "wilson"]

_Z975 = 1.959963984540054
PAIR_NAMES = ("LL", "LD", "DD/WL", "WD", "WW")
PAIR_SCORES = (0.0, 0.25, 0.5, 0.75, 1.0)  # per game
NELO_PER_NT = 800.0 / math.log(10.0)
BOOTSTRAP_MAX_DEALS = 2000


def pair_index(first: float, second: float) -> int:
    """Index into the five pair counts of a pair whose two game scores (1, ½ or 0) are given."""
    total = first + second
    if total not in (0.0, 0.5, 1.0, 1.5, 2.0):
        raise ValueError(f"game scores must be 1, 0.5 or 0, got {first!r}, {second!r}")
    return int(round(2 * total))


def _moments(pairs: Sequence[int]) -> tuple[int, float, float]:
    """(number of pairs, mean per-game score, variance of the per-pair mean score)."""
    n = sum(pairs)
    if n == 0:
        return 0, 0.5, 0.0
    mean = sum(c * s for c, s in zip(pairs, PAIR_SCORES)) / n
    var = sum(c * (s - mean) ** 2 for c, s in zip(pairs, PAIR_SCORES)) / n
    return n, mean, var


def pair_elo(pairs: Sequence[int], z: float = _Z975) -> dict[str, float]:
    """Elo difference with its 95% interval from pentanomial counts [LL, LD, DD+WL, WD, WW].

    ``score_low``/``score_high`` are the per-game score's interval (:func:`score_interval`),
    ``elo_low``/``elo_high`` the same interval on the Elo scale: finite unless the score itself is
    0 or 1 (then ``elo`` is infinite and the other end is the finite one-sided bound); ``nelo`` is
    normalized Elo.  ``z`` sets the level (1.96: 95%)."""
    n, mean, var = _moments(pairs)
    if n == 0:
        return {"pairs": 0, "score": 0.5, "score_low": 0.0, "score_high": 1.0, "elo": 0.0, "elo_low": -math.inf,
                "elo_high": math.inf, "nelo": 0.0, "nelo_low": -math.inf, "nelo_high": math.inf}
    sd = math.sqrt(var / n)
    lo, hi = mean - z * sd, mean + z * sd
    _, wlo, whi = score_interval(pairs, z)
    sigma_pg = math.sqrt(2.0 * var)  # per game: a pair is two games
    if sigma_pg > 0:
        nelo = NELO_PER_NT * (mean - 0.5) / sigma_pg
        nelo_lo, nelo_hi = NELO_PER_NT * (lo - 0.5) / sigma_pg, NELO_PER_NT * (hi - 0.5) / sigma_pg
    else:
        nelo = nelo_lo = nelo_hi = 0.0 if mean == 0.5 else math.copysign(math.inf, mean - 0.5)
    return {"pairs": n, "score": mean, "score_low": wlo, "score_high": whi,
            "elo": score_to_elo(mean), "elo_low": score_to_elo(wlo), "elo_high": score_to_elo(whi),
            "nelo": nelo, "nelo_low": nelo_lo, "nelo_high": nelo_hi}


def wilson(p: float, n: float, z: float = _Z975) -> tuple[float, float]:
    """Wilson's score interval for a proportion ``p`` observed over ``n`` trials (``n`` may be an
    effective, fractional size).  Never of width zero, always inside [0, 1]: a rate of 0 out of
    n gets [0, z^2 / (n + z^2)], a one-sided bound."""
    if n <= 0:
        return 0.0, 1.0
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z / (1 + z2 / n) * math.sqrt(max(p * (1 - p), 0.0) / n + z2 / (4 * n * n))
    # The interval holds its own rate exactly: in floats, centre - half can land a hair above 0
    # for p = 0 (and centre + half below 1 for p = 1).
    return max(0.0, min(p, centre - half)), min(1.0, max(p, centre + half))


def effective_n(hits: Sequence[float], games: Sequence[float]) -> tuple[float, float]:
    """(rate, effective number of games) for a rate counted over deals whose games are correlated.

    The effective size is Kish's: p(1-p) over the variance of the ratio estimator across deals
    (its residuals h_i - p g_i), kept between the number of deals and the number of games.  When
    that variance cannot be estimated (one deal, or a rate of exactly 0 or 1) the number of deals
    is used, the cautious end."""
    h = np.asarray(hits, dtype=float)
    g = np.asarray(games, dtype=float)
    k, total = len(g), float(g.sum()) if len(g) else 0.0
    if k == 0 or total == 0:
        return 0.0, 0.0
    p = float(h.sum()) / total
    var = float(np.sum((h - p * g) ** 2)) / (k - 1) / k / float(g.mean()) ** 2 if k > 1 else 0.0
    if var <= 0 or p <= 0 or p >= 1:
        return p, float(k)
    return p, min(total, max(float(k), p * (1 - p) / var))


def rate_interval(hits: Sequence[float], games: Sequence[float]) -> tuple[float, float, float]:
    """(rate, low, high): sum(hits) / sum(games) with Wilson's 95% interval at the effective number
    of games (:func:`effective_n`).  ``hits[i]`` and ``games[i]`` are deal i's counts over all its
    seat rotations, so the correlation of a deal's games widens the interval as it should.  Every
    rate the arena shows with an interval (win %, draw %, a match's win rate) goes through here."""
    p, n = effective_n(hits, games)
    lo, hi = wilson(p, n)
    return p, lo, hi


def score_interval(pairs: Sequence[int], z: float = _Z975) -> tuple[float, float, float]:
    """(score, low, high): a match's mean score per game from pentanomial pair counts, with Wilson's
    95% interval at the effective number of games (the pair-score spread's design effect, between
    the number of pairs and of games; the number of pairs when every pair scored the same).  Unlike
    the plain normal interval it never reaches 0 or 1 unless the score is 0 or 1, and it never
    collapses to a point."""
    n, mean, var = _moments(pairs)
    if n == 0:
        return 0.5, 0.0, 1.0
    per_game = mean * (1 - mean)
    neff = float(n) if var <= 0 or per_game <= 0 else min(2.0 * n, max(float(n), per_game / (var / n)))
    lo, hi = wilson(mean, neff, z)
    return mean, lo, hi


class PairSprt(WaldTest):
    """SPRT of H0: elo = elo0 against H1: elo = elo1 (logistic Elo) on pentanomial pair counts.

    The log-likelihood ratio is fishtest's generalised one: the maximum-likelihood distributions
    over the five pair outcomes constrained to expected per-game score s(elo1) and s(elo0).  Zero
    counts are replaced by 1e-3 (as fishtest does) so the maximum stays defined."""

    def __init__(self, elo0: float = 0.0, elo1: float = 5.0, alpha: float = 0.05, beta: float = 0.05) -> None:
        super().__init__(elo0, elo1, alpha, beta)
        self.pairs = [0, 0, 0, 0, 0]

    def update(self, first: float, second: float) -> Verdict:
        """Record one pair by its two game scores from the candidate's side; returns the status."""
        self.pairs[pair_index(first, second)] += 1
        return self.status

    @property
    def llr(self) -> float:
        if sum(self.pairs) == 0:
            return 0.0
        counts = [c if c > 0 else 1e-3 for c in self.pairs]
        n = sum(counts)
        probs = [c / n for c in counts]
        q0 = _constrained_mle(list(PAIR_SCORES), probs, elo_to_score(self.elo0))
        q1 = _constrained_mle(list(PAIR_SCORES), probs, elo_to_score(self.elo1))
        return n * sum(p * math.log(a / b) for p, a, b in zip(probs, q1, q0))

    def __repr__(self) -> str:
        return (f"PairSprt(elo0={self.elo0}, elo1={self.elo1}, pairs={self.pairs}, llr={self.llr:.3f} in "
                f"[{self.lower:.3f}, {self.upper:.3f}], {self.status})")


def bootstrap_over_deals(deals: Sequence[Any], statistic: Callable[[Sequence[Any]], float], *,
                         samples: int = 1000, seed: int = 0) -> tuple[float, float, float]:
    """(statistic, low, high): a 95% percentile interval from resampling whole deals.

    ``deals`` holds one item per deal (all its seat rotations together), so the correlation of
    the games of a deal is kept; ``statistic`` maps a list of deals to a number.  Seeded, so the
    same games give the same interval."""
    if not deals:
        return math.nan, math.nan, math.nan
    rng = np.random.default_rng(seed)
    n = len(deals)
    values = np.array([statistic([deals[i] for i in rng.integers(0, n, n)]) for _ in range(samples)])
    return float(statistic(list(deals))), float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5))


def bootstrap_rate(hits: Sequence[float], games: Sequence[float], *, samples: int = 1000,
                   seed: int = 0) -> tuple[float, float, float]:
    """(rate, low, high): sum(hits) / sum(games) with a 95% percentile interval from resampling
    deals; ``hits[i]`` and ``games[i]`` are deal i's count over all its seat rotations.  The
    vectorised case of :func:`bootstrap_over_deals`, for a win rate at tables of any size.

    Past ``BOOTSTRAP_MAX_DEALS`` deals the resampling would cost seconds, and the normal
    approximation of the ratio estimator over deals (its variance from the deals' residuals
    h_i - rate * g_i) is as good; that is used instead."""
    h = np.asarray(hits, dtype=float)
    g = np.asarray(games, dtype=float)
    if len(g) == 0 or g.sum() == 0:
        return 0.0, 0.0, 1.0
    if len(g) > BOOTSTRAP_MAX_DEALS:
        n = len(g)
        rate = float(h.sum() / g.sum())
        sd = math.sqrt(float(np.sum((h - rate * g) ** 2)) / (n - 1) / n) / float(g.mean())
        return rate, max(0.0, rate - _Z975 * sd), min(1.0, rate + _Z975 * sd)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(g), (samples, len(g)))
    totals = g[idx].sum(axis=1)
    rates = np.divide(h[idx].sum(axis=1), totals, out=np.zeros(samples), where=totals > 0)
    return float(h.sum() / g.sum()), float(np.percentile(rates, 2.5)), float(np.percentile(rates, 97.5))
