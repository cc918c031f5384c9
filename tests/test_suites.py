"""Deal suites: `arena deals make` / `from-games` / `show`, and `arena match --suite` (and `arena tournament --suite`) playing a
suite (its seeds, never shown to a bot) with the per-deal flip report."""

from __future__ import annotations

import json
import stat
from dataclasses import replace
from pathlib import Path

import pytest
import trio
from typer.testing import CliRunner

from arena.bots.manifest import load_bot
from arena.cli.main import app
from arena.engine import rules_from
from arena.ladder import run_match
from arena.tournament.store import Store
from arena.tournament.suites import Suite, SuiteError, load_suite, make_suite, save_suite, suite_from_games

from .checks import fixed_secret
from .fakes import POLICIES, ScriptedConnection, policy_bot, policy_launcher

runner = CliRunner()


@pytest.fixture
def in_process(monkeypatch):
    import arena.bots.launch
    monkeypatch.setattr(arena.bots.launch, "Launcher", lambda *a, **k: policy_launcher())


def test_make_writes_a_private_suite_and_show_hides_the_seeds(tmp_path: Path):
    path = tmp_path / "s.json"
    done = runner.invoke(app, ["deals", "make", str(path), "-n", "7", "--rules", "shithead", "--players", "3"])
    assert done.exit_code == 0, done.output
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    suite = load_suite(path)
    assert len(suite.deals) == 7 == len(set(suite.deals)) and suite.players == 3 and suite.rules.name == "shithead"
    shown = runner.invoke(app, ["deals", "show", str(path)])
    assert shown.exit_code == 0 and "7 deals" in shown.output
    assert not any(str(s) in shown.output for s in suite.deals)
    again = runner.invoke(app, ["deals", "make", str(path)])
    assert again.exit_code == 2 and "--force" in again.output and load_suite(path) == suite


@pytest.mark.parametrize("text, needle", [
    ("{", "is not JSON"),
    ('{"format": "other"}', "is not a deal suite"),
    ('{"format": "palace-deal-suite", "version": 9}', "suite version 9"),
    ('{"format": "palace-deal-suite", "version": 1, "rules": {"name": "classic"}, "players": 2, "deals": []}',
     "non-empty list"),
    ('{"format": "palace-deal-suite", "version": 1, "rules": {"name": "classic"}, "players": 2, '
     '"deals": [{"seed": -4}]}', "deal 1 needs a 'seed'"),
    ('{"format": "palace-deal-suite", "version": 1, "rules": {"name": "classic"}, "players": 9, '
     '"deals": [{"seed": 4}]}', "players, not 9"),
])
def test_broken_suites_are_named(tmp_path: Path, text: str, needle: str):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(SuiteError, match=needle):
        load_suite(path)
    done = runner.invoke(app, ["match", "lowest", "highest", "--suite", str(path), "--no-store"])
    assert done.exit_code == 2 and "Traceback" not in done.output


def known_suite(rules: str, players: int, count: int) -> Suite:
    """A suite of fixed deals: a fresh suite's games (lowest and highest often play on to the turn
    cap) took another time every run, for tests whose claims hold on any deals."""
    return replace(make_suite(rules_from(rules, {}), players, count), deals=tuple((i + 1) * 0x2545F4914F6CDD1D % (1 << 63) for i in range(count)))


