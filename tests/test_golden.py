"""Golden games: recorded seeded games that must replay with identical events and result.

Each file ``tests/golden/<preset>.json`` holds a few games of one preset (two and four
players): the rules as options, the deal seed, and for every step the seat to move, the
action's JSON (as the protocol sends it) and the omniscient events it caused. The test replays each
game from ``new_game``, finds each recorded action by its JSON among ``legal_actions``
and checks the events, the final result and the final position.

A deliberate change to the rules engine that alters play changes these files: check the
first differing step, then record again and commit the new files with the change::

    python -m tests.test_golden --record
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest

from arena.engine import PRESETS, Rules, apply_action, legal_actions, new_game
from arena.engine.views import action_json, event_for, result_json, to_position

GOLDEN = Path(__file__).parent / "golden"
FORMAT = 1
PLAYERS = (2, 4)
SEEDS = (101, 202)


def _choose(state, acts, rng: random.Random) -> int:
    """Mostly the lowest plain play (so games reach their endgames), sometimes anything."""
    if rng.random() < 0.85:
        plays = [(a.cards[0] >> 2 in state.rules.wild, a.cards[0] >> 2, rng.random(), k)
                 for k, a in enumerate(acts) if a.kind == "play"]
        if plays:
            return min(plays)[3]
    return rng.randrange(len(acts))


def record_game(rules: Rules, players: int, seed: int, choices: int) -> dict:
    """Play one seeded game and return its record."""
    state = new_game(rules, players, seed)
    rng = random.Random(choices)
    steps = []
    while not state.over:
        acts = legal_actions(state)
        action = acts[_choose(state, acts, rng)]
        seat = state.to_move
        state, events = apply_action(state, action)
        steps.append({"seat": seat, "action": action_json(action),
                      "events": [event_for(e, None) for e in events]})
    return {"rules": rules.options(), "players": players, "seed": seed, "choices": choices,
            "max_turns": state.max_turns, "steps": steps, "result": result_json(state.result),
            "final": to_position(state)}


def record_all() -> list[Path]:
    GOLDEN.mkdir(exist_ok=True)
    written = []
    for name, rules in PRESETS.items():
        games = [record_game(rules, n, seed, seed * 10 + n) for n in PLAYERS for seed in SEEDS]
        path = GOLDEN / f"{name}.json"
        path.write_text(_dump({"format": FORMAT, "preset": name, "games": games}))
        written.append(path)
    return written


def _dump(data: dict) -> str:
    """JSON with one step per line, so that a change shows as a readable diff."""
    games = []
    for g in data["games"]:
        head = {k: v for k, v in g.items() if k not in ("steps", "final")}
        steps = ",\n".join("    " + json.dumps(s, separators=(",", ":")) for s in g["steps"])
        games.append("  {\n" + ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in head.items())
                     + ',\n  "steps": [\n' + steps + "\n  ],\n"
                     + f'  "final": {json.dumps(g["final"], separators=(",", ":"))}\n  }}')
    return ('{"format": %d, "preset": %s, "games": [\n' % (data["format"], json.dumps(data["preset"]))
            + ",\n".join(games) + "\n]}\n")


def _files() -> list[Path]:
    return sorted(GOLDEN.glob("*.json"))


def replay(game: dict) -> None:
    rules = Rules.from_options(game["rules"])
    state = new_game(rules, game["players"], game["seed"], max_turns=game["max_turns"])
    for i, step in enumerate(game["steps"]):
        assert not state.over, f"step {i}: the game ended early"
        assert state.to_move == step["seat"], f"step {i}: seat {state.to_move} to move, recorded {step['seat']}"
        matches = [a for a in legal_actions(state) if action_json(a) == step["action"]]
        assert len(matches) == 1, f"step {i}: {step['action']} matches {len(matches)} legal actions"
        state, events = apply_action(state, matches[0])
        got = [event_for(e, None) for e in events]
        assert got == step["events"], f"step {i}: events differ"
    assert state.over, "the recorded game ended but the replay goes on"
    assert result_json(state.result) == game["result"]
    assert json.loads(json.dumps(to_position(state))) == game["final"]


def test_golden_files_cover_every_preset_at_two_and_four_players():
    seen = set()
    for path in _files():
        data = json.loads(path.read_text())
        assert data["format"] == FORMAT
        seen |= {(data["preset"], g["players"]) for g in data["games"]}
    assert seen >= {(name, n) for name in PRESETS for n in PLAYERS}


@pytest.mark.parametrize("path", _files(), ids=lambda p: p.stem)
def test_golden_games_replay_identically(path):
    for game in json.loads(path.read_text())["games"]:
        replay(game)


if __name__ == "__main__":  # python -m tests.test_golden --record
    if sys.argv[1:] != ["--record"]:
        sys.exit("usage: python -m tests.test_golden --record")
    for p in record_all():
        print(f"wrote {p} ({p.stat().st_size // 1024} KiB)")
