"""Tournaments: the schedule, the config file, the concurrent runner, the store and the CLI on top.

Most runs use in-process fake bots (``tests.fakes.policy_launcher``); one uses the real
bundled bots, and the CLI runs in this process (its games on worker processes).
"""

from __future__ import annotations

import csv
import itertools
import json
import threading
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
import trio

from arena.referee import GameRecord
from arena.tournament.config import ConfigError, TournamentConfig, load_bots, load_config
from arena.tournament.run import run_tournament
from arena.tournament.schedule import schedule, tables
from arena.tournament.seeds import deal_seed
from arena.tournament.standings import standings
from arena.tournament.store import Store
from tests.checks import children, fixed_secret, replay
from tests.fakes import POLICIES, ScriptedConnection, policy_bot, policy_launcher

ROOT = Path(__file__).resolve().parents[1]
BOTS3 = ["random", "lowest", "heuristic"]


SECRET = bytes(range(32))  # a fixed store secret, so the tests' schedules are fixed


def labels(bots: list[str]) -> dict[str, str]:
    return {b: f"{b}@1" for b in bots}


def schedule_of(cfg: TournamentConfig, lab: dict[str, str]) -> list[Any]:
    return schedule(cfg, lab, SECRET)


def cfg_of(**kw: Any) -> TournamentConfig:
    return load_config(None, kw)


# ---------------------------------------------------------------- the schedule

@pytest.mark.parametrize("n_bots,seats,deals", [(3, 2, 4), (4, 3, 2), (5, 4, 1), (6, 6, 3)])
def test_round_robin_duplicate_deals(n_bots: int, seats: int, deals: int) -> None:
    bots = [f"b{i}" for i in range(n_bots)]
    cfg = TournamentConfig(bots=bots, seats=seats, deals=deals, rules="skip8", seed=9)
    games = schedule_of(cfg, labels(bots))
    groups = list(itertools.combinations([f"b{i}@1" for i in range(n_bots)], seats))
    assert len(games) == len(groups) * deals * seats
    assert [g.index for g in games] == list(range(len(games)))
    by_deal: dict[tuple[int, int], list[Any]] = defaultdict(list)
    for g in games:
        by_deal[(g.table, g.deal)].append(g)
    assert len(by_deal) == len(groups) * deals
    for (table, deal), rotations in by_deal.items():
        # every deal is played once per seat rotation, all with the same seed
        assert len(rotations) == seats
        assert {g.seed for g in rotations} == {deal_seed(SECRET, 9, table, deal)}
        assert sorted(g.rotation for g in rotations) == list(range(seats))
        base = rotations[0].seats
        assert rotations[0].rotation == 0 and base == groups[table]
        for g in rotations:
            assert g.seats == base[g.rotation:] + base[:g.rotation]
        for seat in range(seats):  # each bot sits in each seat exactly once over the rotations
            assert sorted(g.seats[seat] for g in rotations) == sorted(base)
    # every pair of bots meets equally often
    meets = Counter(pair for g in games for pair in itertools.combinations(sorted(g.seats), 2))
    assert len(set(meets.values())) == 1


def test_seeds_depend_only_on_base_table_and_deal() -> None:
    a = schedule_of(TournamentConfig(bots=["x", "y", "z"], deals=3, seed=5), labels(["x", "y", "z"]))
    b = schedule_of(TournamentConfig(bots=["p", "q", "r"], deals=3, seed=5, rules="shithead", max_turns=50),
                    labels(["p", "q", "r"]))
    assert [(g.table, g.deal, g.seed) for g in a] == [(g.table, g.deal, g.seed) for g in b]
    c = schedule_of(TournamentConfig(bots=["x", "y", "z"], deals=3, seed=6), labels(["x", "y", "z"]))
    assert all(g.seed != h.seed for g, h in zip(a, c))
    seeds = {(g.table, g.deal): g.seed for g in a}
    assert len(set(seeds.values())) == len(seeds)  # no two deals share a seed
    # stable across runs, machines and Python versions (HMAC-SHA256, not hash())
    assert deal_seed(SECRET, 1, 0, 0) == deal_seed(bytes(range(32)), 1, 0, 0)
    assert all(0 <= s < 1 << 63 for s in seeds.values())
    # another secret (another store) deals other cards for the same public seed
    other = schedule(TournamentConfig(bots=["x", "y", "z"], deals=3, seed=5), labels(["x", "y", "z"]), b"k" * 32)
    assert all(g.seed != h.seed for g, h in zip(a, other))


