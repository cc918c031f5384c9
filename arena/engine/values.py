"""The engine's named values as ``StrEnum``s: game phases, card zones, why a game ended.

The engine stores these as plain strings (its hot modules are compiled by mypyc and
compare strings), and a ``StrEnum`` member *is* its string: ``Phase.SETUP == "setup"``,
and JSON carries the same text. Code outside the engine names them through these
classes, so a typo is an ``AttributeError`` rather than a comparison that is never true.
``tests/test_protocol.py`` checks them against the JSON Schemas and the engine's constants.
"""

from __future__ import annotations

from enum import StrEnum


class Phase(StrEnum):
    SETUP = "setup"  # face-up cards being chosen (or stacked)
    PLAY = "play"
    OVER = "over"


class Zone(StrEnum):
    """Where a seat's cards lie; a play names the zone it comes from."""

    HAND = "hand"
    FACE_UP = "face_up"
    FACE_DOWN = "face_down"


class EndReason(StrEnum):
    """Why a game ended (``Result.reason``)."""

    FIRST_OUT = "first_out"  # the rules end the game when the first seat goes out
    PLAYED_OUT = "played_out"  # everyone but one went out
    STALE_DRAW = "stale_draw"  # too many turns without progress
    TURN_CAP = "turn_cap"  # max_turns reached
    FORFEIT = "forfeit"  # forfeits left fewer than two seats


class Decision(StrEnum):
    """What a request asks a seat to do (``request.decision``)."""

    SETUP = "setup"
    PLAY_HAND = "play_hand"
    PLAY_FACE_UP = "play_face_up"
    FLIP_FACE_DOWN = "flip_face_down"
