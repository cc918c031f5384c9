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

Scale.  With ties the expected head-to-head score (finishing ahead = 1, tied = 1/2) rises more
slowly with the strength gap than the logistic: for two seats it is 1/2 + sinh(d/2) / (2 cosh(d/2)
+ delta_2).  The reported rating is ``elo = 400/ln 10 * c * theta``, with c chosen so that at equal
strength the expected head-to-head score changes with the Elo gap exactly as the Elo logistic does
(slope ln 10 / 1600 per Elo).  So, near equality, 100 Elo still means a 64% score against that
bot, and a pair's Elo difference reads like the score-based Elo that `arena match` and the
head-to-head matrix give.  For two seats c = 2 / (2 + delta_2) (with delta_2 = 2 the curves
coincide exactly); for bigger tables c comes from the same slope, computed in the model for each
table size and averaged over the games' pairs of seats.  Without ties c = 1: Plackett-Luce puts
any two bots of a table in order with exactly the logistic probability.  The intervals carry the
tie parameters' uncertainty through c too.

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

import numpy as np

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


def _stages(o: Outcome) -> list[tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]]:
    """(choice set S, chosen group T, the tie that was possible U) for each stage of one game
    that is a choice (|S| >= 2).  U is everyone in S who could still tie: S less the bots placed
    below the game's tie (seats that forfeited before the draw); for a tie stage, T itself."""
    out = []
    groups = o.groups
    below: set[str] = set()
    if not o.partial:
        first_tie = next((g for g, grp in enumerate(groups) if len(grp) > 1), None)
        if first_tie is not None:
            below = {b for h in groups[first_tie + 1:] for b in h}
    for g in range(1 if o.partial else len(groups)):
        rest = tuple(b for h in groups[g:] for b in h)
        if len(rest) >= 2:
            tie = groups[g] if len(groups[g]) > 1 else tuple(b for b in rest if b not in below)
            out.append((rest, groups[g], tie))
    return out


def _beat_edges(o: Outcome, index: Mapping[str, int]) -> list[tuple[int, int]]:
    """Directed 'a finished ahead of (or tied with) b' edges, for the MLE existence check."""
    edges = []
    for rest, chosen, _ in _stages(o):
        for a in chosen:
            edges += [(index[a], index[c]) for c in rest if c != a]
    return edges


def _pair_score(k: int, d: float, ties: Mapping[int, float]) -> float:
    """Expected head-to-head score of seat 0 against seat 1 at a table of k bots, the first d
    nats stronger than the second, the others in between (strengths d/2, -d/2, 0, ...)."""
    theta = [d / 2, -d / 2] + [0.0] * (k - 2)
    memo: dict[int, float] = {}

    def score(left: int) -> float:  # both 0 and 1 still in; left = bitmask of those in play
        if left in memo:
            return memo[left]
        members = [i for i in range(k) if left >> i & 1]
        cands = [(i,) for i in members] + ([tuple(members)] if len(members) in ties else [])
        w = [math.exp(sum(theta[i] for i in u) / len(u)) * (ties[len(u)] if len(u) > 1 else 1.0) for u in cands]
        total, e = sum(w), 0.0
        for u, wu in zip(cands, w):
            a, b = 0 in u, 1 in u
            e += wu * (0.5 if a and b else 1.0 if a else 0.0 if b else score(left & ~sum(1 << i for i in u)))
        memo[left] = e / total
        return memo[left]

    return score((1 << k) - 1)


def _scale(sizes: Mapping[int, float], ties: Mapping[int, float]) -> float:
    """c of the module docstring: the model's slope at equality over the logistic's (1/4 per nat),
    the model's averaged over table sizes weighted by ``sizes`` (size -> pairs of seats)."""
    if not ties or not sizes:
        return 1.0
    h = 1e-4
    slope = sum(w * (_pair_score(k, h, ties) - _pair_score(k, -h, ties)) / (2 * h) for k, w in sizes.items())
    return slope / (0.25 * sum(sizes.values()))


# --------------------------------------------------------------------------
# likelihood


