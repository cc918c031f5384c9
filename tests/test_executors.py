"""The executors and what they promise: secret deal seeds, no bot process meets a deal twice
(attacked by a bot that remembers deals), one compact record form between processes, one run
of a tournament per store, and an import graph without cycles."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path
from typing import Any

from arena.bots.containment import Containment
import pytest
import trio

from arena.bots.manifest import load_bot
from arena.engine import rules_from
from arena.referee import TimeControl
from arena.referee.blocking import BlockingLaunch, BlockingPlayer, play_game, settle
from arena.tournament import seeds
from arena.tournament.config import load_config
from arena.tournament.executors import BotPool, PlayedGame
from arena.tournament.run import TournamentBusy, run_tournament
from arena.tournament.runlock import LockHeld, held, tournament_lock
from arena.tournament.store import Store
from tests.checks import arena_here
from tests.fakes import policy_launcher

REPO = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- secret seeds

def test_secret_is_made_once_private_and_shared_by_every_run(tmp_path: Path) -> None:
    store_dir = tmp_path / "new-store"
    one = seeds.load_secret(store_dir)
    assert len(one) == 32 and seeds.load_secret(store_dir) == one
    assert stat.S_IMODE(store_dir.stat().st_mode) == 0o700  # we made the directory: closed
    assert stat.S_IMODE((store_dir / "secret.key").stat().st_mode) == 0o600
    assert sorted(p.name for p in store_dir.iterdir()) == ["secret.key"]  # no temporary file left


def test_secret_made_by_racing_runs_is_one_secret(tmp_path: Path) -> None:
    got: list[bytes] = []
    threads = [threading.Thread(target=lambda: got.append(seeds.load_secret(tmp_path))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 8 and len(set(got)) == 1


def test_a_readable_or_damaged_secret_is_refused(tmp_path: Path) -> None:
    seeds.load_secret(tmp_path)
    key = tmp_path / "secret.key"
    key.chmod(0o644)
    with pytest.raises(seeds.SecretError, match="chmod 600"):
        seeds.load_secret(tmp_path)
    key.chmod(0o600)
    key.write_bytes(b"short")
    with pytest.raises(seeds.SecretError, match="damaged"):
        seeds.load_secret(tmp_path)


def test_deal_seed_needs_the_secret() -> None:
    a, b = b"a" * 32, b"b" * 32
    assert seeds.deal_seed(a, 1, 0, 0) == seeds.deal_seed(a, 1, 0, 0)
    assert seeds.deal_seed(a, 1, 0, 0) != seeds.deal_seed(b, 1, 0, 0)
    assert len({seeds.deal_seed(a, 1, t, d) for t in range(20) for d in range(20)}) == 400
    # pinned (HMAC-SHA256 as `openssl dgst -sha256 -mac HMAC` computes it, first 8 bytes, >> 1):
    # the same secret deals the same cards on every machine and Python version
    assert seeds.deal_seed(bytes(range(32)), 1, 0, 0) == 2466492544145381759
    # the old public formula is gone: the default seed no longer names a predictable deal
    import hashlib
    public = int.from_bytes(hashlib.sha256(b"palace:1:0:0").digest()[:8], "big") >> 1
    assert seeds.deal_seed(seeds.run_secret(), 1, 0, 0) != public


def test_arena_play_seed_deals_from_the_store_secret(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from arena.cli.main import app
    runs = []
    for store in ("a/s.sqlite", "a/s.sqlite", "b/s.sqlite"):  # one turn a game: only its deal is read
        res = CliRunner().invoke(app, ["play", "lowest", "highest", "--seed", "1", "--max-turns", "1", "-q",
                                       "--store", str(tmp_path / store)])
        assert res.exit_code == 0, res.output
        db = Store(tmp_path / store, readonly=True)
        runs.append(db.games(tournament="play")[-1]["seed"])
    assert runs[0] == runs[1] == seeds.deal_seed(seeds.load_secret(tmp_path / "a"), 1, 0, 0)
    assert runs[2] != runs[0]  # another store, another secret, other cards for --seed 1


# ---------------------------------------------------------------- the pool

def test_pool_never_lends_a_process_a_deal_it_has_seen() -> None:
    def main() -> None:
        pool = BotPool(policy_launcher(), TimeControl())
        spec = load_bot("lowest")
        seen: dict[str, set[int]] = {}
        lent = []
        for rnd in range(3):  # three rotation rounds over five deals, two games at once
            for deal in range(5):
                p = pool.take(spec, deal, 2)
                lent.append(p)
                serial = pool.serial(p)
                assert deal not in seen.setdefault(serial, set()), (serial, deal)
                seen[serial].add(deal)
                if len(lent) == 2:
                    for q in lent:
                        pool.give_back(q)
                    lent = []
        for q in lent:
            pool.give_back(q)
        assert len(seen) < 15  # processes are reused within a round...
        assert max(len(s) for s in seen.values()) > 1
        # ...and the idle ones that saw a deal asked for again were retired, not hoarded
        assert sum(len(v) for v in pool.idle.values()) <= 3
        pool.close()

    main()


def test_a_deal_played_seat_order_after_seat_order_keeps_one_process_per_seat() -> None:
    """A match plays each deal's seat orders one after the other: the process that just played the
    deal waits for the next one (up to one a seat less than the table) while a fresh one takes the
    other seat order, so two processes per bot serve a two-seat match of any length; a deal lent
    more often than the table has seats retires the spent ones rather than hoarding them."""
    pool = BotPool(policy_launcher(), TimeControl())
    spec = load_bot("lowest")
    seen: dict[str, set[int]] = {}
    for deal in range(10):
        for _ in range(2):  # its two seat orders, one game at a time
            p = pool.take(spec, deal, 2)
            assert deal not in seen.setdefault(pool.serial(p), set())
            seen[pool.serial(p)].add(deal)
            pool.give_back(p)
    assert pool.started == 2 and all(len(s) == 10 for s in seen.values())
    for _ in range(3):  # a deal lent again and again (a suite that repeats it): one spent process waits, no more
        pool.give_back(pool.take(spec, 99, 2))
    assert len(pool.idle[spec]) == 2 and pool.started == 3
    pool.close()


def test_a_match_on_one_lane_starts_two_processes_per_bot() -> None:
    """`arena match -j 1`'s in-process lane: 6 deal pairs, 4 bot starts (it was one per bot per
    deal, the first seat order's process retired at the second's start)."""
    from arena.ladder.match import run_match
    starts: list[str] = []
    progress, _ = trio.run(lambda: run_match(load_bot("lowest"), load_bot("highest"), rules_from("shithead", {}),
                                             max_games=12, max_turns=200, launcher=policy_launcher(starts)))
    assert sum(progress.pairs) == 6
    assert Counter(starts) == {"lowest@1.0": 2, "highest@1.0": 2}


# ---------------------------------------------------------------- the attack: a bot with a memory

@pytest.fixture
def memory_bot() -> Any:
    """The remembering bot in a directory a private bot uid can reach (tmp_path is 0700)."""
    d = Path(tempfile.mkdtemp(prefix="arena-memory-bot-"))
    d.chmod(0o755)
    shutil.copy(REPO / "tests" / "memory_bot.py", d / "bot.py")
    (d / "bot.toml").write_text('name = "memory"\nversion = "1"\ncommand = ["python3", "bot.py"]\n')
    for p in d.iterdir():
        p.chmod(0o644)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_the_memory_bot_recognises_a_deal_played_again_by_the_same_process(memory_bot: Path) -> None:
    """The control: one process playing both rotations of a deal does recognise it, so the
    tournament tests below would see a pool that reuses a process for a deal."""
    from arena.bots.launch import Launcher

    launcher = BlockingLaunch(Launcher())
    me = BlockingPlayer(load_bot(memory_bot), launcher, TimeControl(5000))
    other = BlockingPlayer(load_bot("lowest"), launcher, TimeControl(5000))
    rules = rules_from("classic", {})
    try:
        play_game([me, other], rules, 424242, game_id="first")
        again = play_game([other, me], rules, 424242, game_id="again")
    finally:
        me.shutdown()
        other.shutdown()
        settle()
    lines = [line for steps in again.stderr for line in steps]
    assert any(line.startswith("RECOGNISED again: the deal of first") for line in lines), lines


# The memory bot knows a deal by the setup hands and the face-up cards chosen, all shown in a game's
# first turns: a game cut at 40 turns lets it recognise a deal as a whole one does (the control
# above plays whole games), and the tournaments that check the pool end each game there (a whole
# game of the first-action bot ran 50 to 2,000 turns).
MEMORY_TURNS = 40


def assert_no_process_saw_a_deal_twice(store: Store, name: str) -> Counter:
    """From the store alone: every (process, deal) at most once, and no RECOGNISED line."""
    plays: Counter = Counter()
    games = store.games(tournament=name, limit=10**6)
    assert games
    for g in games:
        log = store.game_record(g["id"])
        assert log is not None and len(log["processes"]) == len(g["seats"])
        for seat, process in enumerate(log["processes"]):
            plays[(process, g["seed"])] += 1
        lines = [line for seat_lines in log["stderr"] for line in seat_lines]
        lines += [line for step in log["steps"] for line in step.get("stderr", [])]
        assert not any("RECOGNISED" in line for line in lines), (g["id"], lines)
    assert max(plays.values()) == 1, [k for k, v in plays.items() if v > 1]
    per_process = Counter(process for process, _ in plays)
    assert max(per_process.values()) > 1  # processes did serve several games: the test means something
    return per_process


@pytest.mark.parametrize("processes", [1, 2], ids=["in-process", "worker-processes"])
def test_no_bot_process_plays_a_deal_twice(memory_bot: Path, tmp_path: Path, processes: int) -> None:
    """``MEMORY_TURNS`` turns a game: who is lent which deal is decided at each game's start."""
    cfg = load_config(None, {"name": "memory", "bots": [str(memory_bot), "lowest", "heuristic"], "deals": 3,
                             "rules": "classic", "concurrency": 2, "processes": processes, "move_ms": 5000,
                             "max_turns": MEMORY_TURNS, "store": str(tmp_path / "m.sqlite")})
    store = Store(cfg.store)
    trio.run(run_tournament, cfg, store)
    assert len(store.games(tournament="memory", limit=100)) == 18
    assert_no_process_saw_a_deal_twice(store, "memory")


