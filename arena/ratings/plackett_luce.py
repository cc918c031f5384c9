"""Maximum-likelihood Plackett-Luce Elo over a whole tournament.

Model.  Bot i has strength theta_i (natural-log units); in every *stage* of a
game the next finisher is drawn from the bots still in play S with
probability exp(theta_w) / sum_{j in S} exp(theta_j).  Reported
``elo = 400/ln(10) * theta`` (i.e. 400*log10(strength)), so two-seat games
are exactly the Elo logistic.

How outcomes become stages (the log-likelihood is a weighted sum of stage
log-probabilities):

* full order a > b > c: stages (a from abc), (b from bc).
* winner only: one stage, the winner chosen from everyone.
* a tied group G (k bots) above the set L of bots below it: the
  log-likelihood is *averaged over the k! orders of G* (the "each order,
  equal weight" rule; for two players this is exactly chess's draw = half a
  win plus half a loss).  In closed form: for every non-empty T subset of G
  there is a stage "choose from T + L" with weight 1/C(k,|T|), the chooser
  spread evenly over T - so no k! enumeration.  This is a composite
  likelihood, so the Hessian-based errors are approximate for tie-heavy data.
* a draw (no finishing order at all: agreed, or adjudicated when a game is
  stopped) is by default *left out of the likelihood* and only counted in
  ``games``/``draws``.  Plackett-Luce never produces a draw; a stopped game is
  a censored observation, and when the stop does not depend on who is ahead
  (turn cap, bots looping) its probability does not involve the strengths,
  so dropping it is exact - and a weak bot's stalling cannot drag a strong
  one down.  ``draws="tie"`` instead treats it as everyone tied (the rule
  above; for two seats, chess's half point) for pools where a draw really
  means "nobody could beat anyone".

Prior.  Each bot also plays ``prior`` virtual drawn two-seat games (default 1)
against the *current pool average* (theta_bar, itself a function of all
thetas).  This keeps all-win / all-loss bots finite, is translation invariant
(so anchoring stays a pure gauge choice), and is negligible next to real games.
``prior=0`` gives the plain MLE, which exists only when the "beat" graph is
strongly connected - checked, ValueError otherwise.

Speed.  The likelihood only needs, per distinct choice set, its total weight
(plus one vector of total stage wins), so identical games and identical
stages are aggregated first; Newton's method on the concave log-likelihood
then needs a handful of iterations.  Aggregation is done in a canonical
sorted order, so the same multiset of games gives bit-identical ratings.

Why not choix for the fit: it takes no per-observation weights (needed for
aggregated counts and the fractional tie stages), has no ties, and its
regulariser is an L2 ridge on absolute theta rather than this prior.  The
tests use choix as an independent check of the untied MLE.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations
from typing import Literal

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from .outcome import Outcome

__all__ = ["ELO_PER_NAT", "Rating", "Ratings", "fit_elo"]

ELO_PER_NAT = 400.0 / math.log(10.0)
_Z95 = 1.959963984540054


@dataclass(frozen=True, slots=True)
class Rating:
    """One bot's fitted rating; ``se`` and the CI are in Elo, relative to the gauge.

    With the default pool-mean gauge ``se`` is the error of (bot - pool mean);
    with an anchor it is the error of (bot - anchor), and the anchor's is 0.
    """

    elo: float
    se: float
    ci_low: float
    ci_high: float
    games: int
    draws: int = 0


class Ratings(dict[str, Rating]):
    """``name -> Rating`` plus the covariance that honest pairwise LOS needs.

    Ratings of bots that met each other are correlated, so
    ``sqrt(se_a**2 + se_b**2)`` is only an approximation of the error of a
    difference; :meth:`diff_se` uses the full covariance.
    """

    def __init__(
        self,
        ratings: Mapping[str, Rating],
        covariance: np.ndarray,
        *,
        anchor: str | None,
        prior: float,
        draws: str,
        log_likelihood: float,
        iterations: int,
    ) -> None:
        super().__init__(ratings)
        self.names: tuple[str, ...] = tuple(ratings)
        self._index = {n: i for i, n in enumerate(self.names)}
        self.covariance = covariance  # Elo^2, same order as names
        self.anchor = anchor
        self.prior = prior
        self.draws_policy = draws
        self.log_likelihood = log_likelihood
        self.iterations = iterations

    def diff_se(self, a: str, b: str) -> float:
        i, j = self._index[a], self._index[b]
        c = self.covariance
        return math.sqrt(max(c[i, i] + c[j, j] - 2.0 * c[i, j], 0.0))

    def standings(self) -> list[str]:
        """Names best first (ties broken by name so the table is stable)."""
        return sorted(self, key=lambda n: (-self[n].elo, n))


# --------------------------------------------------------------------------
# outcomes -> aggregated stages


@lru_cache(maxsize=None)
def _template(sizes: tuple[int, ...], partial: bool) -> tuple[tuple[tuple[int, ...], tuple[int, ...], float], ...]:
    """Stages of one game *shape* (group sizes, partial) as column positions.

    Returns (set columns, chooser columns, weight) triples; the weight of the
    stage is shared evenly by its choosers.  A singleton group gives the plain
    PL stage; a tied group of k gives, for every subset T of it, the stage
    "choose from T + everyone below" with weight 1/C(k, |T|) (the average
    over the k! orders, see the module docstring).
    """
    starts = [sum(sizes[:g]) for g in range(len(sizes))]
    total = sum(sizes)
    stages = []
    for g in range(1 if partial else len(sizes)):
        group = range(starts[g], starts[g] + sizes[g])
        below = tuple(range(starts[g] + sizes[g], total))
        k = sizes[g]
        for t in range(1, k + 1):
            for chosen in combinations(group, t):
                if t + len(below) >= 2:
                    stages.append((chosen + below, chosen, 1.0 / math.comb(k, t)))
    return tuple(stages)


class _StageBuilder:
    """Collects (choice set, weight) stages and per-bot stage wins, shape by shape."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.sets: dict[int, list[np.ndarray]] = defaultdict(list)
        self.wts: dict[int, list[np.ndarray]] = defaultdict(list)
        self.win_idx: list[np.ndarray] = [np.zeros(0, dtype=np.int64)]
        self.win_w: list[np.ndarray] = [np.zeros(0)]

    def add_shape(self, sizes: tuple[int, ...], partial: bool, rows: np.ndarray, counts: np.ndarray) -> None:
        """``rows[i]`` lists game i's bots group by group, best group first."""
        for cols, chosen, share in _template(sizes, partial):
            w = counts * share
            self.sets[len(cols)].append(rows[:, list(cols)])
            self.wts[len(cols)].append(w)
            self.win_idx.append(rows[:, list(chosen)].ravel())
            self.win_w.append(np.repeat(w / len(chosen), len(chosen)))

    def build(self) -> tuple[list[tuple[np.ndarray, np.ndarray]], np.ndarray]:
        groups = []
        for s in sorted(self.sets):
            rows = np.sort(np.concatenate(self.sets[s]), axis=1)
            w = np.concatenate(self.wts[s])
            # canonical order (rows, then weight) => sums are order independent
            order = np.lexsort((w,) + tuple(rows[:, j] for j in reversed(range(s))))
            rows, w = rows[order], w[order]
            new = np.ones(len(rows), dtype=bool)
            new[1:] = np.any(rows[1:] != rows[:-1], axis=1)
            starts = np.flatnonzero(new)
            groups.append((rows[starts], np.add.reduceat(w, starts)))
        idx = np.concatenate(self.win_idx)
        w = np.concatenate(self.win_w)
        order = np.lexsort((w, idx))
        b = np.bincount(idx[order], w[order], minlength=self.n).astype(float)
        return groups, b


