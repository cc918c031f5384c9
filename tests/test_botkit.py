"""arena.botkit: typed requests read the protocol's own examples, serve() speaks the protocol,
Game samples states consistent with the real game, and the kit needs no third-party package."""

from __future__ import annotations

import io
import json
import random
import subprocess
import sys
from pathlib import Path

from arena.botkit import Card, Game, Request, serve
from arena.engine import PRESETS, apply_action, legal_actions, start_game
from arena.engine.views import action_json, event_for, seat_view
from arena.referee import protocol
from arena.referee import decision_name

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "protocol" / "examples"


def test_typed_request_reads_the_protocol_example():
    raw = json.loads((EXAMPLES / "request.json").read_text())
    req = Request(raw)
    v = req.view
    assert [c.name for c in v.hand] == raw["view"]["hand"]
    assert v.pile_top == Card(raw["view"]["pile"][-1]).rank or raw["view"]["pile_top"] is None
    assert len(v.players) == len(raw["view"]["players"])
    assert [a.id for a in req.actions] == [a["id"] for a in raw["actions"]]
    assert all(a.kind == "play" and a.zone == "hand" for a in req.plays())
    assert Card("TS").rank == 10 and Card("XR").rank == 15 and Card("AH").rank == 14
    for path in sorted(EXAMPLES.glob("request-*.json")):
        r = Request(json.loads(path.read_text()))
        assert [a.id for a in r.actions] == list(range(len(r.actions)))
        assert all(isinstance(a.kind, str) and a.kind for a in r.actions)


def test_serve_answers_hello_and_requests_and_keeps_prints_off_stdout():
    seen = []

    def choose(req: Request) -> int:
        print("thinking")  # must not reach the protocol stream
        seen.append(req.view.seat)
        return req.actions[-1].id

    raw = json.loads((EXAMPLES / "request.json").read_text())
    lines = [json.dumps({"type": "hello", "protocol": 1}), "not json", json.dumps(raw),
             json.dumps({"type": "shutdown"}), json.dumps(raw)]
    out = io.StringIO()
    serve(choose, "kit", "2.0", typed=True, stdin=io.StringIO("\n".join(lines) + "\n"), stdout=out)
    replies = [json.loads(x) for x in out.getvalue().splitlines()]
    assert replies == [{"type": "hello", "protocol": 1, "name": "kit", "version": "2.0"},
                       {"type": "action", "request": raw["id"], "action": raw["actions"][-1]["id"]}]
    assert seen == [raw["view"]["seat"]]


def test_game_resamples_consistent_states():
    rules = PRESETS["classic"]
    rng = random.Random(3)
    state, events = start_game(rules, 2, 3)
    pending = [event_for(e, 0) for e in events]
    game = Game(protocol.start("g", 0, 2, ["a", "b"], rules.options(), {"move_ms": 1000}, 3))
    checked = 0
    while state.result is None and checked < 30:
        acts = legal_actions(state)
        if state.to_move == 0 and len(acts) > 1:
            req = protocol.request(1, "g", decision_name(state), seat_view(state, 0), pending,
                                   [action_json(a) for a in acts], {"move_ms": 1000, "bank_ms": 0})
            pending = []
            game.see(Request(req))
            if state.phase == "play":
                sample = game.resample(rng)
                assert sample.seats[0].hand == state.seats[0].hand
                assert legal_actions(sample) == acts
                assert game.history.admits(state)
                typed = Request(req).actions
                assert [game.engine_action(a) for a in typed] == list(acts)
                checked += 1
        state, evs = apply_action(state, acts[rng.randrange(len(acts))], check=False)
        pending.extend(event_for(e, 0) for e in evs)
    assert checked > 5


def test_kit_and_starter_need_no_third_party_package():
    """``python -S`` (no site-packages) with only the checkout on the path: the kit imports,
    the Python starter answers hello, and the engine's resampler is importable."""
    code = "import arena.botkit, arena.engine.resample, sys; from arena.botkit import Game; " \
           "assert not [m for m in sys.modules if m.split('.')[0] in ('numpy', 'trio', 'typer', 'rich')]"
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "ARENA_PURE_ENGINE": "1"}  # the sources: no build needed
    subprocess.run([sys.executable, "-S", "-c", code], check=True, env=env, timeout=60)
    out = subprocess.run([sys.executable, "-S", "bot.py"], cwd=ROOT / "examples" / "bots" / "python", env=env,
                         input='{"type":"hello","protocol":1}\n{"type":"shutdown"}\n', capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["name"] == "starter-python"


def test_the_python_starter_seeds_each_game_from_its_start_seed():
    """As protocol/PROTOCOL.md recommends, so arena debug replays an unmodified starter: the same
    start.seed gives the same choices whatever BOT_SEED, and another start.seed others."""
    def choices(start_seed: int, bot_seed: str) -> list[int]:
        lines = ['{"type":"hello","protocol":1}',
                 json.dumps({"type": "start", "game": "g", "seat": 0, "players": 2, "seed": start_seed})]
        lines += [json.dumps({"type": "request", "id": i, "game": "g", "decision": "play", "view": {}, "events": [],
                              "actions": [{"id": j, "kind": "pick_up"} for j in range(10)]}) for i in range(20)]
        lines.append('{"type":"shutdown"}')
        env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "ARENA_PURE_ENGINE": "1", "BOT_SEED": bot_seed}
        out = subprocess.run([sys.executable, "-S", "bot.py"], cwd=ROOT / "examples" / "bots" / "python", env=env,
                             input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        replies = [json.loads(line) for line in out.stdout.splitlines()[1:]]
        return [r if isinstance(r, int) else r["action"] for r in replies]
    first = choices(11, "1")
    assert first == choices(11, "2") and len(set(first)) > 1
    assert first != choices(12, "1")