# ---------------------------------------------------------------- a game called off

STALLING_BOT = """import json, sys
log = open(sys.argv[1], "a")
for line in sys.stdin:
    kind = json.loads(line)["type"]
    log.write(kind + "\\n")
    log.flush()
    if kind == "hello":
        print(json.dumps({"type": "hello", "protocol": 1, "name": "stall", "version": "1"}), flush=True)
"""


def test_a_cancelled_game_stops_its_bots_at_once_in_their_lane(tmp_path: Path) -> None:
    """A game whose caller is cancelled (Ctrl-C, a match decided) is called off in its lane's
    thread: the waiting bot is killed then and there, not left to time out (it would be told
    ``error`` first) and not left running; the executor then closes cleanly."""
    from arena.bots.launch import Launcher
    from arena.tournament.executors import BotSetup, GameTask, open_in_process

    heard = tmp_path / "heard.log"
    heard.write_text("")
    d = tmp_path / "stall"
    d.mkdir()
    (d / "bot.py").write_text(STALLING_BOT)
    (d / "bot.toml").write_text(f'name = "stall"\nversion = "1"\ncommand = ["python3", "bot.py", "{heard}"]\n')
    stall = load_bot(d)
    setup = BotSetup.of({str(d): stall, "lowest": load_bot("lowest")}, rules=rules_from("classic", {}),
                        clock=TimeControl(move_ms=3000, bank_ms=0), containment=Containment.TRUSTED)
    started: list = []
    inner = BlockingLaunch(Launcher(containment=Containment.TRUSTED))

    def launch(spec):
        started.append(inner(spec))
        return started[-1]

    async def main() -> None:
        async with open_in_process(setup, capacity=1, launcher=launch) as ex:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(ex.play, GameTask("g-1", 5, (stall.label, "lowest@1.0"), 100))
                while "request" not in heard.read_text():
                    await trio.sleep(0.02)
                nursery.cancel_scope.cancel()

    trio.run(main)
    assert heard.read_text().split() == ["hello", "start", "request"]  # never told it timed out
    assert started and all(bot.returncode is not None for bot in started)