class _Objective:
    """Negative log-posterior, gradient and Hessian in phi = (theta, lambda), lambda = log delta.

    Each stage is a conditional logit over its candidates - every single bot of the choice set,
    and the tie of the bots still able to tie - with features (1/|U| on U's bots, one-hot of U's
    tie size), so the Hessian is the weighted covariance of those features: positive
    semi-definite, and the whole objective convex."""

    def __init__(self, n: int, tie_sizes: tuple[int, ...], sets: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]],
                 b: np.ndarray, prior: float, tie_prior: float = 1.0) -> None:
        self.n, self.L = n, len(tie_sizes)
        self.tie_prior = tie_prior
        self.N = n + self.L
        self.tie_sizes = tie_sizes
        self.prior = prior
        self.b = b  # length N: chosen-feature totals
        self.sets = {}  # s -> (features m x (s+1) x (s+L), -inf where no tie, weights, global columns, Hessian keys)
        sizes = np.array(tie_sizes, dtype=np.int64)
        for s, (idx, masks, W) in sets.items():
            m = len(idx)
            F = np.zeros((m, s + 1, s + self.L))
            F[:, np.arange(s), np.arange(s)] = 1.0
            size = masks.sum(axis=1).astype(np.int64)
            ok = np.isin(size, sizes)
            F[ok, s, :s] = masks[ok] / size[ok, None]
            F[np.flatnonzero(ok), s, s + np.searchsorted(sizes, size[ok])] = 1.0
            off = np.zeros((m, s + 1))
            off[~ok, s] = -np.inf  # no tie possible at this stage
            glob = np.concatenate([idx, np.broadcast_to(n + np.arange(self.L), (m, self.L))], axis=1)
            keys = (glob[:, :, None] * self.N + glob[:, None, :]).ravel()
            self.sets[s] = (F, off, W, glob, keys)

    def _probs(self, phi: np.ndarray, s: int) -> tuple[np.ndarray, np.ndarray]:
        F, off, _, glob, _ = self.sets[s]
        x = np.einsum("mck,mk->mc", F, phi[glob]) + off
        top = x.max(axis=1)
        logz = top + np.log(np.exp(x - top[:, None]).sum(axis=1))
        return np.exp(x - logz[:, None]), logz

    def value(self, phi: np.ndarray, *, with_prior: bool = True) -> float:
        v = -float(self.b @ phi)
        for s, (_, _, W, _, _) in self.sets.items():
            v += float(W @ self._probs(phi, s)[1])
        if with_prior:
            theta, lam = phi[: self.n], phi[self.n:]
            if self.prior:
                d = theta - theta.mean()
                v += self.prior * 0.5 * float(np.sum(np.logaddexp(0, -d) + np.logaddexp(0, d)))
            v += self.tie_prior * float(np.sum(np.logaddexp(0, -lam) + np.logaddexp(0, lam)))
        return v

    def derivatives(self, phi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n, N = self.n, self.N
        grad = -self.b.copy()
        hess = np.zeros(N * N)
        for s, (F, _, W, glob, keys) in self.sets.items():
            p, _ = self._probs(phi, s)
            mu = np.einsum("mc,mck->mk", p, F)
            second = np.einsum("mc,mci,mcj->mij", p, F, F)
            cov = (second - mu[:, :, None] * mu[:, None, :]) * W[:, None, None]
            grad += np.bincount(glob.ravel(), (W[:, None] * mu).ravel(), minlength=N)
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
        grad[n:] += self.tie_prior * np.tanh(lam / 2.0)
        sl = 1.0 / (1.0 + np.exp(-lam))
        hess[n:, n:] += np.diag(self.tie_prior * 2.0 * sl * (1.0 - sl))
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
    tie_prior: float = 1.0,
) -> Ratings:
    """Fit Plackett-Luce Elo with ties to all games at once (order independent).

    ``outcomes`` is any iterable of :class:`Outcome` or a ``Counter`` of them (counts are
    weights).  ``anchor=None`` puts the pool mean at ``anchor_elo``; a bot name fixes that bot
    there instead.  ``prior`` is the number of virtual games per bot, half won and half lost,
    against the pool average (0 = plain MLE); ``tie_prior`` weighs the tie parameters' prior the same
    way.  Counts may be fractional: a season's fit weighs the seasons before it down (a power prior,
    :mod:`arena.ladder.seasons`), and scaling every count and both priors by one factor leaves the
    ratings where they were and widens the intervals.  95% intervals come from the observed information
    (Hessian of the negative log-posterior) under the gauge constraint.

    The result is a dict ``name -> Rating`` that also carries ``covariance`` (Elo^2, for
    :meth:`Ratings.diff_se` and the LOS helpers), the fitted tie parameters ``ties``, the data
    ``log_likelihood`` at the fit (priors excluded) and Newton ``iterations``.
    """
    if prior < 0 or tie_prior <= 0:
        raise ValueError("prior must be >= 0 and tie_prior > 0")
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
    games = np.zeros(n)  # floats: a season's carried games are weighted
    ndraws = np.zeros(n)
    set_w: dict[tuple[tuple[int, ...], tuple[bool, ...]], float] = defaultdict(float)
    chosen: list[tuple[tuple[int, ...], float]] = []
    pair_weights: dict[int, float] = defaultdict(float)  # table size -> pairs of seats, for the scale
    for o in sorted(counts, key=lambda o: (o.groups, o.partial)):  # canonical order: bit-identical sums
        c = counts[o]
        for b in o.bots:
            games[index[b]] += c
        k = len(o.bots)
        pair_weights[k] += c * k * (k - 1) / 2
        for g in (o.groups[:1] if o.partial else o.groups):
            if len(g) > 1:
                for b in g:
                    ndraws[index[b]] += c
        for rest, group, tie in _stages(o):
            key = tuple(sorted(index[b] for b in rest))
            can = {index[b] for b in tie}
            set_w[(key, tuple(i in can for i in key))] += c
            chosen.append((tuple(index[b] for b in group), c))
    tie_sizes = tuple(sorted({len(g) for g, _ in chosen if len(g) > 1}))
    N = n + len(tie_sizes)
    b = np.zeros(N)
    for g, c in chosen:
        for i in g:
            b[i] += c / len(g)
        if len(g) > 1:
            b[n + tie_sizes.index(len(g))] += c
    by_size: dict[int, list[tuple[tuple[int, ...], tuple[bool, ...], float]]] = defaultdict(list)
    for key, mask in sorted(set_w):
        by_size[len(key)].append((key, mask, set_w[(key, mask)]))
    sets = {s: (np.array([k for k, _, _ in rows], dtype=np.int64), np.array([m for _, m, _ in rows], dtype=float),
                np.array([w for _, _, w in rows])) for s, rows in sorted(by_size.items())}

    if prior == 0:  # scipy imported here: 0.4 s of CPU that the arena's own fits (prior > 0) never need
        from scipy.sparse import coo_matrix
        from scipy.sparse.csgraph import connected_components
        edges = [e for o in counts for e in _beat_edges(o, index)]
        arr = np.array(edges, dtype=np.int64).reshape(-1, 2)
        graph = coo_matrix((np.ones(len(arr)), (arr[:, 0], arr[:, 1])), shape=(n, n))
        ncomp, _ = connected_components(graph, directed=True, connection="strong")
        if ncomp > 1:
            raise ValueError(
                "with prior=0 the maximum-likelihood ratings do not exist: some bots never "
                "lost (or never won) against the rest of the pool; use prior > 0"
            )

    obj = _Objective(n, tie_sizes, sets, b, prior, tie_prior)
    phi, hess, iterations = _newton(obj)
    theta, lam = phi[:n], phi[n:]

    # covariance in the sum-zero gauge: pseudo-inverse of H (null space = the gauge direction)
    gauge = _gauge(n, N)
    cov = np.linalg.inv(hess + gauge) - gauge / (n * n)
    # Elo = anchor_elo + K c(lambda) (theta - theta_anchor); its Jacobian carries lambda's error
    fitted = {t: math.exp(lam[k]) for k, t in enumerate(tie_sizes)}
    s = _scale(pair_weights, fitted)
    a = None if anchor is None else index[anchor]
    rel = theta - (0.0 if a is None else theta[a])
    J = np.zeros((n, N))
    J[:, :n] = s * np.eye(n)
    if a is not None:
        J[:, a] -= s
    for k, t in enumerate(tie_sizes):
        h = 1e-5
        up = _scale(pair_weights, {**fitted, t: fitted[t] * math.exp(h)})
        down = _scale(pair_weights, {**fitted, t: fitted[t] * math.exp(-h)})
        J[:, n + k] = rel * (up - down) / (2 * h)
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
            games=int(round(games[i])),
            draws=int(round(ndraws[i])),
        )
        for i, name in enumerate(names)
    }
    return Ratings(ratings, cov_elo, anchor=anchor, prior=prior,
                   log_likelihood=-obj.value(phi, with_prior=False), iterations=iterations,
                   ties=fitted, scale=ELO_PER_NAT * s)
