"""Immutable game data: seats, state, actions, events and results.

Everything here is a ``NamedTuple``: immutable, cheap to build and copy with
``_replace``, and its ``repr`` rebuilds it. The engine creates many of these per
turn, so they are deliberately plain.
"""

from __future__ import annotations

from typing import Final, NamedTuple

from .rules import Rules

HAND: Final = "hand"
FACE_UP: Final = "face_up"
FACE_DOWN: Final = "face_down"


class Seat(NamedTuple):
    hand: tuple[int, ...]  # sorted
    face_up: tuple[tuple[int, ...], ...]  # stacks, each of one rank (singletons without stacking)
    face_down: tuple[int | None, ...]  # by position, fixed by the deal; None once played
    known: tuple[int, ...] = ()  # hand cards every player has seen arrive (picked up, flipped, surrendered)
    place: int | None = None  # finishing place: 1 for the first out; forfeits count up from last
    forfeit: str | None = None  # reason, when the referee removed this seat
    setup: str = ""  # pending setup decision: "face_up", "stack", or "" when done

    @property
    def active(self) -> bool:
        return self.place is None

    @property
    def face_up_cards(self) -> tuple[int, ...]:
        return tuple(c for stack in self.face_up for c in stack)

    @property
    def face_down_count(self) -> int:
        return sum(c is not None for c in self.face_down)

    @property
    def card_count(self) -> int:
        return len(self.hand) + sum(map(len, self.face_up)) + self.face_down_count


class Result(NamedTuple):
    """How a game ended. ``order`` lists seats best to worst, tied seats grouped.

    ``complete`` is False when only the winner is known (first-out games): the
    seats of the last group are then unranked among themselves, not tied.
    """

    reason: str  # "first_out", "played_out", "stale_draw", "turn_cap", "forfeit"
    order: tuple[tuple[int, ...], ...]
    complete: bool
    draw: bool = False

    @property
    def winner(self) -> int | None:
        return None if self.draw or len(self.order[0]) != 1 else self.order[0][0]

    @property
    def loser(self) -> int | None:
        if self.draw or not self.complete or len(self.order[-1]) != 1:
            return None
        return self.order[-1][0]

    def place_of(self, seat: int) -> int:
        """1-based place; tied or unranked seats share the best place of their group."""
        place = 1
        for group in self.order:
            if seat in group:
                return place
            place += len(group)
        raise ValueError(f"seat {seat} not in result")


class State(NamedTuple):
    rules: Rules
    seats: tuple[Seat, ...]
    stock: tuple[int, ...]  # the top card is the last
    pile: tuple[int, ...]  # bottom to top
    burned: tuple[int, ...]  # out of the game, seen by everyone
    set_aside: tuple[int, ...]  # out of the game, unseen (a short deal's leftovers, forfeited hands)
    to_move: int
    direction: int = 1
    phase: str = "play"  # "setup", "play", "over"
    turn: int = 0  # actions taken in the play phase
    stale: int = 0  # turns since the last burn or player going out
    need: int = 0  # match_count: cards the next play must hold (0 = no requirement)
    descending: bool = False  # the "descending" sevens run is on
    max_turns: int = 2000
    result: Result | None = None
    seed: int | None = None

    @property
    def players(self) -> int:
        return len(self.seats)

    @property
    def over(self) -> bool:
        return self.result is not None


# Actions. ``kind`` is the protocol's name for each.

class Play(NamedTuple):
    """Lay ``cards`` (one rank) from ``zone``; ``target`` names a seat for a pile-giving joker."""
    cards: tuple[int, ...]
    zone: str = HAND
    target: int | None = None
    kind: str = "play"


class PickUp(NamedTuple):
    """Take the pile into hand; ``surrender`` is the face-up card laid first under the harsh rule."""
    surrender: int | None = None
    kind: str = "pick_up"


class Flip(NamedTuple):
    """Turn over the face-down card at ``position`` (chosen blind)."""
    position: int
    kind: str = "flip"


class SetFaceUp(NamedTuple):
    """Setup: the face-up stacks, chosen from the seat's visible cards; the rest are the hand."""
    stacks: tuple[tuple[int, ...], ...]
    kind: str = "set_face_up"


class Stack(NamedTuple):
    """Setup with stacking: add same-rank cards drawn since to the face-up stack of that rank."""
    cards: tuple[int, ...]
    kind: str = "stack"


class Done(NamedTuple):
    """Setup with stacking: no more stacking."""
    kind: str = "done"


Action = Play | PickUp | Flip | SetFaceUp | Stack | Done


# Events: what happened, in order. They are the log and what bots are told.

class SetupChosen(NamedTuple):
    seat: int
    face_up: tuple[tuple[int, ...], ...]
    kind: str = "setup"


class StartCard(NamedTuple):
    card: int
    set_aside: bool  # a burn card or joker turned as start card leaves the game
    kind: str = "start_card"


class Leads(NamedTuple):
    seat: int
    why: str
    kind: str = "leads"


class Played(NamedTuple):
    seat: int
    cards: tuple[int, ...]
    zone: str
    kind: str = "played"


class Flipped(NamedTuple):
    seat: int
    position: int
    card: int
    legal: bool
    kind: str = "flipped"


class Drew(NamedTuple):
    seat: int
    cards: tuple[int, ...]  # seen only by ``seat``
    kind: str = "drew"


class Burned(NamedTuple):
    cards: tuple[int, ...]
    why: str  # "ten" or "four_of_a_kind"
    kind: str = "burned"


class PickedUp(NamedTuple):
    seat: int
    cards: tuple[int, ...]
    kind: str = "picked_up"


class Surrendered(NamedTuple):
    seat: int
    card: int
    kind: str = "surrendered"


class GavePile(NamedTuple):
    seat: int
    target: int
    cards: tuple[int, ...]
    kind: str = "gave_pile"


class Skipped(NamedTuple):
    seat: int
    kind: str = "skipped"


class Reversed(NamedTuple):
    direction: int
    kind: str = "reversed"


class WentOut(NamedTuple):
    seat: int
    place: int
    kind: str = "went_out"


class Forfeited(NamedTuple):
    seat: int
    reason: str
    kind: str = "forfeited"


class GameOver(NamedTuple):
    result: Result
    kind: str = "game_over"


Event = (SetupChosen | StartCard | Leads | Played | Flipped | Drew | Burned | PickedUp
         | Surrendered | GavePile | Skipped | Reversed | WentOut | Forfeited | GameOver)
