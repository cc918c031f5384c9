"""Several referee processes play one tournament: same games as one process, stored once each;
a worker that dies is replaced and its games played again; workers that cannot start are one
plain error, not a traceback."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
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


# Three bots, two deals: 12 games, enough that a worker killed as the third is stored dies holding
# games with more still to send (two workers, two lanes each).
DEALS = 2
GAMES = 3 * 2 * DEALS  # pairs x seat orders x deals


def _cfg(tmp: Path, name: str, processes: int, store: str = "t.sqlite", **kw):
    return load_config(None, {"name": name, "bots": ["random", "lowest", "heuristic"], "deals": DEALS,
                              "concurrency": 2, "processes": processes, "store": str(tmp / store), **kw})


def _run(tmp: Path, name: str, processes: int, reporter: Reporter | None = None,
         stats: RunStats | None = None, **kw) -> Store:
    cfg = _cfg(tmp, name, processes, **kw)
    store = Store(cfg.store)
    trio.run(lambda: run_tournament(cfg, store, reporter, stats=stats))
    return store


def kill_a_worker_at_the_third_store(monkeypatch) -> list[int]:
    """SIGKILL a referee worker that holds a game in flight, at the run's third stored game or the
    first store after it where one does (the worker whose game was just stored may hold none yet:
    the pid alone could not tell, and a worker killed idle once made the test fail), and wait until
    it is dead before the run can notice (this runs inside its loop): the next games sent may go to
    the dead worker's broken pipe, and must be played elsewhere all the same. Returns the list the
    killed pid is put in."""
    import arena.tournament.run as run
    import arena.tournament.worker as worker
    real_store = run.store_played
    real_init = worker._Worker.__init__
    workers: list = []
    killed: list[int] = []
    stored: list[int] = []

    def noted(self, *args, **kw):
        real_init(self, *args, **kw)
        workers.append(self)

    def store_then_kill(*args, **kw):
        saved = real_store(*args, **kw)
        stored.append(1)
        holding = [w for w in workers if w.alive and w.held and w.proc.returncode is None]
        if len(stored) >= 3 and not killed and holding:
            pid = holding[0].proc.pid
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
            while Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                time.sleep(0.001)
        return saved

    monkeypatch.setattr(worker._Worker, "__init__", noted)
    monkeypatch.setattr(run, "store_played", store_then_kill)
    return killed


class _Recorded:
    """A reporter that notes each call the run makes on it (method, arguments), passed on to ``inner``."""

    def __init__(self, inner, calls: list) -> None:
        self.inner, self.calls = inner, calls

    def __getattr__(self, name: str):
        method = getattr(self.inner, name)

        def call(*args):
            self.calls.append((name, args))
            return method(*args)
        return call


def test_two_processes_play_the_same_games_as_one_and_a_killed_one_is_replaced(tmp_path: Path, monkeypatch) -> None:
    """One store, two runs of one tournament: one process, in-process; then ``arena tournament
    --plain`` on two worker processes, one of them SIGKILLed as the third game is stored
    (mid-tournament, games in flight). The same secret gives the same seeds, so both store the
    same games, every action alike, each once: the replaced worker's games are played again,
    nothing lost, nothing doubled. The command says the death once and finishes. The live display
    is then given the very calls the run made on its reporter and must say the same. (Each kill
    run costs two worker processes and their bots: one run shows all of it.)"""
    import io

    from rich.console import Console
    from typer.testing import CliRunner

    from arena.bots import launch
    from arena.cli.main import app
    from arena.tournament import live
    # run from a directory holding a folder named arena (a clone's parent): the workers must
    # still import the installed package, not that folder
    (tmp_path / "arena").mkdir()
    monkeypatch.chdir(tmp_path)
    since = boot_ticks()  # other tests' daemons dying orphaned to us (tmux, chromium) are not ours
    one = _games(_run(tmp_path, "t", 1), "t")
    assert len(one) == GAMES
    killed = kill_a_worker_at_the_third_store(monkeypatch)
    # The workers' temporary copies of the bots go here, where no other test or process puts
    # any: what is left at the end is known to be this run's.
    temp = Path(tempfile.mkdtemp(prefix="arena-worker-temps-"))
    temp.chmod(0o711)  # bots' private uids read the copies inside
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.setattr(tempfile, "tempdir", None)
    calls: list = []
    plain = live.PlainReporter
    monkeypatch.setattr(live, "PlainReporter", lambda: _Recorded(plain(), calls))
    toml = tmp_path / "k.toml"
    toml.write_text(f'name = "k"\nbots = ["random", "lowest", "heuristic"]\ndeals = {DEALS}\nconcurrency = 2\n'
                    f'processes = 2\nstore = "{tmp_path / "t.sqlite"}"\n')
    res = CliRunner().invoke(app, ["tournament", str(toml), "--plain"])
    assert res.exit_code == 0, res.output
    assert killed, "no worker was killed"
    store = Store(tmp_path / "t.sqlite")
    got = _games(store, "k")
    # same store, so same secret: same seeds, seats, results, every action; each game stored once
    assert [g[1:] for g in got] == [g[1:] for g in one] and len({g[0] for g in got}) == GAMES
    assert store.tournament("k")["status"] == "done"
    incidents = [args[0] for name, args in calls if name == "incident"]
    assert len(incidents) == 1 and f"pid {killed[0]}" in incidents[0], incidents
    assert "signal 9" in incidents[0] and "rescheduled" in incidents[0]
    assert "holding 0 game" not in incidents[0]  # it died with games in flight
    assert calls[-1][0] == "finished" and f"finished: {GAMES}/{GAMES} games stored" in res.output, res.output
    screen = io.StringIO()
    shown = live.RichReporter(Console(file=screen, width=200))
    for name, args in calls:  # the live display, given what the run gave the plain log
        getattr(shown, name)(*args)
    for said in (res.output, screen.getvalue()):
        assert "an arena bug" not in said and "AttributeError" not in said
        assert f"pid {killed[0]}" in said and "signal 9" in said and "rescheduled" in said, said
    # The dead worker's bots were orphaned to this process (a subreaper): reaped, not zombies.
    assert zombie_children(started_since=since) == []
    # The dead worker's copies were removed by the clean-up after it, the others' at their exit;
    # only this process's own (made once per process, removed at its exit) may remain (the
    # package copies every process on the machine shares are kept in the user's place for them).
    ours = {str(p.parent) for p in launch._runnable_copies.values()}
    assert {str(p) for p in temp.glob("palace-arena-*")} - ours == set()
    shutil.rmtree(temp, ignore_errors=True)


def test_a_bot_gone_before_the_workers_start_forfeits_and_the_run_ends(tmp_path: Path, monkeypatch) -> None:
    # A bot path that vanishes after scheduling, before the workers load it: each worker refuses
    # that bot alone (its author's doing, tests/test_stranger_attacks3.py), so its games are its
    # forfeits and the run completes; the workers used to die, every one, and the run with them.
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
    trio.run(run_tournament, cfg, store)  # completes: no exception, no worker lost
    results = store.results("w")
    assert len(results) == 4 and store.tournament("w")["status"] == "done"
    for seats, result in results:
        gone = seats.index(next(s for s in seats if s.startswith("gone@")))
        assert result["forfeits"] == {str(gone): "start_failed"}, result
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


def test_a_worker_death_is_said_even_when_the_run_ends_during_its_cleanup(monkeypatch) -> None:
    """The cleanup after a worker's death can take seconds; the other workers may finish every game
    meanwhile and the run close. The death is said first, so no reporter misses it (the
    dead-worker tests above failed at random under load while it was said only after)."""
    from types import SimpleNamespace

    import arena.tournament.worker as worker

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            ex = worker.WorkerExecutor(SimpleNamespace(rules=SimpleNamespace(options=dict)), 1, 1, nursery)
            monkeypatch.setattr(worker, "cleanup_stale", lambda: setattr(ex, "closing", True))
            proc = await trio.lowlevel.open_process(["sh", "-c", "kill -9 $$"])
            w = worker._Worker(1, proc)
            ex.workers.append(w)
            await ex._buried(w)
            assert ex.deaths == 1 and len(ex.incidents) == 1, ex.incidents
            assert f"pid {proc.pid}" in ex.incidents[0] and "signal 9" in ex.incidents[0]
            assert ex.workers == []  # not replaced: the run is closing

    trio.run(main)


def test_a_dead_workers_directory_another_cleanup_holds_is_gone_when_the_close_returns() -> None:
    """The close clears what its dead workers left; another arena's cleanup (a run starting, here
    any test's) may be clearing the same directory at that moment, holding its lock. The close
    skipped it as a live referee's, and returned with it still there for a moment (the test below
    failed so under load, 1 run in 4). Now a referee known dead is waited for. Planted (no wait):
    the directory is still there on return."""
    import fcntl
    import threading

    from arena.bots.containment import cleanup_stale, process_registry
    ended = subprocess.Popen(["true"])
    ended.wait()  # a referee that ended, reaped
    left = process_registry().run_dir / f"ref-{ended.pid}"
    left.mkdir()
    fd = os.open(left / "lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another arena's cleanup, at work on it

    def finish() -> None:
        shutil.rmtree(left, ignore_errors=True)
        os.close(fd)
    other = threading.Timer(1.0, finish)
    other.start()
    try:
        cleanup_stale(dead=[ended.pid])
        assert not left.exists()
    finally:
        other.join()


def test_a_worker_killed_for_not_exiting_at_the_end_is_cleaned_up_after(tmp_path: Path, monkeypatch) -> None:
    """A worker that does not exit within the grace at the run's end is killed: it runs no exit
    handler, and the readers that would clear its bots are cancelled with the run, so the close
    itself clears what it left (its registry directory, copies and bots); before, they stayed
    until some later arena run's cleanup."""
    import arena.tournament.worker as worker
    from arena.bots.containment import process_registry
    monkeypatch.setattr(worker, "EXIT_GRACE", 0.5)
    real_close = worker.WorkerExecutor.aclose
    stopped: list[int] = []

    async def stop_one_then_close(self, graceful: bool = True):
        pid = self.workers[0].proc.pid
        os.kill(pid, signal.SIGSTOP)  # alive, holding its lock and directory, deaf to `end`
        stopped.append(pid)
        await real_close(self, graceful)

    monkeypatch.setattr(worker.WorkerExecutor, "aclose", stop_one_then_close)
    since = boot_ticks()
    store = _run(tmp_path, "late", 2, bots=["random", "lowest"], deals=1)  # two games: a worker each
    assert store.tournament("late")["status"] == "done"
    assert stopped and not Path(f"/proc/{stopped[0]}").exists()  # killed and reaped
    assert not (process_registry().run_dir / f"ref-{stopped[0]}").exists()
    assert zombie_children(started_since=since) == []