def test_schedule_is_ordered_by_rotation_round() -> None:
    """Every deal's first rotation before any deal's second: a pooled process can serve a whole
    round without meeting a deal twice."""
    cfg = TournamentConfig(bots=BOTS3 + ["highest"], seats=3, deals=2)
    games = schedule_of(cfg, labels(cfg.bots))
    assert [g.rotation for g in games] == sorted(g.rotation for g in games)
    for r in range(cfg.seats):
        round_ = [g for g in games if g.rotation == r]
        assert len({(g.table, g.deal) for g in round_}) == len(round_) == 4 * 2


def test_more_deals_extend_the_schedule() -> None:
    """Raising ``deals`` keeps the seeds of the deals already there (a longer run extends a shorter)."""
    short = schedule_of(TournamentConfig(bots=BOTS3, deals=2), labels(BOTS3))
    long = schedule_of(TournamentConfig(bots=BOTS3, deals=5), labels(BOTS3))
    key = lambda g: (g.table, g.deal, g.rotation, g.seats, g.seed)  # noqa: E731
    assert {key(g) for g in short} <= {key(g) for g in long}


def test_gauntlet_tables() -> None:
    field, cands = ["f1", "f2", "f3", "f4"], ["c1", "c2"]
    cfg = TournamentConfig(bots=field, candidates=cands, format="gauntlet", seats=3, deals=2)
    lab = labels(field + cands)
    groups = tables(cfg, lab)
    assert len(groups) == len(cands) * 6  # C(4, 2) field pairs per candidate
    for g in groups:
        assert g[0] in ("c1@1", "c2@1") and not set(g[1:]) & {"c1@1", "c2@1"}  # candidates never meet
    for c in ("c1@1", "c2@1"):
        assert sorted(g[1:] for g in groups if g[0] == c) == sorted(itertools.combinations(
            [lab[f] for f in field], 2))
    games = schedule_of(cfg, lab)
    assert len(games) == len(groups) * 2 * 3
    per_seat = Counter((g.seats.index(c), c) for g in games for c in ("c1@1", "c2@1") if c in g.seats)
    assert len(set(per_seat.values())) == 1  # each candidate sits in every seat equally often


def test_sampling_when_max_tables_is_exceeded() -> None:
    bots = [f"b{i}" for i in range(9)]
    lab = labels(bots)
    everything = set(itertools.combinations([lab[b] for b in bots], 3))  # 84 tables
    cfg = TournamentConfig(bots=bots, seats=3, max_tables=10, seed=1)
    sample = tables(cfg, lab)
    assert len(sample) == 10 == len(set(sample)) and set(sample) <= everything
    assert tables(cfg, lab) == sample  # reproducible
    assert tables(TournamentConfig(bots=bots, seats=3, max_tables=10, seed=2), lab) != sample
    assert len(schedule_of(cfg, lab)) == 10 * cfg.deals * 3
    assert set(tables(TournamentConfig(bots=bots, seats=3, max_tables=84), lab)) == everything


def test_schedule_is_reproducible_from_the_file(tmp_path: Path) -> None:
    f = tmp_path / "t.toml"
    f.write_text('bots = ["random", "lowest", "heuristic", "highest"]\nseats = 3\ndeals = 3\nseed = 77\n')
    one = load_config(f)
    two = load_config(f)
    lab = {ref: s.label for ref, s in load_bots(one).items()}
    assert schedule_of(one, lab) == schedule_of(two, lab)
    assert one.fingerprint() == two.fingerprint()