# ---------------------------------------------------------------- one compact form across processes

def test_a_played_game_crosses_processes_as_msgpack_with_the_log_as_raw_bytes() -> None:
    launch = policy_launcher()
    players = [BlockingPlayer(load_bot(b), launch, TimeControl()) for b in ("lowest", "highest")]
    record = play_game(players, rules_from("classic", {}), 99, game_id="x-000001")
    played = PlayedGame.of(record, ["p.1", "p.2"])
    data = played.to_bytes()
    assert isinstance(data, bytes) and played.log in data  # the packed log travels as is: no base64
    assert b"four_of_a_kind" not in data  # the rules stay behind: the receiver sent them
    back = PlayedGame.from_bytes(data, record.rules)
    assert back.summary["rules"] is record.rules
    assert back.processes == ["p.1", "p.2"] and back.log == played.log
    assert back.record.result == record.result and back.record.steps == []  # the summary, log apart
    assert back.full_record().as_json() == record.as_json()


# ---------------------------------------------------------------- one run per tournament and store

def test_a_second_run_of_the_same_tournament_is_refused_with_the_holder(tmp_path: Path) -> None:
    cfg = load_config(None, {"name": "busy", "bots": ["lowest", "highest"], "deals": 1,
                             "store": str(tmp_path / "b.sqlite")})
    store = Store(cfg.store)
    with tournament_lock(store.path, "busy"):
        with pytest.raises(TournamentBusy, match=f"process {os.getpid()}"):
            trio.run(lambda: run_tournament(cfg, store, launcher=policy_launcher()))
        # another tournament in the same store is not held up
        other = load_config(None, {"name": "other", "bots": ["lowest", "highest"], "deals": 1,
                                   "store": cfg.store})
        assert len(trio.run(lambda: run_tournament(other, store, launcher=policy_launcher()))) == 2
    assert store.games(tournament="busy") == []
    assert len(trio.run(lambda: run_tournament(cfg, store, launcher=policy_launcher()))) == 2  # lock gone


