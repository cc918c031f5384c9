"""The living ladder: matchmaking, `arena ladder run` (batches, snapshots, retire, new members,
suspension), the store as the whole ladder (copied elsewhere and resumed), the view and history.

Bots run in-process (tests/fakes.py) except the kill -9 test, which runs `arena ladder run` with
the real bundled bots as a subprocess and kills it mid-run.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import trio
from typer.testing import CliRunner

from arena.bots.manifest import load_bot
from arena.cli.main import app
from arena.ladder import (Candidate, LadderState, RunSummary, bot_statuses, choose_table, ladder_standings,
                          load_ladder, members, open_store, rating_history, retire, run_ladder, submit, trends)
from arena.ladder.tables import MemberStatus, _add_member, clear_status

from .checks import store_count
from .fakes import POLICIES, ScriptedConnection, policy_bot, policy_launcher
from .test_ladder import bot_copy, ctx, write_ladder

REPO = Path(__file__).resolve().parent.parent
runner = CliRunner()


# --------------------------------------------------------------------------- matchmaking (pure)

def _cands(**elos):
    return [Candidate(label, games=100, elo=e, lo=e - w, hi=e + w) for label, (e, w) in elos.items()]


def test_new_bots_first_then_widest_interval_with_near_opponents():
    bots = _cands(a=(1500, 50), b=(1600, 80), c=(1400, 40), d=(1900, 30), e=(1450, 45))
    t = choose_table(bots, {}, seats=2, field_size=2, new_games=40, explore=False)
    assert (t.focus, t.why) == ("b", "widest interval") and t.field == ("a", "e")  # nearest ratings to 1600
    newcomer = Candidate("n", games=3)
    t = choose_table(bots + [newcomer], {}, seats=2, field_size=3, new_games=40, explore=False)
    assert (t.focus, t.why) == ("n", "new") and len(t.field) == 3
    t = choose_table(bots, {}, seats=2, field_size=2, new_games=40, explore=False, previous="b")
    assert t.focus == "a"  # not the same focus twice in a row
    t = choose_table(bots, {}, seats=4, field_size=1, new_games=40, explore=False)
    assert len(t.field) == 3  # a four-seat table needs three opponents whatever field_size says
    assert choose_table(bots[:1], {}, seats=2, field_size=2, new_games=0, explore=False) is None


def test_every_pairing_is_played_by_exploration():
    """Bots far apart in rating never meet by nearness; exploration batches still reach every pair."""
    bots = _cands(**{f"b{i}": (1000 + 300 * i, 20) for i in range(6)})
    played: dict[tuple[str, str], int] = {}
    for batch in range(60):
        t = choose_table(bots, played, seats=2, field_size=1, new_games=0, explore=batch % 4 == 3)
        for o in t.field:
            key = tuple(sorted((t.focus, o)))
            played[key] = played.get(key, 0) + 1
    assert set(played) == set(itertools.combinations(sorted(b.label for b in bots), 2))


# --------------------------------------------------------------------------- the run

@pytest.fixture
def lad4(tmp_path: Path):
    path = write_ladder(tmp_path, "run4", bots=["random", "lowest", "highest", "heuristic"],
                        store=str(tmp_path / "s.sqlite"))
    ladder = load_ladder(path)
    ladder.matchmaking.snapshot_every = 20
    store = open_store(ladder)
    yield ladder, store
    store.close()


def test_run_plays_duplicate_batches_and_keeps_history(lad4):
    ladder, store = lad4
    seen = []
    summary = trio.run(lambda: run_ladder(ladder, store, ctx(), games=40,
                                          on_batch=lambda s, t, n: seen.append((n, t))))
    assert summary.games >= 40 and summary.stopped == "games" and summary.batches == len(seen)
    assert 0 < summary.overhead_s < summary.wall_s and 0 < summary.overhead_share < 1
    for number, table in seen:
        t = store.tournament(ladder.run_id(number))
        assert t["status"] == "done" and t["played"] == t["planned"]
        games = store.games(tournament=ladder.run_id(number), limit=100)
        by_seed: dict[int, list] = {}
        for g in games:
            by_seed.setdefault(g["seed"], []).append(tuple(g["seats"]))
            assert table.focus in g["seats"]
        for seatings in by_seed.values():  # each deal in both seat orders
            assert len(seatings) == 2 and seatings[0] == seatings[1][::-1]
    # snapshots: the shared schema, one row per bot, every 20 games and at the end
    cols = [r[1] for r in store.db.execute("PRAGMA table_info(rating_snapshots)")]
    assert cols == ["ladder", "taken_at", "games", "bot", "elo", "lo", "hi"]
    hist = rating_history(store, ladder.name)
    assert summary.snapshots >= 2 and len(hist) == 4 * summary.snapshots
    assert all(h["lo"] <= h["elo"] <= h["hi"] for h in hist)
    assert [h["games"] for h in rating_history(store, ladder.name, "random")] == sorted(
        h["games"] for h in rating_history(store, ladder.name, "random@1.0"))
    # the last snapshot is the table of all games
    st = ladder_standings(ladder, store)
    last = {h["bot"]: h for h in hist if h["games"] == st.games}
    assert {r.label: round(r.elo, 1) for r in st.rows} == {b: h["elo"] for b, h in last.items()}


def test_retire_and_new_members_take_effect_while_running(lad4, tmp_path: Path):
    ladder, store = lad4
    log = []

    def on_batch(s: RunSummary, table, number: int) -> None:
        log.append((number, table))
        if number == 1:  # what `arena ladder retire` in another terminal does
            retire(store, ladder, "highest@1.0")
        if number == 2:  # a submission's registration, seen at the next batch
            _add_member(store, ladder, load_bot(bot_copy(tmp_path, "lowest", "9.0")), "submitted", "test")

    # batch 5 is the last the test reads: the seeding's 12 games and batches of at most 12 (a focus
    # and its three others, both seat orders, 2 deals), 8 while highest is gone and the new one not
    # yet in, end it at 80 games; a smaller batch only adds batches (it played 10 with 120)
    trio.run(lambda: run_ladder(ladder, store, ctx(), games=80, on_batch=on_batch))
    assert len(log) >= 6
    after = [t for n, t in log if n >= 2]
    assert all("highest@1.0" not in (t.focus, *t.field) for t in after)
    assert log[3][1].focus == "lowest@9.0"  # the batch after it joined (an exploration batch: it met nobody)
    assert log[4][1].focus != "lowest@9.0" and (log[5][1].focus, log[5][1].why) == ("lowest@9.0", "new")
    assert bot_statuses(store, ladder.name)["highest@1.0"].status is MemberStatus.RETIRED
    snaps = {h["games"] for h in rating_history(store, ladder.name)}
    assert len(snaps) >= 2  # one when lowest@9.0 joined
    with pytest.raises(Exception, match="not a member"):
        retire(store, ladder, "nobody@1.0")
    assert "already retired" in retire(store, ladder, "highest@1.0")


def crashy_launcher():
    """Bundled policies in-process, except bots named 'crashy...': they exit on their first
    request, after a traceback on stderr."""
    inner = policy_launcher()

    def launch(spec):
        if spec.name.startswith("crashy"):
            def respond(line):
                if json.loads(line)["type"] == "request":
                    return None
                return policy_bot(POLICIES["random"](), spec.name)(line)
            conn = ScriptedConnection(respond)
            conn.stderr = ["Traceback (most recent call last):", "ZeroDivisionError: division by zero"]
            return conn
        return inner(spec)
    return launch


def test_a_bot_that_keeps_crashing_is_suspended_with_its_stderr(lad4, tmp_path: Path):
    ladder, store = lad4
    crashy = bot_copy(tmp_path, "random", "1.0", "crashy")
    toml = crashy / "bot.toml"
    toml.write_text(toml.read_text().replace('name = "random"', 'name = "crashy"'))
    trio.run(lambda: run_ladder(ladder, store, ctx(), games=1))
    _add_member(store, ladder, load_bot(crashy), "submitted", "test")
    said: list[str] = []
    c = ctx(said)
    c.launcher = crashy_launcher()
    log = []
    summary = trio.run(lambda: run_ladder(ladder, store, c, games=40, on_batch=lambda s, t, n: log.append(t)))
    assert summary.suspended == ["crashy@1.0"]
    status = bot_statuses(store, ladder.name)["crashy@1.0"]
    # counted between batches: at least suspend_after (3) faulted games in a row, all of one batch here
    assert status.status is MemberStatus.SUSPENDED and " faulted games in a row (crash " in status.reason
    assert int(status.reason.split()[0]) >= 3 and "suspend_after = 3," in status.reason  # both numbers
    assert "ZeroDivisionError: division by zero" in status.detail["stderr"]
    assert any("suspended crashy@1.0" in s and "suspend_after = 3" in s and "ZeroDivisionError" in s for s in said)
    first_after = next(i for i, t in enumerate(log) if "crashy@1.0" in (t.focus, *t.field)) + 1
    assert all("crashy@1.0" not in (t.focus, *t.field) for t in log[first_after:])
    st = ladder_standings(ladder, store)
    assert st.suspensions["crashy@1.0"]["stderr"][-1] == "ZeroDivisionError: division by zero"
    assert next(r for r in st.rows if r.label == "crashy@1.0").status is MemberStatus.SUSPENDED
    # reinstated (fixed, say): the faults it was suspended for do not suspend it again before it
    # plays; new ones do
    assert clear_status(store, ladder.name, "crashy@1.0")
    fixed = ctx()
    inner = policy_launcher()

    def launch_fixed(spec):
        if spec.name == "crashy":
            return ScriptedConnection(policy_bot(POLICIES["random"](), spec.name))
        return inner(spec)
    fixed.launcher = launch_fixed
    assert trio.run(lambda: run_ladder(ladder, store, fixed, games=1)).suspended == []
    assert "crashy@1.0" not in bot_statuses(store, ladder.name)
    c = ctx()
    c.launcher = crashy_launcher()
    assert trio.run(lambda: run_ladder(ladder, store, c, games=12)).suspended == ["crashy@1.0"]


def test_state_reads_only_new_games_and_fits_counts(lad4):
    ladder, store = lad4
    trio.run(lambda: run_ladder(ladder, store, ctx(), games=12))
    state = LadderState(ladder)
    n = state.refresh(store)
    assert n == state.games == ladder_standings(ladder, store).games and state.refresh(store) == 0
    fitted = state.ratings()
    table = {r.label: r.elo for r in ladder_standings(ladder, store).rows}
    assert {k: v.elo for k, v in fitted.items()} == pytest.approx(table)


def test_trends():
    snaps = [{"bot": "a", "elo": e} for e in (1500, 1510, 1530, 1540)] + [{"bot": "b", "elo": e} for e in (1500, 1480)]
    snaps += [{"bot": "c", "elo": 1500}, {"bot": "d", "elo": 1500}, {"bot": "d", "elo": 1503}]
    assert trends(snaps) == {"a": "↑", "b": "↓", "d": "→"}


# --------------------------------------------------------------------------- one file plus the store

def test_a_copied_store_is_the_whole_ladder_and_resumes(open_tmp: Path):
    """Run a ladder with a submitted bot, copy only the store directory elsewhere, remove the
    original (ladder file, bot sources and store), and resume there by name."""
    origin = open_tmp / "origin"
    origin.mkdir()
    path = write_ladder(origin, "travel", bots=["random", "lowest"], store=str(origin / "data" / "s.sqlite"))
    ladder = load_ladder(path)
    store = open_store(ladder)
    trio.run(submit, ladder, str(bot_copy(origin, "heuristic", "3.0")), store, ctx())
    assert {h["bot"] for h in rating_history(store, "travel")} == {"random@1.0", "lowest@1.0", "heuristic@3.0"}
    trio.run(lambda: run_ladder(ladder, store, ctx(), games=10))
    # leave an unfinished batch, as a kill -9 would: the last batch lost its last game
    last = max(r[0] for r in store.db.execute("SELECT id FROM tournaments WHERE id LIKE 'ladder:travel:run:%'"))
    gid = store.db.execute("SELECT id FROM games WHERE tournament=? ORDER BY idx DESC LIMIT 1", (last,)).fetchone()[0]
    with store.tx() as db:
        for table in ("game_logs", "game_seats"):
            db.execute(f"DELETE FROM {table} WHERE game=?", (gid,))
        db.execute("DELETE FROM games WHERE id=?", (gid,))
        db.execute("UPDATE tournaments SET status='running' WHERE id=?", (last,))
    before = ladder_standings(ladder, store).games
    store.close()
    assert (origin / "data" / "ladders" / "travel.toml").is_file()
    moved = open_tmp / "elsewhere"
    shutil.copytree(origin / "data", moved)
    shutil.rmtree(origin)

    empty = open_tmp / "no-ladders"
    empty.mkdir()
    again = load_ladder("travel", empty, store_dir=moved)
    assert again.path == (moved / "ladders" / "travel.toml").resolve()
    store = open_store(again, moved / "s.sqlite")
    refs = {m.label: m.ref for m in members(store, "travel")}
    assert set(refs) == {"random@1.0", "lowest@1.0", "heuristic@3.0"}
    assert all(Path(r).is_relative_to(moved) for r in refs.values())
    said: list[str] = []
    summary = trio.run(lambda: run_ladder(again, store, ctx(said), games=6))
    assert any("finishing batch" in s for s in said)
    assert store.tournament(last)["status"] == "done" and store.tournament(last)["played"] == \
        store.tournament(last)["planned"]
    assert ladder_standings(again, store).games == before + summary.games >= before + 7
    store.close()


# --------------------------------------------------------------------------- command line

def _in_process(monkeypatch):
    import arena.tournament.check
    import arena.bots.launch
    import arena.tournament.run
    monkeypatch.setattr(arena.tournament.run, "Launcher", lambda *a, **k: policy_launcher())
    monkeypatch.setattr(arena.bots.launch, "Launcher", lambda *a, **k: policy_launcher())
    monkeypatch.setattr(arena.tournament.check, "run_check", lambda spec, games, move_ms: ctx().checker(spec))


def test_a_paused_ladder_plays_no_batch_until_resumed(lad4, monkeypatch):
    """What an admin's pause does to a running `arena ladder run`: it waits, plays nothing, says why
    once, and plays on once resumed (the wait is counted, not timed)."""
    import arena.ladder.run as run_module
    from arena.ladder import pause, resume
    ladder, store = lad4
    trio.run(lambda: run_ladder(ladder, store, ctx(), games=1))  # seeded, and a batch or more played
    before = len(store.db.execute("SELECT id FROM tournaments").fetchall())
    pause(store, ladder.name, "exam week")
    waits: list[int] = []

    async def wait() -> None:
        assert len(store.db.execute("SELECT id FROM tournaments").fetchall()) == before  # no batch while paused
        waits.append(len(waits))
        if len(waits) == 3:
            assert resume(store, ladder.name)
        await trio.sleep(0)

    monkeypatch.setattr(run_module, "_wait_paused", wait)
    said: list[str] = []
    summary = trio.run(lambda: run_ladder(ladder, store, ctx(said), games=4))
    assert len(waits) == 3 and summary.stopped == "games" and summary.batches >= 1
    assert [line for line in said if "paused" in line] == [
        f"ladder {ladder.name} is paused (exam week): waiting until it is resumed"]
    assert f"ladder {ladder.name} resumed" in said
    audit = store.db.execute("SELECT action, target, origin FROM audit ORDER BY id").fetchall()
    assert audit == [("pause", f"ladder:{ladder.name}", "terminal"), ("resume", f"ladder:{ladder.name}", "terminal")]


def test_cli_run_view_history_retire(tmp_path: Path, monkeypatch):
    _in_process(monkeypatch)
    # one game at a time, so the seeding the first view does plays in this process, on the fakes
    path = write_ladder(tmp_path, "cli-run", bots=["random", "lowest", "highest"], concurrency=1)
    store = str(tmp_path / "s.sqlite")
    first = runner.invoke(app, ["ladder", str(path), "--store", store])
    assert first.exit_code == 0, first.output
    assert "first view of this ladder" in first.output
    result = runner.invoke(app, ["ladder", "run", str(path), "--store", store, "--games", "12", "-j", "1", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["games"] >= 12 and data["stopped"] == "games" and 0 < data["overhead_share"] < 1
    assert "running ladder cli-run" in result.stderr
    shown = runner.invoke(app, ["ladder", str(path), "--store", store])
    assert shown.exit_code == 0, shown.output
    assert f"{data['games']} game(s) since the last view" in shown.output
    assert "trend" in shown.output and "last hour" in shown.output
    as_json = json.loads(runner.invoke(app, ["ladder", str(path), "--store", store, "--json"]).stdout)
    assert as_json["since_last_view"] == 0 and as_json["history"]
    assert {r["games_last_hour"] for r in as_json["standings"]} != {0}
    assert all(r["win_rate_low"] <= r["win_rate"] <= r["win_rate_high"] for r in as_json["standings"])
    again = runner.invoke(app, ["ladder", "run", str(path), "--store", store, "--games", "2", "-j", "1"],
                          env={"COLUMNS": "250"})
    assert again.exit_code == 0, again.output
    # the table a run ends with has the last hour and the trend, as `arena ladder NAME` a moment later
    cells = re.findall(r"│\s*(\S+)\s*│\s*(\d+)\s*│\s*active\s*│", again.stdout)
    assert len(cells) == 3 and all(int(n) > 0 for _, n in cells), again.stdout
    assert any(trend != "-" for trend, _ in cells), again.stdout
    hist = runner.invoke(app, ["ladder", str(path), "--store", store, "--history", "lowest"])
    assert hist.exit_code == 0 and "Rating history of lowest" in hist.output and "●" in hist.output
    out = runner.invoke(app, ["ladder", "retire", str(path), "lowest@1.0", "--store", store])
    assert out.exit_code == 0 and "retired lowest@1.0" in out.output
    bad = runner.invoke(app, ["ladder", "retire", str(path), "lowest", "--store", store])
    assert bad.exit_code == 2 and "did you mean lowest@1.0" in bad.output
    shown = runner.invoke(app, ["ladder", str(path), "--store", store, "--json"])
    assert next(r for r in json.loads(shown.stdout)["standings"] if r["bot"] == "lowest@1.0")["status"] == "retired"
    out = runner.invoke(app, ["ladder", "reinstate", str(path), "lowest@1.0", "--store", store])
    assert out.exit_code == 0 and "reinstated" in out.output
    out = runner.invoke(app, ["ladder", "suspend", str(path), "lowest@1.0", "--reason", "cheating", "--store", store])
    assert out.exit_code == 0 and "suspended lowest@1.0" in out.output
    shown = runner.invoke(app, ["ladder", str(path), "--store", store, "--json"])
    assert next(r for r in json.loads(shown.stdout)["standings"] if r["bot"] == "lowest@1.0")["status"] == "suspended"
    assert runner.invoke(app, ["ladder", "reinstate", str(path), "lowest@1.0", "--store", store]).exit_code == 0
    out = runner.invoke(app, ["ladder", "pause", str(path), "--reason", "exam week", "--store", store])
    assert out.exit_code == 0 and "paused cli-run: exam week" in out.output
    out = runner.invoke(app, ["ladder", "resume", str(path), "--store", store])
    assert out.exit_code == 0 and "resumed cli-run" in out.output
    out = runner.invoke(app, ["ladder", "resume", str(path), "--store", store])
    assert out.exit_code == 0 and "was not paused" in out.output
    import sqlite3
    db = sqlite3.connect(store)
    actions = [r[0] for r in db.execute("SELECT action FROM audit WHERE origin='terminal' ORDER BY id")]
    db.close()
    assert actions == ["retire", "reinstate", "suspend", "reinstate", "pause", "resume"]
    listed = runner.invoke(app, ["ladder", "--json"])
    assert listed.exit_code == 0 and any(r["name"] == "classic-2p" for r in json.loads(listed.stdout))


def _arena(*args: str, cwd: Path, **kw) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-c", "from arena.cli.main import app; app()", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True, **kw)


def test_kill_9_during_ladder_run_loses_no_stored_game_and_resumes(open_tmp: Path):
    """The real thing: `arena ladder run` with the bundled bots as processes, killed with SIGKILL
    once it has stored its first batch game (mid-batch, as a rule); every stored game is whole, and a second run finishes the
    interrupted batch before choosing new tables. One game at a time, in the run's own process: a
    tournament killed with its referee worker processes is tests/test_resume.py's."""
    path = write_ladder(open_tmp, "kill", bots=["random", "lowest"], max_turns=400, concurrency=1)
    store = open_tmp / "s.sqlite"
    proc = _arena("ladder", "run", str(path), "--store", str(store), "--plain", cwd=open_tmp)
    runs = "SELECT COUNT(*) FROM games WHERE tournament LIKE 'ladder:kill:run:%'"
    deadline = time.monotonic() + 300
    try:
        while store_count(store, runs) < 1:  # the first batch game: the kill comes mid-batch
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the run stored no batch games in 300 s"
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
    db = sqlite3.connect(store)
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    cut = db.execute("SELECT COUNT(*) FROM tournaments WHERE id LIKE 'ladder:kill:run:%' AND status!='done'").fetchone()[0]
    from arena.serve import data, views
    read = data.open_read(store)  # the web overview: the killed run's batch is not "playing" for good
    (tile,) = views.home(read).ladders
    read.db.close()
    assert (tile.playing, tile.stopped) == (0, cut)
    stored = {r[0] for r in db.execute("SELECT id FROM games WHERE tournament LIKE 'ladder:kill:%'")}
    # every stored game is whole: its seats and its log went in with it
    assert {r[0] for r in db.execute("SELECT DISTINCT game FROM game_seats")} >= stored
    assert {r[0] for r in db.execute("SELECT game FROM game_logs")} >= stored
    db.close()

    # the resumed run is about what the store holds, not the process: it runs in this one, its
    # games one at a time (no worker processes; the bots are still processes)
    with contextlib.chdir(open_tmp):
        again = runner.invoke(app, ["ladder", "run", str(path), "--store", str(store), "--plain", "--games", "4",
                                    "-j", "1"])
    out = again.stdout
    assert again.exit_code == 0, again.output
    db = sqlite3.connect(store)
    after = {r[0] for r in db.execute("SELECT id FROM games WHERE tournament LIKE 'ladder:kill:%'")}
    assert stored <= after  # nothing lost
    unfinished = db.execute("SELECT COUNT(*) FROM tournaments WHERE id LIKE 'ladder:kill:%' AND status!='done'")
    assert unfinished.fetchone()[0] == 0
    for tid, planned in db.execute("SELECT id, planned FROM tournaments WHERE id LIKE 'ladder:kill:run:%'"):
        assert db.execute("SELECT COUNT(*) FROM games WHERE tournament=?", (tid,)).fetchone()[0] == planned
    db.close()
    assert "ladder overhead" in out
    if cut:  # killed mid-batch (the usual case): that batch was finished before any new table
        assert "finishing batch" in out