# ---------------------------------------------------------------- config errors

CONFIG_ERRORS = [
    ('bots = ["random", "lowest"]\ncolour = "red"\n', "unknown tournament field(s): colour"),
    ('bots = ["random", "lowest"]\n[time]\nmove_ms = 5\nthink = 3\n', "think"),
    ('bots = ["random", "lowest"]\nrules = "no-such-rules"\n', "rules:"),
    ('bots = ["random", "lowest"]\n[options]\nbogus = 1\n', "rules:"),
    ('bots = ["random", "lowest"]\n[options]\nseven = "sideways"\n', "seven"),
    ('bots = ["random", "lowest"]\nseats = 3\n', "3 seats need at least 3 bots, got 2"),
    ('bots = ["random"]\n', "2 seats need at least 2 bots, got 1"),
    ('bots = ["random", "lowest"\n', "not valid TOML"),
    ('bots = ["random", "lowest"]\nseats = 9\n', "seats:"),
    ('bots = ["random", "lowest"]\nformat = "ladder"\n', "format"),
    ('bots = ["random", "lowest"]\nformat = "gauntlet"\n', "candidates"),
    ('bots = ["random", "random"]\n', "listed once"),
    ('bots = ["random", "lowest"]\ndeals = 0\n', "deals must be at least 1"),
    ('bots = ["random", "lowest"]\ntime = 5\n', "[time] must be a table"),
    ('bots = ["random", "lowest"]\n[limits]\nmemory_mb = -1\n', "limits:"),
    ('bots = ["random", "lowest"]\n[limits]\nshoe_size = 9\n', "limits:"),
    ('bots = ["random", "lowest"]\nbank_ms = -1\n', "bank_ms"),
    # wrongly typed values name their field instead of failing somewhere deeper
    ('bots = ["random", "lowest"]\nseats = "3"\n', "seats"),
    ('bots = ["random", "lowest"]\ndeals = "4"\n', "deals"),
    ('bots = ["random", "lowest"]\nmax_turns = 1.5\n', "max_turns"),
    ('bots = "random"\n', "bots"),
    ('bots = ["random", "lowest"]\nrules = 4\n', "rules"),
    ('bots = ["random", "lowest"]\nsandbox = "yes"\n', "sandbox"),
    ('bots = ["random", "lowest"]\noptions = 3\n', "options"),
    ('bots = ["random", 7]\n', "bots"),
]


@pytest.mark.parametrize("body,needle", CONFIG_ERRORS)
def test_config_errors(tmp_path: Path, body: str, needle: str) -> None:
    f = tmp_path / "bad.toml"
    f.write_text(body)
    with pytest.raises(ConfigError) as info:
        load_config(f)
    assert needle in str(info.value)


