"""A tournament killed with SIGKILL and resumed ends up exactly like one that was never interrupted.

The bundled bots are deterministic (random reseeds from each game's start seed), so
every game's actions depend only on the schedule. The test copies them into a
directory of their own, which makes every bot process recognisable by its working
directory when looking for leftovers.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from arena.tournament.standings import standings
from arena.tournament.store import Store
from tests.checks import arena_here, zombie_children

ROOT = Path(__file__).resolve().parents[1]
BOTS = ("random", "lowest", "heuristic")
NAME = "resume"
TOTAL = 3 * 2 * 2  # 3 tables x 2 deals x 2 seat rotations

TOURNAMENT = f"""\
name = "{NAME}"
bots = ["BOTS/random", "BOTS/lowest", "BOTS/heuristic"]
seats = 2
deals = 2
seed = 2024
rules = "classic"
concurrency = 2
[time]
move_ms = 5000
"""


def arena_cmd(*args: str) -> list[str]:
    return [sys.executable, "-c", "from arena.cli.main import app; app()", *args]


def stored(path: Path) -> int:
    """Games in the store so far, read while the tournament writes (WAL: readers never block it)."""
    if not path.exists():
        return 0
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            return db.execute("SELECT COUNT(*) FROM games").fetchone()[0]
        finally:
            db.close()
    except sqlite3.OperationalError:  # not created yet
        return 0


def bot_processes(bots_dir: Path) -> list[int]:
    """Live processes of this test's bots: each bot's command carries the name of ``bots_dir`` as its
    last argument (a contained seat runs from the arena's own copy of the folder, so its working
    directory does not say whose bot it is; its command line does)."""
    mark = os.fsencode(bots_dir.name)
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as fh:
                argv = fh.read().split(b"\0")
        except OSError:
            continue  # gone
        if mark in argv:
            found.append(int(name))
    return found


def reap_orphans(before: set[int]) -> None:
    """Bots orphaned by the kill may be handed to this process (a subreaper once a test here used
    arena.bots); reap those zombies so they do not linger."""
    for pid in zombie_children():
        if pid not in before:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass


def wait_gone(bots_dir: Path, seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while True:
        left = bot_processes(bots_dir)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def snapshot(path: Path) -> dict[str, Any]:
    """Everything about the stored games that must not depend on timing or interruption."""
    db = Store(path, readonly=True)
    try:
        games = {}
        for row in db.games(tournament=NAME, limit=10**6):
            log = db.game_record(row["id"])
            assert log is not None
            steps = [{k: v for k, v in s.items() if k not in ("ms", "stderr")} for s in log["steps"]]
            games[row["id"]] = {
                "index": row["index"], "seed": row["seed"], "seats": row["seats"], "result": row["result"],
                "reason": row["reason"], "turns": row["turns"], "faults": log["faults"],
                "decisions": log["decisions"], "setup_events": log["setup_events"], "steps": steps,
            }
        lines = [{k: v for k, v in line.as_json().items() if k != "ms_per_decision"}
                 for line in standings(db.results(NAME))]
        (n_logs,) = db.db.execute("SELECT COUNT(*) FROM game_logs").fetchone()
        (n_seats,) = db.db.execute("SELECT COUNT(*) FROM game_seats").fetchone()
        (n_games,) = db.db.execute("SELECT COUNT(*) FROM games").fetchone()
        t = db.tournament(NAME)
        return {"games": games, "standings": lines, "counts": (n_games, n_logs, n_seats),
                "status": t and (t["status"], t["planned"], t["played"])}
    finally:
        db.close()


@pytest.fixture
def bots_dir() -> Any:
    """Copies of the bundled bots in a directory of their own, one a bot's private uid can enter
    (when the referee is root, bots do not run as root; pytest's temporary directories are 0700)."""
    d = Path(tempfile.mkdtemp(prefix="arena-resume-bots-"))
    d.chmod(0o755)
    for b in BOTS:
        shutil.copytree(ROOT / "bots" / b, d / b, ignore=shutil.ignore_patterns("__pycache__"))
        toml = d / b / "bot.toml"  # the bot's command names this folder (bot_processes finds it by that)
        toml.write_text(toml.read_text().replace('command = ["python3", "bot.py"]',
                                                 f'command = ["python3", "bot.py", "{d.name}"]'))
        assert d.name in toml.read_text()
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_killed_tournament_resumes_to_the_same_games(tmp_path: Path, bots_dir: Path) -> None:
    conf = tmp_path / "resume.toml"
    conf.write_text(TOURNAMENT.replace("BOTS", str(bots_dir)))
    pids_before = {int(p) for p in os.listdir("/proc") if p.isdigit()}

    # the reference: one uninterrupted run
    ref_store = tmp_path / "reference.sqlite"
    ref = arena_here("tournament", str(conf), "--plain", "--store", str(ref_store), cwd=tmp_path)
    assert ref.returncode == 0, ref.stdout + ref.stderr
    assert f"finished: {TOTAL}/{TOTAL} games stored" in ref.stdout

    # the same file into another store, killed at a random point after some games are stored
    seed = int(os.environ.get("RESUME_KILL_SEED", random.randrange(1 << 30)))
    kill_after = random.Random(seed).randint(2, TOTAL // 2)
    store = tmp_path / "killed.sqlite"
    log = (tmp_path / "killed.log").open("w")
    proc = subprocess.Popen(arena_cmd("tournament", str(conf), "--plain", "--store", str(store)),
                            cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 90
        while stored(store) < kill_after and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        if proc.poll() is not None:
            log.flush()
            raise AssertionError(f"the run ended before the kill (seed {seed}):\n"
                                 + (tmp_path / "killed.log").read_text()[-2000:])
        running = bot_processes(bots_dir)  # (so the leftover check below can see bots at all)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
        log.close()
    assert running, "no bot process found while the tournament ran"
    at_kill = stored(store)
    assert kill_after <= at_kill < TOTAL, (seed, at_kill)
    reap_orphans(pids_before)

    # resume with the very same command
    again = arena_here("tournament", str(conf), "--plain", "--store", str(store), cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"resuming with {at_kill} already stored" in again.stdout
    assert f"finished: {TOTAL}/{TOTAL} games stored" in again.stdout

    want, got = snapshot(ref_store), snapshot(store)
    assert got["counts"] == want["counts"] == (TOTAL, TOTAL, 2 * TOTAL)  # nothing stored twice
    assert got["status"] == want["status"] == ("done", TOTAL, TOTAL)
    assert sorted(got["games"]) == sorted(want["games"])
    for gid in want["games"]:
        assert got["games"][gid] == want["games"][gid], f"{gid} differs after resuming (kill seed {seed})"
    assert got["standings"] == want["standings"]
    assert all(g["faults"] == [] for g in got["games"].values())

    reap_orphans(pids_before)
    assert wait_gone(bots_dir, 5.0) == [], "bot processes left behind"


# ---------------------------------------------------------------- nothing is played twice

def _counting_launcher(starts: list[str], games: list[str]):
    """In-process bots (the bundled policies) that note every process started and every game
    begun (a seat's ``start``): what a resume really plays, whatever the store keeps."""
    import json

    from tests.fakes import policy_launcher
    inner = policy_launcher(starts)

    def launch(spec):
        conn = inner(spec)
        send = conn.send_line

        def send_line(text: str, *, timeout: float = 10.0) -> None:
            msg = json.loads(text)
            if msg.get("type") == "start":
                games.append(msg["game"])
            send(text, timeout=timeout)

        conn.send_line = send_line
        return conn
    return launch


def test_resume_plays_nothing_twice(tmp_path: Path) -> None:
    """Stopped after some games, a run resumes with exactly the missing ones, each once; run again
    once finished, it starts no bot and plays no game. (The store's key would hide a game played
    twice, so the games are counted where they are played, not where they are stored.)"""
    import trio

    from arena.tournament.config import load_config
    from arena.tournament.run import Reporter, RunStats, run_tournament
    cfg = load_config(None, {"name": "twice", "bots": list(BOTS), "deals": 4, "concurrency": 2,
                             "store": str(tmp_path / "t.sqlite")})
    total = 3 * 4 * 2
    db = Store(cfg.store)

    class Stop(Exception):
        pass

    class StopAfter(Reporter):
        def __init__(self, n: int) -> None:
            self.n = n

        def game_done(self, game, record) -> None:
            self.n -= 1
            if self.n == 0:
                raise Stop()

    starts: list[str] = []
    games: list[str] = []
    with pytest.raises(Stop):
        trio.run(lambda: run_tournament(cfg, db, StopAfter(9), launcher=_counting_launcher(starts, games)))
    first = {g["id"] for g in db.games(tournament="twice", limit=10**6)}
    assert len(first) == 9

    starts, games = [], []
    stats = RunStats()
    trio.run(lambda: run_tournament(cfg, db, stats=stats, launcher=_counting_launcher(starts, games)))
    every = {g["id"] for g in db.games(tournament="twice", limit=10**6)}
    assert len(every) == total and db.tournament("twice")["status"] == "done"
    played = [g for i, g in enumerate(games) if g not in games[:i]]  # each game once (its seats all start it)
    assert sorted(played) == sorted(every - first)  # the missing games, none of those stored before
    assert len(games) == 2 * len(played)  # two seats each, no game begun a second time
    assert stats.submitted == stats.stored == total - 9 and stats.duplicates == 0

    starts, games = [], []
    stats = RunStats()
    trio.run(lambda: run_tournament(cfg, db, stats=stats, launcher=_counting_launcher(starts, games)))
    assert (starts, games) == ([], [])  # finished: no bot started, no game played
    assert stats.submitted == stats.stored == stats.duplicates == 0
