"""Replays: re-simulation against the log, rebuilt requests, the terminal and the HTML page.

Games are played by the real referee (:func:`arena.referee.blocking.play_game` with
:class:`arena.referee.blocking.BlockingPlayer`) against in-process bots behind
``tests.fakes.ScriptedConnection``, which keeps every line the referee wrote,
and stored in a temporary :class:`arena.tournament.store.Store`.

* golden check: re-simulating each stored game (every preset, forfeits included)
  reproduces the live states, the logged events and the result;
* tampering (an action index, an action, one event's card, the result, a
  truncated log, the deal's events) is found and reported at its step;
* ``--as SEAT``: the rebuilt requests (and start/end messages) are byte for byte
  the lines the referee sent, time bank included;
* the CLI (``arena replay``, ``--verify``, ``--as``, ``--json``, exports,
  ``arena report``), and the interactive commands with scripted input;
* the HTML replay and report opened in headless Chromium, driven through the
  Chrome DevTools Protocol over a pipe (``--remote-debugging-pipe``: no
  websocket, no driver binary, no network) with real key and mouse events.
"""

from __future__ import annotations

import copy
import io
import json
import os
import random
import re
import select
import shutil
import subprocess
import tempfile
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from arena import strategies
from arena.bots.errors import BotCommandError
from arena.bots.manifest import BotSpec
from arena.cli.main import app
from arena.engine import PRESETS, Rules, preset
from arena.engine.views import to_position
from arena.referee import protocol
from arena.referee import GameRecord, TimeControl
from arena.referee.blocking import BlockingPlayer, play_game
from arena.referee.seat import WALL
from arena.referee.testing import FakeClock
from arena.replay import (
    Replay, ReplayError, conversation_for, load_file, requests_for, simulate,
)
from arena.replay.html import replay_html, report_html
from arena.replay.terminal import navigate, render_frame, run_interactive, run_seat_interactive
from arena.replay.view import replay_data
from arena.tournament.store import Store
from tests.fakes import ScriptedConnection, policy_bot

ROOT = Path(__file__).resolve().parents[1]
CLOCK = TimeControl(move_ms=1000, bank_ms=10_000, handshake_ms=10_000)


# ====================================================================== playing and storing games

@dataclass
class Bot:
    """An in-process bot: a policy, and optionally garbage at its n-th request, thinking time, stderr."""

    policy: Callable[[dict[str, Any]], int]
    garbage_at: int | None = None
    delay: float = 0.0
    fail_start: bool = False
    stderr: Callable[[dict[str, Any]], list[str]] | None = None
    conns: list[ScriptedConnection] = field(default_factory=list)

    def launcher(self, name: str):
        def launch(spec: BotSpec) -> ScriptedConnection:
            if self.fail_start:
                raise BotCommandError("command not found: 'fake'")  # as spawn says it
            count = 0
            base = policy_bot(self.policy, name)

            def respond(line: str) -> list[str] | None:
                nonlocal count
                msg = json.loads(line)
                if msg["type"] == "request":
                    count += 1
                    if self.stderr is not None:
                        conn.stderr.extend(self.stderr(msg))
                    if count == self.garbage_at:
                        return ["this is not JSON {"]
                return base(line)

            conn = ScriptedConnection(respond, delay=self.delay)
            self.conns.append(conn)
            return conn
        return launch

    def sent(self, game_id: str) -> list[str]:
        """The lines the referee wrote to this bot during ``game_id`` (start, requests, end)."""
        out = []
        for c in self.conns:
            for line in c.sent:
                msg = json.loads(line)
                if msg.get("game") == game_id:
                    out.append(line)
        return out


@dataclass
class Played:
    record: GameRecord
    bots: list[Bot]
    live: list[dict[str, Any]]  # to_position of the referee's state after each step that had events

    @property
    def log(self) -> dict[str, Any]:
        return json.loads(json.dumps(self.record.as_json()))  # exactly what the store keeps


def play(rules: Rules, seed: int, bots: list[Bot], *, clock: TimeControl = CLOCK, max_turns: int = 2000,
         game_id: str | None = None, mock_clock: bool = False) -> Played:
    live: list[tuple[Any, dict[str, Any]]] = []

    def on_event(state, event) -> None:
        if not live or live[-1][0] is not state:
            live.append((state, to_position(state)))

    # a fake clock, which the bots think on and the players time on, or the wall clock
    timer: Any = FakeClock() if mock_clock else WALL

    def launcher(b: Bot, name: str):
        inner = b.launcher(name)

        def launch(spec: BotSpec) -> ScriptedConnection:
            conn = inner(spec)
            if mock_clock:
                conn.clock = timer
            return conn
        return launch
    players = [BlockingPlayer(BotSpec(f"bot{i}", "1", ("fake",), ROOT, ROOT), launcher(b, f"bot{i}"), clock,
                              timer=timer) for i, b in enumerate(bots)]
    gid = game_id or f"{rules.name}-{len(bots)}p-{seed}"
    try:
        rec = play_game(players, rules, seed, game_id=gid, clock=clock, max_turns=max_turns, on_event=on_event,
                        timer=timer)
    finally:
        for p in players:
            p.shutdown()
    return Played(rec, bots, [pos for _, pos in live])