def test_ctrl_c_stops_a_run_with_one_line_and_exit_130(open_tmp: Path):
    path = write_ladder(open_tmp, "intr", bots=["random", "lowest"], max_turns=400, concurrency=1)
    store = open_tmp / "s.sqlite"
    proc = _arena("ladder", "run", str(path), "--store", str(store), "--plain", cwd=open_tmp)
    deadline = time.monotonic() + 300
    try:
        while store_count(store, "SELECT COUNT(*) FROM games WHERE tournament LIKE 'ladder:intr:run:%'") < 1:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the run stored no batch game in 300 s"
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 130, out + err
    assert "Traceback" not in out + err and "ExceptionGroup" not in out + err
    said = out + err
    assert "interrupted: " in said and "continues where it stopped" in said and "error:" not in said
    # the summary once ("ladder overhead" is also in a --plain batch line, printed when a batch
    # ended before the signal, so the summary is counted by its own words)
    assert said.count("batch(es) this run") == 1
    played = store_count(store, "SELECT COUNT(DISTINCT tournament) FROM games WHERE tournament LIKE 'ladder:intr:run:%'")
    assert f" {played} batch(es) this run" in said, said[-800:]
    # the batch left unfinished is marked so in the store (readers see the change; the next run finishes it)
    assert store_count(store, "SELECT COUNT(*) FROM tournaments WHERE id LIKE 'ladder:intr:run:%' AND status='running'") == 0


