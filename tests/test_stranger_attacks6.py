"""Attacks of a bot author with the docs and the code, sixth round: what a bot can do to the Dask
worker that plays it (``arena tournament --cluster``). Each test is an attack that worked before
its fix, written from the attacker's side.

* A bot that outlives its run. At the end of a run (or when its pool is idle) the worker's
  referee shuts its bots down: each gets ``shutdown``, its stdin is closed and it has a grace to
  exit, after which whatever is left is killed by the thread's hub. The bots were started on the
  Dask task's thread, but the plugin's teardown (and the idle reaper) runs on another thread of
  the worker, whose hub held none of them: nobody ever finished them. A bot that ignores
  ``shutdown`` and stdin's end kept spinning on a real ``dask worker`` after its run had ended
  (seen: 11 CPU seconds and counting, 40 s after the run printed its standings), unfrozen, as
  did every bot left in its cgroup; those that did exit stayed zombies of the worker, and their
  cgroups and private uids were never given back (a ``--cluster local`` run then ended, every
  time, with "cleaned up: N bot process(es) killed, M cgroup(s) removed, left by 2 earlier arena
  process(es)"). A run's bots now live on a hub of the run's own, which its teardown settles on
  whatever thread it runs.
"""

from __future__ import annotations

import pickle
import shutil
import tempfile
import threading
from pathlib import Path

import pytest

from arena.bots import blocking
from arena.bots.bundles import CACHE_ENV
from arena.bots.containment import Containment
from arena.bots.manifest import load_bot
from arena.bots.procs import scan_procs
from arena.tournament import cluster as C
from arena.tournament.config import TournamentConfig
from arena.tournament.executors import BotSetup, GameTask

REPO = Path(__file__).resolve().parent.parent

LINGER = """\
import signal
signal.signal(signal.SIGTERM, signal.SIG_IGN)
exec(open("bot.py").read())
while True:  # shut down, stdin closed: stay, spinning
    pass
"""


def _lingering_bot(where: Path) -> Path:
    """The starter bot, which after its last game (``shutdown``, or stdin's end) spins forever."""
    where.mkdir()
    shutil.copy(REPO / "examples" / "bots" / "python" / "bot.py", where / "bot.py")
    (where / "linger.py").write_text(LINGER)
    (where / "bot.toml").write_text('name = "linger"\nversion = "1"\ncommand = ["python3", "linger.py"]\n')
    return where


def _alive(pids: list[int]) -> list[str]:
    """Of ``pids``, those that still exist (running, or unreaped), with their state."""
    table = scan_procs()
    return [f"{pid} ({table[pid].state})" for pid in pids if pid in table]


def test_a_bot_that_ignores_shutdown_does_not_outlive_its_run_on_a_worker(tmp_path, monkeypatch):
    """The worker side without Dask, on two threads as a Dask worker uses them: a game on one
    (the task's), the run's teardown on another (the plugin's). After the teardown nothing of
    either bot is left: no process running, none unreaped."""
    monkeypatch.setattr(blocking, "SHUTDOWN_GRACE", 0.2)  # the grace it ignores; short for the test
    cache = Path(tempfile.mkdtemp(prefix="arena-cache-"))  # bots' private uids must reach it
    cache.chmod(0o755)
    monkeypatch.setenv(CACHE_ENV, str(cache))
    bot = _lingering_bot(Path(tempfile.mkdtemp(prefix="arena-linger-")) / "linger")
    bot.parent.chmod(0o755)
    cfg = TournamentConfig()
    specs = [load_bot("lowest"), load_bot(bot)]
    setup = BotSetup.of({"lowest": specs[0], str(bot): specs[1]}, rules=cfg.ruleset(), clock=cfg.clock(),
                        containment=Containment.NAMESPACES)
    referee = pickle.loads(pickle.dumps(C._referee(setup)))  # as the run's plugin reaches a worker
    pids: list[int] = []
    errors: list[BaseException] = []

    def task() -> None:  # the Dask task's thread
        try:
            referee.play(GameTask("unit-000000", 5, tuple(s.label for s in specs), 300).wire())
            pids.extend(p.conn.pid for p in referee.executor.pool.info if p.conn is not None)
        except BaseException as e:  # noqa: BLE001 - raised below, on the test's thread
            errors.append(e)

    try:
        t = threading.Thread(target=task)
        t.start()
        t.join()
        assert not errors, errors
        assert len(pids) == 2  # both bots warm in the run's pool
    finally:
        closer = threading.Thread(target=referee.close)  # the plugin's teardown: another thread
        closer.start()
        closer.join()
        shutil.rmtree(cache, ignore_errors=True)
        shutil.rmtree(bot.parent, ignore_errors=True)
    assert _alive(pids) == []
