"""The fixed action space of :mod:`arena.envs`: one index per kind of action, for any rule set.

No numpy and no engine here: a bot can map its request's actions to indices with the
standard library alone. The environments and the learned bot (:mod:`.learned`) share it, so it
sits here, below the environments.

=============  ===========================================================
index          action
=============  ===========================================================
0              pick up the pile
1 + r - 2      pick up, surrendering a face-up card of rank r (harsh rule)
15 + p         flip face-down position p (p < 8)
23 + k         play from hand: rank r, count c (k = (r-2)*12 + c-1)
191 + k        play from face-up: rank r, count c
359 + k        play jokers giving the pile: zone, target seat, count
503 + i        the i-th setup action of the request (setup, stack, done; i < 128)
=============  ===========================================================
"""

from __future__ import annotations

from typing import Any

from arena.errors import ArenaError

_RANK = {ch: k + 2 for k, ch in enumerate("23456789TJQKAX")}  # a card string's first letter -> rank


def _rank(card: str) -> int:
    return _RANK[card[0]]

RANKS = 14  # 2..14 and the joker (15)
MAX_COUNT = 12  # cards of one rank in one play (three decks)
MAX_FLIPS = 8
MAX_SEATS = 6
MAX_SETUP = 128
PICK_UP, SURRENDER, FLIP, HAND_PLAY, FACE_UP_PLAY, GIVE_PLAY, SETUP = 0, 1, 15, 23, 191, 359, 503
N_ACTIONS = SETUP + MAX_SETUP



class ActionSpaceError(ArenaError, ValueError):
    """An action the fixed space has no index for (a table or deck beyond its sizes)."""


def index_of(kind: str, *, rank: int = 0, count: int = 1, zone: str = "hand", target: int | None = None,
             position: int = 0, setup: int = 0) -> int:
    """The fixed index of one action, from its parts."""
    if kind == "pick_up":
        return PICK_UP if not rank else SURRENDER + rank - 2
    if kind == "flip":
        if position >= MAX_FLIPS:
            raise ActionSpaceError(f"face-down position {position} beyond {MAX_FLIPS}")
        return FLIP + position
    if kind == "play":
        if count > MAX_COUNT:
            raise ActionSpaceError(f"a play of {count} cards is beyond {MAX_COUNT}")
        if target is not None:
            if target >= MAX_SEATS:
                raise ActionSpaceError(f"target seat {target} beyond {MAX_SEATS}")
            return GIVE_PLAY + ((zone != "hand") * MAX_SEATS + target) * MAX_COUNT + count - 1
        base = HAND_PLAY if zone == "hand" else FACE_UP_PLAY
        return base + (rank - 2) * MAX_COUNT + count - 1
    if setup >= MAX_SETUP:
        raise ActionSpaceError(f"setup choice {setup} beyond {MAX_SETUP}")
    return SETUP + setup


def json_index(action: dict[str, Any], position: int) -> int:
    """The index of a request action (``position`` is its place in the request's list)."""
    kind = action["kind"]
    if kind == "pick_up":
        s = action.get("surrender")
        return index_of(kind, rank=_rank(s) if s else 0)
    if kind == "flip":
        return index_of(kind, position=action["position"])
    if kind == "play":
        cards = action["cards"]
        return index_of(kind, rank=_rank(cards[0]), count=len(cards), zone=action["from"],
                        target=action.get("target"))
    return index_of(kind, setup=position)


_ENGINE_INDEX: dict[Any, int] = {}


def engine_index(action, position: int) -> int:
    """The index of an engine action (``position``: its place in ``legal_actions``)."""
    k = _ENGINE_INDEX.get(action)
    if k is not None:
        return k
    kind = action.kind
    if kind in ("pick_up", "flip", "play"):
        k = _ENGINE_INDEX[action] = _engine_index(action, position)
        return k
    return index_of(kind, setup=position)


def _engine_index(action, position: int) -> int:
    kind = action.kind
    if kind == "pick_up":
        return PICK_UP if action.surrender is None else SURRENDER + (action.surrender >> 2) - 2
    if kind == "flip":
        return index_of(kind, position=action.position)
    if kind == "play":
        return index_of(kind, rank=action.cards[0] >> 2, count=len(action.cards), zone=action.zone,
                        target=action.target)
    return index_of(kind, setup=position)