def mixed_bots(n: int, seed: int, **first: Any) -> list[Bot]:
    """Seat 0 random (seeded), then heuristic and lowest-first; ``first`` sets options on the last seat."""
    kinds = [strategies.random_policy(random.Random(seed)), strategies.heuristic, strategies.lowest_first]
    bots = [Bot(kinds[i % 3], stderr=lambda m: [f"req {m['id']}: {len(m['actions'])} actions"]) for i in range(n)]
    for k, v in first.items():
        setattr(bots[-1], k, v)
    return bots


def store_games(path: Path, games: list[Played], tid: str = "t") -> Store:
    db = Store(path)
    db.begin_tournament(tid, {"rules": "mixed", "format": "test", "seats": 3}, len(games))
    for i, g in enumerate(games, 1):
        assert db.save_game(tid, i, [f"{b}@1" for b in g.record.players], g.record.as_json())
    return db


def rewrite_log(db: Store, game_id: str, log: dict[str, Any]) -> None:
    db.db.execute("UPDATE game_logs SET log=? WHERE game=?",
                  (zlib.compress(json.dumps(log).encode()), game_id))


PRESET_GAMES = [(name, n, seed) for name in PRESETS for n, seed in ((2, 11), (3, 12))]


@pytest.fixture(scope="module")
def preset_games() -> dict[tuple[str, int], Played]:
    out = {}
    for name, n, seed in PRESET_GAMES:
        out[(name, n)] = play(preset(name), seed, mixed_bots(n, seed))
    return out


@pytest.fixture(scope="module")
def forfeit_game() -> Played:
    """Three seats; seat 2 sends garbage at its 6th request and forfeits; the others play on."""
    return play(preset("classic"), 5, mixed_bots(3, 5, garbage_at=6))


@pytest.fixture(scope="module")
def stored(tmp_path_factory, preset_games, forfeit_game) -> tuple[Path, list[Played]]:
    path = tmp_path_factory.mktemp("store") / "arena.sqlite"
    games = [forfeit_game] + [preset_games[k] for k in sorted(preset_games)]
    store_games(path, games).close()
    return path, games


# ====================================================================== golden: re-simulation equals the log

def check_golden(played: Played, rp: Replay) -> None:
    log = played.log
    assert rp.ok, [str(m) for m in rp.mismatches]
    assert rp.complete and rp.steps == len(log["steps"])
    for fr, step in zip(rp.frames[1:], log["steps"]):
        assert fr.events == step["events"]
        assert fr.step == step
    assert rp.frames[0].events == log["setup_events"]
    assert rp.result == log["result"]
    # The states themselves: every state the referee passed on (after a step with events) is a frame's.
    sim = [to_position(f.state) for f in rp.frames[1:] if f.raw_events]
    assert sim == played.live
    assert to_position(rp.final)["result"]["order"] == log["result"]["order"]


@pytest.mark.parametrize("name,n,seed", PRESET_GAMES)
def test_resimulation_matches_every_preset(preset_games, name: str, n: int, seed: int) -> None:
    played = preset_games[(name, n)]
    check_golden(played, simulate(played.log))


def test_resimulation_of_a_forfeit_matches(forfeit_game: Played) -> None:
    log = forfeit_game.log
    assert [f["reason"] for f in log["faults"]] == ["bad_json"]
    rp = simulate(log)
    check_golden(forfeit_game, rp)
    fault = [f for f in rp.frames if f.step and "fault" in f.step]
    assert len(fault) == 1 and fault[0].events[0] == {"kind": "forfeited", "seat": 2, "reason": "bad_json"}
    assert len(rp.frames) > fault[0].index + 1, "the other seats play on after the forfeit"
    assert rp.final.seats[2].forfeit == "bad_json"


def test_two_seat_forfeit_ends_the_game() -> None:
    played = play(preset("shithead"), 3, mixed_bots(2, 3, garbage_at=4))
    rp = simulate(played.log)
    check_golden(played, rp)
    assert rp.result["reason"] == "forfeit" and rp.result["forfeits"] == {"1": "bad_json"}


def test_start_failure_is_replayed() -> None:
    """A bot that cannot start forfeits before the first step: no step logs it, only ``faults``."""
    played = play(preset("classic"), 8, mixed_bots(3, 8, fail_start=True))
    log = played.log
    assert log["faults"][0]["reason"] == "start_failed" and not any("fault" in s for s in log["steps"])
    rp = simulate(log)
    assert rp.ok, [str(m) for m in rp.mismatches]
    assert rp.start_forfeits and rp.frames[0].state.seats[2].forfeit == "start_failed"
    assert [to_position(f.state) for f in rp.frames[1:] if f.raw_events] == played.live[1:]


