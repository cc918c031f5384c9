"""Two-bot statistics the way chess engine testers compute them.

``elo_difference`` and ``los`` follow cutechess-cli (score -> logistic Elo,
trinomial variance of the per-game score, 95% margin by mapping score +-
1.96 sd through the Elo curve).  ``Sprt`` is the generalised SPRT in
*logistic* Elo (not BayesElo, no draw-elo parameter) on trinomial results,
as in fishtest's ``LLR_logistic`` (Van den Bergh): the log-likelihood ratio
of the maximum-likelihood W/D/L distributions constrained to expected score
s(elo1) versus s(elo0).  Its familiar closed form
N (s1-s0)(2s-s0-s1) / (2 var) is the quadratic approximation of the same
quantity and is available as :attr:`Sprt.llr_approx`; the exact form is used
for decisions because the approximation blows up when the observed variance
is near zero (a few straight wins would "prove" H1).  Zero W/D/L counts are
replaced by 1e-3 before the MLE, as fishtest does, which keeps the MLE
defined (draws are rare in Palace, so a zero draw count is the normal case).
"""

from __future__ import annotations

import math
from enum import StrEnum



class Verdict(StrEnum):
    """Where a sequential test stands: go on, or which hypothesis it accepts (a match that ends at
    its game cap without either says ``MAX_GAMES``)."""

    CONTINUE = "continue"
    ACCEPT_H0 = "accept_h0"
    ACCEPT_H1 = "accept_h1"
    MAX_GAMES = "max_games"

__all__ = ["elo_to_score", "score_to_elo", "elo_difference", "los", "Sprt"]

_Z975 = 1.959963984540054


def elo_to_score(elo: float) -> float:
    """Expected score of the logistic Elo model."""
    return 1.0 / (1.0 + 10.0 ** (-elo / 400.0))


def score_to_elo(score: float) -> float:
    """Inverse of :func:`elo_to_score`; +-inf at scores 1 and 0."""
    if score <= 0.0:
        return -math.inf
    if score >= 1.0:
        return math.inf
    return 400.0 * math.log10(score / (1.0 - score))


def elo_difference(wins: int, draws: int, losses: int) -> tuple[float, float]:
    """(Elo difference, 95% error margin) from one side's W/D/L, cutechess style.

    The margin is half the width of the interval obtained by mapping score +-
    1.96 standard errors (trinomial per-game variance) through the Elo curve,
    so it is infinite when that interval reaches score 0 or 1.
    """
    if min(wins, draws, losses) < 0:
        raise ValueError("counts must be non-negative")
    n = wins + draws + losses
    if n == 0:
        return 0.0, math.inf
    score = (wins + 0.5 * draws) / n
    var = (wins * (1.0 - score) ** 2 + draws * (0.5 - score) ** 2 + losses * score**2) / n
    sd = math.sqrt(var / n)
    lo, hi = score - _Z975 * sd, score + _Z975 * sd
    elo = score_to_elo(score)
    if lo <= 0.0 or hi >= 1.0:
        return elo, math.inf
    return elo, (score_to_elo(hi) - score_to_elo(lo)) / 2.0


def los(wins: int, losses: int) -> float:
    """Likelihood of superiority from decisive games only (draws carry none)."""
    if wins + losses == 0:
        return 0.5
    return 0.5 + 0.5 * math.erf((wins - losses) / math.sqrt(2.0 * (wins + losses)))


_RESULTS = {"win": 1.0, "draw": 0.5, "loss": 0.0, 1: 1.0, 0.5: 0.5, 0: 0.0}


def _constrained_mle(values: list[float], probs: list[float], s: float) -> list[float]:
    """argmax sum p_i log q_i subject to sum q_i = 1 and sum q_i a_i = s.

    Lagrange: q_i = p_i / (1 + lam (a_i - s)) with lam the unique root (in the
    range keeping every q_i positive) of sum p_i (a_i - s) / (1 + lam (a_i - s)).
    """
    x = [a - s for a in values]
    lo, hi = -1.0 / max(x), -1.0 / min(x)
    width = hi - lo

    def f(lam: float) -> float:
        return sum(p * xi / (1.0 + lam * xi) for p, xi in zip(probs, x))

    from scipy.optimize import brentq  # imported here: it is slow to import, and only an SPRT needs it
    lam = brentq(f, lo + 1e-12 * width, hi - 1e-12 * width, xtol=1e-15, rtol=1e-14)
    return [p / (1.0 + lam * xi) for p, xi in zip(probs, x)]