def test_a_hopeless_bot_does_not_take_every_batch():
    """highest loses every game: its interval stays wide, but a game teaches little about it."""
    bots = _cands(heuristic=(1970, 130), lowest=(1920, 130), random=(1450, 130), highest=(650, 340))
    t = choose_table(bots, {}, seats=2, field_size=3, new_games=0, explore=False)
    assert t.focus in ("heuristic", "lowest") and t.why == "widest interval"
    # among equals, the widest interval still goes first
    even = _cands(a=(1500, 100), b=(1510, 150), c=(1490, 120))
    assert choose_table(even, {}, seats=2, field_size=2, new_games=0, explore=False).focus == "b"


def test_matchmaking_refits_after_the_games_grew_enough(lad4, monkeypatch):
    import arena.ladder.history as history
    ladder, store = lad4
    trio.run(lambda: run_ladder(ladder, store, ctx(), games=12))
    state = LadderState(ladder)
    state.refresh(store)
    first = state.ratings()
    trio.run(lambda: run_ladder(ladder, store, ctx(), games=12))
    assert state.refresh(store) > 0
    monkeypatch.setattr(history, "REFIT_SHARE", 10.0)  # refit only after the games grew tenfold
    assert state.ratings() is first
    assert state.ratings(fresh=True) is not first  # a snapshot always fits every game
    monkeypatch.setattr(history, "REFIT_SHARE", 0.01)
    trio.run(lambda: run_ladder(ladder, store, ctx(), games=12))
    state.refresh(store)
    assert state.ratings() is not first


