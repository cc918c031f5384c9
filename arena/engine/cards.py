"""Cards as small integers.

A card is ``rank * 4 + suit``, so sorting a tuple of cards sorts it by rank, and
``card >> 2`` is its rank. Suits never matter to the rules; they exist so that
cards look like cards and so that every physical card can be followed through a
game. Several decks simply repeat the same integers.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

# Final: mypyc inlines these into the compiled engine instead of looking them up per use.
TWO: Final = 2
THREE: Final = 3
FOUR: Final = 4
FIVE: Final = 5
SIX: Final = 6
SEVEN: Final = 7
EIGHT: Final = 8
NINE: Final = 9
TEN: Final = 10
JACK: Final = 11
QUEEN: Final = 12
KING: Final = 13
ACE: Final = 14
JOKER: Final = 15

RANK_CHARS = {2: "2", 3: "3", 4: "4", 5: "5", 6: "6", 7: "7", 8: "8", 9: "9",
              10: "T", 11: "J", 12: "Q", 13: "K", 14: "A", 15: "X"}
RANK_NAMES = {2: "2", 3: "3", 4: "4", 5: "5", 6: "6", 7: "7", 8: "8", 9: "9",
              10: "10", 11: "jack", 12: "queen", 13: "king", 14: "ace", 15: "joker"}
SUIT_CHARS = "CDHS"
JOKER_CHARS = "RB"  # a deck's two jokers: red and black
COURT: Final = frozenset({JACK, QUEEN, KING})
_CHAR_RANKS = {c: r for r, c in RANK_CHARS.items()}
_CHAR_RANKS["1"] = 10  # lets "10H" parse as well as "TH"


def card(rank: int, suit: int = 0) -> int:
    return rank * 4 + suit


def rank_of(c: int) -> int:
    return c >> 2


def _name(c: int) -> str:
    r = c >> 2
    if r == JOKER:
        return "X" + JOKER_CHARS[c & 1]
    return RANK_CHARS[r] + SUIT_CHARS[c & 3]


_NAMES: Final = [_name(c) if c >= 8 else "" for c in range(64)]


def card_str(c: int) -> str:
    """``"7H"``, ``"TS"``, ``"XR"`` (red joker)."""
    return _NAMES[c]


def parse_card(text: str) -> int:
    """Inverse of :func:`card_str`; accepts ``"10H"`` and lower case too."""
    t = text.strip().upper()
    if t.startswith("10"):
        t = "T" + t[2:]
    if len(t) != 2 or t[0] not in _CHAR_RANKS:
        raise ValueError(f"not a card: {text!r}")
    r = _CHAR_RANKS[t[0]]
    if r == JOKER:
        if t[1] not in JOKER_CHARS:
            raise ValueError(f"not a card: {text!r}")
        return card(JOKER, JOKER_CHARS.index(t[1]))
    if t[1] not in SUIT_CHARS:
        raise ValueError(f"not a card: {text!r}")
    return card(r, SUIT_CHARS.index(t[1]))


def cards_str(cs: Iterable[int]) -> list[str]:
    names = _NAMES
    return [names[c] for c in cs]


def stacks_str(stacks: Iterable[Iterable[int]]) -> list[list[str]]:
    """Face-up stacks as lists of names (one call per seat: views render many of them)."""
    names = _NAMES
    return [[names[c] for c in st] for st in stacks]


def parse_cards(texts: Iterable[str]) -> tuple[int, ...]:
    return tuple(parse_card(t) for t in texts)


def make_deck(decks: int, jokers_per_deck: int) -> list[int]:
    """Every card of ``decks`` full packs plus their jokers, in a fixed order."""
    one = [card(r, s) for r in range(2, 15) for s in range(4)]
    one += [card(JOKER, j % 2) for j in range(jokers_per_deck)]
    return one * decks