def test_timeouts_and_the_bank_replay_exactly() -> None:
    """Bots that overrun move_ms every time: the bank drains, then a timeout forfeit (virtual time)."""
    clock = TimeControl(move_ms=10, bank_ms=120, handshake_ms=1000)
    bots = mixed_bots(3, 4)
    bots[1].delay = 0.013
    played = play(preset("powers"), 4, bots, clock=clock, mock_clock=True)
    log = played.log
    assert log["clock"] == clock.as_json()
    rp = simulate(log)
    check_golden(played, rp)
    banks = [d.request["clock"]["bank_ms"] for d in requests_for(rp, 1)]
    assert banks[0] == 120 and banks[-1] < banks[0], banks
    for seat, bot in enumerate(played.bots):
        sent = [l for l in bot.sent(rp.game_id) if l.startswith('{"type":"request"')]
        assert [d.line for d in requests_for(rp, seat)] == sent


# ====================================================================== tampering is found, at its step

def _first_choice_step(log: dict[str, Any], rp: Replay, after: int = 5) -> tuple[int, int]:
    """(step number, another legal index whose action differs) for a step with a real choice."""
    from arena.engine.views import action_json
    for fr in rp.frames[after:]:
        if fr.step and "action" in fr.step and len(fr.actions) > 1 and fr.before.phase == "play":
            other = next(i for i, a in enumerate(fr.actions) if action_json(a) != fr.step["act"])
            return fr.index, other
    raise AssertionError("no step with a choice")


def test_tampered_action_index_is_reported(forfeit_game: Played) -> None:
    log = forfeit_game.log
    k, other = _first_choice_step(log, simulate(log))
    bad = copy.deepcopy(log)
    bad["steps"][k - 1]["action"] = other
    rp = simulate(bad)
    assert not rp.ok and rp.complete
    assert [(m.step, m.what) for m in rp.mismatches] == [(k, "act")], [str(m) for m in rp.mismatches]
    assert f"step {k}: act" in str(rp.mismatches[0])


def test_action_index_out_of_range_is_reported(forfeit_game: Played) -> None:
    log = forfeit_game.log
    k, _ = _first_choice_step(log, simulate(log))
    bad = copy.deepcopy(log)
    bad["steps"][k - 1]["action"] = 999
    rp = simulate(bad)
    assert [(m.step, m.what) for m in rp.mismatches] == [(k, "action")]
    bad["steps"][k - 1]["act"] = {"kind": "play", "cards": ["ZZ"], "from": "hand"}
    rp = simulate(bad)
    assert not rp.complete and rp.steps == k - 1, "the replay stops where the log cannot be followed"
    assert {m.what for m in rp.mismatches} == {"action", "act"} and all(m.step == k for m in rp.mismatches)


def test_a_different_consistent_action_diverges_and_is_reported(forfeit_game: Played) -> None:
    """Index and act both changed to another legal action: the events of that step no longer match."""
    from arena.engine.views import action_json
    log = forfeit_game.log
    rp0 = simulate(log)
    k, other = _first_choice_step(log, rp0)
    bad = copy.deepcopy(log)
    bad["steps"][k - 1]["action"] = other
    bad["steps"][k - 1]["act"] = action_json(rp0.frames[k].actions[other])
    rp = simulate(bad)
    assert not rp.ok
    assert rp.mismatches[0].step == k and rp.mismatches[0].what.startswith("event")


def test_tampered_event_card_is_reported(forfeit_game: Played) -> None:
    log = forfeit_game.log
    bad = copy.deepcopy(log)
    k = next(i for i, s in enumerate(bad["steps"], 1) if s["events"] and s["events"][0]["kind"] == "played"
             and i > 10)
    ev = bad["steps"][k - 1]["events"][0]
    original = ev["cards"][0]
    ev["cards"][0] = "AS" if original != "AS" else "KS"
    rp = simulate(bad)
    assert rp.complete and len(rp.mismatches) == 1
    m = rp.mismatches[0]
    assert (m.step, m.what) == (k, "event 1")
    assert m.expected["cards"][0] == original and m.stored["cards"][0] == ev["cards"][0]
    assert original in str(m) and f"step {k}" in str(m)


def test_tampered_result_truncation_and_deal_are_reported(forfeit_game: Played) -> None:
    log = forfeit_game.log
    bad = copy.deepcopy(log)
    bad["result"]["order"] = list(reversed(bad["result"]["order"]))
    assert [(m.step, m.what) for m in simulate(bad).mismatches] == [(None, "result")]
    bad = copy.deepcopy(log)
    del bad["steps"][-3:]
    rp = simulate(bad)
    assert ("end" in {m.what for m in rp.mismatches}) and rp.result is None
    bad = copy.deepcopy(log)
    bad["steps"].append(dict(bad["steps"][-1]))
    assert any(m.what == "step" and m.step == len(bad["steps"]) for m in simulate(bad).mismatches)
    bad = copy.deepcopy(log)
    bad["seed"] += 1
    assert not simulate(bad).ok
    bad = copy.deepcopy(log)
    bad["faults"][0]["reason"] = "timeout"
    assert {m.what for m in simulate(bad).mismatches} >= {"fault", "result"}


