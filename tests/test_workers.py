"""Several referee processes play one tournament: same games as one process, stored once each;
a worker that dies is replaced and its games played again; workers that cannot start are one
plain error, not a traceback."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from pathlib import Path

import pytest
import trio

from arena.tournament.config import load_config
from arena.tournament.run import Reporter, RunStats, TournamentIncomplete, run_tournament
from arena.tournament.store import Store
from tests.checks import boot_ticks, zombie_children


def _games(store: Store, name: str) -> list[tuple]:
    rows = store.games(tournament=name, limit=10**6)
    out = []
    for g in rows:
        log = store.game_record(g["id"])
        out.append((g["index"], g["seed"], tuple(g["seats"]), g["result"]["order"],
                    [s.get("action") for s in log["steps"]]))
    return out


def _cfg(tmp: Path, name: str, processes: int, store: str = "t.sqlite", **kw):
    return load_config(None, {"name": name, "bots": ["random", "lowest", "heuristic"], "deals": 3,
                              "concurrency": 2, "processes": processes, "store": str(tmp / store), **kw})


def _run(tmp: Path, name: str, processes: int, reporter: Reporter | None = None,
         stats: RunStats | None = None) -> Store:
    cfg = _cfg(tmp, name, processes)
    store = Store(cfg.store)
    trio.run(lambda: run_tournament(cfg, store, reporter, stats=stats))
    return store


def test_two_processes_play_the_same_games_as_one(tmp_path: Path) -> None:
    one = _games(_run(tmp_path, "t", 1), "t")
    two = _games(_run(tmp_path, "t2", 2), "t2")
    assert len(one) == 18 and len(two) == 18
    # same store, so same secret: same seeds, seats, results, every action
    assert [g[1:] for g in one] == [g[1:] for g in two]
    assert len({g[0] for g in two}) == 18  # each game stored once


def worker_pids() -> list[int]:
    """This test process's referee workers (``python -m arena.tournament.worker``)."""
    me, found = str(os.getpid()), []
    for proc in Path("/proc").iterdir():
        try:
            if b"arena.tournament.worker" not in (proc / "cmdline").read_bytes():
                continue
            status = (proc / "status").read_text()
        except OSError:
            continue
        if f"PPid:\t{me}\n" in status:
            found.append(int(proc.name))
    return found


def test_a_killed_worker_is_replaced_and_the_tournament_finishes(tmp_path: Path) -> None:
    since = boot_ticks()  # other tests' daemons dying orphaned to us (tmux, chromium) are not ours
    reference = _games(_run(tmp_path, "ref", 1), "ref")

    class Killer(Reporter):
        """SIGKILLs one worker as the third game is stored (mid-tournament, games in flight)."""

        def __init__(self) -> None:
            self.stored = 0
            self.killed: list[int] = []
            self.incidents: list[str] = []

        def game_done(self, game, record) -> None:
            self.stored += 1
            if self.stored == 3:
                pid = worker_pids()[0]
                os.kill(pid, signal.SIGKILL)
                self.killed.append(pid)

        def incident(self, text: str) -> None:
            self.incidents.append(text)

    killer = Killer()
    stats = RunStats()
    store = _run(tmp_path, "k", 2, killer, stats)
    assert killer.killed, "no worker was killed"
    got = _games(store, "k")
    assert [g[1:] for g in got] == [g[1:] for g in reference]  # nothing lost, nothing doubled
    assert store.tournament("k")["status"] == "done"
    assert len(killer.incidents) == 1 and f"pid {killer.killed[0]}" in killer.incidents[0]
    assert "signal 9" in killer.incidents[0] and "rescheduled" in killer.incidents[0]
    assert "holding 0 game" not in killer.incidents[0]  # it died with games in flight
    assert stats.incidents == killer.incidents and stats.failed == []
    # The dead worker's bots were orphaned to this process (a subreaper): reaped, not zombies.
    assert zombie_children(started_since=since) == []


def test_workers_that_cannot_start_are_one_plain_error(tmp_path: Path, monkeypatch) -> None:
    # A bot path that vanishes after scheduling: every worker dies loading it.
    reachable = Path(tempfile.mkdtemp(prefix="arena-gone-"))  # a bot's private uid must reach it
    reachable.chmod(0o755)
    bot = reachable / "gone"
    bot.mkdir()
    bot.chmod(0o755)
    (bot / "bot.toml").write_text('name = "gone"\ncommand = ["python3", "bot.py"]\n')
    cfg = load_config(None, {"name": "w", "bots": [str(bot), "lowest"], "deals": 2, "concurrency": 2,
                             "processes": 2, "store": str(tmp_path / "w.sqlite")})
    store = Store(cfg.store)
    import arena.tournament.worker as worker
    real = worker.WorkerExecutor.start

    async def vanish_then_start(self):
        (bot / "bot.toml").unlink(missing_ok=True)
        return await real(self)

    monkeypatch.setattr(worker.WorkerExecutor, "start", vanish_then_start)
    with pytest.raises(TournamentIncomplete) as info:  # one exception, not a group
        trio.run(run_tournament, cfg, store)
    assert "referee worker processes died" in str(info.value) and "no bot at" in str(info.value)
    assert store.tournament("w")["status"] == "running"  # resumable, not marked done
    shutil.rmtree(reachable)


def test_the_plain_summary_reports_worker_deaths() -> None:
    import io

    from arena.tournament.live import PlainReporter
    from arena.tournament.config import TournamentConfig
    out = io.StringIO()
    rep = PlainReporter(stream=out)
    rep.started(TournamentConfig(bots=["a", "b"]), 4, 0)
    rep.incident("referee worker 1 (pid 7) died (signal 9) holding 2 game(s); last stderr: (no stderr); "
                 "replaced, its games rescheduled")
    rep.finished(False)
    lines = out.getvalue().splitlines()
    assert lines[1].startswith("arena: referee worker 1 (pid 7) died (signal 9)")
    assert lines[-1] == ("finished: 0/4 games stored; 1 referee worker death(s), each replaced and its games "
                         "played again")