def test_config_error_for_missing_file_and_unknown_bot(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no tournament file"):
        load_config(tmp_path / "nope.toml")
    with pytest.raises(ConfigError, match="no bot at 'no-such-bot'"):
        load_bots(cfg_of(bots=["random", "no-such-bot"]))


def test_config_file_fields(tmp_path: Path) -> None:
    (tmp_path / "mybot").mkdir()
    (tmp_path / "mybot" / "bot.toml").write_text('name = "mine"\ncommand = ["python3", "bot.py"]\n')
    f = tmp_path / "cup.toml"
    f.write_text('bots = ["random", "mybot"]\nrules = "shithead"\ndeals = 3\n'
                 '[options]\nstale_turns = 300\n[time]\nmove_ms = 250\nbank_ms = 0\n')
    cfg = load_config(f, {"seed": 12, "deals": None})
    assert cfg.name == "cup" and cfg.deals == 3 and cfg.seed == 12
    assert cfg.bots == ["random", str((tmp_path / "mybot").resolve())]  # paths are relative to the file
    assert cfg.clock().move_ms == 250 and cfg.clock().bank_ms == 0
    assert cfg.ruleset().stale_turns == 300


# ---------------------------------------------------------------- the runner with fake bots

def check_store(db: Store, cfg: TournamentConfig, lab: dict[str, str]) -> list[dict[str, Any]]:
    """Every scheduled game is stored exactly once, as scheduled, with a coherent log."""
    from arena.tournament.seeds import load_secret
    games = schedule(cfg, lab, load_secret(db.path.parent))
    rows = db.games(tournament=cfg.name, limit=10**6)
    assert [r["index"] for r in rows] == [g.index for g in games]
    assert len({r["id"] for r in rows}) == len(rows)
    for row, g in zip(rows, games):
        assert row["id"] == f"{cfg.name}-{g.index:06d}"
        assert row["seats"] == list(g.seats) and row["seed"] == g.seed
        log = db.game_record(row["id"])
        assert log is not None and log["game_id"] == row["id"] and log["seed"] == g.seed
        assert log["players"] == [s.split("@")[0] for s in g.seats]
        assert log["result"] == row["result"]
        replay(GameRecord.from_json(log))
    (n_games,) = db.db.execute("SELECT COUNT(*) FROM games WHERE tournament=?", (cfg.name,)).fetchone()
    (n_logs,) = db.db.execute("SELECT COUNT(*) FROM game_logs l JOIN games g ON g.id=l.game "
                              "WHERE g.tournament=?", (cfg.name,)).fetchone()
    (n_seats,) = db.db.execute("SELECT COUNT(*) FROM game_seats s JOIN games g ON g.id=s.game "
                               "WHERE g.tournament=?", (cfg.name,)).fetchone()
    assert n_games == n_logs == len(games) and n_seats == len(games) * cfg.seats
    t = db.tournament(cfg.name)
    assert t is not None and t["status"] == "done" and t["planned"] == t["played"] == len(games)
    return rows


def test_fake_round_robin_end_to_end(tmp_path: Path) -> None:
    cfg = cfg_of(name="rr", bots=BOTS3, seats=2, deals=3, concurrency=3, store=str(tmp_path / "a.sqlite"))
    db = Store(cfg.store)
    starts: list[str] = []
    played = trio.run(lambda: run_tournament(cfg, db, launcher=policy_launcher(starts)))
    lab = {ref: s.label for ref, s in load_bots(cfg).items()}
    assert len(played) == 18
    check_store(db, cfg, lab)
    # processes serve many games in turn (each bot plays 12): at most one per concurrent game per bot
    # and rotation round, since a process never meets a deal twice
    assert set(starts) == set(lab.values())
    assert all(count <= cfg.workers * cfg.seats for count in Counter(starts).values()), Counter(starts)
    lines = {l.bot: l for l in standings(db.results("rr"))}
    assert set(lines) == set(lab.values()) and all(l.games == 12 for l in lines.values())
    assert sum(l.wins for l in lines.values()) == 18
    # run again: nothing left to play, nothing stored twice
    again = trio.run(lambda: run_tournament(cfg, db, launcher=policy_launcher()))
    assert again == [] and len(db.games(tournament="rr", limit=1000)) == 18


def test_fake_gauntlet_four_seats(tmp_path: Path) -> None:
    cfg = cfg_of(name="g4", bots=["random", "lowest", "highest"], candidates=["heuristic"], format="gauntlet",
                 seats=4, rules="shithead", deals=2, concurrency=2, store=str(tmp_path / "g.sqlite"))
    db = Store(cfg.store)
    trio.run(lambda: run_tournament(cfg, db, launcher=policy_launcher()))
    lab = {ref: s.label for ref, s in load_bots(cfg).items()}
    rows = check_store(db, cfg, lab)
    assert len(rows) == 1 * 2 * 4 and all("heuristic@1.0" in r["seats"] for r in rows)


def test_store_refuses_a_second_copy(tmp_path: Path) -> None:
    cfg = cfg_of(name="once", bots=["random", "lowest"], deals=1, concurrency=1, store=str(tmp_path / "o.sqlite"))
    db = Store(cfg.store)
    (rec, _) = trio.run(lambda: run_tournament(cfg, db, launcher=policy_launcher()))
    assert db.save_game("once", 0, ["random@1.0", "lowest@1.0"], rec.as_json()) is False
    assert len(db.games(tournament="once")) == 2


class Interleaving:
    """Fake bots that each check they only ever hear about one game at a time. A game's first
    start waits (on its lane's thread) until three games have begun, so the games do overlap
    however the threads are scheduled (an executor that plays one at a time times out and fails)."""

    def __init__(self) -> None:
        self.begun = threading.Condition()
        self.trace: list[tuple[str, str]] = []  # (game id, message type), in the order bots saw them
        self.problems: list[str] = []

    def __call__(self, spec: Any) -> ScriptedConnection:
        inner = policy_bot(POLICIES[spec.name](), spec.name)
        current: list[str | None] = [None]
        outer = self

        def respond(line: str) -> list[str] | None:
            msg = json.loads(line)
            game = msg.get("game")
            if msg["type"] == "start":
                if current[0] is not None:
                    outer.problems.append(f"{spec.name}: start of {game} during {current[0]}")
                current[0] = game
                with outer.begun:
                    outer.trace.append((game, "start"))
                    outer.begun.notify_all()
                    outer.begun.wait_for(lambda: len({g for g, k in outer.trace if k == "start"}) >= 3, timeout=30)
                return inner(line)
            elif msg["type"] in ("request", "end"):
                if game != current[0]:
                    outer.problems.append(f"{spec.name}: {msg['type']} of {game} during {current[0]}")
                if msg["type"] == "end":
                    current[0] = None
            if game is not None:
                outer.trace.append((game, msg["type"]))
            return inner(line)

        return ScriptedConnection(respond)


def test_concurrent_games_do_not_interleave(tmp_path: Path) -> None:
    """(A known secret and a turn cap: the claim is about the games' messages, not their length,
    which on a fresh secret ran from a fraction of a second to seconds where heuristic and highest
    played on to the default cap.)"""
    fixed_secret(tmp_path)
    cfg = cfg_of(name="conc", bots=BOTS3 + ["highest"], seats=3, rules="skip8", deals=1, concurrency=4,
                 max_turns=200, store=str(tmp_path / "c.sqlite"))
    db = Store(cfg.store)
    bots = Interleaving()

    async def main() -> Any:
        return await run_tournament(cfg, db, launcher=bots)

    trio.run(main)
    assert bots.problems == []
    lab = {ref: s.label for ref, s in load_bots(cfg).items()}
    check_store(db, cfg, lab)
    # the games really did run side by side
    open_games, most = set(), 0
    for game, kind in bots.trace:
        if kind == "start":
            open_games.add(game)
        elif kind == "end":
            open_games.discard(game)
        most = max(most, len(open_games))
    assert most >= 3


# ---------------------------------------------------------------- real bundled bots

def test_real_bundled_bots(tmp_path: Path) -> None:
    """The bundled bots as real processes, one game at a time in this process, so each bot is this
    process's child and one left behind is seen (the referee workers are tests/test_workers.py's)."""
    before = children()
    cfg = cfg_of(name="real", bots=["random", "lowest"], seats=2, deals=2, concurrency=1, move_ms=5000,
                 store=str(tmp_path / "r.sqlite"))
    db = Store(cfg.store)
    played = trio.run(run_tournament, cfg, db)
    assert len(played) == 4 and all(r.faults == [] for r in played)
    lab = {ref: s.label for ref, s in load_bots(cfg).items()}
    check_store(db, cfg, lab)
    assert children() - before == set(), "bot processes left behind"


# ---------------------------------------------------------------- the command line

@pytest.fixture(scope="module")
def cli_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Any]:
    """`arena tournament` from a file, run in this process (tests.checks.arena_here: what it prints,
    stores and exits with; its games on worker processes as ever); what a shell sees of a real
    process is tests/test_cli_firsthour.py's."""
    from tests.checks import arena_here
    tmp = tmp_path_factory.mktemp("cli")
    f = tmp / "cup.toml"
    f.write_text('name = "cup"\nbots = ["random", "lowest", "heuristic"]\nseats = 2\ndeals = 1\n'
                 'concurrency = 2\n[time]\nmove_ms = 5000\n')
    store = tmp / "cup.sqlite"
    done = arena_here("tournament", str(f), "--plain", "--store", str(store), cwd=tmp)
    return tmp, store, done