def test_match_plays_the_suites_deals_in_order_and_reports_flips(tmp_path: Path):
    fixed_secret(tmp_path)  # the fresh-deals match below is dealt from the store's secret
    store = Store(tmp_path / "s.sqlite")
    suite = known_suite("shithead", 2, 6)
    progress, tid = trio.run(lambda: run_match(load_bot("lowest"), load_bot("highest"), suite.rules, suite=suite,
                                               max_games=100, max_turns=200, store=store, launcher=policy_launcher()))
    games = {g["index"]: g for g in store.games(tournament=tid, limit=100)}
    assert progress.games == 12 and len(progress.deal_pairs) == 6
    assert [games[2 * d]["seed"] for d in range(6)] == list(suite.deals)
    assert [games[2 * d + 1]["seed"] for d in range(6)] == list(suite.deals)
    # the same bots on fresh deals are another match (another resume key)
    _, fresh = trio.run(lambda: run_match(load_bot("lowest"), load_bot("highest"), suite.rules, max_games=2,
                                          max_turns=200, store=store, launcher=policy_launcher()))
    assert fresh != tid
    with pytest.raises(Exception, match="other rules"):
        trio.run(lambda: run_match(load_bot("lowest"), load_bot("highest"), rules_from("classic", {}), suite=suite,
                                   launcher=policy_launcher()))
    store.close()


def test_cli_flip_report_and_summary(in_process, tmp_path: Path):
    path = tmp_path / "s.json"
    save_suite(path, known_suite("shithead", 2, 8))
    md = tmp_path / "m.md"
    done = runner.invoke(app, ["match", "lowest", "highest", "--suite", str(path), "--no-store", "--max-turns", "200",
                               "--json", "--summary", str(md), "-j", "1"])  # -j 1: the in-process bots
    assert done.exit_code == 0, done.output
    data = json.loads(done.stdout)
    report = data["deals_report"]
    assert [r["deal"] for r in report] == list(range(1, 9))
    counts = {name: sum(r["pair"] == name for r in report) for name in data["pairs"]}
    assert counts == data["pairs"]
    text = md.read_text()
    assert "per deal of the suite (8 played)" in text and "flipped from a win to a loss (LL" in text
    with_rules = runner.invoke(app, ["match", "lowest", "highest", "--suite", str(path), "--rules", "classic",
                                     "--no-store"])
    assert with_rules.exit_code == 2 and "the suite sets the rules" in with_rules.output


def test_from_games_cuts_the_games_a_bot_lost_and_names_them(tmp_path: Path, in_process):
    store_path = tmp_path / "s.sqlite"
    fixed_secret(tmp_path)  # on a fresh random secret's deals `lowest` lost all 16 games once in a while
    store = Store(store_path)
    trio.run(lambda: run_match(load_bot("lowest"), load_bot("highest"), rules_from("classic", {}), max_games=16,
                               max_turns=600, store=store, launcher=policy_launcher()))
    rows = store.games(limit=100)
    lost_games = [g for g in rows if not (len(g["result"]["order"][0]) == 1
                                          and g["seats"][g["result"]["order"][0][0]] == "lowest@1.0")]
    assert lost_games and len(lost_games) < len(rows)  # lowest loses some games to highest, not all
    lost = {}
    for g in lost_games:
        lost.setdefault(g["seed"], g["id"])
    suite = suite_from_games(store, lost_by="lowest@1.0")
    assert set(suite.deals) == set(lost) and {suite.origin(i) for i in range(len(suite.deals))} <= set(lost.values())
    store.close()
    path = tmp_path / "lost.json"
    done = runner.invoke(app, ["deals", "from-games", str(path), "--lost-by", "lowest@1.0", "--store", str(store_path)])
    assert done.exit_code == 0, done.output
    assert load_suite(path).deals == suite.deals and stat.S_IMODE(path.stat().st_mode) == 0o600
    shown = runner.invoke(app, ["deals", "show", str(path)])
    assert f"cut from {len(suite.deals)} stored games" in shown.output
    # the flip report names the stored game each deal came from
    played = runner.invoke(app, ["match", "heuristic", "lowest", "--suite", str(path), "--no-store",
                                 "--max-turns", "600", "-j", "1"])  # -j 1: the in-process bots
    assert played.exit_code == 0, played.output
    assert "per deal of the suite" in played.stdout
    none = runner.invoke(app, ["deals", "from-games", str(tmp_path / "x.json"), "--lost-by", "nobody@1",
                               "--store", str(store_path)])
    assert none.exit_code == 2 and "no stored games lost by nobody@1" in none.output