def test_unusable_logs_raise_replay_errors() -> None:
    with pytest.raises(ReplayError):
        simulate({"steps": []})
    with pytest.raises(ReplayError):
        simulate({"seed": 1, "players": ["a", "b"], "steps": [], "rules": {"setup": "nonsense"}})
    with pytest.raises(ReplayError):
        simulate({"seed": 1, "players": ["a"], "steps": [], "rules": preset("classic").options()})


# ====================================================================== --as SEAT: the requests, byte for byte

@pytest.mark.parametrize("name,n,seed", PRESET_GAMES)
def test_rebuilt_requests_are_the_lines_sent(preset_games, name: str, n: int, seed: int) -> None:
    played = preset_games[(name, n)]
    rp = simulate(played.log)
    for seat, bot in enumerate(played.bots):
        sent = bot.sent(rp.game_id)
        requests = [l for l in sent if l.startswith('{"type":"request"')]
        rebuilt = requests_for(rp, seat)
        assert [d.line for d in rebuilt] == requests
        assert [protocol.encode(m) for m in conversation_for(rp, seat)] == sent  # start .. requests .. end
        for d in rebuilt[:3]:  # equal to what was sent, which test_protocol validates in full
            protocol.validate("request", d.request)


def test_rebuilt_requests_after_a_forfeit(forfeit_game: Played) -> None:
    rp = simulate(forfeit_game.log)
    for seat, bot in enumerate(forfeit_game.bots):
        sent = bot.sent(rp.game_id)
        assert [protocol.encode(m) for m in conversation_for(rp, seat)] == sent
    last = requests_for(rp, 2)[-1]
    assert last.fault == "bad_json" and last.choice is None


def test_forced_steps_send_no_request(forfeit_game: Played) -> None:
    rp = simulate(forfeit_game.log)
    forced = {f.index for f in rp.frames[1:] if f.step.get("forced")}
    asked = {d.step for s in range(3) for d in requests_for(rp, s)}
    assert forced and not forced & asked
    assert len(asked) + len(forced) == rp.steps


def test_logs_without_a_clock_assume_the_default(forfeit_game: Played) -> None:
    log = forfeit_game.log
    del log["clock"]
    rp = simulate(log)
    assert rp.ok and rp.clock_assumed and rp.clock == TimeControl()


# ====================================================================== the command line

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


def test_cli_plain_replay(stored) -> None:
    path, games = stored
    gid = games[0].record.game_id
    r = invoke("replay", gid, "--store", str(path))
    assert r.exit_code == 0, r.output
    out = r.stdout
    last = len(games[0].record.steps)
    assert f"Turn 0/{last}" in out and f"Turn {last}/{last}" in out
    assert "forfeit: bad_json" in out and "burn!" in out and "Pile:" in out and "to beat:" in out
    assert "stderr| req " in out and " ms" in out
    assert "Result:" in out and "MISMATCH" not in out and "warning" not in r.stderr
    r = invoke("replay", gid, "--store", str(path), "--from", "3", "--to", "4")
    assert "Turn 3/" in r.stdout and "Turn 4/" in r.stdout and "Turn 5/" not in r.stdout


def test_cli_verify_and_tampered_store(tmp_path: Path, forfeit_game: Played) -> None:
    path = tmp_path / "a.sqlite"
    db = store_games(path, [forfeit_game])
    gid = forfeit_game.record.game_id
    r = invoke("replay", gid, "--store", str(path), "--verify")
    assert r.exit_code == 0 and "ok" in r.stdout
    log = forfeit_game.log
    k, other = _first_choice_step(log, simulate(log))
    log["steps"][k - 1]["action"] = other
    rewrite_log(db, gid, log)
    r = invoke("replay", gid, "--store", str(path), "--verify")
    assert r.exit_code == 1 and "MISMATCH" in r.stdout and f"step {k}: act" in r.stdout
    r = invoke("replay", gid, "--store", str(path), "--verify", "--json")
    report = json.loads(r.stdout)
    assert r.exit_code == 1 and report["ok"] is False and report["mismatches"][0]["step"] == k
    r = invoke("replay", gid, "--store", str(path), "--to", "2")
    assert r.exit_code == 0 and "MISMATCH" in r.stderr and f"step {k}" in r.stderr  # warned, still shown
    db.close()