@pytest.mark.parametrize("exit_code", [0, 1])
def test_the_close_clears_what_workers_that_exited_on_their_own_left(monkeypatch, exit_code: int) -> None:
    """A worker that exits by itself has closed its bots, but a bot that outlives its close is left
    for ``cleanup_stale`` (frozen gVisor seats were once found left so after a Ctrl-C): the run's
    close clears after every worker, not only after those it had to kill."""
    from types import SimpleNamespace

    import arena.tournament.worker as worker
    cleaned: list[int] = []

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            ex = worker.WorkerExecutor(SimpleNamespace(rules=SimpleNamespace(options=dict)), 1, 1, nursery)
            monkeypatch.setattr(worker, "cleanup_stale", lambda dead: cleaned.append(dead))
            proc = await trio.lowlevel.open_process(["sh", "-c", f"cat >/dev/null; exit {exit_code}"],
                                                    stdin=subprocess.PIPE)
            ex.workers.append(worker._Worker(1, proc))
            await ex.aclose(graceful=False)
            assert proc.returncode == exit_code  # it exited on its own, when its stdin closed
            assert cleaned == [[proc.pid]]  # its directory among those waited for
            nursery.cancel_scope.cancel()

    trio.run(main)


def _fake_workers(monkeypatch, command: list[str]):
    """A WorkerExecutor's setup that needs no bots, and its workers started as ``command``."""
    from types import SimpleNamespace

    import arena.tournament.worker as worker
    monkeypatch.setattr(worker, "COMMAND", command)
    monkeypatch.setattr(worker, "cleanup_stale", lambda dead=(): None)
    return SimpleNamespace(rules=SimpleNamespace(options=dict), containment=None, wire=dict)