def test_bots_never_see_a_suites_seeds(tmp_path: Path):
    """Every line sent to either bot during a suite match: no deal seed in any of them."""
    sent: list[str] = []

    def launch(spec):
        bot = ScriptedConnection(policy_bot(POLICIES[spec.name](), spec.name))
        original = bot.send_line

        def send_line(text: str, *, timeout: float = 10.0) -> None:
            sent.append(text.decode() if isinstance(text, bytes) else text)
            original(text, timeout=timeout)
        bot.send_line = send_line  # type: ignore[method-assign]
        return bot
    suite = known_suite("classic", 2, 3)
    trio.run(lambda: run_match(load_bot("lowest"), load_bot("highest"), suite.rules, suite=suite, max_turns=400,
                               launcher=launch))
    assert sent and not any(str(seed) in line for seed in suite.deals for line in sent)


def test_match_on_a_suite_end_to_end(tmp_path: Path):
    """Real bot processes: arena deals make, then arena match --suite with the SPRT; the exit status
    is the verdict whichever it is (the deals are fresh each run: at most 12 games of at most 200
    turns, so its length does not hang on them). The commands run in this process (a shell sees a
    match's verdict as its status in test_match_gate's real-process tests)."""
    from tests.checks import arena_here
    path = tmp_path / "s.json"
    def arena(*args: str):
        return arena_here(*args, cwd=tmp_path)
    assert arena("deals", "make", str(path), "-n", "40", "--rules", "shithead").returncode == 0
    done = arena("match", "lowest", "highest", "--suite", str(path), "--sprt", "0,100", "--max-turns", "200",
                 "--max-games", "12", "--store", str(tmp_path / "st.sqlite"), "--json")
    data = json.loads(done.stdout)
    assert done.returncode == {"accept_h1": 0, "accept_h0": 1, "max_games": 3}[data["status"]], done.stderr
    assert "from the suite" in done.stderr and len(data["deals_report"]) == data["deals"] <= 40
    # what holds for every deal: each deal played in both seatings, each game stored once. Not who
    # won: lowest and highest draw both games of about half the deals, and a suite that opens with
    # nine such deals ends in H0 after 18 draws, no game won by either side
    db = Store(tmp_path / "st.sqlite", readonly=True)
    stored = db.count_games(tournament=data["tournament"])
    db.close()
    assert data["games"] == 2 * data["deals"] == stored > 0
    assert "readable by other users" not in done.stderr


def test_a_suite_inside_a_bots_folder_is_refused(tmp_path: Path):
    """The sandbox shows a bot its own folder: a suite kept there would hand it every deal."""
    import shutil
    from arena.bots.manifest import BUNDLED_DIR
    from arena.tournament.config import ConfigError, load_bots, load_config
    bot = tmp_path / "mine"
    shutil.copytree(BUNDLED_DIR / "lowest", bot, ignore=shutil.ignore_patterns("__pycache__"))
    (bot / "bot.toml").write_text((bot / "bot.toml").read_text().replace('name = "lowest"', 'name = "mine"'))
    path = bot / "deals" / "s.json"
    path.parent.mkdir()
    save_suite(path, make_suite(rules_from("classic", {}), 2, 3))
    for pair in ([str(bot), "highest"], ["highest", str(bot)]):  # either seat's folder
        done = runner.invoke(app, ["match", *pair, "--suite", str(path), "--no-store"])
        assert done.exit_code == 2 and "lies inside the folder of mine@1.0" in done.output, (pair, done.output)
    for bots in ([str(bot), "highest"], ["highest", "lowest", str(bot)]):
        cfg = load_config(None, {"bots": bots, "suite": str(path)})
        with pytest.raises(ConfigError, match="suite: the deal suite .* lies inside the folder of mine@1.0"):
            load_bots(cfg)


# --------------------------------------------------------------------------- mid-game positions

