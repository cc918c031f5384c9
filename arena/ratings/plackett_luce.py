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
* a draw is the tie of everyone, treated the same way (``draws="tie"``, the
  default): a draw between unequal bots is evidence that they are closer,
  as in every chess rating list.  ``draws="ignore"`` drops draws from the
  likelihood (they still count in ``games``/``draws``) for pools where draws
  are adjudication artefacts rather than play.

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
from typing import Literal

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from .outcome import Outcome

__all__ = [
    "ELO_PER_NAT",
    "Rating",
    "Ratings",
    "fit_elo",
    "likelihood_of_superiority",
    "los_matrix",
    "neighbour_los",
]

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


class _StageBuilder:
    """Collects (choice set, weight) stages and per-bot stage wins."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.sets: dict[int, list[np.ndarray]] = defaultdict(list)
        self.wts: dict[int, list[np.ndarray]] = defaultdict(list)
        self.win_idx: list[np.ndarray] = []
        self.win_w: list[np.ndarray] = []

    def add_rows(self, rows: np.ndarray, counts: np.ndarray, stages: int) -> None:
        """Untied games, ``rows`` in finishing order: first ``stages`` stages."""
        k = rows.shape[1]
        for t in range(min(stages, k - 1)):
            self.sets[k - t].append(rows[:, t:])
            self.wts[k - t].append(counts)
            self.win_idx.append(rows[:, t])
            self.win_w.append(counts)

    def add_tied(self, groups: list[list[int]], count: float, partial: bool) -> None:
        """Games with ties: average over the orders of each tied group (see module doc)."""
        last = 1 if partial else len(groups)
        for g in range(last):
            group = groups[g]
            below = [b for h in groups[g + 1 :] for b in h]
            k = len(group)
            for t in range(1, k + 1):
                share = count / math.comb(k, t)
                for T in _subsets(group, t):
                    members = list(T) + below
                    if len(members) < 2:
                        continue
                    self.sets[len(members)].append(np.array([members]))
                    self.wts[len(members)].append(np.array([share]))
                    self.win_idx.append(np.array(T))
                    self.win_w.append(np.full(t, share / t))

    def build(self) -> tuple[list[tuple[np.ndarray, np.ndarray]], np.ndarray]:
        groups = []
        for s in sorted(self.sets):
            rows = np.sort(np.concatenate(self.sets[s]).astype(np.int64), axis=1)
            w = np.concatenate(self.wts[s]).astype(float)
            # canonical order (rows, then weight) => sums are order independent
            order = np.lexsort((w,) + tuple(rows[:, j] for j in reversed(range(s))))
            rows, w = rows[order], w[order]
            new = np.ones(len(rows), dtype=bool)
            new[1:] = np.any(rows[1:] != rows[:-1], axis=1)
            starts = np.flatnonzero(new)
            groups.append((rows[starts], np.add.reduceat(w, starts)))
        if self.win_idx:
            idx = np.concatenate(self.win_idx).astype(np.int64)
            w = np.concatenate(self.win_w).astype(float)
            order = np.lexsort((w, idx))
            b = np.bincount(idx[order], w[order], minlength=self.n)
        else:
            b = np.zeros(self.n)
        return groups, b


def _subsets(items: list[int], t: int):
    from itertools import combinations

    return combinations(items, t)


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
    draws: Literal["tie", "ignore"] = "tie",
) -> Ratings:
    """Fit Plackett-Luce Elo to all games at once (order independent).

    ``anchor=None`` puts the pool mean at ``anchor_elo``; a bot name fixes
    that bot there instead.  ``prior`` is the number of virtual draws per bot
    against the pool average (0 = plain MLE).  95% intervals come from the
    observed information (Hessian of the negative log-posterior) under the
    gauge constraint.  See the module docstring for ties and draws.
    """
    if draws not in ("tie", "ignore"):
        raise ValueError("draws must be 'tie' or 'ignore'")
    if prior < 0:
        raise ValueError("prior must be >= 0")
    counts = Counter(outcomes)
    for o in counts:
        if not isinstance(o, Outcome):
            raise TypeError(f"expected Outcome, got {type(o).__name__}")
    names = sorted({b for o in counts for b in o.bots})
    if anchor is not None and anchor not in names:
        raise ValueError(f"anchor {anchor!r} played no games")
    n = len(names)
    index = {b: i for i, b in enumerate(names)}
    games = np.zeros(n, dtype=np.int64)
    ndraws = np.zeros(n, dtype=np.int64)
    builder = _StageBuilder(n)
    untied: dict[tuple[int, bool], tuple[list[list[int]], list[int]]] = defaultdict(lambda: ([], []))
    for o, c in counts.items():
        ids = [index[b] for b in o.bots]
        games[ids] += c
        if o.is_draw:
            ndraws[ids] += c
            if draws == "ignore":
                continue
        if all(len(g) == 1 for g in o.groups[:1 if o.partial else None]):
            rows, cs = untied[(len(ids), o.partial)]
            rows.append(ids)
            cs.append(c)
        else:
            builder.add_tied([[index[b] for b in g] for g in o.groups], c, o.partial)
    for (k, partial), (rows, cs) in untied.items():
        builder.add_rows(np.array(rows, dtype=np.int64), np.array(cs, dtype=float), 1 if partial else k)

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
                   log_likelihood=-obj.value(theta), iterations=iterations)


# --------------------------------------------------------------------------
# likelihood of superiority


def _phi(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def likelihood_of_superiority(a: Rating, b: Rating, *, covariance: float = 0.0) -> float:
    """P(a is truly stronger than b), normal approximation of the fitted ratings.

    Pass ``covariance`` (Elo^2, e.g. ``ratings.covariance[i, j]``) for the
    exact error of the difference; without it the two errors are treated as
    independent.  :func:`los_matrix` and :func:`neighbour_los` do this for you.
    """
    var = a.se**2 + b.se**2 - 2.0 * covariance
    diff = a.elo - b.elo
    if var <= 0.0:
        return 0.5 if diff == 0 else float(diff > 0)
    return _phi(diff / math.sqrt(var))


def _cov(ratings: Mapping[str, Rating], a: str, b: str) -> float:
    if isinstance(ratings, Ratings):
        i, j = ratings._index[a], ratings._index[b]
        return float(ratings.covariance[i, j])
    return 0.0


def los_matrix(ratings: Mapping[str, Rating]) -> tuple[list[str], np.ndarray]:
    """Names in standings order and M[i, j] = LOS(row bot over column bot)."""
    names = sorted(ratings, key=lambda n: (-ratings[n].elo, n))
    m = np.full((len(names), len(names)), 0.5)
    for i, a in enumerate(names):
        for j, b in enumerate(names):
            if i != j:
                m[i, j] = likelihood_of_superiority(ratings[a], ratings[b], covariance=_cov(ratings, a, b))
    return names, m


def neighbour_los(ratings: Mapping[str, Rating]) -> list[tuple[str, str, float]]:
    """For a standings table: (bot, bot just below, LOS of bot over it), best first."""
    names = sorted(ratings, key=lambda n: (-ratings[n].elo, n))
    return [
        (a, b, likelihood_of_superiority(ratings[a], ratings[b], covariance=_cov(ratings, a, b)))
        for a, b in zip(names, names[1:])
    ]