class WaldTest:
    """What every sequential probability ratio test here shares: H0: elo = elo0 against H1: elo =
    elo1, Wald's bounds ``lower = log(beta / (1 - alpha))`` and ``upper = log((1 - beta) / alpha)``,
    and the verdict of the log-likelihood ratio a subclass computes (:attr:`llr`)."""

    def __init__(self, elo0: float = 0.0, elo1: float = 5.0, alpha: float = 0.05, beta: float = 0.05) -> None:
        if not elo1 > elo0:
            raise ValueError("need elo1 > elo0")
        if not (0 < alpha < 1 and 0 < beta < 1):
            raise ValueError("alpha and beta must be in (0, 1)")
        self.elo0, self.elo1, self.alpha, self.beta = elo0, elo1, alpha, beta
        self.lower = math.log(beta / (1.0 - alpha))
        self.upper = math.log((1.0 - beta) / alpha)

    @property
    def llr(self) -> float:
        raise NotImplementedError

    @property
    def status(self) -> Verdict:
        llr = self.llr
        if llr >= self.upper:
            return Verdict.ACCEPT_H1
        if llr <= self.lower:
            return Verdict.ACCEPT_H0
        return Verdict.CONTINUE


class Sprt(WaldTest):
    """Sequential probability ratio test of H0: elo = elo0 against H1: elo = elo1.

    Feed results from the candidate's side (1 / 0.5 / 0 or "win"/"draw"/
    "loss"); stop at the first :attr:`status` other than "continue".
    """

    def __init__(self, elo0: float = 0.0, elo1: float = 5.0, alpha: float = 0.05, beta: float = 0.05) -> None:
        super().__init__(elo0, elo1, alpha, beta)
        self.wins = self.draws = self.losses = 0

    def update(self, result: float | str) -> Verdict:
        """Record one game; returns the new status."""
        try:
            score = _RESULTS[result]
        except (KeyError, TypeError):
            raise ValueError(f"result must be win/draw/loss or 1/0.5/0, got {result!r}") from None
        if score == 1.0:
            self.wins += 1
        elif score == 0.5:
            self.draws += 1
        else:
            self.losses += 1
        return self.status

    def add(self, wins: int = 0, draws: int = 0, losses: int = 0) -> Verdict:
        """Record many games at once."""
        if min(wins, draws, losses) < 0:
            raise ValueError("counts must be non-negative")
        self.wins += wins
        self.draws += draws
        self.losses += losses
        return self.status

    def _regularised(self) -> tuple[float, list[float], list[float]]:
        counts = [c if c > 0 else 1e-3 for c in (self.losses, self.draws, self.wins)]
        n = sum(counts)
        return n, [0.0, 0.5, 1.0], [c / n for c in counts]

    @property
    def llr(self) -> float:
        """Generalised log-likelihood ratio (exact trinomial MLE form)."""
        if self.wins + self.draws + self.losses == 0:
            return 0.0
        n, values, probs = self._regularised()
        q0 = _constrained_mle(values, probs, elo_to_score(self.elo0))
        q1 = _constrained_mle(values, probs, elo_to_score(self.elo1))
        return n * sum(p * math.log(a / b) for p, a, b in zip(probs, q1, q0))

    @property
    def llr_approx(self) -> float:
        """N (s1 - s0)(2 s - s0 - s1) / (2 var): the usual quadratic approximation."""
        if self.wins + self.draws + self.losses == 0:
            return 0.0
        n, values, probs = self._regularised()
        s = sum(a * p for a, p in zip(values, probs))
        var = sum(p * (a - s) ** 2 for a, p in zip(values, probs))
        s0, s1 = elo_to_score(self.elo0), elo_to_score(self.elo1)
        return n * (s1 - s0) * (2.0 * s - s0 - s1) / (2.0 * var)

    def __repr__(self) -> str:
        return (
            f"Sprt(elo0={self.elo0}, elo1={self.elo1}, W/D/L={self.wins}/{self.draws}/{self.losses}, "
            f"llr={self.llr:.3f} in [{self.lower:.3f}, {self.upper:.3f}], {self.status})"
        )
