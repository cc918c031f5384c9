"""Likelihood of superiority (LOS) from a fitted table.

LOS(a, b) = P(a's true rating > b's) under the normal approximation of the
fit.  Ratings of bots that met are correlated, so the error of a difference
needs the covariance: with a :class:`Ratings` from :func:`fit_elo` the
helpers use it; with plain ``Rating`` values they assume independence.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from .plackett_luce import Rating, Ratings

__all__ = ["likelihood_of_superiority", "los_matrix", "neighbour_los"]


def likelihood_of_superiority(a: Rating, b: Rating, *, covariance: float = 0.0) -> float:
    """P(a is truly stronger than b).

    Pass ``covariance`` (Elo^2, ``ratings.covariance[i, j]``) for the exact
    error of the difference; without it the two errors are taken as
    independent.  :func:`los_matrix` and :func:`neighbour_los` do this for you.
    """
    var = a.se**2 + b.se**2 - 2.0 * covariance
    diff = a.elo - b.elo
    if var <= 0.0:
        return 0.5 if diff == 0 else float(diff > 0)
    return 0.5 * math.erfc(-diff / math.sqrt(2.0 * var))


_ERFC = np.frompyfunc(math.erfc, 1, 1)


def _normal_cdf(z: np.ndarray) -> np.ndarray:
    """The standard normal CDF elementwise (scipy's ``ndtr``) from the C library's ``erfc``: a table
    has a few hundred cells at most, and ``scipy.special`` cost every standings command 0.3 s to import."""
    return 0.5 * _ERFC(-z / math.sqrt(2.0)).astype(float)


def _standings(ratings: Mapping[str, Rating]) -> list[str]:
    return sorted(ratings, key=lambda n: (-ratings[n].elo, n))


def los_matrix(ratings: Mapping[str, Rating]) -> tuple[list[str], np.ndarray]:
    """Names in standings order and ``M[i, j]`` = LOS of row bot over column bot."""
    names = _standings(ratings)
    elo = np.array([ratings[n].elo for n in names])
    if isinstance(ratings, Ratings):
        idx = [ratings.names.index(n) for n in names]
        cov = ratings.covariance[np.ix_(idx, idx)]
    else:
        cov = np.diag([ratings[n].se ** 2 for n in names])
    d = np.diag(cov)
    var = d[:, None] + d[None, :] - 2.0 * cov
    diff = elo[:, None] - elo[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        m = _normal_cdf(diff / np.sqrt(var))
    degenerate = ~(var > 0)
    m[degenerate] = np.where(diff[degenerate] == 0, 0.5, (diff[degenerate] > 0).astype(float))
    np.fill_diagonal(m, 0.5)
    return names, m


def neighbour_los(ratings: Mapping[str, Rating]) -> list[tuple[str, str, float]]:
    """For a standings table: (bot, bot just below, LOS of bot over it), best first."""
    names, m = los_matrix(ratings)
    return [(a, b, float(m[i, i + 1])) for i, (a, b) in enumerate(zip(names, names[1:]))]