@pytest.fixture(scope="module")
def lost_games(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store of 12 games lowest played against highest, played once: the tests cut positions
    from it and never write to it."""
    return _lost_games_store(tmp_path_factory.mktemp("lost"))


def _lost_games_store(tmp_path: Path) -> Path:
    fixed_secret(tmp_path)  # the same 12 games every run
    store_path = tmp_path / "games.sqlite"
    store = Store(store_path)
    trio.run(lambda: run_match(load_bot("lowest"), load_bot("highest"), rules_from("shithead", {}), max_games=12,
                               max_turns=600, store=store, launcher=policy_launcher()))
    store.close()
    return store_path


def test_positions_cut_from_games_are_checked_and_played_from_where_they_stand(tmp_path: Path, in_process,
                                                                              lost_games: Path):
    """`arena deals from-games --position-at T`: each entry is the game before its T-th decision, in
    the engine's position format, with the moves that reach it from the deal. A match on it starts
    every game (both seat orders) there: the opening is in the record as `given` steps nobody was
    asked for, the first request comes at the position, and the game replays from its seed."""
    from arena.engine.views import from_position, to_position
    from arena.replay.simulate import simulate
    from arena.tournament.suites import reach
    store_path = lost_games
    path = tmp_path / "at7.json"
    done = runner.invoke(app, ["deals", "from-games", str(path), "--position-at", "7", "--store", str(store_path)])
    assert done.exit_code == 0, done.output
    assert "positions (each before its game's decision 7)" in done.output
    suite = load_suite(path)
    assert suite.position_count == len(suite.deals) > 0
    db = Store(store_path, readonly=True)
    for i, seed in enumerate(suite.deals):
        moves, position = suite.moves_of(i), suite.position_of(i)
        record = db.game_record(suite.origin(i))
        asked = [k for k, st in enumerate(record["steps"]) if "request" in st]
        assert len(moves) == asked[6] and moves == tuple(st["action"] for st in record["steps"][:len(moves)])
        assert to_position(reach(suite.rules, 2, seed, moves)) == position
        assert from_position(position).to_move == record["steps"][len(moves)]["seat"]
    db.close()
    shown = runner.invoke(app, ["deals", "show", str(path)])
    assert f"{len(suite.deals)} of them mid-game positions" in shown.output and "position after" in shown.output
    store = Store(tmp_path / "m.sqlite")
    progress, tid = trio.run(lambda: run_match(load_bot("heuristic"), load_bot("lowest"), suite.rules, suite=suite,
                                               max_games=100, max_turns=600, store=store,
                                               launcher=policy_launcher()))
    assert progress.games == 2 * len(suite.deals)
    for g in store.games(tournament=tid, limit=100):
        d = suite.deals.index(g["seed"])
        record = store.game_record(g["id"])
        moves = suite.moves_of(d)
        assert record["given"] == list(moves)
        assert all(st.get("given") for st in record["steps"][:len(moves)])
        assert not any(st.get("given") for st in record["steps"][len(moves):])
        first_asked = next(st for st in record["steps"] if "request" in st)
        assert record["steps"].index(first_asked) >= len(moves)
        replay = simulate(record)
        assert replay.ok, replay.mismatches[:3]
        assert to_position(replay.frames[len(moves)].state) == {**suite.position_of(d), "max_turns": 600}
    store.close()


@pytest.mark.parametrize("edit, needle", [
    (lambda e: e["position"]["seats"][0].__setitem__("hand", e["position"]["seats"][1]["hand"]),
     "do not reach the position"),
    (lambda e: e.__setitem__("moves", [99] + e["moves"][1:]), "move 1 is action 99"),
    (lambda e: e.pop("moves"), "a position needs 'moves'"),
])
def test_a_position_that_its_moves_do_not_reach_is_refused(tmp_path: Path, in_process, lost_games: Path, edit,
                                                           needle):
    store_path = lost_games
    path = tmp_path / "p.json"
    assert runner.invoke(app, ["deals", "from-games", str(path), "--position-at", "3",
                               "--store", str(store_path)]).exit_code == 0
    data = json.loads(path.read_text())
    edit(data["deals"][0])
    path.write_text(json.dumps(data))
    with pytest.raises(SuiteError, match=needle):
        load_suite(path)
    done = runner.invoke(app, ["match", "lowest", "highest", "--suite", str(path), "--no-store"])
    assert done.exit_code == 2 and needle in done.output and "Traceback" not in done.output


def test_a_tournament_plays_positions_in_every_seat_rotation(tmp_path: Path, in_process):
    """Three seats: each position is played once per rotation of the table, from the position."""
    from arena.replay.simulate import simulate
    from arena.tournament.config import load_config
    from arena.tournament.run import run_tournament
    source = Store(tmp_path / "src.sqlite")
    cfg = load_config(None, {"bots": ["random", "lowest", "highest"], "rules": "shithead", "seats": 3, "deals": 2,
                             "max_turns": 600, "store": str(tmp_path / "src.sqlite")})
    trio.run(lambda: run_tournament(cfg, source, launcher=policy_launcher()))
    suite = suite_from_games(source, position_at=10, limit=2)
    source.close()
    path = tmp_path / "three.json"
    save_suite(path, suite)
    cfg = load_config(None, {"bots": ["random", "lowest", "heuristic"], "rules": "shithead", "seats": 3,
                             "max_turns": 600, "suite": str(path), "store": str(tmp_path / "t.sqlite")})
    store = Store(tmp_path / "t.sqlite")
    trio.run(lambda: run_tournament(cfg, store, launcher=policy_launcher()))
    games = store.games(tournament=cfg.name, limit=100)
    assert len(games) == 3 * len(suite.deals)
    for d, seed in enumerate(suite.deals):
        mine = [g for g in games if g["seed"] == seed]
        assert len({tuple(g["seats"]) for g in mine}) == 3  # every rotation
        for g in mine:
            record = store.game_record(g["id"])
            assert record["given"] == list(suite.moves_of(d)) and simulate(record).ok
    store.close()


def test_a_positions_opening_travels_to_worker_processes():
    """A game task crosses to a referee worker or a Dask worker as plain values: the opening too."""
    from arena.tournament.executors import GameTask
    task = GameTask("t-000001", 42, ("a@1", "b@1"), 600, (0, 2, 1))
    assert GameTask.from_wire(task.wire()) == task
    plain = GameTask("t-000002", 42, ("a@1", "b@1"), 600)
    assert GameTask.from_wire({k: v for k, v in plain.wire().items() if k != "moves"}) == plain


@pytest.mark.parametrize("mode, warned", [(0o644, True), (0o640, True), (0o604, True), (0o600, False), (0o400, False)])
def test_a_suite_its_group_or_others_can_read_is_warned_of(tmp_path: Path, mode: int, warned: bool):
    """Readable by its group or by everyone: a bot under another uid could read it either way."""
    from arena.tournament.suites import exposure_warning
    path = tmp_path / "s.json"
    save_suite(path, make_suite(rules_from("classic", {}), 2, 2))
    path.chmod(mode)
    said = exposure_warning(path)
    assert (said is not None) == warned and (not warned or f"chmod 600 {path}" in said)


def test_a_tournament_warns_of_a_suite_others_can_read(tmp_path: Path, in_process):
    path = tmp_path / "open.json"
    save_suite(path, make_suite(rules_from("classic", {}), 2, 2))
    path.chmod(0o640)
    done = runner.invoke(app, ["tournament", "--bot", "lowest", "--bot", "highest", "--suite", str(path), "--plain",
                               "--store", str(tmp_path / "t.sqlite"), "-j", "1"])  # -j 1: the in-process bots
    assert done.exit_code == 0, done.output
    assert f"{path} is readable by other users" in " ".join(done.output.split()) and f"chmod 600 {path}" in done.output