def test_cli_as_seat(stored) -> None:
    path, games = stored
    played = games[0]
    gid = played.record.game_id
    r = invoke("replay", gid, "--store", str(path), "--as", "1")
    assert r.exit_code == 0
    rp = simulate(played.log)
    n = len(requests_for(rp, 1))
    assert f"Decision 1/{n} of bot1" in r.stdout and f"Decision {n}/{n}" in r.stdout
    assert "Actions offered:" in r.stdout and "▶ [" in r.stdout and "Events since its last request" in r.stdout
    r = invoke("replay", gid, "--store", str(path), "--as", "2", "--json")
    assert r.stdout.splitlines() == played.bots[2].sent(gid)
    r = invoke("replay", gid, "--store", str(path), "--as", "7")
    assert r.exit_code == 2 and "seats 0..2" in r.stderr


def test_cli_json_export_files_and_errors(stored, tmp_path: Path) -> None:
    path, games = stored
    gid = games[1].record.game_id
    r = invoke("replay", gid, "--store", str(path), "--json")
    data = json.loads(r.stdout)
    assert data["game"] == gid and len(data["frames"]) == len(games[1].record.steps) + 1
    out = tmp_path / "all.jsonl"
    assert invoke("export", str(out), "--tournament", "t", "--logs", "--store", str(path)).exit_code == 0
    r = invoke("replay", f"{out}#{gid}", "--verify")
    assert r.exit_code == 0 and gid in r.stdout
    r = invoke("replay", str(out), "--verify")
    assert r.exit_code == 2 and "holds" in r.stderr
    one = tmp_path / "one.json"
    one.write_text(json.dumps(games[1].log))
    assert invoke("replay", str(one), "--verify").exit_code == 0
    line = tmp_path / "line.jsonl"
    line.write_text(out.read_text().splitlines()[1] + "\n")
    assert load_file(line)["game_id"] == gid
    bare = tmp_path / "bare.jsonl"
    assert invoke("export", str(bare), "--tournament", "t", "--store", str(path)).exit_code == 0
    r = invoke("replay", f"{bare}#{gid}")
    assert r.exit_code == 2 and "--logs" in r.stderr
    r = invoke("replay", "no-such-game", "--store", str(path))
    assert r.exit_code == 2 and "no game 'no-such-game'" in r.stderr
    r = invoke("replay", "x", "--store", str(tmp_path / "missing.sqlite"))
    assert r.exit_code == 2 and "no store" in r.stderr


def test_games_listing_leads_to_replay(stored) -> None:
    path, games = stored
    r = invoke("games", "--store", str(path), "--json")
    rows = json.loads(r.stdout)
    assert {g["id"] for g in rows} == {g.record.game_id for g in games}
    for row in rows[:3]:
        assert invoke("replay", row["id"], "--store", str(path), "--verify").exit_code == 0
    faulted = json.loads(invoke("games", "--store", str(path), "--fault", "bad_json", "--json").stdout)
    assert [g["id"] for g in faulted] == [games[0].record.game_id]
    assert games[0].record.game_id in invoke("games", "--store", str(path)).stdout


def test_cli_html_and_report_files(stored, tmp_path: Path) -> None:
    path, games = stored
    gid = games[0].record.game_id
    page = tmp_path / "g.html"
    r = invoke("replay", gid, "--store", str(path), "--html", str(page))
    assert r.exit_code == 0 and page.exists()
    text = page.read_text()
    assert_self_contained(text)
    report = tmp_path / "r.html"
    r = invoke("report", "t", "--store", str(path), "--html", str(report))
    assert r.exit_code == 0 and "embedded" in r.stdout
    assert_self_contained(report.read_text())
    assert report.read_text().count('type="application/gzip-base64"') == len(games)
    # styled as the server's pages: its stylesheet inlined, its header and main column
    site = (Path(__file__).resolve().parents[1] / "arena" / "serve" / "static" / "site.css").read_text()
    style = report.read_text().split("<style>", 1)[1].split("</style>", 1)[0]
    assert site.strip() in style
    assert '<header class="top">' in report.read_text() and "<main>" in report.read_text()
    split = tmp_path / "s.html"
    r = invoke("report", "t", "--store", str(path), "--html", str(split), "--split")
    assert r.exit_code == 0
    files = sorted((tmp_path / "s-replays").glob("*.html"))
    assert len(files) == len(games)
    assert f'href="s-replays/{gid}.html"' in split.read_text()
    # a report is shared: no bot's stderr lines (each of these bots writes one at every request),
    # nor the message of the forfeit (it quotes what the bot wrote), unless --private
    shared = (tmp_path / "s-replays" / f"{gid}.html").read_text()
    assert "actions" in shared and not re.search(r"req \d+: \d+ actions", shared)
    r = invoke("report", "t", "--store", str(path), "--html", str(split), "--split", "--private")
    assert r.exit_code == 0 and re.search(r"req \d+: \d+ actions", (tmp_path / "s-replays" / f"{gid}.html").read_text())
    r = invoke("report", "nope", "--store", str(path), "--html", str(split))
    assert r.exit_code == 2 and "no tournament" in r.stderr