def test_a_ctrl_c_at_the_terminal_reaches_the_run_not_its_workers(monkeypatch) -> None:
    """A worker in the run's process group got the terminal's SIGINT too, and one still importing
    (before any handler) died of it: the interrupted run said "referee worker died" and started a
    replacement while it stopped (seen in 2 of 17 resumed runs interrupted at their start, load 18).
    Each worker is a process group of its own: the run alone stops them, by closing their stdin."""
    import arena.tournament.worker as worker
    setup = _fake_workers(monkeypatch, ["sh", "-c", "cat >/dev/null"])
    groups: list[int] = []

    async def main() -> None:
        async with worker.open_workers(setup, 2, 1) as ex:
            groups.extend(os.getpgid(pid) for pid in ex.pids())
            assert len(groups) == 2

    trio.run(main)
    assert os.getpgrp() not in groups and len(set(groups)) == 2


def _interrupted_while_a_worker_is_replaced(monkeypatch, spawn_then):
    """Run open_workers with one fake worker, kill it, and raise Ctrl-C in the caller just as its
    replacement starts: the replacement's start waits until the executor is closing, then does
    ``spawn_then(real_open_process, *args, **kw)``. Returns what left open_workers."""
    import arena.tournament.worker as worker
    setup = _fake_workers(monkeypatch, ["sh", "-c", "cat >/dev/null"])
    real_open = trio.lowlevel.open_process
    starts: list[int] = []
    ex_seen: list = []
    replacing = trio.Event()

    async def open_process(*args, **kw):
        starts.append(1)
        if len(starts) == 2:  # the replacement: past its closing check, the caller is interrupted now
            replacing.set()
            while not ex_seen[0].closing:
                await trio.sleep(0)
            return await spawn_then(real_open, *args, **kw)
        return await real_open(*args, **kw)

    monkeypatch.setattr(trio.lowlevel, "open_process", open_process)

    async def main() -> None:
        async with worker.open_workers(setup, 1, 1) as ex:
            ex_seen.append(ex)
            os.kill(ex.pids()[0], signal.SIGKILL)
            await replacing.wait()
            raise KeyboardInterrupt

    with pytest.raises(BaseException) as caught:
        trio.run(main)
    return caught.value, ex_seen[0]


