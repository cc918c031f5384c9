"""What each seat may see, as JSON-ready dicts, and the position format.

``seat_view`` is the only description of a game the protocol ever sends to a bot;
``event_for`` censors an event for one seat; ``decision_name`` names what a request
asks and ``reveal`` is what every seat is shown once the game is over. ``to_position``/``from_position``
save and load the full (omniscient) state for tests, bug reports and puzzles.
"""

from __future__ import annotations

import json
from typing import Any, Final

from .cards import card_str, cards_str, parse_card, parse_cards, stacks_str
from .game import effective_top
from .model import (Action, Burned, Drew, Event, Flip, Flipped, GameOver, PickedUp, PickUp, Play, Played, Result, Seat,
                    SetFaceUp, SetupChosen, Stack, State)
from .rules import Rules

POSITION_VERSION = 1


def seat_view(state: State, seat: int) -> dict[str, Any]:
    """Everything ``seat`` may know now, and nothing more.

    During setup the other seats' face-up choices are not shown: the choices are
    simultaneous in a real game, even though the engine takes them in seat order.
    """
    me = state.seats[seat]
    top = effective_top(state.rules, state.pile)
    players = []
    for i, s in enumerate(state.seats):
        show_up = i == seat or state.phase != "setup"
        players.append({
            "seat": i,
            "hand_count": len(s.hand),
            "face_up": stacks_str(s.face_up) if show_up else None,
            "face_down": [c is not None for c in s.face_down],
            "known_hand": cards_str(s.known),
            "place": s.place,
            "forfeit": s.forfeit,
        })
    return {
        "seat": seat,
        "phase": state.phase,
        "to_move": state.to_move,
        "turn": state.turn,
        "direction": state.direction,
        "hand": cards_str(me.hand),
        "face_up": stacks_str(me.face_up),
        "face_down": [c is not None for c in me.face_down],
        "players": players,
        "pile": cards_str(state.pile),
        "pile_top": None if top is None else _rank_name(top),
        "need": state.need,
        "descending": state.descending,
        "stock": len(state.stock),
        "burned": cards_str(state.burned),
        "set_aside": len(state.set_aside),
    }


# A view as the bytes a bot is sent (seat_view_json): each card number's JSON, and the few
# strings a view names (the pile top's rank), encoded once.
# (The standard library's json, not orjson: the engine is imported by bots too, under an
# interpreter that may have nothing but the standard library; these bytes equal orjson's.)
_CARD_JSON: Final = tuple(json.dumps(card_str(c), ensure_ascii=False).encode() for c in range(64))
_TOP_JSON: Final = {rank: json.dumps(card_str(rank * 4)[0], ensure_ascii=False).encode() for rank in range(2, 16)}


def _encode_by_dicts(state: State, seat: int, pile_top: bytes, cards: tuple[bytes, ...]) -> bytes | None:
    """What ``_view.encode`` says when it cannot help: not this state (the caller builds the dicts)."""
    return None


def _actions_by_dicts(actions: tuple[Action, ...], cards: tuple[bytes, ...]) -> bytes | None:
    """What ``_view.encode_actions`` says when it cannot help: not these actions."""
    return None


def _line_by_parts(head: tuple[bytes, ...], state: State, seat: int, pile_top: bytes, cards: tuple[bytes, ...],
                   middle: tuple[bytes, ...], actions: tuple[Action, ...], tail: tuple[bytes, ...]) -> bytes | None:
    """What ``_view.encode_line`` says when it cannot help: not this line (the caller joins the parts)."""
    return None


try:
    from ._view import encode as _encode_view, encode_actions as _encode_actions, encode_line as _encode_line
except ImportError:  # not built (no C compiler at install): the dicts are built and encoded
    _encode_view = _encode_by_dicts
    _encode_actions = _actions_by_dicts
    _encode_line = _line_by_parts


def seat_view_json(state: State, seat: int) -> bytes:
    """``orjson.dumps(seat_view(state, seat))``, byte for byte. A bot's every request carries its
    view, and building the dicts only to encode them once was most of the referee's cost per
    decision (``bench/bench_instructions.py``): a small C helper (``_view.c``) writes the bytes
    straight from the state's tuples, and where it is not built, or a state holds what it does
    not handle, the dicts are built and encoded. ``tests/test_referee_core_lines.py`` holds
    the two ways together."""
    top = effective_top(state.rules, state.pile)
    encoded = _encode_view(state, seat, b"null" if top is None else _TOP_JSON[top], _CARD_JSON)
    if encoded is not None:
        return encoded
    import orjson  # the referee's (a bot importing the engine never calls this)
    return orjson.dumps(seat_view(state, seat))