def assert_self_contained(text: str) -> None:
    assert "<script src" not in text and "<link" not in text and "@import" not in text
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", text)
    assert "url(" not in text
    assert "</script>" in text and text.count("<script") == text.count("</script>")


# ====================================================================== the terminal: commands and rendering

def test_navigation_commands(forfeit_game: Played) -> None:
    data = replay_data(simulate(forfeit_game.log))
    last = len(data["frames"]) - 1
    burns = [k for k, f in enumerate(data["frames"]) if "burn" in f["i"]["flags"]]
    pickups = [k for k, f in enumerate(data["frames"]) if "pickup" in f["i"]["flags"]]
    assert burns and pickups
    assert navigate("n", 0, data) == (1, "") and navigate("", 3, data) == (4, "")
    assert navigate("p", 3, data) == (2, "") and navigate("p", 0, data)[0] == 0
    assert navigate("g 40", 0, data) == (40, "") and navigate("40", 0, data) == (40, "")
    assert navigate("g 99999", 5, data)[0] == 5
    assert navigate("b", 0, data) == (burns[0], "") and navigate("u", 0, data) == (pickups[0], "")
    assert navigate("b", burns[-1], data)[1].startswith("no burn")
    assert navigate("e", 0, data) == (last, "") and navigate("s", 9, data) == (0, "")
    assert navigate("q", 3, data)[0] is None
    assert "unknown command" in navigate("zz", 3, data)[1]


def test_interactive_session_with_scripted_input(forfeit_game: Played) -> None:
    data = replay_data(simulate(forfeit_game.log))
    burn = next(k for k, f in enumerate(data["frames"]) if k > 39 and "burn" in f["i"]["flags"])
    console = Console(file=io.StringIO(), width=140, force_terminal=False, record=True)
    commands = iter(["n", "g 40", "p", "b", "q"])
    run_interactive(console, data, 0, ask=lambda prompt: next(commands))
    out = console.export_text()
    last = len(data["frames"]) - 1
    for k in (0, 1, 40, 39, burn):
        assert f"Turn {k}/{last}" in out
    commands = iter(["n", "g 3"])  # EOF ends the session too
    def ask(prompt: str) -> str:
        try:
            return next(commands)
        except StopIteration:
            raise EOFError from None
    rp = simulate(forfeit_game.log)
    run_seat_interactive(console, data, requests_for(rp, 0), ask=ask)
    assert "Decision 3/" in console.export_text()


def test_render_shows_see_through_top() -> None:
    """With see-through cards on the pile, the card that counts is named (powers: 3s are see-through)."""
    for seed in range(1, 40):
        played = play(preset("powers"), seed, mixed_bots(2, seed))
        data = replay_data(simulate(played.log))
        hits = [k for k, f in enumerate(data["frames"])
                if f["s"]["top"] is not None and f["s"]["top"] < len(f["s"]["pile"]) - 1]
        if hits:
            break
    else:
        pytest.skip("no see-through card landed on a pile in these deals")
    k = hits[0]
    s = data["frames"][k]["s"]
    assert s["pile"][-1][0] == "3"
    console = Console(file=io.StringIO(), width=160, record=True)
    console.print(render_frame(data, k))
    text = console.export_text()
    assert "see-through" in text and f"to beat: {s['beat']}" in text


# ====================================================================== the HTML page in a real browser