def test_a_replacement_started_as_the_run_is_interrupted_is_stopped_with_the_others(monkeypatch) -> None:
    """A worker's replacement whose start overlapped the close was never stopped: the close had
    listed the workers already, and the new one waited on its stdin until the run's process exited."""
    started = []

    async def spawn(real_open, *args, **kw):
        proc = await real_open(*args, **kw)
        started.append(proc)
        return proc

    got, ex = _interrupted_while_a_worker_is_replaced(monkeypatch, spawn)
    try:
        assert isinstance(got, KeyboardInterrupt), repr(got)
        assert len(started) == 1 and started[0].returncode == 0  # its stdin closed: it exited
        assert ex.workers == [] or all(w.proc.returncode is not None for w in ex.workers)
    finally:
        for proc in started:
            if proc.returncode is None:
                proc.kill()


def test_an_error_met_while_the_workers_stop_does_not_hide_the_interrupt(monkeypatch) -> None:
    """A worker's task that fails while the run stops (a replacement that cannot start, its
    pipe torn) must not stand in for the Ctrl-C that stopped the run: it did, and a resumed
    ``arena tournament -j 2`` interrupted at its start once ended as an arena bug (exit 70)."""
    import errno

    async def cannot_start(real_open, *args, **kw):
        raise OSError(errno.EAGAIN, "Resource temporarily unavailable (planted)")

    got, _ = _interrupted_while_a_worker_is_replaced(monkeypatch, cannot_start)
    assert isinstance(got, KeyboardInterrupt), repr(got)
    assert isinstance(got.__cause__, BaseExceptionGroup)  # kept for the debug traceback
