"""The core's request lines, put together from encoded pieces, are the bytes of its messages.

``RefereeCore`` writes a bot's request line without building the message: the view and the
offered actions are written as bytes (``views.seat_view_json`` and ``views.offered_json``, by a
C helper where it is built) and joined with the rest; a core that does not encode builds the
message. Both must say exactly the same thing, and nothing a caller does to a message or a
record may change what a later request says.
"""

from __future__ import annotations

import random

import orjson
import pytest

from arena.engine import (IMPLEMENTATION, PRESETS, Rules, apply_action, forfeit, legal_actions, new_game, preset,
                          with_options)
from arena.engine import views as engine_views
from arena.engine.views import action_json, line_json, offered_json, seat_view, seat_view_json
from arena.referee import protocol
from arena.referee.core import RefereeCore, Request, TimeControl

CLOCK = TimeControl(move_ms=300, bank_ms=2000)


def _play(rules: str, players: int, seed: int, *, encode: bool, meddle: bool = False):
    """A game's requests, answered by a seeded random choice and think time (some over the move
    time: the bank is drawn on); ``meddle``: the caller scribbles over every message and the
    record's steps as it goes."""
    rng = random.Random(seed)
    core = RefereeCore(preset(rules), [f"b{i}" for i in range(players)], seed, game_id="g", clock=CLOCK,
                       encode=encode)
    out = []
    bank = [CLOCK.bank_ms / 1000] * players  # what each seat has left, by the rule PROTOCOL.md states
    while (req := core.next_request()) is not None:
        msg = req.message
        assert msg["clock"] == {"move_ms": CLOCK.move_ms, "bank_ms": int(bank[req.seat] * 1000)}
        assert req.timeout == CLOCK.move_ms / 1000 + bank[req.seat]
        out.append((req.seat, req.id, req.timeout, req.n_actions, req.line, protocol.encode(msg).encode()))
        if meddle:
            for a in msg["actions"]:
                a["kind"] = "scribbled"
                a["id"] = -1
            msg["clock"]["bank_ms"] = -1
            for step in core.record.steps:
                if "act" in step:
                    step["act"]["kind"] = "scribbled"
        seconds = rng.choice((0.0004, 0.25, 0.9))
        core.answer(rng.randrange(req.n_actions), seconds)
        bank[req.seat] = max(0.0, bank[req.seat] - max(0.0, round(seconds * 1000, 3) / 1000 - CLOCK.move_ms / 1000))
    return out, core


@pytest.mark.parametrize("rules,players", [("classic", 2), ("shithead", 3), ("smeghead", 4), ("powers", 2)])
def test_each_line_is_its_message_encoded(rules: str, players: int) -> None:
    for seed in range(2):
        lines, _ = _play(rules, players, seed, encode=True)
        messages, _ = _play(rules, players, seed, encode=False)
        assert len(lines) == len(messages) > 10
        for (seat, rid, timeout, n, line, from_line), (*same, empty, built) in zip(lines, messages):
            assert (seat, rid, timeout, n) == tuple(same)
            assert empty == b""
            assert line == from_line == built  # the bytes a bot gets, however the request was made


def test_what_a_caller_does_to_a_message_or_a_record_changes_no_later_request() -> None:
    clean, core = _play("classic", 2, 7, encode=False)
    record = protocol.encode(core.record.as_json())  # as it was stored, before anyone meddled
    meddled, _ = _play("classic", 2, 7, encode=False, meddle=True)
    again, again_core = _play("classic", 2, 7, encode=True)
    assert [m[5] for m in meddled] == [m[5] for m in clean] == [m[4] for m in again]
    assert protocol.encode(again_core.record.as_json()) == protocol.encode(core.record.as_json()) == record


def test_a_request_needs_its_line_or_its_message() -> None:
    with pytest.raises(ValueError):
        Request(0, 1, None, b"", 1.0, 2)
    req = Request(0, 1, None, b'{"type":"request","id":1}', 1.0, 2)
    assert req.message == {"type": "request", "id": 1} and req.message is req.message  # read once


# Every preset, and one table with what no preset has: stacking, harsh face-up cards, jokers that give the pile.
RULES = [preset(name) for name in sorted(PRESETS)] + [
    with_options(preset("classic"), {"stacking": True, "harsh_face_up": True, "jokers": 2, "joker": "give_pile"})]


def _positions(rules: Rules, players: int, seed: int, reason: str):
    """Every position of a seeded random game of ``rules``, in which the last seat forfeits for
    ``reason`` a third of the way in (a forfeited seat's view has its place and reason)."""
    rng = random.Random(seed)
    state = new_game(rules, players, seed)
    while not state.over:
        yield state
        if state.turn == 30 and state.seats[-1].forfeit is None:
            state, _ = forfeit(state, players - 1, reason)
            continue
        actions = legal_actions(state)
        state, _ = apply_action(state, actions[rng.randrange(len(actions))])
    yield state