def test_cli_tournament_prints_standings(cli_run: Any) -> None:
    _, store, done = cli_run
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "tournament cup: 6 games" in out and "finished: 6/6 games stored" in out
    assert "Standings: cup (6 games)" in out
    for bot in ("random@1.0", "lowest@1.0", "heuristic@1.0"):
        assert bot in out
    assert store.exists()


def run_cli(*args: str) -> Any:
    """The other commands run in-process (typer's runner): the same code without a new interpreter each."""
    from typer.testing import CliRunner

    from arena.cli.main import app
    try:
        runner = CliRunner(mix_stderr=False)  # click < 8.2 mixes stderr in unless told
    except TypeError:
        runner = CliRunner()
    return runner.invoke(app, list(args), catch_exceptions=False)


def test_cli_standings_games_export(cli_run: Any) -> None:
    tmp, store, done = cli_run
    assert done.returncode == 0, done.stderr
    st = run_cli("standings", "cup", "--store", str(store), "--json")
    assert st.exit_code == 0, st.stderr
    lines = json.loads(st.stdout)
    assert {l["bot"] for l in lines} == {"random@1.0", "lowest@1.0", "heuristic@1.0"}
    assert all(l["games"] == 4 for l in lines) and sum(l["wins"] for l in lines) == 6
    table = run_cli("standings", "cup", "--store", str(store))
    assert table.exit_code == 0 and "heuristic@1.0" in table.stdout
    missing = run_cli("standings", "nope", "--store", str(store))
    assert missing.exit_code == 2 and "no tournament 'nope'" in missing.stderr

    gm = run_cli("games", "--tournament", "cup", "--store", str(store), "--json")
    assert gm.exit_code == 0, gm.stderr
    rows = json.loads(gm.stdout)
    assert sorted(r["index"] for r in rows) == list(range(6)) and all(r["faults"] == 0 for r in rows)
    assert len(json.loads(run_cli("games", "--bot", "random", "--store", str(store), "--json").stdout)) == 4
    listing = run_cli("games", "--tournament", "cup", "--store", str(store))
    assert listing.exit_code == 0 and "cup-000005" in listing.stdout

    jl = tmp / "out.jsonl"
    ex = run_cli("export", str(jl), "--tournament", "cup", "--logs", "--store", str(store))
    assert ex.exit_code == 0, ex.stderr
    games = [json.loads(line) for line in jl.read_text().splitlines()]
    assert [g["id"] for g in games] == [r["id"] for r in rows]
    for g in games:
        replay(GameRecord.from_json(g["log"]))

    cv = tmp / "out.csv"
    ex = run_cli("export", str(cv), "--tournament", "cup", "--store", str(store))
    assert ex.exit_code == 0, ex.stderr
    with cv.open() as fh:
        table_rows = list(csv.DictReader(fh))
    assert len(table_rows) == 12  # one row per seat
    for g in games:
        mine = [r for r in table_rows if r["game"] == g["id"]]
        assert [r["bot"] for r in mine] == g["seats"]
        assert [int(r["seat"]) for r in mine if r["place"] == "1"] == [g["result"]["winner"]]

    # the CLI's standings are the ones computed from the store
    direct = standings(Store(store, readonly=True).results("cup"))
    assert [l.bot for l in direct] == [l["bot"] for l in lines]