def test_the_cli_says_which_process_plays_the_tournament(tmp_path: Path) -> None:
    store = tmp_path / "cli.sqlite"
    Store(store).close()
    with tournament_lock(store, "demo"):  # (the command in this process: what it says is not about the process)
        done = arena_here("tournament", "--plain", "--store", str(store), "--deals", "1", env={"COLUMNS": "300"})
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"already being played in {store} by process {os.getpid()}" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_lost_executors_line_counts_a_game_another_lane_stored_after_the_loss(tmp_path: Path, monkeypatch) -> None:
    """Two lanes: one learns the executor is gone while the other's deal (its two games) has come
    back and is being stored. The line says how many games are stored, and must count those too (it
    said fewer than the store held when it was counted at the loss)."""
    from contextlib import asynccontextmanager

    from arena.tournament import run as run_mod
    from arena.tournament.executors import ExecutorBroken
    from arena.tournament.run import TournamentIncomplete
    real_open = run_mod.open_executor

    @asynccontextmanager
    async def opened(*args, **kw):
        async with real_open(*args, **kw) as real:
            first_back, let_first_go = trio.Event(), trio.Event()

            class Breaking:
                capacity = 2
                incidents: list[str] = []

                async def play_deal(self, tasks):
                    if tasks[0].game_id.endswith("000000"):
                        result = await real.play_deal(tasks)
                        first_back.set()
                        await let_first_go.wait()
                        return result
                    await first_back.wait()
                    let_first_go.set()  # the first lane's game is stored after this lane gives up
                    raise ExecutorBroken("lost the cluster")

            yield Breaking()

    monkeypatch.setattr(run_mod, "open_executor", opened)
    cfg = load_config(None, {"name": "lost", "bots": ["lowest", "highest"], "deals": 2, "concurrency": 2,
                             "store": str(tmp_path / "l.sqlite")})
    store = Store(cfg.store)
    with pytest.raises(TournamentIncomplete, match="lost the cluster; 2/4 games are stored"):
        trio.run(lambda: run_tournament(cfg, store, launcher=policy_launcher()))
    assert len(store.games(tournament="lost")) == 2


def test_a_killed_runs_lock_is_gone_though_a_child_it_forked_lives_on(tmp_path: Path) -> None:
    """A run killed while one of its forks has not yet exec'd (a bot starting): the kernel says
    nobody plays it any more, and a new run takes the lock, while that child still lives."""
    store = tmp_path / "k.sqlite"
    r, w = os.pipe()
    code = f"""
import os, signal, time
from arena.tournament.runlock import tournament_lock
with tournament_lock({str(store)!r}, "k"):
    child = os.fork()
    if child == 0:
        time.sleep(30); os._exit(0)
    os.write({w}, str(child).encode())
    os.kill(os.getpid(), signal.SIGKILL)
"""
    run = subprocess.run([sys.executable, "-c", code], pass_fds=(w,), timeout=60)
    os.close(w)
    child = int(os.read(r, 32))
    os.close(r)
    try:
        assert run.returncode == -signal.SIGKILL
        os.kill(child, 0)  # the fork lives on, holding every descriptor of its parent
        assert held(store, ["k"]) == set()
        with tournament_lock(store, "k"):
            assert held(store, ["k"]) == {"k"}
    finally:
        os.kill(child, signal.SIGKILL)


def test_a_second_lock_in_the_same_process_is_refused_and_keeps_the_first(tmp_path: Path) -> None:
    """Two runs in one process (threads): the second is refused without opening the file, which
    would drop the first's record lock when closed."""
    store = tmp_path / "t.sqlite"
    with tournament_lock(store, "t"):
        with pytest.raises(LockHeld, match=f"process {os.getpid()}"):
            with tournament_lock(store, "t"):
                pass
        assert held(store, ["t"]) == {"t"}
    assert held(store, ["t"]) == set()


# ---------------------------------------------------------------- the import graph

@pytest.mark.parametrize("module,forbidden", [
    ("arena.tournament.executors", ["arena.tournament.run", "arena.tournament.worker", "arena.tournament.cluster"]),
    ("arena.tournament.worker", ["arena.tournament.run", "arena.tournament.cluster"]),
    ("arena.tournament.cluster", ["arena.tournament.run", "arena.tournament.worker", "dask", "distributed"]),
])
def test_executors_do_not_import_the_tournament(module: str, forbidden: list[str]) -> None:
    code = f"import sys, {module}; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", "import json; " + code], capture_output=True, text=True,
                         timeout=60, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 0, out.stderr
    loaded = set(json.loads(out.stdout))
    assert not loaded & set(forbidden), loaded & set(forbidden)
