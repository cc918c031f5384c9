"""Maximum-likelihood Plackett-Luce Elo with ties (Davidson-Luce) over a whole tournament.

Model.  Bot i has strength theta_i (natural-log units).  A game's finishing order is drawn one
*stage* at a time: from the bots still in play S, the next finishing group T is chosen - one bot,
or a tied group of t bots - with probability proportional to

    delta_t * exp(mean of theta over T)          (delta_1 = 1)

over every subset of S whose size is 1 or a tie size seen in the data.  This is the tie model of
Turner, van Etten, Firth and Kosmidis, "Modelling rankings in R: the PlackettLuce package",
Computational Statistics 35 (2020), which generalises Davidson's tie extension of Bradley-Terry
(R. R. Davidson, "On extending the Bradley-Terry model to accommodate ties in paired comparison
experiments", JASA 65, 1970) to rankings: for two seats P(a beats b) : P(draw) : P(b beats a) =
exp(theta_a) : delta_2 exp((theta_a + theta_b) / 2) : exp(theta_b).  So a draw is evidence that the
two are close, and the tie parameters delta_t are fitted with the strengths.  Each delta_t has a
weak prior of its own (one virtual tie and one virtual decisive result between equals), so a pool
where every game of some size is drawn still has a finite fit.

How outcomes become stages: a full order a > b > c is (a from abc), (b from bc); a tied group is one
stage choosing the whole group (the players still in at a draw: "tied for the rest", a tie of that
group); a forfeited seat is below everyone, so it is simply never chosen before the last stage; a
winner-only game (the rest unranked) is its first stage only.

Scale.  With ties the two-seat expected score is 1/2 + sinh(d/2) / (2 cosh(d/2) + delta_2) for a
strength gap d, flatter than the logistic.  The reported rating is
``elo = 400/ln 10 * 2 / (2 + delta_2) * theta``: the gap whose expected-score slope at equal
strength is that of the Elo logistic, so that, near equality, 100 Elo still means a 64% score, and a
pair's Elo difference reads like the score-based Elo `arena match` prints.  (With delta_2 = 2 the
two curves coincide exactly.)  Without two-seat ties the scale is 400/ln 10 and two-seat games are
exactly the Elo logistic.  The intervals carry the uncertainty of delta_2 through this scale too.

Prior on strengths.  Each bot also plays ``prior`` virtual games (default 1) scored half a win and
half a loss against the *current pool average*.  This keeps all-win / all-loss bots finite, is
translation invariant (so anchoring stays a pure gauge choice), and is negligible next to real
games.  ``prior=0`` gives the plain MLE, which exists only when the "finished ahead" graph (ties
count both ways) is strongly connected - checked, ValueError otherwise.

Speed.  A stage's likelihood depends on the choice set S only through its total weight, plus one
vector of how often each bot (and each tie size) was chosen; so identical games and identical
stages are aggregated first, and Newton's method on the concave log-likelihood needs a handful of
iterations.  Aggregation is done in a canonical sorted order, so the same multiset of games gives
bit-identical ratings.

Why not choix for the fit: it takes no per-observation weights (needed for aggregated counts), has
no ties, and its regulariser is an L2 ridge on absolute theta rather than this prior.  The tests use
choix as an independent check of the untied MLE.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from .outcome import Outcome

__all__ = ["ELO_PER_NAT", "MIN_RATED_GAMES", "Rating", "Ratings", "fit_elo"]

ELO_PER_NAT = 400.0 / math.log(10.0)
_Z95 = 1.959963984540054
MIN_RATED_GAMES = 10  # fewer games than this: the views say "too few games" instead of a rating


@dataclass(frozen=True, slots=True)
class Rating:
    """One bot's fitted rating; ``se`` and the CI are in Elo, relative to the gauge.

    With the default pool-mean gauge ``se`` is the error of (bot - pool mean);
    with an anchor it is the error of (bot - anchor), and the anchor's is 0.
    ``draws`` counts the games in which the bot finished in a tied group.
    """

    elo: float
    se: float
    ci_low: float
    ci_high: float
    games: int
    draws: int = 0

    @property
    def rated(self) -> bool:
        """Enough games for the views to show the number (``MIN_RATED_GAMES``)."""
        return self.games >= MIN_RATED_GAMES


class Ratings(dict[str, Rating]):
    """``name -> Rating`` plus the covariance that honest pairwise LOS needs, and the tie parameters.

    Ratings of bots that met each other are correlated, so
    ``sqrt(se_a**2 + se_b**2)`` is only an approximation of the error of a
    difference; :meth:`diff_se` uses the full covariance.  ``ties`` maps a tie size t to its
    fitted delta_t; ``scale`` is Elo per unit of theta (see the module docstring).
    """

    def __init__(
        self,
        ratings: Mapping[str, Rating],
        covariance: np.ndarray,
        *,
        anchor: str | None,
        prior: float,
        log_likelihood: float,
        iterations: int,
        ties: Mapping[int, float] | None = None,
        scale: float = ELO_PER_NAT,
    ) -> None:
        super().__init__(ratings)
        self.names: tuple[str, ...] = tuple(ratings)
        self._index = {n: i for i, n in enumerate(self.names)}
        self.covariance = covariance  # Elo^2, same order as names
        self.anchor = anchor
        self.prior = prior
        self.log_likelihood = log_likelihood
        self.iterations = iterations
        self.ties = dict(ties or {})
        self.scale = scale

    def diff_se(self, a: str, b: str) -> float:
        i, j = self._index[a], self._index[b]
        c = self.covariance
        return math.sqrt(max(c[i, i] + c[j, j] - 2.0 * c[i, j], 0.0))

    def standings(self) -> list[str]:
        """Names best first (ties broken by name so the table is stable)."""
        return sorted(self, key=lambda n: (-self[n].elo, n))

    @property
    def draw_at_equal(self) -> float | None:
        """The model's two-seat draw probability between equals, delta_2 / (2 + delta_2); None without ties."""
        d = self.ties.get(2)
        return None if d is None else d / (2.0 + d)