def offered_json(actions: tuple[Action, ...]) -> bytes:
    """The actions a request offers, ``orjson.dumps([{"id": i, **action_json(a)} ...])`` byte for
    byte, written by the C helper where it is built (as :func:`seat_view_json`)."""
    encoded = _encode_actions(actions, _CARD_JSON)
    if encoded is not None:
        return encoded
    import orjson
    return orjson.dumps([{"id": i, **action_json(a)} for i, a in enumerate(actions)])


def line_json(head: tuple[bytes, ...], state: State, seat: int, middle: tuple[bytes, ...],
              actions: tuple[Action, ...], tail: tuple[bytes, ...]) -> bytes:
    """The bytes of ``head``, :func:`seat_view_json`, ``middle``, :func:`offered_json` and ``tail``,
    joined: a request's line, written by the C helper in one buffer where it is built (the view and
    the actions are then never objects of their own)."""
    top = effective_top(state.rules, state.pile)
    line = _encode_line(head, state, seat, b"null" if top is None else _TOP_JSON[top], _CARD_JSON, middle, actions,
                        tail)
    if line is not None:
        return line
    return b"".join((*head, seat_view_json(state, seat), *middle, offered_json(actions), *tail))


def decision_name(state: State) -> str:
    """What the seat to move decides now: ``request.decision`` (see :class:`.values.Decision`)."""
    if state.phase == "setup":
        return "setup"
    seat = state.seats[state.to_move]
    if seat.hand:
        return "play_hand"
    return "play_face_up" if seat.face_up else "flip_face_down"


def reveal(state: State) -> list[dict[str, Any]]:
    """Every seat's cards, face-down ones included: sent to all in ``end`` once the game is over."""
    return [{"seat": i, "hand": cards_str(s.hand), "face_up": [cards_str(x) for x in s.face_up],
             "face_down": [None if c is None else cards_str((c,))[0] for c in s.face_down]}
            for i, s in enumerate(state.seats)]


def _rank_name(rank: int) -> str:
    return card_str(rank * 4)[0]


def action_json(action: Action) -> dict[str, Any]:
    if isinstance(action, Play):
        out: dict[str, Any] = {"kind": "play", "cards": cards_str(action.cards), "from": action.zone}
        if action.target is not None:
            out["target"] = action.target
        return out
    if isinstance(action, PickUp):
        if action.surrender is None:
            return {"kind": "pick_up"}
        return {"kind": "pick_up", "surrender": card_str(action.surrender)}
    if isinstance(action, Flip):
        return {"kind": "flip", "position": action.position}
    if isinstance(action, SetFaceUp):
        return {"kind": "set_face_up", "face_up": stacks_str(action.stacks)}
    if isinstance(action, Stack):
        return {"kind": "stack", "cards": cards_str(action.cards)}
    return {"kind": action.kind}


def result_json(result: Result) -> dict[str, Any]:
    return {"reason": result.reason, "order": [list(g) for g in result.order],
            "complete": result.complete, "draw": result.draw,
            "winner": result.winner, "loser": result.loser}


def events_seen(events: list[Event], players: int) -> tuple[list[dict[str, Any]], list[list[dict[str, Any]]] | None]:
    """``events`` rendered for the log (``event_for(e, None)`` each), and for each seat where one
    of them is private (a draw, a face-up choice); None where every seat sees the log's (nearly
    every step: the log's dicts are then shared, not copied per seat)."""
    omni = [event_for(e, None) for e in events]
    for e in events:
        if isinstance(e, (Drew, SetupChosen)):
            return omni, [[event_for(e, seat) if isinstance(e, (Drew, SetupChosen)) and e.seat != seat else o
                           for e, o in zip(events, omni)] for seat in range(players)]
    return omni, None


