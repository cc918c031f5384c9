"""Ladders: ladder files, submit (version rules, check, placement), standings, matrix, JSON, match + SPRT.

Bots run in-process (tests/fakes.py policy_launcher) except one end-to-end ``arena submit`` with the
real bundled bots as subprocesses.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
from pathlib import Path

import pytest
import trio
from rich.console import Console
from typer.testing import CliRunner

from arena.bots.manifest import BUNDLED_DIR, load_bot
from arena.cli.ladder import ladder_table
from arena.cli.main import app
from arena.ladder import (CheckFailed, LadderError, RunContext, ensure_seeded, head_to_head, ladder_results,
                          ladder_standings, list_ladders, load_ladder, members, open_store, run_match, snapshot_dir,
                          submit)
from arena.ladder.tables import member
from arena.ratings import Sprt

from .checks import fixed_secret
from .fakes import policy_launcher

REPO = Path(__file__).resolve().parent.parent
runner = CliRunner()


async def _ok_check(spec):
    return {"ok": True, "faults": [], "bot": spec.label}


def ctx(said: list[str] | None = None, starts: list[str] | None = None, checker=_ok_check) -> RunContext:
    return RunContext(launcher=policy_launcher(starts), checker=checker,
                      say=(said.append if said is not None else (lambda text: None)))


def write_ladder(directory: Path, name: str = "test-2p", **fields) -> Path:
    body = {"rules": "classic", "seats": 2, "deals": 1, "max_turns": 300, "concurrency": 2,
            "bots": ["random", "lowest", "highest"], **fields}
    lines = []
    for k, v in body.items():
        lines.append(f"{k} = {json.dumps(v)}")
    path = directory / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def bot_copy(tmp: Path, bundled: str, version: str, dirname: str | None = None) -> Path:
    """A copy of a bundled bot under a new version (the fake launcher plays it by name)."""
    dest = tmp / (dirname or f"{bundled}-{version}")
    shutil.copytree(BUNDLED_DIR / bundled, dest, ignore=shutil.ignore_patterns("__pycache__"))
    toml = dest / "bot.toml"
    toml.write_text(toml.read_text().replace('version = "1.0"', f'version = "{version}"'))
    return dest


@pytest.fixture
def lad(tmp_path: Path):
    fixed_secret(tmp_path)  # the same deals every run: tests here read rankings and verdicts
    path = write_ladder(tmp_path, store=str(tmp_path / "store.sqlite"))
    ladder = load_ladder(path)
    store = open_store(ladder)
    yield ladder, store
    store.close()


# --------------------------------------------------------------------------- ladder files

def test_shipped_ladders_load():
    names = {name: (lad, err) for name, lad, err in list_ladders()}
    assert {"classic-2p", "shithead-4p"} <= set(names)
    for name in ("classic-2p", "shithead-4p"):
        lad, err = names[name]
        assert err == "" and lad is not None, err
        assert {load_bot(b).name for b in lad.bots} >= {"random", "lowest", "highest", "heuristic"}
    assert names["classic-2p"][0].seats == 2 and names["classic-2p"][0].rules == "classic"
    assert names["shithead-4p"][0].seats == 4 and names["shithead-4p"][0].rules == "shithead"
    assert load_ladder("classic-2p").move_ms == 1000  # [time] table read


def test_ladder_file_paths_and_time_table(tmp_path: Path):
    bot = bot_copy(tmp_path / "bots", "lowest", "3.0", "mine")
    path = tmp_path / "x.toml"
    path.write_text('bots = ["random", "bots/mine"]\nrules = "shithead"\n[time]\nmove_ms = 250\nbank_ms = 0\n'
                    '[options]\nstacking = true\n')
    lad = load_ladder(path)
    assert lad.name == "x" and lad.bots == ["random", str(bot.resolve())]
    assert (lad.move_ms, lad.bank_ms) == (250, 0)
    assert lad.ruleset().options()["stacking"] is True


@pytest.mark.parametrize("text, needle", [
    ("bots = [", "not valid TOML"),
    ('bots = ["random", "lowest"]\ncolour = "red"', "unknown ladder field(s): colour"),
    ('bots = ["random", "lowest"]\nsuspend_after = 3', "suspend_after goes under [matchmaking]"),
    ('bots = ["random", "lowest"]\nseats = "two"', "seats must be an integer"),
    ('bots = ["random", "lowest"]\nseats = true', "seats must be an integer"),
    ('rules = "classic"', "missing required field 'bots'"),
    ('bots = ["random"]', "2 seats need at least 2 initial bots"),
    ('bots = ["random", "lowest"]\nrules = "poker"', "rules:"),
    ('bots = ["random", "lowest", "highest"]\nseats = 9', "seats:"),
    ('bots = ["random", "no-such-bot"]', "bots[1]"),
    ('bots = ["random", "random"]', "listed once"),
    ('bots = ["random", "lowest"]\ndeals = 0', "deals must be at least 1"),
    ('bots = ["random", "lowest"]\n[time]\nmove = 5', "time.move"),
    ('bots = ["random", "lowest"]\nmove_ms = 5\n[time]\nmove_ms = 5', "both at the top level and in [time]"),
    ('bots = ["random", 3]', "bots[1] must be"),
    ('bots = ["random", "lowest"]\noptions = 3', "[options] must be a table"),
])
def test_broken_ladder_files(tmp_path: Path, text: str, needle: str):
    path = tmp_path / "broken.toml"
    path.write_text(text)
    with pytest.raises(LadderError) as e:
        load_ladder(path)
    assert needle in str(e.value)
    assert str(path) in str(e.value)
    # and the CLI says it in one line, without a traceback
    result = runner.invoke(app, ["ladder", str(path), "--store", str(tmp_path / "s.sqlite")])
    assert result.exit_code == 2
    assert "error:" in result.output and "Traceback" not in result.output
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit)


def test_unknown_ladder_names_the_known_ones():
    with pytest.raises(LadderError, match="known ladders: .*classic-2p"):
        load_ladder("no-such-ladder")
    result = runner.invoke(app, ["ladder", "no-such-ladder"])
    assert result.exit_code == 2 and "no ladder 'no-such-ladder'" in result.output


def test_listing(tmp_path: Path):
    result = runner.invoke(app, ["ladder", "--json", "--store", str(tmp_path / "none.sqlite")])
    assert result.exit_code == 0, result.output
    rows = {r["name"]: r for r in json.loads(result.output)}
    assert rows["classic-2p"]["seats"] == 2 and rows["classic-2p"]["games"] is None
    assert not (tmp_path / "none.sqlite").exists()  # listing never creates a store
    result = runner.invoke(app, ["ladder", "--store", str(tmp_path / "none.sqlite")])
    assert "classic-2p" in result.output and "shithead-4p" in result.output


# --------------------------------------------------------------------------- submit

def test_submit_two_bots(lad, tmp_path: Path):
    ladder, store = lad
    said: list[str] = []
    low = bot_copy(tmp_path, "lowest", "2.0")
    res = trio.run(submit, ladder, str(low), store, ctx(said))
    assert res.status == "placed" and res.label == "lowest@2.0"
    seed = store.tournament(ladder.seed_id)
    assert seed["status"] == "done" and seed["played"] == 3 * 1 * 2  # C(3,2) tables x 1 deal x 2 rotations
    placement = store.tournament(ladder.placement_id("lowest@2.0"))
    assert placement["status"] == "done" and placement["played"] == 3 * 1 * 2  # vs each of 3 members
    assert res.games_played == 12
    assert any("seeding" in s for s in said) and any("placement of lowest@2.0" in s for s in said)

    heu = bot_copy(tmp_path, "heuristic", "2.0")
    res2 = trio.run(submit, ladder, str(heu), store, ctx())
    assert res2.games_played == 4 * 2  # no seeding again; 4 members now
    # every ladder game is an ordinary stored game of a named tournament
    games = store.games(tournament=ladder.placement_id("heuristic@2.0"), limit=100)
    assert len(games) == 8 and all("heuristic@2.0" in g["seats"] for g in games)
    assert sum("lowest@2.0" in g["seats"] for g in games) == 2
    assert len(ladder_results(store, ladder)) == 6 + 6 + 8

    st = res2.standings
    labels = [r.label for r in st.rows]
    assert sorted(labels) == sorted(["random@1.0", "lowest@1.0", "highest@1.0", "lowest@2.0", "heuristic@2.0"])
    assert [r.rank for r in st.rows] == [1, 2, 3, 4, 5]
    elos = [r.elo for r in st.rows]
    assert all(e is not None for e in elos) and elos == sorted(elos, reverse=True)
    assert math.isclose(sum(elos) / len(elos), 1500.0, abs_tol=1e-6)  # pool-mean gauge
    for r in st.rows:
        assert r.elo_low < r.elo < r.elo_high
        assert r.games == sum(1 for seats, _ in ladder_results(store, ladder) if r.label in seats)
    assert all(r.los_next is not None and 0 <= r.los_next <= 1 for r in st.rows[:-1]) and st.rows[-1].los_next is None
    assert {m.label: m.origin for m in members(store, ladder.name)} == {
        "random@1.0": "initial", "lowest@1.0": "initial", "highest@1.0": "initial",
        "lowest@2.0": "submitted", "heuristic@2.0": "submitted"}

    # the standings as the CLI prints them, with both submitted bots
    con = Console(record=True, width=200)
    con.print(ladder_table(st, highlight="heuristic@2.0"))
    text = con.export_text()
    assert "heuristic" in text and "lowest" in text and "2.0" in text and "LOS" in text and "±" in text
    result = runner.invoke(app, ["ladder", str(ladder.path), "--store", str(store.path)])
    assert result.exit_code == 0, result.output
    assert "heuristic" in result.output and "Elo ± 95%" in result.output and "20 games" in result.output


def test_version_rules(lad, tmp_path: Path):
    ladder, store = lad
    heu = bot_copy(tmp_path, "heuristic", "2.0")
    trio.run(submit, ladder, str(heu), store, ctx())
    # the same files again: nothing to play
    starts: list[str] = []
    again = trio.run(submit, ladder, str(heu), store, ctx(starts=starts))
    assert again.status == "unchanged" and again.games_played == 0 and starts == []
    # same label, different files: refused, with the way out
    (heu / "bot.py").write_text((heu / "bot.py").read_text() + "\n# tweak\n")
    with pytest.raises(LadderError, match=r"heuristic@2.0 is already on ladder .* bump `version`"):
        trio.run(submit, ladder, str(heu), store, ctx())
    result = runner.invoke(app, ["submit", str(heu), "--ladder", str(ladder.path), "--store", str(store.path)])
    assert result.exit_code == 2 and "bump `version`" in result.output and "Traceback" not in result.output
    # a new version of the same name is a new entry, placed against the old one too
    toml = heu / "bot.toml"
    toml.write_text(toml.read_text().replace('version = "2.0"', 'version = "2.1"'))
    res = trio.run(submit, ladder, str(heu), store, ctx())
    assert res.status == "placed" and res.label == "heuristic@2.1"
    opponents = {b for g in store.games(tournament=ladder.placement_id("heuristic@2.1"), limit=100)
                 for b in g["seats"]} - {"heuristic@2.1"}
    assert "heuristic@2.0" in opponents
    assert {r.label for r in res.standings.rows} >= {"heuristic@2.0", "heuristic@2.1"}


def test_failed_check_refuses(lad, tmp_path: Path):
    ladder, store = lad

    async def faulty(spec):
        return {"ok": False, "bot": spec.label, "faults": [{"scenario": "classic", "game": 0, "reason": "timeout",
                                                            "message": "no reply"}]}
    with pytest.raises(CheckFailed) as e:
        trio.run(submit, ladder, str(bot_copy(tmp_path, "random", "9")), store, ctx(checker=faulty))
    assert "failed arena check (1 fault(s))" in str(e.value) and e.value.report["faults"][0]["reason"] == "timeout"
    assert members(store, ladder.name) == [] and ladder_results(store, ladder) == []  # nothing registered or played


def test_members_play_from_snapshots_and_initial_bot_added_later(open_tmp: Path):
    tmp_path = open_tmp
    store_path = str(tmp_path / "s.sqlite")
    path = write_ladder(tmp_path, store=store_path)
    ladder = load_ladder(path)
    store = open_store(ladder)
    low = bot_copy(tmp_path, "lowest", "2.0")
    trio.run(submit, ladder, str(low), store, ctx())
    snap = snapshot_dir(store, ladder, "lowest@2.0")
    m = {m.label: m for m in members(store, ladder.name)}
    assert m["lowest@2.0"].ref == str(snap) and load_bot(snap).files_hash() == m["lowest@2.0"].hash
    assert Path(m["random@1.0"].ref) == snapshot_dir(store, ladder, "random@1.0")
    # the author edits the bot in place for the next version: the member still plays its snapshot
    (low / "bot.py").write_text((low / "bot.py").read_text() + "\n# edited after joining\n")
    trio.run(submit, ladder, str(bot_copy(tmp_path, "highest", "2.0")), store, ctx())
    seats = {b for g in store.games(tournament=ladder.placement_id("highest@2.0"), limit=100) for b in g["seats"]}
    assert "lowest@2.0" in seats
    # a snapshot that no longer matches its hash is left out, with a warning
    (snap / "bot.py").write_text("# tampered\n")
    said: list[str] = []
    trio.run(submit, ladder, str(bot_copy(tmp_path, "heuristic", "2.0")), store, ctx(said))
    assert any("lowest@2.0 is left out" in s for s in said)
    seats = {b for g in store.games(tournament=ladder.placement_id("heuristic@2.0"), limit=100) for b in g["seats"]}
    assert "lowest@2.0" not in seats and "highest@2.0" in seats
    # an initial bot added to the file after seeding gets a placement of its own
    write_ladder(tmp_path, store=store_path, bots=["random", "lowest", "highest", "heuristic"])
    ladder = load_ladder(path)
    played = trio.run(ensure_seeded, ladder, store, ctx())
    assert played > 0 and store.tournament(ladder.placement_id("heuristic@1.0"))["status"] == "done"
    assert {m.label: m.origin for m in members(store, ladder.name)}["heuristic@1.0"] == "initial"
    # changing what a game is (rules, seats) on a ladder with games is refused
    write_ladder(tmp_path, store=store_path, rules="shithead")
    with pytest.raises(LadderError, match="rules"):
        trio.run(ensure_seeded, load_ladder(path), store, ctx())
    store.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="bots run under a private uid only when the referee is root")
def test_snapshots_inside_the_closed_store_run_from_a_readable_copy(tmp_path: Path):
    """The ladder keeps its members' files in the store directory, which no bot uid may enter
    (pytest's tmp_path is 0700 too): the launcher runs such a member from a copy of that bot alone
    that its private uids read and no other user does, so the ladder still plays exactly the files
    it registered."""
    from arena.bots.launch import ARENA_COPIES, _others_can_use, runnable
    from arena.bots.manifest import load_bot
    from arena.bots.uids import BOT_UID_BASE, inaccessible_reason
    ladder = load_ladder(write_ladder(tmp_path, store=str(tmp_path / "s.sqlite")))
    store = open_store(ladder)
    trio.run(ensure_seeded, ladder, store, ctx())
    m = members(store, ladder.name)[0]
    ref = Path(m.ref)
    assert ref.is_relative_to(tmp_path) and any((d / ARENA_COPIES).is_file() for d in ref.parents)
    spec = load_bot(ref)
    played = runnable(spec)
    if os.geteuid() == 0:  # private uids: the copy is elsewhere, theirs to read (no other user's), the same bot
        assert played.root != spec.root and not _others_can_use(played.workdir)
        assert inaccessible_reason(played.workdir, BOT_UID_BASE, BOT_UID_BASE, os.R_OK | os.X_OK) is None
        assert played.files_hash() == spec.files_hash() == m.hash
        assert not _others_can_use(tmp_path / "s.sqlite")
    store.close()


def test_anchor(tmp_path: Path):
    path = write_ladder(tmp_path, store=str(tmp_path / "s.sqlite"), anchor="random", anchor_elo=1000)
    ladder = load_ladder(path)
    store = open_store(ladder)
    trio.run(ensure_seeded, ladder, store, ctx())
    st = ladder_standings(ladder, store)
    rnd = next(r for r in st.rows if r.label == "random@1.0")
    assert st.anchor == "random@1.0" and rnd.elo == pytest.approx(1000.0) and rnd.se == pytest.approx(0.0)
    ladder.anchor = "nobody"
    with pytest.raises(LadderError, match="anchor 'nobody' has no games"):
        ladder_standings(ladder, store)
    store.close()


# --------------------------------------------------------------------------- JSON and matrix

def test_json_and_matrix(tmp_path: Path):
    """A four-seat ladder: JSON shape, and head-to-head counts that add up."""
    path = write_ladder(tmp_path, "test-4p", rules="shithead", seats=4, bots=["random", "lowest", "highest", "heuristic"],
                        store=str(tmp_path / "s.sqlite"))
    ladder = load_ladder(path)
    store = open_store(ladder)
    trio.run(submit, ladder, str(bot_copy(tmp_path, "lowest", "2.0")), store, ctx())
    assert store.tournament(ladder.seed_id)["played"] == 4  # one table, 4 rotations
    assert store.tournament(ladder.placement_id("lowest@2.0"))["played"] == 4 * 4  # C(4,3) tables x 4 rotations
    store.close()

    result = runner.invoke(app, ["ladder", str(path), "--store", str(tmp_path / "s.sqlite"), "--json", "--matrix"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["ladder"] == "test-4p" and data["seats"] == 4 and data["games"] == 20
    assert data["anchor"] == {"bot": None, "pool_mean": 1500.0}
    rows = data["standings"]
    assert [r["rank"] for r in rows] == list(range(1, 6))
    for r in rows:
        assert set(r) >= {"rank", "bot", "name", "version", "elo", "elo_low", "elo_high", "elo_se", "games", "wins",
                          "win_rate", "avg_place", "draws", "draw_rate", "faults", "los_next"}
        assert r["elo_low"] <= r["elo"] <= r["elo_high"] and 1 <= r["avg_place"] <= 4
    assert rows[-1]["los_next"] is None

    m = data["matrix"]
    assert m["bots"] == [r["bot"] for r in rows]
    cells = m["cells"]
    games = {r["bot"]: r["games"] for r in rows}
    for a in m["bots"]:
        assert sum(c["games"] for c in cells[a].values()) == 3 * games[a]  # three opponents per game
        for b, c in cells[a].items():
            back = cells[b][a]
            assert c["games"] == back["games"] == c["wins"] + c["ties"] + c["losses"]
            assert (c["wins"], c["ties"], c["losses"]) == (back["losses"], back["ties"], back["wins"])
            assert c["score"] + back["score"] == pytest.approx(1.0)

    result = runner.invoke(app, ["ladder", str(path), "--store", str(tmp_path / "s.sqlite"), "--matrix"])
    assert result.exit_code == 0 and "Head to head" in result.output


def test_head_to_head_two_seats():
    games = [(["a", "b"], {"order": [[0], [1]], "draw": False}),
             (["b", "a"], {"order": [[0, 1]], "draw": True}),
             (["a", "c"], {"order": [[1], [0]], "draw": False})]
    m = head_to_head(games)
    assert (m["a"]["b"].games, m["a"]["b"].ahead, m["a"]["b"].tied) == (2, 1, 1)
    assert m["a"]["b"].score == 0.75 and m["b"]["a"].score == 0.25
    assert m["c"]["a"].score == 1.0 and "c" not in m["b"]


# --------------------------------------------------------------------------- match

def test_match_sprt_stops_early_and_resumes(tmp_path: Path):
    from arena.engine import rules_from
    from arena.tournament.store import Store
    fixed_secret(tmp_path)  # the verdict within 100 games depends on the deals: the same ones every run
    store = Store(tmp_path / "s.sqlite")
    low, high = load_bot("lowest"), load_bot("highest")
    seen = []
    progress, tid = trio.run(lambda: run_match(low, high, rules_from("shithead", {}), sprt=Sprt(0, 100),
                                               max_games=400, max_turns=600, concurrency=2, store=store,
                                               launcher=policy_launcher(), on_pair=lambda p: seen.append(p.games)))
    assert progress.status == "accept_h1" and progress.games < 100 and progress.games % 2 == 0
    assert progress.wins > progress.losses and seen == list(range(2, progress.games + 1, 2))
    stored = store.games(tournament=tid, limit=1000)
    assert len(stored) >= progress.games
    pair = {g["index"]: g for g in stored}
    assert pair[0]["seats"] == ["lowest@1.0", "highest@1.0"] and pair[1]["seats"] == ["highest@1.0", "lowest@1.0"]
    assert pair[0]["seed"] == pair[1]["seed"] != pair[2]["seed"]  # duplicate deals
    # the same match again is answered from the store, same verdict, no bot started
    starts: list[str] = []
    again, tid2 = trio.run(lambda: run_match(low, high, rules_from("shithead", {}), sprt=Sprt(0, 100),
                                             max_games=400, max_turns=600, store=store,
                                             launcher=policy_launcher(starts)))
    assert tid2 == tid and starts == []
    assert (again.status, again.wins, again.draws, again.losses) == (progress.status, progress.wins,
                                                                     progress.draws, progress.losses)
    store.close()


def test_match_without_sprt_plays_max_games():
    from arena.engine import rules_from
    p, _ = trio.run(lambda: run_match(load_bot("lowest"), load_bot("random"), rules_from("shithead", {}),
                                      max_games=6, max_turns=400, launcher=policy_launcher()))
    assert p.games == 6 and p.status == "max_games"
    with pytest.raises(LadderError, match="two different labels"):
        trio.run(lambda: run_match(load_bot("lowest"), load_bot("lowest"), rules_from("classic", {}),
                                   launcher=policy_launcher()))


# --------------------------------------------------------------------------- end to end

def test_cli_submit_end_to_end(open_tmp: Path):
    """A real submission: arena check and the placement games run the real bundled bots as processes
    (one game at a time, in this process: referee worker processes are
    test_a_match_plays_the_same_games_on_worker_processes')."""
    tmp_path = open_tmp
    path = write_ladder(tmp_path, "e2e", bots=["random", "highest"], max_turns=400, move_ms=2000, concurrency=1)
    store = tmp_path / "store.sqlite"
    low = bot_copy(tmp_path, "lowest", "2.0")
    # the command runs in this process (typer's CliRunner); its bots are real processes
    with contextlib.chdir(tmp_path):
        done = runner.invoke(app, ["submit", str(low), "--ladder", str(path), "--store", str(store), "--plain"])
    assert done.exit_code == 0, done.output
    assert "checking lowest@2.0" in done.stdout and "seeding ladder e2e" in done.stdout
    assert "provisional" in done.stdout
    assert "lowest@2.0 is #" in done.stdout and "of 3 on e2e" in done.stdout

    shown = runner.invoke(app, ["ladder", str(path), "--store", str(store), "--json"])
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.output)
    assert data["games"] == 2 + 4 and {r["bot"] for r in data["standings"]} == {"random@1.0", "highest@1.0",
                                                                               "lowest@2.0"}
    games = runner.invoke(app, ["games", "--tournament", "ladder:e2e:placement:lowest@2.0", "--store", str(store),
                                "--json"])
    assert games.exit_code == 0 and len(json.loads(games.output)) == 4


def test_cli_submit_refuses_a_faulty_bot_with_the_report(tmp_path: Path, monkeypatch):
    import arena.tournament.check

    async def faulty(spec, games=2, move_ms=1000, opponent="random"):
        return {"ok": False, "bot": spec.label, "requests": 3, "decisions": {"play": 3}, "mean_ms": 1.0,
                "max_ms": 2.0, "limits": {"move_ms": move_ms},
                "scenarios": [{"scenario": "classic", "game": 0, "seat": 0, "requests": 3, "result": None}],
                "faults": [{"scenario": "classic", "game": 0, "reason": "illegal_action", "message": "id 99"}]}
    monkeypatch.setattr(arena.tournament.check, "run_check", faulty)
    path = write_ladder(tmp_path, "refuse")
    bad = bot_copy(tmp_path, "random", "7")
    result = runner.invoke(app, ["submit", str(bad), "--ladder", str(path), "--store", str(tmp_path / "s.sqlite")])
    assert result.exit_code == 1
    assert "illegal_action" in result.output and "failed arena check (1 fault(s))" in result.output
    assert "Traceback" not in result.output and not (tmp_path / "ladder-bots").exists()


def test_cli_submit_json_and_match_in_process(tmp_path: Path, monkeypatch):
    """The CLI paths with in-process bots: submit --json keeps stdout pure JSON; match prints the SPRT."""
    import arena.tournament.check
    import arena.bots.launch
    import arena.tournament.run
    monkeypatch.setattr(arena.tournament.run, "Launcher", lambda *a, **k: policy_launcher())
    monkeypatch.setattr(arena.bots.launch, "Launcher", lambda *a, **k: policy_launcher())
    monkeypatch.setattr(arena.tournament.check, "run_check", lambda spec, games, move_ms: _ok_check(spec))
    path = write_ladder(tmp_path, "cli", concurrency=1)  # one game at a time: in this process, on the fakes
    store = str(tmp_path / "s.sqlite")
    # a fixed secret: the same deals, so the same games and verdict, every run
    from arena.tournament.seeds import SECRET_BYTES, SECRET_FILE
    (tmp_path / SECRET_FILE).write_bytes(bytes([7]) * SECRET_BYTES)
    (tmp_path / SECRET_FILE).chmod(0o600)
    result = runner.invoke(app, ["submit", str(bot_copy(tmp_path, "heuristic", "5")), "--ladder", str(path),
                                 "--store", store, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["submitted"] == "heuristic@5" and data["status"] == "placed" and data["games_played"] == 6 + 6
    assert data["place"] == next(r["rank"] for r in data["standings"] if r["bot"] == "heuristic@5")
    assert "seeding ladder cli" in result.stderr and "provisional" in result.stderr

    # what the command prints of an SPRT; the pair counts over drawn games are
    # test_match_counts_pairs_and_win_rate_over_deals' (lowest and highest, whose games run long)
    result = runner.invoke(app, ["match", "heuristic", "random", "--rules", "shithead", "--sprt", "0,100", "-j", "1",
                                 "--max-turns", "600", "--store", store, "--every", "1000", "--move-ms", "60000"])
    assert result.exit_code == 0, result.output
    assert "accept_h1" in result.stdout and "H1 accepted: heuristic@1.0 - random@1.0" in result.stdout
    assert "LLR" in result.stdout and "LOS" in result.stdout and "arena games --tournament 'match:" in result.stdout
    result = runner.invoke(app, ["match", "lowest", "highest", "--sprt", "10,0", "--store", store])
    assert result.exit_code == 2 and "elo1 must be above elo0" in result.output


# --------------------------------------------------------------------------- arena match: pairs, labels, resume

def test_match_counts_pairs_and_win_rate_over_deals():
    from arena.engine import rules_from
    from arena.ratings import PairSprt
    from arena.tournament.suites import Suite
    rules = rules_from("shithead", {})
    fixed = Suite(rules, 2, tuple(range(1, 201)))  # fixed deals: the verdict is the same every run
    p, _ = trio.run(lambda: run_match(load_bot("lowest"), load_bot("highest"), rules, suite=fixed,
                                      sprt=PairSprt(0, 100), max_games=400, max_turns=600, launcher=policy_launcher()))
    assert sum(p.pairs) * 2 == p.games and len(p.deal_wins) == sum(p.pairs)
    assert p.wins == 2 * p.pairs[4] + p.pairs[3] + p.pairs[2] - _split_draws(p)
    data = p.as_json()
    assert set(data["pairs"]) == {"LL", "LD", "DD/WL", "WD", "WW"} and data["sprt"]["model"] == "pentanomial"
    assert data["win_rate_low"] <= data["win_rate"] <= data["win_rate_high"]
    assert data["elo_low"] is None or data["elo_low"] <= data["elo"]
    assert p.status == "accept_h1"


def _split_draws(p) -> int:
    """DD/WL pairs hold a win only when they are WL: DD pairs = draws that sit in them."""
    dd = (p.draws - p.pairs[1] - p.pairs[3]) // 2
    return dd


def test_cli_match_labels_max_games_resume_and_pairs(tmp_path: Path, monkeypatch):
    """Issue 16's `arena match` items: ladder labels as bots, --max-games 7 says it plays 6, a rerun
    says what it resumes; the pair counts and the win rate interval are in the output and JSON."""
    import arena.tournament.check
    import arena.bots.launch
    import arena.tournament.run
    monkeypatch.setattr(arena.tournament.run, "Launcher", lambda *a, **k: policy_launcher())
    monkeypatch.setattr(arena.bots.launch, "Launcher", lambda *a, **k: policy_launcher())
    monkeypatch.setattr(arena.tournament.check, "run_check", lambda spec, games, move_ms: _ok_check(spec))
    fixed_secret(tmp_path)  # the same deals every run: lowest and random's games took another time each run
    path = write_ladder(tmp_path, "lab", concurrency=1)  # one game at a time: in this process, on the fakes
    store = str(tmp_path / "s.sqlite")
    src = bot_copy(tmp_path / "src", "lowest", "2.0")
    assert runner.invoke(app, ["submit", str(src), "--ladder", str(path), "--store", store]).exit_code == 0
    shutil.rmtree(tmp_path / "src")  # only the ladder's copy is left: the label must find it
    args = ["match", "lowest@2.0", "random@1.0", "--max-games", "7", "--max-turns", "400", "--store", store, "-j", "1"]
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    assert "at most 6 games (3 deals); --max-games 7 is rounded down to whole deal pairs" in first.output
    assert "6 games played" in first.output and "resuming" not in first.output
    assert "pairs (A's two games of a deal): LL" in first.output and "95% over deals" in first.output
    again = runner.invoke(app, args + ["--json"])
    assert again.exit_code == 0, again.output
    assert "resuming: 6 of 6 games already stored" in again.stderr
    data = json.loads(again.stdout)
    assert data["games"] == 6 and sum(data["pairs"].values()) == 3 and data["deals"] == 3
    assert {"win_rate", "win_rate_low", "win_rate_high", "normalized_elo", "trinomial_elo"} <= set(data)
    unknown = runner.invoke(app, ["match", "nobody@1.0", "random", "--store", store])
    assert unknown.exit_code == 2 and "no ladder member or stored bot is labelled 'nobody@1.0'" in unknown.output


def test_a_match_plays_the_same_games_on_worker_processes(tmp_path: Path) -> None:
    """``arena match`` goes through the executors as tournaments do: on two referee worker
    processes it plays, deal for deal, the games one process plays (both stores share a secret)."""
    from arena.engine import rules_from
    from arena.tournament.store import Store

    def games(processes: int) -> tuple[list, set[str]]:
        db = Store(tmp_path / f"p{processes}.sqlite")
        p, tid = trio.run(lambda: run_match(load_bot("lowest"), load_bot("random"), rules_from("shithead", {}),
                                            max_games=8, max_turns=400, concurrency=2, store=db,
                                            processes=processes))
        assert p.games == 8 and p.status == "max_games"
        rows = db.games(tournament=tid, limit=100)
        logs = [db.game_record(g["id"]) for g in rows]
        played = [(g["index"], g["seats"], g["result"]["order"], [s.get("action") for s in log["steps"]])
                  for g, log in zip(rows, logs)]
        pools = {serial.split(".")[0] for log in logs for serial in log["processes"]}
        return played, pools

    one, pools_one = games(1)
    two, pools_two = games(2)
    assert len(one) == 8 and one == two
    # each lane of the in-process executor, and each worker process, lends from a pool of its own
    assert len(pools_one) == 2 and len(pools_two) == 2


# --------------------------------------------------------------------------- snapshot folder names


def _edited(tmp_path: Path, version: str, dirname: str) -> Path:
    bot = bot_copy(tmp_path, "random", version, dirname)
    (bot / "bot.py").write_text((bot / "bot.py").read_text() + f"\n# {dirname}\n")  # other files
    return bot


def _intact(store, ladder, label: str) -> str:
    m = member(store, ladder.name, label)
    assert m is not None and load_bot(m.ref).files_hash() == m.hash, f"{label}'s files were replaced"
    return m.ref


def test_a_submission_never_replaces_another_members_folder(tmp_path: Path):
    """Snapshot names mapped ``+`` to ``_``, and a differing folder was removed: uploading
    ``random@1.0_b1`` overwrote ``random@1.0+b1``'s files and the next run suspended the victim.
    A snapshot folder is now a function of the exact label."""
    from arena.ladder.tables import snapshot_name
    ladder = load_ladder(write_ladder(tmp_path, store=str(tmp_path / "s.sqlite")))
    store = open_store(ladder)
    try:
        trio.run(submit, ladder, str(_edited(tmp_path, "1.0+b1", "victim")), store, ctx())
        victim = _intact(store, ladder, "random@1.0+b1")
        trio.run(submit, ladder, str(_edited(tmp_path, "1.0_b1", "attacker")), store, ctx())
        assert _intact(store, ladder, "random@1.0+b1") == victim != _intact(store, ladder, "random@1.0_b1")
        labels = ("a@1+b", "a@1_b", "a@1%2Bb", "a@1%5Fb", "a@1 b", "a@1/b", "a@1..", "a@é", "a@" + "x" * 300,
                  "a@" + "x" * 301, "a@1.0-RC", "a@1.0-rc", "a@1.0-Rc")
        names = {snapshot_name(label) for label in labels}
        assert all("/" not in n and len(n.encode()) <= 200 for n in names)
        # distinct even on a disk that ignores case (macOS, a casefold folder), where one label's
        # folder would be another's and the differing one be removed
        assert len({n.casefold() for n in names}) == len(labels)
    finally:
        store.close()


def test_an_old_stores_snapshot_folders_are_still_found_and_never_replaced(tmp_path: Path):
    """An older arena named ``random@1.0+b1``'s folder ``random@1.0_b1`` (the lossy map) and kept that
    path in ladder_members.ref: the member still loads from it, and the label that name spelled
    before, submitted now, gets a folder of its own."""
    ladder = load_ladder(write_ladder(tmp_path, store=str(tmp_path / "s.sqlite")))
    store = open_store(ladder)
    try:
        trio.run(submit, ladder, str(_edited(tmp_path, "1.0+b1", "victim")), store, ctx())
        new = Path(member(store, ladder.name, "random@1.0+b1").ref)
        old = new.with_name("random@1.0_b1")
        new.rename(old)
        with store.tx() as db:
            db.execute("UPDATE ladder_members SET ref=? WHERE label=?",
                       (str(old.relative_to(tmp_path)), "random@1.0+b1"))
        assert _intact(store, ladder, "random@1.0+b1") == str(old)
        trio.run(submit, ladder, str(_edited(tmp_path, "1.0_b1", "attacker")), store, ctx())
        assert _intact(store, ladder, "random@1.0+b1") == str(old)
        assert Path(_intact(store, ladder, "random@1.0_b1")) != old
        # and a folder that some member runs from is never removed for another label, whatever its name
        with store.tx() as db:
            db.execute("UPDATE ladder_members SET ref=? WHERE label=?",
                       (str(snapshot_dir(store, ladder, "random@7").relative_to(tmp_path)), "random@1.0+b1"))
        old.rename(snapshot_dir(store, ladder, "random@7"))
        with pytest.raises(LadderError, match="belongs to the member random@1.0\\+b1"):
            trio.run(submit, ladder, str(_edited(tmp_path, "7", "squatter")), store, ctx())
        _intact(store, ladder, "random@1.0+b1")
    finally:
        store.close()


def test_a_bot_folder_holding_the_store_is_refused(tmp_path: Path):
    """Submitted from the folder that holds the store (``arena submit .`` beside arena-data/), the
    copy would carry the store's secret deal key into the bot's own files: refused, nothing copied."""
    bot = bot_copy(tmp_path, "random", "9")
    ladder = load_ladder(write_ladder(tmp_path, store=str(bot / "data" / "s.sqlite")))
    store = open_store(ladder)
    try:
        from arena.tournament.seeds import load_secret
        load_secret(store.path.resolve().parent)
        with pytest.raises(LadderError, match="holds the store"):
            trio.run(submit, ladder, str(bot), store, ctx())
        assert not any((bot / "data").glob("ladder-bots/*/*/data/secret.key"))
    finally:
        store.close()