@pytest.mark.parametrize("rules", RULES, ids=lambda r: r.name)
def test_a_view_is_written_as_the_dicts_encode(rules: Rules) -> None:
    """``seat_view_json`` (the C helper where it is built) is ``orjson.dumps(seat_view(...))`` in every
    position and from every seat: setup, play, forfeits, the end; a forfeit reason the helper does
    not write (one that JSON must escape) takes the dicts' way, to the same bytes."""
    views = 0
    for players, reason in ((2, "timeout"), (3, "crash"), (4, 'odd "reason" \u00e9\n')):
        for state in _positions(rules, players, players, reason):
            for seat in range(players):
                assert seat_view_json(state, seat) == orjson.dumps(seat_view(state, seat))
                views += 1
    assert views > 300


def test_the_offered_actions_are_written_as_the_dicts_encode() -> None:
    """``offered_json`` is the numbered ``action_json`` of every legal action, encoded, in every
    position of every preset: plays from each zone, jokers' targets, surrenders, flips, setups."""
    shapes = set()
    for rules in RULES:
        for players in (2, 3, 4):
            for state in _positions(rules, players, players, "timeout"):
                actions = legal_actions(state)
                numbered = [{"id": i, **action_json(a)} for i, a in enumerate(actions)]
                shapes |= {(a["kind"], *sorted(a)) for a in numbered}
                assert offered_json(actions) == orjson.dumps(numbered)
    kinds = {"play", "pick_up", "flip", "set_face_up", "stack", "done"}
    assert {shape[0] for shape in shapes} == kinds
    assert {"target", "surrender", "from"} <= {key for shape in shapes for key in shape}


@pytest.mark.parametrize("rules", RULES, ids=lambda r: r.name)
def test_a_line_is_its_parts_joined(rules: Rules) -> None:
    """``line_json`` (the C helper writes the whole line in one buffer where it is built) is the
    head, ``seat_view_json``, the middle, ``offered_json`` and the tail joined, in every position
    and from every seat; a view the helper declines (a reason JSON must escape) is joined instead."""
    head, middle, tail = (b'{"id":', b"7", b',"view":'), (b',"events":[]', b',"actions":'), (b"}",)
    lines = declined = 0
    for players, reason in ((2, "timeout"), (4, 'odd "reason" \u00e9\n')):
        for state in _positions(rules, players, players, reason):
            actions = legal_actions(state)
            for seat in range(players):
                joined = b"".join((*head, seat_view_json(state, seat), *middle, offered_json(actions), *tail))
                assert line_json(head, state, seat, middle, actions, tail) == joined
                lines += 1
                declined += engine_views._encode_line(head, state, seat, b"null", engine_views._CARD_JSON, middle,
                                                      actions, tail) is None
    assert lines > 100
    assert declined > 0 or engine_views._encode_line is engine_views._line_by_parts


def test_the_c_helper_writes_the_view_where_it_is_built() -> None:
    """Built with the compiled engine, the helper writes a plain view itself (None would mean
    the dicts were built after all) and declines what it does not write."""
    state = new_game(preset("classic"), 2, 1)
    odd = forfeit(state, 1, 'a "quoted" reason')[0]
    if engine_views._encode_view is engine_views._encode_by_dicts:
        assert IMPLEMENTATION == "python"  # only a pure-Python install goes without it
        return
    encode = engine_views._encode_view
    assert encode(state, 0, b"null", engine_views._CARD_JSON) == orjson.dumps(seat_view(state, 0))
    line, actions = engine_views._encode_line, legal_actions(state)
    assert line((b"<",), state, 0, b"null", engine_views._CARD_JSON, (b"|",), actions, (b">",)) == \
        b"<" + orjson.dumps(seat_view(state, 0)) + b"|" + offered_json(actions) + b">"
    for head in ((b"<", "text"), [b"<"]):  # parts that are not a tuple of bytes: declined, never guessed at
        assert line(head, state, 0, b"null", engine_views._CARD_JSON, (), actions, ()) is None
    assert encode(odd, 0, b"null", engine_views._CARD_JSON) is None
    assert encode(state, 0, b"null", engine_views._CARD_JSON[:10]) is None  # a card outside the table
    assert encode(state, 5, b"null", engine_views._CARD_JSON) is None  # no such seat
    actions = legal_actions(state)
    assert engine_views._encode_actions(actions, engine_views._CARD_JSON) == offered_json(actions)
    for kind in ("swap", 'set"face_up'):  # a kind the helper does not know, one it would have to escape
        odd = (actions[0]._replace(kind=kind),)
        assert engine_views._encode_actions(odd, engine_views._CARD_JSON) is None
        assert offered_json(odd) == b'[{"id":0,"kind":"set_face_up","face_up":' + orjson.dumps(
            action_json(odd[0])["face_up"]) + b"}]"  # the dicts' way: what action_json writes
