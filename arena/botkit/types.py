"""Typed, read-only views of protocol messages: cards, piles, seats, legal actions.

Each object wraps the decoded JSON and parses a field when it is first read, so a bot
pays only for what it looks at, and a field it never reads cannot fail it. The dicts
stay available as ``.raw``. Field meanings are in ``protocol/PROTOCOL.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

RANKS = "23456789TJQKAX"  # the rank letter of each card string, in rank order (X: joker)


@dataclass(frozen=True, slots=True)
class Card:
    """A card as the protocol writes it (``"7H"``, ``"TS"``, ``"XR"``); ``rank`` is 2..14, 15 for jokers."""

    name: str

    @property
    def rank(self) -> int:
        return RANKS.index(self.name[0]) + 2

    @property
    def suit(self) -> str:
        return self.name[1]

    def __str__(self) -> str:
        return self.name


def cards(names: list[str] | None) -> tuple[Card, ...]:
    return tuple(Card(n) for n in names or ())


@dataclass(frozen=True, slots=True)
class Action:
    """One legal action of a request: answer with its ``id``."""

    id: int
    kind: str  # play, pick_up, flip, set_face_up, stack, done
    cards: tuple[Card, ...] = ()
    zone: str | None = None  # play: "hand" or "face_up"
    target: int | None = None  # a joker giving the pile: who takes it
    surrender: Card | None = None  # harsh pick-up: the face-up card laid first
    position: int | None = None  # flip: which face-down card
    face_up: tuple[tuple[Card, ...], ...] = ()  # set_face_up: the stacks

    @classmethod
    def from_json(cls, a: dict[str, Any], position: int) -> Action:
        s = a.get("surrender")
        return cls(a.get("id", position), a.get("kind", ""), cards(a.get("cards")), a.get("from"),
                   a.get("target"), Card(s) if s else None, a.get("position"),
                   tuple(cards(st) for st in a.get("face_up") or ()))

    @property
    def rank(self) -> int | None:
        """The rank played (or surrendered), if any."""
        c = self.cards[0] if self.cards else self.surrender
        return None if c is None else c.rank


class Player:
    """One seat as the view shows it."""

    def __init__(self, raw: dict[str, Any]):
        self.raw = raw
        self.seat: int = raw.get("seat", 0)
        self.hand_count: int = raw.get("hand_count", 0)
        self.place: int | None = raw.get("place")
        self.forfeit: str | None = raw.get("forfeit")

    @cached_property
    def face_up(self) -> tuple[tuple[Card, ...], ...] | None:
        """Face-up stacks; None for other seats during setup."""
        f = self.raw.get("face_up")
        return None if f is None else tuple(cards(st) for st in f)

    @cached_property
    def face_down(self) -> int:
        """Face-down cards still lying there."""
        return sum(1 for x in self.raw.get("face_down") or () if x)

    @cached_property
    def known_hand(self) -> tuple[Card, ...]:
        """Hand cards everyone saw arrive; the other ``hand_count - len(known_hand)`` are unknown."""
        return cards(self.raw.get("known_hand"))

    @property
    def active(self) -> bool:
        return self.place is None


class View:
    """What the seat may see now (the request's ``view``)."""

    def __init__(self, raw: dict[str, Any]):
        self.raw = raw
        self.seat: int = raw.get("seat", 0)
        self.phase: str = raw.get("phase", "play")
        self.to_move: int = raw.get("to_move", 0)
        self.turn: int = raw.get("turn", 0)
        self.need: int = raw.get("need", 0)
        self.descending: bool = raw.get("descending", False)
        self.stock: int = raw.get("stock", 0)

    @cached_property
    def hand(self) -> tuple[Card, ...]:
        return cards(self.raw.get("hand"))

    @cached_property
    def face_up(self) -> tuple[tuple[Card, ...], ...]:
        return tuple(cards(st) for st in self.raw.get("face_up") or ())

    @cached_property
    def face_down(self) -> int:
        return sum(1 for x in self.raw.get("face_down") or () if x)

    @cached_property
    def pile(self) -> tuple[Card, ...]:
        """Bottom to top."""
        return cards(self.raw.get("pile"))

    @cached_property
    def pile_top(self) -> int | None:
        """The rank to beat (see-through cards looked through), or None when anything goes."""
        t = self.raw.get("pile_top")
        return None if t is None else RANKS.index(t) + 2

    @cached_property
    def burned(self) -> tuple[Card, ...]:
        return cards(self.raw.get("burned"))

    @cached_property
    def players(self) -> tuple[Player, ...]:
        return tuple(Player(p) for p in self.raw.get("players") or ())

    def opponents(self) -> tuple[Player, ...]:
        """The other seats still playing, from the next seat on."""
        n = len(self.players)
        return tuple(p for k in range(1, n) if (p := self.players[(self.seat + k) % n]).active)


class Request:
    """One decision: ``view``, ``events`` since the last request, ``actions`` (answer with an id)."""

    def __init__(self, raw: dict[str, Any]):
        self.raw = raw
        self.id = raw.get("id")
        self.game: str | None = raw.get("game")
        self.decision: str | None = raw.get("decision")

    @cached_property
    def view(self) -> View:
        return View(self.raw.get("view") or {})

    @cached_property
    def actions(self) -> tuple[Action, ...]:
        return tuple(Action.from_json(a, k) for k, a in enumerate(self.raw.get("actions") or ()))

    @property
    def events(self) -> list[dict[str, Any]]:
        return self.raw.get("events") or []

    @property
    def move_ms(self) -> int:
        return (self.raw.get("clock") or {}).get("move_ms", 1000)

    def plays(self) -> tuple[Action, ...]:
        return tuple(a for a in self.actions if a.kind == "play")
