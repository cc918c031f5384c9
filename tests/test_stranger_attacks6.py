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
* A manifest edited between the run's reading of it and of the folder. A run reads a bot's
  ``bot.toml`` (its name, version, command) and then, separately, hashes and packs its folder.
  An author who rewrites ``bot.toml`` in between (a loop of renames does it) has a bundle whose
  manifest names another label, or no bot at all: on the worker that was a ``BundleError``, so
  each of the bot's games failed on the cluster as the arena's failure (retried, then reported
  as a game the run could not play), never as the bot's forfeit. A bundle whose manifest is not
  the bot the run seats is now that bot's own refusal: it forfeits its games, as a folder that
  changed before packing already did.
* A cache entry edited after it was verified. A worker's cache entry was checked against the
  files hash once, when it was unpacked; every later run on that machine took it as it found it.
  Bytes changed in it (by anything with the worker's uid, a temp-dir cleaner removing old files
  included) ran under the hash the run recorded, or made an honest bot fail to load. Each run
  now reads the entry again before its first game seats the bot, and an entry that no longer
  hashes to what it was sent under is unpacked afresh.
* A build's copy kept for the life of the process. A contained build runs in a copy of the bot
  (up to ``BUILD_DISK_MB``, 1 GiB), which was removed only when the process exited. ``arena
  serve`` checks every upload in its own long-lived process: on a real club server with a
  gVisor ladder, each upload whose build succeeded left its copy in the server's temp directory
  (seen: the check's copy of a placed bot still there after its job ended, and the same holds
  for a check whose bot then faults), so a stranger's uploads, each with a build that writes
  just under the bound and a bot that fails its check, filled the server's disk a gigabyte at a
  time until a restart. The same held on a long-lived Dask worker, for every run, and for every
  browser game (``--allow-play``) against a ladder member with a build: anyone could fill the
  server's disk by starting games. A check now removes its build copies when its bots are
  finished, and so do a run's pool and a browser game.