def test_cli_config_error_exit_code(tmp_path: Path) -> None:
    f = tmp_path / "bad.toml"
    f.write_text('bots = ["random", "lowest"]\ncolour = "red"\n')
    done = run_cli("tournament", str(f), "--plain", "--store", str(tmp_path / "x.sqlite"))
    assert done.exit_code == 2 and "colour" in done.stderr
    assert not (tmp_path / "x.sqlite").exists()


# ---------------------------------------------------------------- examples, memory, display

EXAMPLES = ROOT / "examples" / "tournaments"


@pytest.mark.parametrize("name,games", [("league-2p", 300), ("league-4p", 200), ("gauntlet", 360),
                                        ("swiss-3p", 96), ("knockout", 12 * 6)])
def test_example_tournaments_load(name: str, games: int) -> None:
    cfg = load_config(EXAMPLES / f"{name}.toml")
    assert cfg.name == name
    lab = {ref: s.label for ref, s in load_bots(cfg).items()}
    from arena.tournament.config import STAGED
    from arena.tournament.formats import planned_games
    count = planned_games(cfg) if cfg.format in STAGED else len(schedule_of(cfg, lab))
    assert count == games  # the count each file's comments promise
    cfg.ruleset()


def test_example_league_plays_with_fakes(tmp_path: Path) -> None:
    cfg = load_config(EXAMPLES / "league-2p.toml", {"deals": 1, "store": str(tmp_path / "e.sqlite")})
    db = Store(cfg.store)
    played = trio.run(lambda: run_tournament(cfg, db, launcher=policy_launcher()))
    assert len(played) == 12 and not any(r.faults for r in played)