# --------------------------------------------------------------------------- a ladder on a deal suite

def test_a_ladder_plays_its_suite_goes_round_it_and_resumes_only_with_it(open_tmp: Path):
    """`suite = ...` in a ladder file: the seed round-robin and each placement play the suite's first
    `deals` deals, run batches go round the suite from where the last one stopped, every game
    deals from the suite, the resume key names the suite's content, the store keeps a private copy,
    and a suite changed under an unfinished batch is refused instead of mixing deals."""
    import stat
    from arena.engine import rules_from
    from arena.ladder import LadderError
    from arena.tournament.suites import load_suite, make_suite, save_suite
    origin = open_tmp / "suited"
    origin.mkdir()
    suite = make_suite(rules_from("classic", {}), 2, 5)
    save_suite(origin / "suite.json", suite)
    path = write_ladder(origin, "suited", bots=["random", "lowest"], deals=2, suite="suite.json",
                        store=str(origin / "data" / "s.sqlite"))
    ladder = load_ladder(path)
    store = open_store(ladder)
    trio.run(submit, ladder, str(bot_copy(origin, "heuristic", "3.0")), store, ctx())
    first_two = set(suite.deals[:2])
    for tid in (ladder.seed_id, ladder.placement_id("heuristic@3.0")):
        assert {g["seed"] for g in store.games(tournament=tid, limit=100)} == first_two
        assert store.tournament(tid)["config"]["suite"] == suite.digest()
    trio.run(lambda: run_ladder(ladder, store, ctx(), games=30))
    batches = [row[0] for row in store.db.execute("SELECT id FROM tournaments WHERE id LIKE 'ladder:suited:run:%' "
                                                  "ORDER BY id")]
    assert len(batches) >= 3
    start = 0
    for tid in batches:
        fp = store.tournament(tid)["config"]
        assert fp["suite"] == suite.digest() and fp.get("suite_from", 0) == start
        want = {suite.deals[(start + d) % 5] for d in range(fp["deals"])}
        assert {g["seed"] for g in store.games(tournament=tid, limit=1000)} == want
        start = (start + fp["deals"]) % 5
    assert {g["seed"] for g in store.games(limit=10**6)} <= set(suite.deals)
    kept = origin / "data" / "ladders" / "suited.suite.json"
    assert load_suite(kept).digest() == suite.digest() and stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert 'suite = "suited.suite.json"' in (origin / "data" / "ladders" / "suited.toml").read_text()
    # an unfinished batch, then other deals in the file: refused, nothing played with the wrong deals
    last = batches[-1]
    with store.tx() as db:
        db.execute("UPDATE tournaments SET status='running' WHERE id=?", (last,))
    save_suite(origin / "suite.json", make_suite(rules_from("classic", {}), 2, 5))
    changed = load_ladder(path)
    games = store.db.execute("SELECT COUNT(*) FROM games").fetchone()[0]
    with pytest.raises(LadderError, match="began with other deals than the suite"):
        trio.run(lambda: run_ladder(changed, store, ctx(), games=4))
    assert store.db.execute("SELECT COUNT(*) FROM games").fetchone()[0] == games
    store.close()


