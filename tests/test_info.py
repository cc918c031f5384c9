"""What a bot was thinking: the optional ``info`` of an ``action`` reply.

The garbage bots come first: a bad ``info`` (huge, nested, the wrong types, not an object,
terminal escapes) is a warning in the record and never a forfeit, and what is kept is small
and of the documented types. Then the display (terminal and HTML replays) and the calibration
figure (Brier score) over stored games.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from arena.engine import preset
from arena.referee import TimeControl
from arena.referee.protocol import MAX_INFO_BYTES, MAX_INFO_TEXT, check_info, read_reply, validate
from arena.referee.testing import MockBot, hello_line

from .fakes import play_mocks

CLOCK = TimeControl(1000, 10_000)


def _bot(info_for) -> MockBot:
    """A bot that plays action 0 and sends ``info_for(request)`` (skipped when it returns ...)."""
    def respond(msg: dict[str, Any]):
        if msg["type"] == "hello":
            return [hello_line("thinker")]
        if msg["type"] == "request":
            reply: dict[str, Any] = {"type": "action", "request": msg["id"], "action": 0}
            info = info_for(msg)
            if info is not ...:
                reply["info"] = info
            return [json.dumps(reply)]
        if msg["type"] == "shutdown":
            from arena.referee.testing import EXIT
            return [EXIT]
        return []
    return MockBot(respond)


def _play(a: MockBot, b: MockBot | None = None):
    return play_mocks([a, b or MockBot()], preset("classic"), 5, clock=CLOCK, names=["a", "b"], game_id="g",
                      max_turns=300)


def _steps(rec, seat: int = 0) -> list[dict[str, Any]]:
    return [s for s in rec.steps if s["seat"] == seat and "request" in s]


GARBAGE = {
    "huge": {"text": "x" * 5000},
    "huge_many_keys": {f"k{i}": i for i in range(500)},
    "nested": {"eval": {"eval": {"eval": [1, [2, [3]]]}}, "text": ["a"]},
    "wrong_types": {"eval": "0.5", "win_prob": 1.5, "nodes": -3, "iterations": 2.5, "text": 7},
    "bools": {"eval": True, "win_prob": False, "nodes": True},
    "not_object": [0.5, 0.5],
    "string": "winning",
    "null": None,
    "number": 0.7,
    "unknown_keys": {"eval": 1.0, "secret_channel": "hi", "__proto__": {}},
    "huge_number": {"eval": 1e300, "nodes": 2**80},
    "lone_surrogates": {"text": "a\ud800b", "\udfff": 1},  # valid JSON escapes, not encodable as UTF-8
}


@pytest.mark.parametrize("case", sorted(GARBAGE))
def test_garbage_info_is_a_warning_never_a_forfeit(case: str):
    rec = _play(_bot(lambda msg: GARBAGE[case]))
    assert rec.faults == [] and "forfeits" in rec.result and rec.result["forfeits"] == {}
    steps = _steps(rec)
    assert steps and all("info_warning" in s for s in steps), steps[0]
    for s in steps:
        assert len(s["info_warning"]) < 400
        kept = s.get("info", {})
        assert len(json.dumps(kept)) <= MAX_INFO_BYTES
        assert set(kept) <= {"eval", "win_prob", "nodes", "iterations", "text"}
        assert all(not isinstance(v, (dict, list, bool)) for v in kept.values())
    if case == "unknown_keys":
        assert steps[0]["info"] == {"eval": 1.0}
        assert "unknown field 'secret_channel'" in steps[0]["info_warning"]


def test_valid_info_is_kept_with_each_decision():
    def info(msg):
        return {"eval": 0.25, "win_prob": 0.6, "nodes": 1200, "iterations": 40, "text": f"req {msg['id']}"}
    rec = _play(_bot(info))
    steps = _steps(rec)
    assert steps and all(s["info"]["text"] == f"req {s['request']}" and "info_warning" not in s for s in steps)
    assert steps[0]["info"] == {"eval": 0.25, "win_prob": 0.6, "nodes": 1200, "iterations": 40,
                                "text": f"req {steps[0]['request']}"}
    assert all("info" not in s for s in _steps(rec, 1))  # the other bot sent none


def test_bare_and_plain_replies_have_no_info():
    rec = _play(_bot(lambda msg: ...))
    assert all("info" not in s and "info_warning" not in s for s in _steps(rec))
    assert read_reply("2", 7, 3) == (2, None)
    assert read_reply('{"type":"action","request":7,"action":2}', 7, 3) == (2, None)


def test_text_is_cut_and_cleaned():
    note = check_info({"text": "\x1b[2J\x1b]0;pwned\x07" + "y" * 300})
    assert "\x1b" not in note["info"]["text"] and "\x07" not in note["info"]["text"]
    assert len(note["info"]["text"]) == MAX_INFO_TEXT
    assert "control characters" in note["info_warning"] and "cut to" in note["info_warning"]


def test_a_bad_action_is_still_a_fault_and_blamed_on_the_action_not_the_info():
    from arena.faults import SchemaViolation, WrongRequest
    with pytest.raises(SchemaViolation, match="at action"):
        read_reply('{"type":"action","request":7,"action":"x","info":{"eval":"bad"}}', 7, 3)
    with pytest.raises(WrongRequest):
        read_reply('{"type":"action","request":6,"action":1,"info":{"eval":1}}', 7, 3)


def test_schema_describes_info():
    ok = {"type": "action", "request": 1, "action": 0,
          "info": {"eval": -1.5, "win_prob": 0.25, "nodes": 10, "iterations": 3, "text": "hi"}}
    validate("action", ok)
    with pytest.raises(jsonschema.ValidationError):
        validate("action", {**ok, "info": {"win_prob": 2}})
    with pytest.raises(jsonschema.ValidationError):
        validate("action", {**ok, "info": {"other": 1}})
    example = json.loads((Path(__file__).resolve().parent.parent / "protocol" / "examples" /
                          "action-info.json").read_text())
    validate("action", example)
    assert "info" in check_info(example["info"]) and "info_warning" not in check_info(example["info"])


# --------------------------------------------------------------------------- shown in replays

def _thinking_game():
    """A game where seat 0 sends a falling win_prob (and once a bad info), seat 1 nothing."""
    asked = []

    def info(msg):
        asked.append(msg["id"])
        if len(asked) == 2:
            return {"win_prob": "high", "text": "\x1b[31mred"}
        return {"win_prob": max(0.0, 0.9 - 0.02 * msg["id"]), "iterations": msg["id"], "text": "plan"}
    return _play(_bot(info))


def test_terminal_replay_shows_info_and_warnings():
    from rich.console import Console
    from arena.replay import simulate
    from arena.replay.terminal import render_decision, render_frame
    from arena.replay.simulate import requests_for
    from arena.replay.view import replay_data
    rec = _thinking_game()
    replay = simulate(rec.as_json())
    assert replay.ok  # what a bot thought is shown, not verified: actions, events and result still match
    data = replay_data(replay)
    console = Console(record=True, width=200)
    for k in range(len(data["frames"])):
        console.print(render_frame(data, k))
    out = console.export_text()
    assert "thinking: win 88% · 1 iterations · \"plan\"" in out
    assert "info warning: win_prob must be a number from 0 to 1, got 'high'" in out
    assert "\x1b[31m" not in out  # the bot's escape sequence never reaches the terminal
    decisions = requests_for(replay, 0)
    assert decisions[0].info == {"win_prob": 0.88, "iterations": 1, "text": "plan"}
    console = Console(record=True, width=200)
    console.print(render_decision(data, decisions[0], 1, len(decisions)))
    assert "thinking: win 88%" in console.export_text()
    assert all(d.info is None for d in requests_for(replay, 1))


def test_a_tampered_stored_info_is_checked_again():
    from arena.replay import simulate
    from arena.replay.view import replay_data
    rec = _thinking_game().as_json()
    step = next(s for s in rec["steps"] if "info" in s)
    step["info"] = {"win_prob": 7, "text": "\x1b]0;pwned\x07" + "z" * 5000, "secret": [1] * 10}
    data = replay_data(simulate(rec))
    shown = [f["i"].get("thought") for f in data["frames"] if f["i"].get("request") == step["request"]]
    assert shown == [None]  # over the size cap: nothing of it is shown


def test_calibration_is_the_brier_score():
    from arena.tournament.calibration import calibration
    won = {"result": {"order": [[0], [1]]}, "steps": [
        {"seat": 0, "info": {"win_prob": 0.8}}, {"seat": 1, "info": {"win_prob": 0.4}},
        {"seat": 0, "info": {"win_prob": 1.0}}, {"seat": 1}]}
    drawn = {"result": {"order": [[0, 1]]}, "steps": [
        {"seat": 0, "info": {"win_prob": 0.5}}, {"seat": 1, "info": {"win_prob": 9}},
        {"seat": 1, "info": "junk"}]}
    c = calibration([(["a", "b"], won), (["b", "a"], drawn)])
    # a: (0.8-1)² + (1-1)² in the first game; in the second a is seat 1 and sent nothing valid
    assert c["a"].decisions == 2 and c["a"].brier == pytest.approx((0.04 + 0.0) / 2)
    # b: (0.4-0)² as seat 1 of the first game, (0.5-0)² as seat 0 of the drawn game
    assert c["b"].decisions == 2 and c["b"].brier == pytest.approx((0.16 + 0.25) / 2)
    assert (c["a"].games, c["a"].wins, c["b"].games, c["b"].wins) == (1, 1, 2, 0)


# --------------------------------------------------------------------------- end to end

def test_bundled_search_bot_sends_info_end_to_end(tmp_path: Path):
    """montecarlo as a real process: its info is stored, shown by arena replay and in the HTML
    replay's data, and scored by arena standings --calibration. The commands run in this process
    (what they print and store is the point); the bots are real processes. At 20 ms a move the bot
    searches 6 ms a decision (30% of it; its ten-second bank covers a slow reply on a loaded
    machine): what it sends does not depend on how long it searched, and the game costs a fifth."""
    from .checks import arena_here

    def arena(*args: str):  # type: ignore[no-untyped-def]
        return arena_here(*args, "--store", str(tmp_path / "s.sqlite"), cwd=tmp_path)
    played = arena("play", "montecarlo", "random", "--seed", "4", "--move-ms", "20", "-q")
    assert played.returncode == 0, played.stdout + played.stderr
    game = played.stdout.split("logged as ")[1].split()[0]
    shown = arena("replay", game)
    assert shown.returncode == 0 and "thinking: win " in shown.stdout and " deals\"" in shown.stdout
    assert "info warning" not in shown.stdout
    page = tmp_path / "g.html"
    assert arena("replay", game, "--html", str(page)).returncode == 0
    assert '"thought":{"eval":' in page.read_text() and 'winChart' in page.read_text()
    standings = arena("standings", "--calibration", "--json")
    rows = {r["bot"]: r for r in json.loads(standings.stdout)}
    assert rows["montecarlo@1.0"]["calibration"]["decisions"] > 0
    assert 0 <= rows["montecarlo@1.0"]["calibration"]["brier"] <= 1
    assert rows["random@1.0"]["calibration"] is None


def test_html_win_probability_line_in_chromium(tmp_path: Path):
    from arena.replay import simulate
    from arena.replay.html import replay_html
    from arena.replay.view import replay_data
    from .test_replay import Chromium, find_chromium
    exe = find_chromium()
    if exe is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    data = replay_data(simulate(_thinking_game().as_json()))
    page = tmp_path / "r.html"
    page.write_text(replay_html(data), encoding="utf-8")
    b = Chromium(exe)
    try:
        b.open(page)
        points = sum(1 for f in data["frames"] if (f["i"].get("thought") or {}).get("win_prob") is not None)
        assert b.js("document.getElementById('winprob-0').getAttribute('data-points')") == str(points)
        assert b.js("document.getElementById('winprob-1')") is None  # seat 1 sent no win_prob
        k = next(i for i, f in enumerate(data["frames"]) if f["i"].get("thought"))
        for _ in range(k):
            b.key("ArrowRight")
        assert b.text("#thought").startswith("thinking: win ")
        b.js("var s = document.getElementById('view'); s.value = '1'; s.dispatchEvent(new Event('change')); 0")
        assert b.text("#thought") == ""  # seat 1's view: seat 0's thoughts were not its to see
        assert b.js("document.getElementById('winprob-0').style.display") == "none"
    finally:
        b.close()


def test_arena_check_reports_info_warnings(tmp_path: Path):
    """arena check counts the info a bot sent and names the first problem; the bot still passes."""
    import shutil
    import tempfile

    from .checks import arena_here
    root = Path(tempfile.mkdtemp(prefix="info-check-"))
    try:
        root.chmod(0o755)
        bot = root / "bot"
        bot.mkdir()
        (bot / "bot.py").write_text(
            "import json, sys\n"
            "for line in sys.stdin:\n"
            "    m = json.loads(line)\n"
            "    if m['type'] == 'hello':\n"
            "        print(json.dumps({'type': 'hello', 'protocol': 1, 'name': 'b', 'version': '1'}), flush=True)\n"
            "    elif m['type'] == 'request':\n"
            "        print(json.dumps({'type': 'action', 'request': m['id'], 'action': 0,\n"
            "                          'info': {'win_prob': 2, 'nodes': 5}}), flush=True)\n")
        (bot / "bot.toml").write_text('name = "b"\nversion = "1"\ncommand = ["python3", "bot.py"]\n')
        for p in (bot, *bot.iterdir()):
            p.chmod(0o755)
        done = arena_here("check", str(bot), "--rules", "classic", "--games", "1", "--json", cwd=root)
        assert done.returncode == 0, done.stdout + done.stderr  # a bad info is never a fault
        info = json.loads(done.stdout)["info"]
        assert info["sent"] > 0 and info["warnings"] == info["sent"]
        assert "win_prob must be a number from 0 to 1, got 2" in info["first_warning"]
    finally:
        shutil.rmtree(root, ignore_errors=True)