# --------------------------------------------------------------------------
# outcomes -> aggregated stages


def _stages(o: Outcome) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """(choice set S, chosen group T) for each stage of one game that is a choice (|S| >= 2)."""
    out = []
    groups = o.groups
    for g in range(1 if o.partial else len(groups)):
        rest = tuple(b for h in groups[g:] for b in h)
        if len(rest) >= 2:
            out.append((rest, groups[g]))
    return out


@lru_cache(maxsize=None)
def _candidates(s: int, tie_sizes: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Every subset a choice set of ``s`` bots can yield: (membership weights 1/|U|, c x s;
    column of its tie parameter in the local feature block, -1 for a single bot)."""
    rows, cols = [], []
    for t in (1, *tie_sizes):
        if t > s:
            continue
        for u in combinations(range(s), t):
            m = np.zeros(s)
            m[list(u)] = 1.0 / t
            rows.append(m)
            cols.append(-1 if t == 1 else tie_sizes.index(t))
    return np.array(rows), np.array(cols, dtype=np.int64)


def _beat_edges(o: Outcome, index: Mapping[str, int]) -> list[tuple[int, int]]:
    """Directed 'a finished ahead of (or tied with) b' edges, for the MLE existence check."""
    edges = []
    for rest, chosen in _stages(o):
        for a in chosen:
            edges += [(index[a], index[c]) for c in rest if c != a]
    return edges


# --------------------------------------------------------------------------
# likelihood


class _Objective:
    """Negative log-posterior, gradient and Hessian in phi = (theta, lambda), lambda = log delta.

    Each stage is a conditional logit over the candidate subsets of its choice set, with features
    (1/|U| on U's bots, one-hot of U's tie size), so the Hessian is the weighted covariance of
    those features: positive semi-definite, and the whole objective convex."""

    def __init__(self, n: int, tie_sizes: tuple[int, ...], sets: dict[int, tuple[np.ndarray, np.ndarray]],
                 b: np.ndarray, prior: float) -> None:
        self.n, self.L = n, len(tie_sizes)
        self.N = n + self.L
        self.tie_sizes = tie_sizes
        self.sets = sets  # s -> (rows m x s of bot indices, weights m)
        self.b = b  # length N: chosen-feature totals
        self.prior = prior
        self._keys: dict[int, np.ndarray] = {}

    def _scores(self, phi: np.ndarray, s: int, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        M, col = _candidates(s, self.tie_sizes)
        lam = np.append(phi[self.n:], 0.0)  # index -1 (a single bot) reads the trailing 0
        x = phi[idx] @ M.T + lam[col]
        return x, M, col

    def value(self, phi: np.ndarray, *, with_prior: bool = True) -> float:
        v = -float(self.b @ phi)
        for s, (idx, W) in self.sets.items():
            x, _, _ = self._scores(phi, s, idx)
            m = x.max(axis=1)
            v += float(W @ (m + np.log(np.exp(x - m[:, None]).sum(axis=1))))
        if with_prior:
            theta, lam = phi[: self.n], phi[self.n:]
            if self.prior:
                d = theta - theta.mean()
                v += self.prior * 0.5 * float(np.sum(np.logaddexp(0, -d) + np.logaddexp(0, d)))
            v += float(np.sum(np.logaddexp(0, -lam) + np.logaddexp(0, lam)))
        return v

    def derivatives(self, phi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n, L, N = self.n, self.L, self.N
        grad = -self.b.copy()
        hess = np.zeros(N * N)
        for s, (idx, W) in self.sets.items():
            x, M, col = self._scores(phi, s, idx)
            p = np.exp(x - x.max(axis=1)[:, None])
            p /= p.sum(axis=1)[:, None]
            F = np.zeros((len(col), s + L))  # local features: the s bots, then the tie sizes
            F[:, :s] = M
            F[np.flatnonzero(col >= 0), s + col[col >= 0]] = 1.0
            mu = p @ F
            second = np.einsum("mc,ci,cj->mij", p, F, F)
            cov = (second - mu[:, :, None] * mu[:, None, :]) * W[:, None, None]
            glob = np.concatenate([idx, np.broadcast_to(n + np.arange(L), (len(idx), L))], axis=1)
            grad += np.bincount(glob.ravel(), (W[:, None] * mu).ravel(), minlength=N)
            keys = self._keys.get(s)
            if keys is None:
                keys = self._keys[s] = (glob[:, :, None] * N + glob[:, None, :]).ravel()
            hess += np.bincount(keys, cov.ravel(), minlength=N * N)
        hess = hess.reshape(N, N)
        theta, lam = phi[:n], phi[n:]
        if self.prior:
            d = theta - theta.mean()
            fp = self.prior * 0.5 * np.tanh(d / 2.0)  # d/dd of the prior term
            grad[:n] += fp - fp.mean()
            sg = 1.0 / (1.0 + np.exp(-d))
            c = np.eye(n) - 1.0 / n
            hess[:n, :n] += (c * (self.prior * sg * (1.0 - sg))) @ c
        grad[n:] += np.tanh(lam / 2.0)
        sl = 1.0 / (1.0 + np.exp(-lam))
        hess[n:, n:] += np.diag(2.0 * sl * (1.0 - sl))
        return grad, hess


def _gauge(n: int, N: int) -> np.ndarray:
    """v v^T with v = (1 on the strengths, 0 on the tie parameters): the direction the fit
    cannot see (adding a constant to every strength)."""
    g = np.zeros((N, N))
    g[:n, :n] = 1.0
    return g


def _newton(obj: _Objective, max_iter: int = 100) -> tuple[np.ndarray, np.ndarray, int]:
    """Damped Newton in the sum-zero gauge; the objective is convex and translation invariant.

    Returns phi, the Hessian at phi (for the covariance) and the iteration count.
    """
    n, N = obj.n, obj.N
    phi = np.zeros(N)
    gauge = _gauge(n, N)
    f = obj.value(phi)
    for it in range(1, max_iter + 1):
        grad, hess = obj.derivatives(phi)
        step = -np.linalg.solve(hess + gauge, grad)
        step[:n] -= step[:n].mean()
        if np.max(np.abs(step)) < 1e-10:  # nats; ~2e-8 Elo
            return phi, hess, it
        decrement = -float(grad @ step)
        t = 1.0
        if decrement > 1e-8:  # outside the quadratic region: backtrack
            while t > 1e-10:
                fc = obj.value(phi + t * step)
                if fc <= f - 1e-4 * t * decrement:
                    break
                t *= 0.5
        phi = phi + t * step
        phi[:n] -= phi[:n].mean()
        f = obj.value(phi)
    raise RuntimeError("Plackett-Luce fit did not converge")


# --------------------------------------------------------------------------
# public fit


def fit_elo(
    outcomes: Iterable[Outcome],
    *,
    anchor: str | None = None,
    anchor_elo: float = 1500.0,
    prior: float = 1.0,
) -> Ratings:
    """Fit Plackett-Luce Elo with ties to all games at once (order independent).

    ``outcomes`` is any iterable of :class:`Outcome` or a ``Counter`` of them (counts are
    weights).  ``anchor=None`` puts the pool mean at ``anchor_elo``; a bot name fixes that bot
    there instead.  ``prior`` is the number of virtual games per bot, half won and half lost,
    against the pool average (0 = plain MLE).  95% intervals come from the observed information
    (Hessian of the negative log-posterior) under the gauge constraint.

    The result is a dict ``name -> Rating`` that also carries ``covariance`` (Elo^2, for
    :meth:`Ratings.diff_se` and the LOS helpers), the fitted tie parameters ``ties``, the data
    ``log_likelihood`` at the fit (priors excluded) and Newton ``iterations``.
    """
    if prior < 0:
        raise ValueError("prior must be >= 0")
    counts = Counter(outcomes)
    names_seen: set[str] = set()
    for o in counts:
        if not isinstance(o, Outcome):
            raise TypeError(f"expected Outcome, got {type(o).__name__}")
        names_seen.update(o.bots)
    names = sorted(names_seen)
    if anchor is not None and anchor not in names_seen:
        raise ValueError(f"anchor {anchor!r} played no games")
    n = len(names)
    if n == 0:
        return Ratings({}, np.zeros((0, 0)), anchor=anchor, prior=prior, log_likelihood=0.0, iterations=0)
    index = {b: i for i, b in enumerate(names)}
    games = np.zeros(n, dtype=np.int64)
    ndraws = np.zeros(n, dtype=np.int64)
    set_w: dict[tuple[int, ...], float] = defaultdict(float)
    chosen: list[tuple[tuple[int, ...], float]] = []
    for o in sorted(counts, key=lambda o: (o.groups, o.partial)):  # canonical order: bit-identical sums
        c = counts[o]
        for b in o.bots:
            games[index[b]] += c
        for g in (o.groups[:1] if o.partial else o.groups):
            if len(g) > 1:
                for b in g:
                    ndraws[index[b]] += c
        for rest, group in _stages(o):
            set_w[tuple(sorted(index[b] for b in rest))] += c
            chosen.append((tuple(index[b] for b in group), c))
    tie_sizes = tuple(sorted({len(g) for g, _ in chosen if len(g) > 1}))
    N = n + len(tie_sizes)
    b = np.zeros(N)
    for g, c in chosen:
        for i in g:
            b[i] += c / len(g)
        if len(g) > 1:
            b[n + tie_sizes.index(len(g))] += c
    by_size: dict[int, list[tuple[tuple[int, ...], float]]] = defaultdict(list)
    for key in sorted(set_w):
        by_size[len(key)].append((key, set_w[key]))
    sets = {s: (np.array([k for k, _ in rows], dtype=np.int64), np.array([w for _, w in rows]))
            for s, rows in sorted(by_size.items())}

    if prior == 0:
        edges = [e for o in counts for e in _beat_edges(o, index)]
        arr = np.array(edges, dtype=np.int64).reshape(-1, 2)
        graph = coo_matrix((np.ones(len(arr)), (arr[:, 0], arr[:, 1])), shape=(n, n))
        ncomp, _ = connected_components(graph, directed=True, connection="strong")
        if ncomp > 1:
            raise ValueError(
                "with prior=0 the maximum-likelihood ratings do not exist: some bots never "
                "lost (or never won) against the rest of the pool; use prior > 0"
            )

    obj = _Objective(n, tie_sizes, sets, b, prior)
    phi, hess, iterations = _newton(obj)
    theta, lam = phi[:n], phi[n:]

    # covariance in the sum-zero gauge: pseudo-inverse of H (null space = the gauge direction)
    gauge = _gauge(n, N)
    cov = np.linalg.inv(hess + gauge) - gauge / (n * n)
    # Elo = anchor_elo + K s(lambda_2) (theta - theta_anchor); its Jacobian carries lambda_2's error
    if 2 in tie_sizes:
        d2 = math.exp(lam[tie_sizes.index(2)])
        s, ds = 2.0 / (2.0 + d2), -2.0 * d2 / (2.0 + d2) ** 2
    else:
        s, ds = 1.0, 0.0
    a = None if anchor is None else index[anchor]
    rel = theta - (0.0 if a is None else theta[a])
    J = np.zeros((n, N))
    J[:, :n] = s * np.eye(n)
    if a is not None:
        J[:, a] -= s
    if 2 in tie_sizes:
        J[:, n + tie_sizes.index(2)] = rel * ds
    cov_elo = ELO_PER_NAT**2 * (J @ cov @ J.T)
    if a is not None:
        cov_elo[a, :] = 0.0
        cov_elo[:, a] = 0.0
    elo = anchor_elo + ELO_PER_NAT * s * rel
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
    return Ratings(ratings, cov_elo, anchor=anchor, prior=prior,
                   log_likelihood=-obj.value(phi, with_prior=False), iterations=iterations,
                   ties={t: math.exp(lam[k]) for k, t in enumerate(tie_sizes)}, scale=ELO_PER_NAT * s)