"""

from __future__ import annotations

import pickle
import shutil
import tempfile
import threading
from pathlib import Path

import pytest

from arena.bots import blocking
from arena.bots.bundles import CACHE_ENV, Holds, pack_bot, prepare_bot
from arena.bots.folder import read_folder
from arena.bots.containment import Containment
from arena.bots.manifest import load_bot
from arena.bots.procs import scan_procs
from arena.tournament import cluster as C
from arena.tournament.config import TournamentConfig
from arena.tournament.executors import BotSetup, GameTask
from tests.checks import recorded_build_copies


def _all_removed(copies: list) -> bool:
    """One build copy among the copies recorded (the rest: the checked copies seats ran from,
    ``launch.runnable``), and none of them left on the disk."""
    builds = [c for c in copies if c.parent.name.startswith("palace-arena-build-")]
    return len(builds) == 1 and not any(c.parent.exists() for c in copies)


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
    (where / "bot.toml").write_text('name = "linger"\nversion = "1"\ncommand = ["python3", "linger.py"]\n'
                                    'build = ["python3", "-c", "open(\'built\', \'w\').write(\'1\')"]\n')
    return where


def worker_run(monkeypatch, grace: float) -> tuple:
    """A run of `lowest` and :func:`_lingering_bot` in the namespaces mode, its plugin referee
    pickled as it reaches a Dask worker, bots given ``grace`` to exit after ``shutdown``:
    (the referee, the two specs, the bundle cache, the lingering bot's folder)."""
    monkeypatch.setattr(blocking, "SHUTDOWN_GRACE", grace)
    cache = Path(tempfile.mkdtemp(prefix="arena-cache-"))  # bots' private uids must reach it
    cache.chmod(0o755)
    monkeypatch.setenv(CACHE_ENV, str(cache))
    bot = _lingering_bot(Path(tempfile.mkdtemp(prefix="arena-linger-")) / "linger")
    bot.parent.chmod(0o755)
    cfg = TournamentConfig()
    specs = [load_bot("lowest"), load_bot(bot)]
    setup = BotSetup.of({"lowest": specs[0], str(bot): specs[1]}, rules=cfg.ruleset(), clock=cfg.clock(),
                        containment=Containment.NAMESPACES)
    return pickle.loads(pickle.dumps(C._referee(setup))), specs, cache, bot


def _alive(pids: list[int]) -> list[str]:
    """Of ``pids``, those that still exist (running, or unreaped), with their state."""
    table = scan_procs()
    return [f"{pid} ({table[pid].state})" for pid in pids if pid in table]


def test_a_bot_that_ignores_shutdown_does_not_outlive_its_run_on_a_worker(tmp_path, monkeypatch):
    """The worker side without Dask, on two threads as a Dask worker uses them: a game on one
    (the task's), the run's teardown on another (the plugin's). After the teardown nothing of
    either bot is left: no process running, none unreaped, no build copy on the disk."""
    copies = recorded_build_copies(monkeypatch)
    referee, specs, cache, bot = worker_run(monkeypatch, grace=0.2)  # the grace it ignores; short for the test
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
    assert _all_removed(copies), ("a copy outlived the run", copies)


@pytest.mark.parametrize("swapped", [b'name = "mallory"\ncommand = ["python3", "main.py"]\n',
                                     b'version = "2"\nname = "edited"\ncommand = ["python3", "main.py"]\n',
                                     b"[[[ not toml", b'name = "edited"\n'])
def test_a_manifest_edited_after_the_run_read_it_is_the_bots_forfeit_not_the_arenas(tmp_path, monkeypatch, swapped):
    """The run reads ``edited@1``; its ``bot.toml`` then names another bot, breaks, or loses its
    command, before the folder is hashed and packed. On the worker that bot is refused as its own
    fault (every start refused, the reason named: a forfeit), not an error that fails its games."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    bot = tmp_path / "edited"
    bot.mkdir()
    (bot / "bot.toml").write_text('name = "edited"\nversion = "1"\ncommand = ["python3", "main.py"]\n')
    (bot / "main.py").write_text("print('ready')\n")
    spec = load_bot(bot)  # the run reads the manifest ...
    (bot / "bot.toml").write_bytes(swapped)  # ... the author rewrites it ...
    setup = BotSetup.of({str(bot): spec, "lowest": load_bot("lowest")}, rules=TournamentConfig().ruleset())
    referee = pickle.loads(pickle.dumps(C._referee(setup)))  # ... and the folder is hashed and packed
    got = referee.bot("edited@1")  # was: BundleError, the game an arena failure on the cluster
    assert got.label == "edited@1" and got.refused
    assert "bot.toml" in got.refused and "run again" in got.refused and "cache" not in got.refused


def test_a_cache_entry_edited_after_its_check_is_unpacked_again_for_the_next_run(tmp_path):
    """Run 1 unpacks and verifies the bot; its entry is then edited (a file changed, one removed);
    run 2, on the same worker process, must seat the files it was sent, not the edited ones."""
    bot = tmp_path / "honest"
    bot.mkdir()
    (bot / "bot.toml").write_text('name = "honest"\nversion = "1"\ncommand = ["python3", "main.py"]\n')
    (bot / "main.py").write_text("print('ready')\n")
    (bot / "data.txt").write_text("weights\n")
    spec = load_bot(bot)
    blob, digest, cache = pack_bot(spec), spec.files_hash(), tmp_path / "cache"
    cache.mkdir()
    first = prepare_bot(digest, "bot.toml", blob, cache, hold=Holds())
    (first.root / "main.py").write_text("print('edited')\n")
    (first.root / "data.txt").unlink()
    second = prepare_bot(digest, "bot.toml", blob, cache, hold=Holds())
    assert (second.root / "main.py").read_text() == "print('ready')\n"
    assert (second.root / "data.txt").read_text() == "weights\n"
    assert read_folder(second.root).digest == digest


def test_an_uploads_build_copy_is_removed_when_its_check_ends(tmp_path, monkeypatch):
    """The check of a bot whose build succeeds (writing a file) and whose bot then fails: once
    ``check_bot`` returns, nothing of the build's copy is left on the disk."""
    from arena.bots.launch import Launcher
    from arena.tournament.check import check_bot
    from tests.checks import reachable
    copies = recorded_build_copies(monkeypatch)
    bot = tmp_path / "builder"
    bot.mkdir()
    (bot / "build.py").write_text("open('out.bin', 'wb').write(b'x' * 4096)\n")
    (bot / "bot.toml").write_text('name = "builder"\ncommand = ["python3", "-c", "raise SystemExit(3)"]\n'
                                  'build = ["python3", "build.py"]\n')
    report = check_bot(load_bot(reachable(bot)), games=1, launcher=Launcher(containment=Containment.NAMESPACES))
    assert not report["ok"] and "build" not in report["faults"]  # it built, then failed its games
    assert _all_removed(copies), ("a copy outlived its check", copies)


def test_a_browser_games_build_copy_is_removed_when_the_game_ends(tmp_path, monkeypatch):
    """``arena serve --allow-play``: a game against a member with a build (here two bots, no
    person, so it plays to its end). Once the game is over, its build's copy is gone."""
    import types

    import trio

    from arena.engine.rules import preset
    from arena.serve.play import Session, play_game
    from arena.referee import TimeControl
    from tests.checks import fixed_secret, reachable
    copies = recorded_build_copies(monkeypatch)
    bot = tmp_path / "member"
    bot.mkdir()
    shutil.copy(REPO / "examples" / "bots" / "python" / "bot.py", bot / "bot.py")
    (bot / "bot.toml").write_text('name = "member"\nversion = "1"\ncommand = ["python3", "bot.py"]\n'
                                  'build = ["python3", "-c", "open(\'built\', \'w\').write(\'1\')"]\n')
    fixed_secret(tmp_path / "data")
    app = types.SimpleNamespace(state=types.SimpleNamespace(options=types.SimpleNamespace(
        store=tmp_path / "data" / "arena.sqlite")))
    session = Session("s", 0, ["member", "lowest"])
    specs = [load_bot(reachable(bot)), load_bot("lowest")]
    trio.run(play_game, app, session, specs, preset("classic"), 3, TimeControl(move_ms=1000), 400)
    assert session.status == "over", session.error
    assert _all_removed(copies), ("a copy outlived the game", copies)