def _beat_edges(o: Outcome, index: Mapping[str, int], draws: str) -> list[tuple[int, int]]:
    """Directed 'a finished ahead of b in some stage' edges, for the MLE existence check."""
    if o.is_draw and draws == "ignore":
        return []
    groups = [[index[b] for b in g] for g in o.groups]
    edges = []
    last = 1 if o.partial else len(groups)
    for g in range(last):
        below = [b for h in groups[g + 1 :] for b in h]
        for a in groups[g]:
            edges += [(a, c) for c in below]
            edges += [(a, c) for c in groups[g] if c != a]
    return edges


# --------------------------------------------------------------------------
# likelihood


class _Objective:
    """Negative log-posterior, gradient and Hessian in theta (natural units)."""

    def __init__(self, groups, b: np.ndarray, prior: float) -> None:
        self.n = len(b)
        self.b = b
        self.prior = prior
        self.groups = [(idx, W, None) for idx, W in groups]

    def _pairkeys(self, i: int) -> np.ndarray:
        idx, W, keys = self.groups[i]
        if keys is None:
            keys = (idx[:, :, None] * self.n + idx[:, None, :]).ravel()
            self.groups[i] = (idx, W, keys)
        return keys

    def value(self, theta: np.ndarray) -> float:
        v = -float(self.b @ theta)
        for idx, W, _ in self.groups:
            x = theta[idx]
            m = x.max(axis=1)
            v += float(W @ (m + np.log(np.exp(x - m[:, None]).sum(axis=1))))
        if self.prior:
            d = theta - theta.mean()
            v += self.prior * 0.5 * float(np.sum(np.logaddexp(0, -d) + np.logaddexp(0, d)))
        return v

    def derivatives(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = self.n
        grad = -self.b.copy()
        hess = np.zeros(n * n)
        diag = np.zeros(n)
        for i, (idx, W, _) in enumerate(self.groups):
            x = theta[idx]
            e = np.exp(x - x.max(axis=1)[:, None])
            p = e / e.sum(axis=1)[:, None]
            wp = (W[:, None] * p).ravel()
            col = np.bincount(idx.ravel(), wp, minlength=n)
            grad += col
            diag += col
            outer = (W[:, None, None] * p[:, :, None] * p[:, None, :]).ravel()
            hess -= np.bincount(self._pairkeys(i), outer, minlength=n * n)
        hess = hess.reshape(n, n)
        hess[np.diag_indices(n)] += diag
        if self.prior:
            d = theta - theta.mean()
            fp = self.prior * 0.5 * np.tanh(d / 2.0)  # d/dd of the prior term
            grad += fp - fp.mean()
            s = 1.0 / (1.0 + np.exp(-d))
            c = np.eye(n) - 1.0 / n
            hess += (c * (self.prior * s * (1.0 - s))) @ c
        return grad, hess


def _newton(obj: _Objective, max_iter: int = 100) -> tuple[np.ndarray, np.ndarray, int]:
    """Damped Newton in the sum-zero gauge; the objective is convex and translation invariant.

    Returns theta, the Hessian at theta (for the covariance) and the iteration count.
    """
    n = obj.n
    theta = np.zeros(n)
    ones = np.ones((n, n))  # fixes the gauge direction; gradient and step are sum-zero
    f = obj.value(theta)
    for it in range(1, max_iter + 1):
        grad, hess = obj.derivatives(theta)
        step = -np.linalg.solve(hess + ones, grad)
        step -= step.mean()
        if np.max(np.abs(step)) < 1e-10:  # nats; ~2e-8 Elo
            return theta, hess, it
        decrement = -float(grad @ step)
        t = 1.0
        if decrement > 1e-8:  # outside the quadratic region: backtrack
            while t > 1e-10:
                fc = obj.value(theta + t * step)
                if fc <= f - 1e-4 * t * decrement:
                    break
                t *= 0.5
        theta = theta + t * step
        theta -= theta.mean()
        f = obj.value(theta)
    raise RuntimeError("Plackett-Luce fit did not converge")


# --------------------------------------------------------------------------
# public fit


def fit_elo(
    outcomes: Iterable[Outcome],
    *,
    anchor: str | None = None,
    anchor_elo: float = 1500.0,
    prior: float = 1.0,
    draws: Literal["ignore", "tie"] = "ignore",
) -> Ratings:
    """Fit Plackett-Luce Elo to all games at once (order independent).

    ``anchor=None`` puts the pool mean at ``anchor_elo``; a bot name fixes
    that bot there instead.  ``prior`` is the number of virtual draws per bot
    against the pool average (0 = plain MLE).  95% intervals come from the
    observed information (Hessian of the negative log-posterior) under the
    gauge constraint.  See the module docstring for ties and draws.

    The result is a dict ``name -> Rating`` that also carries ``covariance``
    (Elo^2, for :meth:`Ratings.diff_se` and the LOS helpers), the data
    ``log_likelihood`` at the fit (prior excluded) and Newton ``iterations``.
    """
    if draws not in ("tie", "ignore"):
        raise ValueError("draws must be 'tie' or 'ignore'")
    if prior < 0:
        raise ValueError("prior must be >= 0")
    counts = Counter(outcomes)
    names_seen: set[str] = set()
    for o in counts:
        if not isinstance(o, Outcome):
            raise TypeError(f"expected Outcome, got {type(o).__name__}")
        for g in o.groups:
            names_seen.update(g)
    names = sorted(names_seen)
    if anchor is not None and anchor not in names_seen:
        raise ValueError(f"anchor {anchor!r} played no games")
    n = len(names)
    index = {b: i for i, b in enumerate(names)}
    builder = _StageBuilder(n)
    seat_ids: list[int] = []  # every seat of every distinct game, for the games count
    seat_w: list[int] = []
    draw_ids: list[int] = []
    draw_w: list[int] = []
    shapes: dict[tuple[tuple[int, ...], bool], tuple[list[list[int]], list[int]]] = defaultdict(lambda: ([], []))
    for o, c in counts.items():
        groups = o.groups
        ids = [index[b] for g in groups for b in g]
        seat_ids += ids
        seat_w += [c] * len(ids)
        if len(groups) == 1:  # draw
            draw_ids += ids
            draw_w += [c] * len(ids)
            if draws == "ignore":
                continue
        rows, cs = shapes[(tuple(map(len, groups)), o.partial)]
        rows.append(ids)
        cs.append(c)
    for (sizes, partial), (rows, cs) in shapes.items():
        builder.add_shape(sizes, partial, np.array(rows, dtype=np.int64), np.array(cs, dtype=float))
    games = np.bincount(np.array(seat_ids, dtype=np.int64), np.array(seat_w, dtype=np.int64), minlength=n)
    ndraws = np.bincount(np.array(draw_ids, dtype=np.int64), np.array(draw_w, dtype=np.int64), minlength=n)

    if n == 0:
        return Ratings({}, np.zeros((0, 0)), anchor=anchor, prior=prior, draws=draws,
                       log_likelihood=0.0, iterations=0)
    if prior == 0:
        edges = [e for o in counts for e in _beat_edges(o, index, draws)]
        arr = np.array(edges, dtype=np.int64).reshape(-1, 2)
        graph = coo_matrix((np.ones(len(arr)), (arr[:, 0], arr[:, 1])), shape=(n, n))
        ncomp, _ = connected_components(graph, directed=True, connection="strong")
        if ncomp > 1:
            raise ValueError(
                "with prior=0 the maximum-likelihood ratings do not exist: some bots never "
                "lost (or never won) against the rest of the pool; use prior > 0"
            )

    groups, b = builder.build()
    obj = _Objective(groups, b, prior)
    theta, hess, iterations = _newton(obj)

    # covariance in the sum-zero gauge: pseudo-inverse of H (null space = ones)
    cov = np.linalg.inv(hess + np.ones((n, n))) - 1.0 / (n * n)
    if anchor is None:
        shift = 0.0
    else:
        a = index[anchor]
        shift = -theta[a]
        cov = cov - cov[:, [a]] - cov[[a], :] + cov[a, a]
        cov[a, :] = 0.0
        cov[:, a] = 0.0
    cov_elo = cov * ELO_PER_NAT**2
    elo = anchor_elo + ELO_PER_NAT * (theta + shift)
    se = np.sqrt(np.clip(np.diag(cov_elo), 0.0, None))
    ratings = {
        name: Rating(
            elo=float(elo[i]),
            se=float(se[i]),
            ci_low=float(elo[i] - _Z95 * se[i]),
            ci_high=float(elo[i] + _Z95 * se[i]),
            games=int(games[i]),
            draws=int(ndraws[i]),
        )
        for i, name in enumerate(names)
    }
    return Ratings(ratings, cov_elo, anchor=anchor, prior=prior, draws=draws,
                   log_likelihood=-_Objective(groups, b, 0.0).value(theta), iterations=iterations)