def test_a_ladder_suite_must_fit_and_stay_out_of_bots_folders(open_tmp: Path):
    from arena.engine import rules_from
    from arena.ladder import LadderError
    from arena.tournament.suites import make_suite, save_suite
    bot = bot_copy(open_tmp, "heuristic", "3.0", "mine")
    save_suite(bot / "suite.json", make_suite(rules_from("classic", {}), 2, 3))
    inside = write_ladder(open_tmp, "inside", bots=["random", "mine"], suite="mine/suite.json")
    with pytest.raises(LadderError, match=r"suite: .*lies inside the folder of heuristic@3.0"):
        load_ladder(inside)
    save_suite(open_tmp / "four.json", make_suite(rules_from("classic", {}), 4, 3))
    other = write_ladder(open_tmp, "other", suite="four.json")
    with pytest.raises(LadderError, match="with 4 players; the ladder plays classic with 2"):
        load_ladder(other)


def test_a_snapshot_tells_an_owner_whose_bot_moved_past_rivals(lad4, monkeypatch):
    """Rating moved past a rival: told by the snapshot that shows it, to the bot's owner only, when
    its interval clears the rival's; two bots swapping places inside their intervals are not told."""
    from types import SimpleNamespace

    from arena.ladder.history import passes, take_snapshot
    wide = lambda elo: (elo, elo - 100, elo + 100)  # noqa: E731
    assert passes({"a": wide(1400), "b": wide(1500), "c": wide(1600)},
                  {"a": wide(1750), "b": wide(1450), "c": wide(1700)}) == {"a": ["b"], "c": ["b"]}  # a: not c
    assert passes({"a": wide(1400)}, {"a": wide(1900), "new": wide(1500)}) == {}  # no earlier rating
    flap = [{"a": wide(1500), "b": wide(1510)}, {"a": wide(1520), "b": wide(1500)}] * 3
    assert not any(passes(x, y) for x, y in itertools.pairwise(flap))  # points swap, intervals overlap
    assert passes(flap[-1], {"a": wide(1800), "b": wide(1500)}) == {"a": ["b"]}
    ladder, store = lad4
    trio.run(lambda: run_ladder(ladder, store, ctx(), games=1))
    state = LadderState(ladder)
    state.refresh(store)
    order = sorted(state.ratings(fresh=True))
    store.db.execute("INSERT INTO accounts (name, password, role, created) VALUES ('ann', 'x', 'member', 0)")
    store.db.execute("INSERT INTO bot_owners VALUES (?, 1, 0)", (order[0].partition("@")[0],))

    def snapshot(elos: list[float]) -> list[tuple]:
        fitted = {label: SimpleNamespace(elo=e, ci_low=e - 100, ci_high=e + 100) for label, e in zip(order, elos)}
        monkeypatch.setattr(state, "ratings", lambda fresh=False: fitted)
        assert take_snapshot(store, ladder, state=state) == len(order)
        return store.db.execute("SELECT account, kind, text, link FROM notifications").fetchall()

    assert snapshot([1000, 1010, 1020, 1030]) == []  # the first snapshot: nobody passed anybody
    for _ in range(3):  # order[0] and order[1] swap back and forth inside their intervals
        assert snapshot([1015, 1005, 1020, 1030]) == [] and snapshot([1000, 1010, 1020, 1030]) == []
    told = snapshot([1300, 1010, 1200, 1030])  # clears order[1] and order[3]; not order[2]
    assert len(told) == 1 and told[0][:2] == (1, "passed") and told[0][3] == f"/ladders/{ladder.name}"
    assert told[0][2].startswith(f"{order[0]} moved past {order[3]}, {order[1]} on ladder {ladder.name}")
    assert snapshot([1290, 1010, 1200, 1030]) == told  # still clear: not told again
