"""The compiled engine and its Python sources: when each runs, and that they play alike."""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import pytest

from arena.engine import IMPLEMENTATION, apply_action, legal_actions, preset, start_game
from arena.engine import records
from arena.engine.compiled import check_compiled
from arena.engine.model import Played, Seat
from arena.engine.views import event_for

ROOT = Path(__file__).resolve().parents[1]

PLAY_A_GAME = """
import hashlib, json, random, sys
if sys.argv[4:] == ["no-native-records"]:
    sys.modules["arena.engine._records"] = None  # as if the C helper had not been built
from arena.engine.records import NATIVE
from arena.engine import IMPLEMENTATION, apply_action, legal_actions, preset, start_game
from arena.engine.views import event_for
state, events = start_game(preset(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
rng = random.Random(int(sys.argv[3]))
log = [event_for(e, None) for e in events]
while state.result is None:
    state, evs = apply_action(state, rng.choice(legal_actions(state)), check=False)
    log += [event_for(e, None) for e in evs]
print(IMPLEMENTATION, NATIVE, hashlib.sha256(json.dumps(log).encode()).hexdigest())
"""


def game_digest(rules: str, players: int, seed: int) -> str:
    state, events = start_game(preset(rules), players, seed)
    rng = random.Random(seed)
    log = [event_for(e, None) for e in events]
    while state.result is None:
        state, evs = apply_action(state, rng.choice(legal_actions(state)), check=False)
        log += [event_for(e, None) for e in evs]
    return hashlib.sha256(json.dumps(log).encode()).hexdigest()


def test_the_python_sources_play_the_same_games_as_the_engine_in_use():
    env = {**os.environ, "ARENA_PURE_ENGINE": "1", "PYTHONPATH": str(ROOT)}
    for rules, players, seed in [("classic", 2, 3), ("shithead", 4, 8), ("skip8", 6, 1), ("powers", 3, 5)]:
        out = subprocess.run([sys.executable, "-c", PLAY_A_GAME, rules, str(players), str(seed)], env=env,
                             capture_output=True, text=True, check=True).stdout.split()
        assert out[0] == "python" and out[2] == game_digest(rules, players, seed), (rules, IMPLEMENTATION)


def test_games_are_the_same_without_the_native_record_builder():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for rules, players, seed in [("classic", 2, 3), ("smeghead", 5, 2)]:
        out = subprocess.run([sys.executable, "-c", PLAY_A_GAME, rules, str(players), str(seed), "no-native-records"],
                             env=env, capture_output=True, text=True, check=True).stdout.split()
        assert out[1:] == ["False", game_digest(rules, players, seed)], rules


def test_the_record_builder_makes_the_namedtuple_the_constructor_makes():
    seat = Seat((1, 2), ((5,),), (9, None), (2,), None, None, "")
    played = Played(1, (8, 9), "face_up")
    for build in {records.build, records.build_with_tuple_new}:
        assert build(Seat, *seat) == seat and type(build(Seat, *seat)) is Seat
        made = build(Played, 1, (8, 9), "face_up", "played")
        assert made == played and made.cards == (8, 9) and type(made) is Played
    with pytest.raises(TypeError):
        records.build(dict, 1)
    with pytest.raises(TypeError):
        records.build()


def fake_build(tmp_path: Path, names=("game", "cards")) -> Path:
    for name in names:
        (tmp_path / f"{name}.py").write_text(f"# {name}\n")
        (tmp_path / f"{name}{EXTENSION_SUFFIXES[0]}").write_bytes(b"")
    stamp = {n: hashlib.sha256((tmp_path / f"{n}.py").read_bytes()).hexdigest() for n in names}
    (tmp_path / "_compiled.json").write_text(json.dumps(stamp))
    return tmp_path / "_compiled.json"


def test_a_current_build_is_used(tmp_path, monkeypatch):
    monkeypatch.delenv("ARENA_PURE_ENGINE", raising=False)
    assert check_compiled(fake_build(tmp_path), tmp_path) == (True, "compiled by mypyc")


def test_no_stamp_means_the_sources_run(tmp_path, monkeypatch):
    monkeypatch.delenv("ARENA_PURE_ENGINE", raising=False)
    stamp = fake_build(tmp_path)
    stamp.unlink()
    assert check_compiled(stamp, tmp_path) == (False, "not compiled")


def test_a_source_edited_after_compiling_makes_the_build_stale(tmp_path, monkeypatch):
    monkeypatch.delenv("ARENA_PURE_ENGINE", raising=False)
    stamp = fake_build(tmp_path)
    (tmp_path / "game.py").write_text("# game, edited\n")
    usable, why = check_compiled(stamp, tmp_path)
    assert not usable and why.startswith("stale: game.py")


def test_a_missing_compiled_module_is_not_used(tmp_path, monkeypatch):
    monkeypatch.delenv("ARENA_PURE_ENGINE", raising=False)
    stamp = fake_build(tmp_path)
    (tmp_path / f"cards{EXTENSION_SUFFIXES[0]}").unlink()
    assert check_compiled(stamp, tmp_path) == (False, "cards was not compiled")


def test_the_environment_can_force_the_sources(tmp_path, monkeypatch):
    monkeypatch.setenv("ARENA_PURE_ENGINE", "1")
    assert check_compiled(fake_build(tmp_path), tmp_path)[0] is False


def test_events_built_on_the_hot_path_carry_their_own_kind():
    """The engine builds some events field by field (records.build) and spells out their kind: it must be
    the one their class declares, or bots and logs would be told the wrong kind."""
    seen = set()
    for rules, players in [("classic", 2), ("shithead", 3), ("powers", 4), ("skip8", 5)]:
        for seed in range(3):
            state, _ = start_game(preset(rules), players, seed)
            rng = random.Random(seed)
            while state.result is None:
                state, evs = apply_action(state, rng.choice(legal_actions(state)), check=False)
                for e in evs:
                    assert e.kind == type(e)._field_defaults["kind"], e
                    seen.add(type(e).__name__)
    assert {"Played", "Drew", "Burned", "PickedUp"} <= seen