def event_for(event: Event, seat: int | None) -> dict[str, Any]:
    """The event as ``seat`` sees it; ``seat=None`` is the omniscient record for logs.

    Every step renders its events for the log and the seats, so the common kinds are written
    out one by one (one dict literal each); any other kind is rendered field by field."""
    if isinstance(event, Played):
        return {"kind": "played", "seat": event.seat, "cards": cards_str(event.cards), "zone": event.zone}
    if isinstance(event, Drew):
        if seat is None or seat == event.seat:
            return {"kind": "drew", "seat": event.seat, "count": len(event.cards), "cards": cards_str(event.cards)}
        return {"kind": "drew", "seat": event.seat, "count": len(event.cards)}
    if isinstance(event, PickedUp):
        return {"kind": "picked_up", "seat": event.seat, "cards": cards_str(event.cards)}
    if isinstance(event, Burned):
        return {"kind": "burned", "cards": cards_str(event.cards), "why": event.why}
    if isinstance(event, Flipped):
        return {"kind": "flipped", "seat": event.seat, "position": event.position, "card": card_str(event.card),
                "legal": event.legal}
    if isinstance(event, SetupChosen):
        if seat is None or seat == event.seat:
            return {"kind": "setup", "seat": event.seat, "face_up": stacks_str(event.face_up)}
        return {"kind": "setup", "seat": event.seat}
    if isinstance(event, GameOver):
        return {"kind": "game_over", "result": result_json(event.result)}
    out: dict[str, Any] = {"kind": event.kind}
    for name, value in zip(event._fields, event):
        if name == "kind":
            continue
        if name == "cards":
            value = cards_str(value)  # type: ignore[arg-type]  # named fields hold what their names say
        elif name in ("card", "surrender"):
            value = card_str(value)  # type: ignore[arg-type]
        out[name] = value
    return out


# ---------------------------------------------------------------- positions

def to_position(state: State) -> dict[str, Any]:
    """The whole state as JSON: every card's place, whose turn, the rules."""
    return {
        "version": POSITION_VERSION,
        "rules": state.rules.options(),
        "seats": [{
            "hand": cards_str(s.hand),
            "face_up": stacks_str(s.face_up),
            "face_down": [None if c is None else card_str(c) for c in s.face_down],
            "known": cards_str(s.known),
            "place": s.place, "forfeit": s.forfeit, "setup": s.setup,
        } for s in state.seats],
        "stock": cards_str(state.stock),
        "pile": cards_str(state.pile),
        "burned": cards_str(state.burned),
        "set_aside": cards_str(state.set_aside),
        "to_move": state.to_move, "direction": state.direction, "phase": state.phase,
        "turn": state.turn, "stale": state.stale, "need": state.need,
        "descending": state.descending, "max_turns": state.max_turns, "seed": state.seed,
        "result": None if state.result is None else {
            "reason": state.result.reason, "order": [list(g) for g in state.result.order],
            "complete": state.result.complete, "draw": state.result.draw},
    }


def from_position(data: dict[str, Any]) -> State:
    """Inverse of :func:`to_position`. Missing optional fields take their defaults."""
    if data.get("version", POSITION_VERSION) != POSITION_VERSION:
        raise ValueError(f"unsupported position version {data.get('version')!r}")
    rules = Rules.from_options(data["rules"])
    seats = tuple(Seat(
        hand=tuple(sorted(parse_cards(s.get("hand", [])))),
        face_up=tuple(parse_cards(st) for st in s.get("face_up", [])),
        face_down=tuple(None if c is None else parse_card(c) for c in s.get("face_down", [])),
        known=tuple(sorted(parse_cards(s.get("known", [])))),
        place=s.get("place"), forfeit=s.get("forfeit"), setup=s.get("setup", ""),
    ) for s in data["seats"])
    res = data.get("result")
    return State(
        rules=rules, seats=seats,
        stock=parse_cards(data.get("stock", [])), pile=parse_cards(data.get("pile", [])),
        burned=parse_cards(data.get("burned", [])), set_aside=parse_cards(data.get("set_aside", [])),
        to_move=data.get("to_move", 0), direction=data.get("direction", 1),
        phase=data.get("phase", "play"), turn=data.get("turn", 0), stale=data.get("stale", 0),
        need=data.get("need", 0), descending=data.get("descending", False),
        max_turns=data.get("max_turns", 2000), seed=data.get("seed"),
        result=None if res is None else Result(res["reason"], tuple(tuple(g) for g in res["order"]),
                                               res["complete"], res.get("draw", False)),
    )
