"""Ratings for Palace Arena: pure functions, no I/O.

* :func:`fit_elo` - the official table: a maximum-likelihood Plackett-Luce
  fit with ties (Davidson's tie model; draws are evidence, the tie parameters
  are fitted) over every game at once (2-6 seats, full orders, winner-only
  games, draws), on the Elo scale, with 95% intervals from the observed
  information and a likelihood-of-superiority matrix.
* :func:`elo_difference`, :func:`los`, :class:`Sprt` - head-to-head numbers
  as chess engine testers compute them (cutechess / fishtest conventions).
* :func:`pair_elo`, :class:`PairSprt`, :func:`bootstrap_over_deals` - the same for duplicate
  deals, whose games come in correlated pairs (pentanomial counts, as fishtest and fastchess).
* :func:`rate_interval`, :func:`score_interval`, :func:`wilson` - every rate and match score
  with a Wilson interval at the effective number of games: never of width zero, never infinite.
* :class:`ProvisionalRatings` - a live openskill table during a run, clearly
  provisional.

Why not the PyPI ``elo`` package: 0.1.1 (2017) uses ``use_2to3`` in its
setup.py, which current setuptools rejects, so it does not even build; and it
only does two-player incremental updates, which depend on game order and give
no multiplayer results and no confidence intervals.  A fitted, order
independent Elo is the requirement here.
"""

from .headtohead import Sprt, Verdict, elo_difference, elo_to_score, los, score_to_elo
from .outcome import Outcome
from .pairs import (PAIR_NAMES, PairSprt, bootstrap_over_deals, bootstrap_rate, pair_elo, pair_index, rate_interval,
                    score_interval, wilson)
from .plackett_luce import ELO_PER_NAT, MIN_RATED_GAMES, Rating, Ratings, fit_elo
from .provisional import ProvisionalRatings, ProvisionalRow
from .superiority import likelihood_of_superiority, los_matrix, neighbour_los

__all__ = [
    "ELO_PER_NAT",
    "MIN_RATED_GAMES",
    "Outcome",
    "PAIR_NAMES",
    "PairSprt",
    "ProvisionalRatings",
    "ProvisionalRow",
    "Rating",
    "Ratings",
    "Sprt",
    "Verdict",
    "bootstrap_over_deals",
    "bootstrap_rate",
    "elo_difference",
    "elo_to_score",
    "fit_elo",
    "likelihood_of_superiority",
    "los",
    "los_matrix",
    "neighbour_los",
    "pair_elo",
    "pair_index",
    "rate_interval",
    "score_interval",
    "score_to_elo",
    "wilson",
]