def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Chromium:
    """Headless Chromium driven over the DevTools protocol on a pipe (fd 3 in, fd 4 out)."""

    def __init__(self, exe: str, timeout: float = 30.0):
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="replay-test-chromium-")
        to_r, self._w = os.pipe()
        self._r, from_w = os.pipe()
        args = [exe, "--headless=new", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
                "--no-first-run", "--no-default-browser-check", "--disable-extensions", "--disable-sync",
                "--disable-background-networking", "--disable-dev-shm-usage", "--mute-audio",
                f"--user-data-dir={self.profile}", "about:blank"]
        self.proc = subprocess.Popen(["bash", "-c", f'exec "$@" 3<&{to_r} 4>&{from_w}', "chromium", *args],
                                     pass_fds=(to_r, from_w), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_r)
        os.close(from_w)
        self._buf = b""
        self._id = 0
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.call("Page.enable", page=True)
        self.call("Emulation.setDeviceMetricsOverride", page=True, width=1280, height=900,
                  deviceScaleFactor=1, mobile=False)

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._r], [], [], left)[0]:
                raise TimeoutError("chromium did not answer")
            chunk = os.read(self._r, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed its pipe")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method: str, page: bool = False, **params: Any) -> dict[str, Any]:
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params}
        if page:
            msg["sessionId"] = self.session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def js(self, expr: str) -> Any:
        r = self.call("Runtime.evaluate", page=True, expression=expr, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"JavaScript error in {expr!r}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def wait(self, expr: str) -> Any:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            try:
                value = self.js(expr)
            except RuntimeError:
                value = None
            if value:
                return value
            time.sleep(0.05)
        raise TimeoutError(expr)

    def open(self, path: Path) -> None:
        self.call("Page.navigate", page=True, url=path.resolve().as_uri())
        self.wait("document.readyState === 'complete' && !!document.getElementById('turn') || "
                  "document.readyState === 'complete' && !!document.getElementById('report')")

    KEYS = {"ArrowRight": 39, "ArrowLeft": 37, "Home": 36, "End": 35, "b": 66, "u": 85}

    def key(self, key: str) -> None:
        vk = self.KEYS[key]
        base = {"key": key, "code": key if len(key) > 1 else f"Key{key.upper()}",
                "windowsVirtualKeyCode": vk, "nativeVirtualKeyCode": vk}
        down = dict(base, type="keyDown", **({"text": key} if len(key) == 1 else {}))
        self.call("Input.dispatchKeyEvent", page=True, **down)
        self.call("Input.dispatchKeyEvent", page=True, **dict(base, type="keyUp"))

    def click(self, selector: str) -> None:
        x, y = self.js(f"(function () {{ var r = document.querySelector({json.dumps(selector)})"
                       f".getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; }})()")
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", page=True, type=kind, x=x, y=y, button="left", clickCount=1)

    def text(self, selector: str) -> str:
        return self.js(f"document.querySelector({json.dumps(selector)}).textContent")

    def cards(self, selector: str) -> list[str]:
        return self.js(f"Array.from(document.querySelectorAll({json.dumps(selector + ' [data-card]')}))"
                       ".map(function (e) { return e.getAttribute('data-card'); })")

    def turn(self) -> int:
        return int(self.js("document.body.getAttribute('data-turn')"))

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._w)
        os.close(self._r)
        shutil.rmtree(self.profile, ignore_errors=True)


@pytest.fixture(scope="module")
def browser():
    exe = find_chromium()
    if exe is None:
        pytest.skip("chromium is not installed (apt-get install chromium): the HTML replay is not tested in a browser")
    b = Chromium(exe)
    yield b
    b.close()


def _expect_omniscient(b: Chromium, frame: dict[str, Any]) -> None:
    s = frame["s"]
    assert b.cards("#pile") == s["pile"]
    for i, seat in enumerate(s["seats"]):
        assert b.cards(f"#seat-{i}-hand") == seat["hand"]
        assert b.cards(f"#seat-{i}-face-up") == [c for st in seat["up"] for c in st]
        assert b.cards(f"#seat-{i}-face-down") == [c if c else "none" for c in seat["down"]]
    if s["top"] is not None:
        assert b.js("document.querySelector('#pile [data-top]').getAttribute('data-card')") == s["pile"][s["top"]]
    assert b.js("document.getElementById('stock').getAttribute('data-count')") == str(s["stock"])


def test_html_replay_in_chromium(browser: Chromium, forfeit_game: Played, tmp_path: Path) -> None:
    log = forfeit_game.log
    # A hostile stderr line must show as text, not break out of the embedded JSON.
    k_err = next(i for i, s in enumerate(log["steps"]) if s.get("stderr"))
    log["steps"][k_err]["stderr"] = ["</script><script>document.title='pwned'</script>"]
    data = replay_data(simulate(log))
    assert data["verify"]["ok"]  # stderr is shown, not verified: actions, events and results are
    page = tmp_path / "replay.html"
    page.write_text(replay_html(data), encoding="utf-8")
    b = browser
    b.open(page)
    last = len(data["frames"]) - 1
    assert b.text("#turn") == f"Turn 0 / {last}" and b.turn() == 0
    assert b.js("document.getElementById('verify').getAttribute('data-ok')") == "1"
    _expect_omniscient(b, data["frames"][0])
    for _ in range(3):
        b.key("ArrowRight")
    assert b.turn() == 3 and b.text("#turn") == f"Turn 3 / {last}"
    info = data["frames"][3]["i"]
    assert info["text"] in b.text("#action") and b.js("document.getElementById('action').getAttribute('data-seat')") == str(info["seat"])
    _expect_omniscient(b, data["frames"][3])
    b.key("ArrowLeft")
    assert b.turn() == 2
    b.click("#next")
    b.click("#next")
    assert b.turn() == 4
    burn = next(k for k, f in enumerate(data["frames"]) if k > 4 and "burn" in f["i"]["flags"])
    b.key("b")
    assert b.turn() == burn and "burn!" in b.text("#events")
    _expect_omniscient(b, data["frames"][burn])
    pickup = next(k for k, f in enumerate(data["frames"]) if k > burn and "pickup" in f["i"]["flags"])
    b.click("#next-pickup")
    assert b.turn() == pickup and "picks up" in b.text("#events")
    b.key("End")
    assert b.turn() == last and "Result:" in b.text("#result")
    _expect_omniscient(b, data["frames"][last])
    b.key("Home")
    assert b.turn() == 0
    b.js(f"(function () {{ var s = document.getElementById('slider'); s.value = '{k_err + 1}';"
         " s.dispatchEvent(new Event('input')); })()")
    assert b.turn() == k_err + 1
    assert b.text("#stderr") == "stderr| </script><script>document.title='pwned'</script>"
    assert b.js("document.title") == f"Replay {data['game']}"
    fault = next(k for k, f in enumerate(data["frames"]) if f["i"]["kind"] == "fault")
    b.js(f"window.replay.show({fault})")
    assert "forfeit: bad_json" in b.text("#action") and "forfeited" in b.text("#seat-2-status")


