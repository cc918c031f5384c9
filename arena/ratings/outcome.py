"""The result of one game, as the rating code sees it.

Kept separate from the referee's own result types on purpose: ratings only
need "who finished ahead of whom", and a canonical, hashable form lets the
fitter aggregate identical games (which is what makes it fast and exactly
order independent).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["Outcome"]


def _place(p: str | Iterable[str]) -> tuple[str, ...]:
    if isinstance(p, str):
        return (p,)
    return tuple(p)


@dataclass(frozen=True, slots=True)
class Outcome:
    """Finishing groups, best first; bots in one group are tied.

    ``partial=True`` means only ``groups[0]`` is known to have beaten everyone
    else and ``groups[1]`` holds all the others, unranked among themselves (a
    "winner only" game).  A draw is a single group holding every bot.

    Construct through :meth:`order`, :meth:`winner_only`, :meth:`draw` or
    :meth:`from_ranks`; the constructors sort names inside each group so that
    equal results compare and hash equal.
    """

    groups: tuple[tuple[str, ...], ...]
    partial: bool = False

    def __post_init__(self) -> None:
        groups = tuple(tuple(sorted(_place(g))) for g in self.groups)
        object.__setattr__(self, "groups", groups)
        names = [b for g in groups for b in g]
        if any(not isinstance(b, str) or not b for b in names):
            raise ValueError("bot names must be non-empty strings")
        if any(len(g) == 0 for g in groups):
            raise ValueError("empty finishing group")
        if len(set(names)) != len(names):
            raise ValueError(f"a bot appears twice in one game: {names}")
        if len(names) < 2:
            raise ValueError("a game needs at least two bots")
        if self.partial and len(groups) != 2:
            raise ValueError("a partial (winner-only) outcome has exactly two groups: winners, rest")

    # -- constructors -------------------------------------------------------
    @classmethod
    def order(cls, *places: str | Iterable[str]) -> Outcome:
        """Full finishing order: ``Outcome.order("a", ("b", "c"), "d")`` has b, c tied 2nd.

        Each argument is one place.  A single argument holding several bots
        would silently mean "everyone tied", the classic slip for
        ``Outcome.order(ranking)``; that is refused - unpack the list, or say
        :meth:`draw` if a draw is meant.
        """
        groups = tuple(_place(p) for p in places)
        if len(groups) == 1 and len(groups[0]) > 1:
            raise ValueError(
                "Outcome.order got one place with several bots; use Outcome.order(*ranking) "
                "for a finishing order or Outcome.draw(bots) for a draw"
            )
        return cls(groups)

    @classmethod
    def winner_only(cls, winner: str, others: Iterable[str]) -> Outcome:
        """Only the winner is known; the others are unranked among themselves."""
        return cls(((winner,), tuple(others)), partial=True)

    @classmethod
    def draw(cls, bots: Iterable[str]) -> Outcome:
        """No winner (agreed or adjudicated draw): one group with everyone."""
        return cls((tuple(bots),))

    @classmethod
    def from_ranks(cls, ranks: Mapping[str, int | float]) -> Outcome:
        """From places as a referee reports them (lower is better, equal = tied)."""
        by_rank: dict[int | float, list[str]] = {}
        for bot, r in ranks.items():
            by_rank.setdefault(r, []).append(bot)
        return cls(tuple(tuple(by_rank[r]) for r in sorted(by_rank)))

    # -- views --------------------------------------------------------------
    @property
    def bots(self) -> tuple[str, ...]:
        return tuple(b for g in self.groups for b in g)

    @property
    def is_draw(self) -> bool:
        return len(self.groups) == 1

    @property
    def winners(self) -> tuple[str, ...]:
        """The first group; empty for a draw (nobody won)."""
        return () if self.is_draw else self.groups[0]
