"""Live, clearly provisional ratings while a tournament is running.

openskill's Plackett-Luce (Weng-Lin) updates one game at a time in O(seats),
so a live table costs nothing; but the result depends on game order and has
no proper confidence intervals, so it is for display only.  The final table
is :func:`arena.ratings.fit_elo`.

Elo-like scale.  openskill's PL update uses win probability
exp(mu_i/c) / sum_j exp(mu_j/c) with c = sqrt(sum over the k seats of
(sigma^2 + beta^2)).  Once sigmas are small c -> beta*sqrt(k), so a mu gap
means Elo gap = 400/ln(10) * delta_mu / (beta*sqrt(k)).  We use k = the mean
number of seats in the games seen so far (2 before any game).  That is exact
only in the small-sigma limit and for one table size, hence "elo-like" and
nominal: fine for eyeballing, not for comparison with fitted Elo.
Winner-only games are passed to openskill as the winner first and everyone
else tied second (openskill has no partial rankings), which slightly pulls
the losers together.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from openskill.models import PlackettLuce

from .outcome import Outcome
from .plackett_luce import ELO_PER_NAT

__all__ = ["ProvisionalRatings", "ProvisionalRow"]


@dataclass(frozen=True, slots=True)
class ProvisionalRow:
    name: str
    mu: float
    sigma: float
    ordinal: float  # mu - 3 sigma: the conservative value the table is sorted by
    elo: float  # nominal Elo-like value of mu (see module docstring)
    elo_ordinal: float  # the same conversion applied to the ordinal
    games: int


class ProvisionalRatings:
    """Game-by-game openskill ratings; ``update(outcome)`` then ``table()``."""

    def __init__(self, model: PlackettLuce | None = None, *, base_elo: float = 1500.0) -> None:
        self.model = model if model is not None else PlackettLuce()
        self.base_elo = base_elo
        self._ratings: dict[str, object] = {}
        self._games: dict[str, int] = {}
        self._seats = 0
        self._n = 0

    def update(self, outcome: Outcome) -> None:
        names = [b for g in outcome.groups for b in g]
        ranks = [i for i, g in enumerate(outcome.groups) for _ in g]
        teams = [[self._rating(b)] for b in names]
        new = self.model.rate(teams, ranks=ranks)
        for b, team in zip(names, new):
            self._ratings[b] = team[0]
            self._games[b] += 1
        self._seats += len(names)
        self._n += 1

    def _rating(self, name: str):
        if name not in self._ratings:
            self._ratings[name] = self.model.rating(name=name)
            self._games[name] = 0
        return self._ratings[name]

    def elo_per_mu(self) -> float:
        """Nominal Elo per mu point: 400/ln10 / (beta * sqrt(mean seats))."""
        k = self._seats / self._n if self._n else 2.0
        return ELO_PER_NAT / (self.model.beta * math.sqrt(k))

    def table(self) -> list[ProvisionalRow]:
        """Rows sorted by ordinal, best first."""
        scale = self.elo_per_mu()
        mu0 = self.model.mu
        rows = []
        for name, r in self._ratings.items():
            ordinal = r.mu - 3.0 * r.sigma
            rows.append(
                ProvisionalRow(
                    name=name,
                    mu=r.mu,
                    sigma=r.sigma,
                    ordinal=ordinal,
                    elo=self.base_elo + scale * (r.mu - mu0),
                    elo_ordinal=self.base_elo + scale * (ordinal - mu0),
                    games=self._games[name],
                )
            )
        rows.sort(key=lambda row: (-row.ordinal, row.name))
        return rows