def test_html_seat_view_hides_what_the_seat_could_not_see(browser: Chromium, stored, tmp_path: Path) -> None:
    path, games = stored
    forfeit_game = games[0]
    data = replay_data(simulate(forfeit_game.log))
    page = tmp_path / "replay.html"
    r = invoke("replay", forfeit_game.record.game_id, "--store", str(path), "--html", str(page), "--as", "1")
    assert r.exit_code == 0
    b = browser
    b.open(page)
    assert b.js("document.getElementById('view').value") == "1"  # --as opens the page in that seat's view
    b.js("(function () { var s = document.getElementById('view'); s.value = 'all'; s.dispatchEvent(new Event('change')); })()")
    _expect_omniscient(b, data["frames"][0])
    b.js("(function () { var s = document.getElementById('view'); s.value = '1'; s.dispatchEvent(new Event('change')); })()")
    # During setup other seats' face-up choices are hidden; the seat's own are shown.
    b.js("window.replay.show(1)")
    assert b.js("!!document.querySelector('#seat-0-face-up [data-hidden]')")
    # After a pick-up the picker's hand holds cards everyone saw: shown, the rest as backs.
    frames = data["frames"]
    k = next(k for k, f in enumerate(frames) if "pickup" in f["i"]["flags"] and f["i"]["seat"] != 1
             and f["s"]["seats"][f["i"]["seat"]]["known"])
    b.js(f"window.replay.show({k})")
    s = frames[k]["s"]
    picker = frames[k]["i"]["seat"]
    seat = s["seats"][picker]
    shown = b.cards(f"#seat-{picker}-hand")
    assert shown == seat["known"] + ["back"] * (len(seat["hand"]) - len(seat["known"]))
    assert b.cards("#seat-1-hand") == s["seats"][1]["hand"]
    for i in range(3):
        assert set(b.cards(f"#seat-{i}-face-down")) <= {"back", "none"}
    assert b.cards("#pile") == s["pile"]
    # Another seat's drawn cards are not named in the events.
    draws = [k for k, f in enumerate(frames) if any(e[1] is not None and e[1] != 1 and e[0] != e[2]
                                                     for e in f["i"]["events"])]
    k = draws[len(draws) // 2]
    b.js(f"window.replay.show({k})")
    private = [e for e in frames[k]["i"]["events"] if e[1] is not None and e[1] != 1]
    for full, _owner, public in private:
        assert public in b.text("#events") and full not in b.text("#events")
    b.js("(function () { var s = document.getElementById('view'); s.value = 'all'; s.dispatchEvent(new Event('change')); })()")
    _expect_omniscient(b, frames[k])


def test_html_report_in_chromium(browser: Chromium, stored, tmp_path: Path) -> None:
    path, games = stored
    report = tmp_path / "report.html"
    r = invoke("report", "t", "--store", str(path), "--html", str(report))
    assert r.exit_code == 0
    b = browser
    b.open(report)
    assert b.js("document.querySelectorAll('#games tbody tr').length") == len(games)
    assert b.js("document.querySelectorAll('#standings tbody tr').length") == len({b for g in games for b in g.record.players})
    gid = games[2].record.game_id
    b.click(f'a.game-link[data-game="{gid}"]')
    b.wait("!!document.getElementById('turn')")
    assert b.js("location.hash") == f"#game={gid}" and b.js("document.getElementById('report').hidden")
    data = replay_data(simulate(games[2].log))
    last = len(data["frames"]) - 1
    assert b.text("#turn") == f"Turn 0 / {last}"
    b.key("End")
    assert b.turn() == last
    _expect_omniscient(b, data["frames"][last])
    b.click("#back")
    b.wait("!document.getElementById('report').hidden")
    assert not b.js("!!document.getElementById('turn')")


def test_report_marks_mismatching_games(stored) -> None:
    path, games = stored
    log = games[0].log
    log["steps"][5]["events"] = []
    bad = replay_data(simulate(log))
    good = replay_data(simulate(games[1].log))
    rows = [{"id": g.record.game_id, "index": i, "seats": g.record.players, "reason": g.log["result"]["reason"],
             "draw": False, "result": g.log["result"], "turns": len(g.record.steps)}
            for i, g in enumerate(games[:2], 1)]
    text = report_html(None, "t", [], rows, {rows[0]["id"]: bad, rows[1]["id"]: good})
    assert text.count('class="bad"') == 1 and "MISMATCH" in text