def test_returned_records_do_not_hold_logs(tmp_path: Path) -> None:
    """A long tournament must not keep every game's log in memory; the store has them."""
    cfg = cfg_of(name="slim", bots=["random", "lowest"], deals=2, concurrency=2, store=str(tmp_path / "m.sqlite"))
    db = Store(cfg.store)
    slim = trio.run(lambda: run_tournament(cfg, db, launcher=policy_launcher()))
    assert all(r.steps == [] and r.result is not None for r in slim)
    assert all(db.game_record(r.game_id)["steps"] for r in slim)
    cfg2 = cfg_of(name="full", bots=["random", "lowest"], deals=1, store=str(tmp_path / "m.sqlite"))
    full = trio.run(lambda: run_tournament(cfg2, db, launcher=policy_launcher(), keep_logs=True))
    assert all(r.steps for r in full)


def test_rich_display_does_not_retally_every_game() -> None:
    """The live table is rebuilt from every result so far; doing it for each game made a long
    tournament quadratic. It is rebuilt at most at the display's refresh rate (and at the end)."""
    import io

    from rich.console import Console

    from arena.tournament.live import RichReporter
    from arena.tournament.schedule import ScheduledGame

    rep = RichReporter(Console(file=io.StringIO(), width=120))
    renders = 0
    real = rep._render

    def counting():
        nonlocal renders
        renders += 1
        return real()

    rep._render = counting  # type: ignore[method-assign]
    total = 2000
    rep.started(TournamentConfig(bots=["a", "b"]), total, 0)
    try:
        for i in range(total):
            result = {"reason": "first_out", "order": [[i % 2], [1 - i % 2]], "complete": True, "draw": False,
                      "winner": i % 2, "loser": 1 - i % 2, "forfeits": {}}
            rep.game_done(ScheduledGame(i, 0, 0, 0, ("a@1", "b@1"), 1),
                          GameRecord(f"g{i}", {}, 1, ["a", "b"], 100, result=result))
    finally:
        rep.finished(False)
    assert renders < total // 4


def test_plain_log_names_the_finishing_order():
    from arena.tournament.live import finishing_order
    assert finishing_order([[1], [0, 2]], ["a@1", "b@1", "c@1"]) == "b@1 > a@1 = c@1"
    assert finishing_order([], ["a@1"]) == "no order"
