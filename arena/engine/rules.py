"""Rule sets as data: one frozen options object and the named presets built from it.

Every variant recorded in the four source documents is a field here. The engine
reads fields, never preset names, so any option combines with any preset.
``RULES.md`` explains each field in words, and :mod:`arena.engine.describe`
prints a rule set from these fields so the prose cannot drift from the code.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from .cards import ACE, EIGHT, JOKER, SEVEN, TEN, THREE, TWO

Setup = Literal["choose", "swap", "none"]
Start = Literal["stock_card", "left_of_dealer", "lowest_card"]
ThreePower = Literal["plain", "see_through"]
SevenPower = Literal["plain", "at_most", "at_most_or_8", "descending", "glass"]
EightPower = Literal["plain", "skip", "see_through", "reverse"]
JokerPower = Literal["reverse", "give_pile"]
FourOfAKind = Literal["off", "burn_next", "burn_again"]


@dataclass(frozen=True, slots=True)
class Rules:
    """Every rule the engine knows, as plain values. Presets are instances."""

    name: str = "custom"
    min_players: int = 2
    max_players: int = 5
    # Cards.
    decks: int = 1
    extra_deck_at: tuple[int, ...] = ()  # player counts from which one more deck is shuffled in
    jokers: int = 0  # jokers per deck
    # Deal: face-down / face-up / hand sizes; hand_size is also the draw-back target.
    face_down: int = 3
    face_up: int = 3
    hand_size: int = 3
    # (players, down, up, hand): a short deal for a table the deck cannot fill; the
    # undealt cards are set aside unseen and there is no stock.
    short_deal: tuple[tuple[int, int, int, int], ...] = ()
    setup: Setup = "swap"  # choose face-up from a hand of up+hand cards / swap freely / no choice
    stacking: bool = False  # stack same-rank face-up cards at setup, drawing back to hand_size
    start: Start = "left_of_dealer"
    # Card powers.
    three: ThreePower = "plain"
    seven: SevenPower = "plain"
    eight: EightPower = "plain"
    joker: JokerPower = "reverse"
    ten_on_court: bool = True  # False: a 10 may not be played on a jack, queen or king
    four_of_a_kind: FourOfAKind = "burn_again"
    reset_again: bool = False  # the player who lays a 2 plays again (002's walkthrough)
    # Play.
    match_count: bool = False  # a set of N must be answered with at least N cards
    must_play: bool = False  # pick up only when no card can be played
    face_up_multi: bool = False  # several same-rank face-up cards in one play
    harsh_face_up: bool = False  # failing on face-up: surrender one face-up card onto the pile first
    burner_out: bool = True  # False: you may not go out on a 10 or a four-of-a-kind
    # End.
    play_on: bool = False  # play on after the first player is out until one is left
    stale_turns: int | None = None  # this many turns without a burn or anyone going out: a draw

    # Derived rank sets, computed once so the hot path reads a frozenset.
    wild: frozenset[int] = field(init=False, repr=False, compare=False)
    see_through: frozenset[int] = field(init=False, repr=False, compare=False)
    skip: frozenset[int] = field(init=False, repr=False, compare=False)
    reverse: frozenset[int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_rules(self)
        wild = {TWO, TEN}
        see = set()
        if self.three == "see_through":
            wild.add(THREE)
            see.add(THREE)
        if self.seven == "glass":
            wild.add(SEVEN)
            see.add(SEVEN)
        if self.eight == "see_through":
            see.add(EIGHT)
        if self.jokers:
            wild.add(JOKER)
            see.add(JOKER)
        object.__setattr__(self, "wild", frozenset(wild))
        object.__setattr__(self, "see_through", frozenset(see))
        object.__setattr__(self, "skip", frozenset({EIGHT} if self.eight == "skip" else ()))
        rev = {EIGHT} if self.eight == "reverse" else set()
        if self.jokers and self.joker == "reverse":
            rev.add(JOKER)
        object.__setattr__(self, "reverse", frozenset(rev))

    def decks_for(self, players: int) -> int:
        return self.decks + sum(players >= n for n in self.extra_deck_at)

    def deal_for(self, players: int) -> tuple[int, int, int, bool]:
        """(down, up, hand, has_stock) for this many players."""
        for n, down, up, hand in self.short_deal:
            if n == players:
                return down, up, hand, False
        return self.face_down, self.face_up, self.hand_size, True

    def replace(self, **changes: Any) -> Rules:
        return dataclasses.replace(self, **changes)

    def options(self) -> dict[str, Any]:
        """The settable fields and their values, JSON-ready."""
        return {f.name: _jsonable(getattr(self, f.name)) for f in dataclasses.fields(self) if f.init}

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> Rules:
        return cls(**{k: _from_json(k, v) for k, v in options.items()})


def _jsonable(v: Any) -> Any:
    if isinstance(v, tuple):
        return [_jsonable(x) for x in v]
    return v


def _from_json(name: str, v: Any) -> Any:
    if name in ("extra_deck_at",):
        return tuple(v)
    if name == "short_deal":
        return tuple(tuple(x) for x in v)
    return v


class RulesError(ValueError):
    """A rule set that cannot be played (for example, more cards dealt than the deck holds)."""


_CHOICES = {
    "setup": Setup, "start": Start, "three": ThreePower, "seven": SevenPower,
    "eight": EightPower, "joker": JokerPower, "four_of_a_kind": FourOfAKind,
}


def check_rules(r: Rules) -> None:
    for name, lit in _CHOICES.items():
        allowed = get_args(lit)
        if getattr(r, name) not in allowed:
            raise RulesError(f"{name} must be one of {', '.join(allowed)}; got {getattr(r, name)!r}")
    if not 2 <= r.min_players <= r.max_players <= 8:
        raise RulesError("players must satisfy 2 <= min_players <= max_players <= 8")
    if r.decks < 1 or r.jokers < 0 or r.jokers > 2:
        raise RulesError("decks must be >= 1 and jokers per deck 0, 1 or 2")
    if r.face_down < 0 or r.face_up < 0 or r.hand_size < 1:
        raise RulesError("face_down and face_up must be >= 0 and hand_size >= 1")
    if r.stale_turns is not None and r.stale_turns < 1:
        raise RulesError("stale_turns must be a positive number of turns or None")
    for players in range(r.min_players, r.max_players + 1):
        down, up, hand, _ = r.deal_for(players)
        total = r.decks_for(players) * (52 + r.jokers)
        if players * (down + up + hand) > total:
            raise RulesError(
                f"{r.name}: {players} players need {players * (down + up + hand)} cards "
                f"but {r.decks_for(players)} deck(s) hold {total}")


def parse_option(text: str) -> tuple[str, Any]:
    """Parse a command-line ``name=value`` into a typed option."""
    if "=" not in text:
        raise RulesError(f"expected option=value, got {text!r}")
    name, raw = (s.strip() for s in text.split("=", 1))
    fields = {f.name: f for f in dataclasses.fields(Rules) if f.init}
    if name not in fields:
        raise RulesError(f"unknown rule option {name!r}; known: {', '.join(sorted(fields))}")
    default = getattr(Rules(), name)
    low = raw.lower()
    if isinstance(default, bool):
        if low not in ("true", "false", "yes", "no", "1", "0", "on", "off"):
            raise RulesError(f"{name} takes true or false, got {raw!r}")
        return name, low in ("true", "yes", "1", "on")
    if name == "stale_turns":
        return name, None if low in ("none", "off", "0") else int(raw)
    if isinstance(default, int):
        return name, int(raw)
    if name == "extra_deck_at":
        return name, tuple(int(x) for x in raw.split(",") if x.strip())
    if name == "short_deal":
        return name, tuple(tuple(int(x) for x in part.split(":")) for part in raw.split(",") if part)
    return name, raw


def with_options(rules: Rules, options: list[str] | dict[str, Any]) -> Rules:
    """A preset with ``name=value`` overrides applied (the name gains a ``+`` mark)."""
    changes = dict(parse_option(o) for o in options) if isinstance(options, list) else dict(options)
    if not changes:
        return rules
    try:
        return rules.replace(name=rules.name + "+" if not rules.name.endswith("+") else rules.name, **changes)
    except TypeError as e:
        raise RulesError(str(e)) from None


POWERS = Rules(
    name="powers", min_players=2, max_players=5, decks=1, extra_deck_at=(3,),
    setup="choose", start="stock_card", three="see_through", seven="at_most",
    four_of_a_kind="burn_next", must_play=False, face_up_multi=False,
    play_on=False, stale_turns=400,
)
CLASSIC = Rules(
    name="classic", min_players=2, max_players=5, decks=1, extra_deck_at=(3,),
    setup="choose", start="stock_card", four_of_a_kind="burn_next", must_play=True,
    play_on=False,
)
SKIP8 = Rules(
    name="skip8", min_players=2, max_players=6, short_deal=((6, 3, 3, 2),),
    setup="swap", start="left_of_dealer", eight="skip", four_of_a_kind="off",
    match_count=True, must_play=True, play_on=True,
)
SHITHEAD = Rules(
    name="shithead", min_players=2, max_players=5, setup="swap", start="lowest_card",
    four_of_a_kind="burn_again", must_play=False, face_up_multi=True, play_on=True,
)
SMEGHEAD = Rules(
    name="smeghead", min_players=2, max_players=6, decks=2, extra_deck_at=(5,),
    face_down=4, face_up=4, hand_size=4, setup="swap", start="lowest_card",
    four_of_a_kind="burn_again", face_up_multi=True, play_on=True,
)

PRESETS: dict[str, Rules] = {r.name: r for r in (POWERS, CLASSIC, SKIP8, SHITHEAD, SMEGHEAD)}
ALIASES = {"000": "powers", "001": "classic", "002": "skip8", "003": "shithead",
           "palace": "classic", "karma": "shithead"}


def preset(name: str) -> Rules:
    key = ALIASES.get(name.lower(), name.lower())
    try:
        return PRESETS[key]
    except KeyError:
        raise RulesError(f"unknown rule set {name!r}; presets: {', '.join(PRESETS)}") from None


def rules_from(name: str, options: list[str] | dict[str, Any] | None = None) -> Rules:
    return with_options(preset(name), options or [])
