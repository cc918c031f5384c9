"""Checks shared by the referee, tournament and resume tests: a logged game re-simulated
with the engine, the processes this test process has started, an ``arena`` command run in
this process, and the server's background tasks driven by a test under trio."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
from pathlib import Path
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, NamedTuple

from arena.bots.launch import _others_can_use, world_readable_copy
from arena.bots.procs import scan_procs
from arena.engine import Rules, apply_action, forfeit, legal_actions, start_game
from arena.engine.views import action_json, event_for, result_json
from arena.referee import GameRecord


def replay(rec: GameRecord):
    """Re-simulate a record with the engine and check each step's logged events are exactly what
    the engine produces. Returns [(state before, step, engine events)], the first entry being the
    deal plus the forfeits of bots that failed to start (those have no step), and the final state."""
    state, events = start_game(Rules.from_options(rec.rules), len(rec.players), rec.seed, max_turns=rec.max_turns)
    assert rec.setup_events == [event_for(e, None) for e in events]
    fault_steps = [s for s in rec.steps if "fault" in s]
    at_start = rec.faults[:len(rec.faults) - len(fault_steps)]
    for f in at_start:
        assert f["turn"] == 0
        state, evs = forfeit(state, f["seat"], f["reason"])
        events += evs
    out: list[tuple[Any, Any, list[Any]]] = [(None, None, events)]
    for step in rec.steps:
        assert step["seat"] == state.to_move and step["turn"] == state.turn and step["phase"] == state.phase
        before = state
        if "fault" in step:
            state, evs = forfeit(state, step["seat"], step["fault"])
        else:
            actions = legal_actions(state)
            assert step["act"] == action_json(actions[step["action"]])
            state, evs = apply_action(state, actions[step["action"]])
        assert step["events"] == [event_for(e, None) for e in evs]
        out.append((before, step, evs))
    assert state.result is not None
    assert {**rec.result, "forfeits": {}} == {**result_json(state.result), "forfeits": {}}
    return out, state


def children() -> set[tuple[int, int]]:
    """(pid, start time) of every process whose parent is this one, zombies included."""
    me = os.getpid()
    return {(p.pid, p.start) for p in scan_procs().values() if p.ppid == me}


def boot_ticks() -> int:
    """Now, in the unit of a process's start time (clock ticks since boot)."""
    with open("/proc/uptime") as f:
        return int(float(f.read().split()[0]) * os.sysconf("SC_CLK_TCK"))


def zombie_children(started_since: int | None = None) -> list[int]:
    """Unreaped children of this process; with ``started_since`` (boot_ticks()), only those started
    since then: a daemon an earlier test left may die, orphaned to this subreaper, at any moment."""
    me = os.getpid()
    return [p.pid for p in scan_procs().values() if p.ppid == me and p.state == "Z"
            and (started_since is None or p.start >= started_since)]


def end_reaped_elsewhere(bot: Any) -> None:
    """Kill and reap a ``subprocess.Popen`` whose reaping a test left to the arena's cleanup (or, if
    the test failed, to here): its ``returncode`` is set, so Popen never waits on a pid reaped already."""
    bot.kill()
    bot.returncode = -9
    try:
        os.waitpid(bot.pid, 0)
    except ChildProcessError:
        pass


def reachable(directory: Path) -> Path:
    """``directory``, or a world-readable copy of it when the checkout sits where other users
    cannot reach (a 0700 ``mktemp -d``): as root, bots run under private uids that must read it."""
    if _others_can_use(directory, stat.S_IXOTH):
        return directory
    return world_readable_copy(directory, "palace-arena-tests-")


def store_count(store: Path, sql: str = "SELECT COUNT(*) FROM games") -> int:
    """``sql``'s count in a store another process is writing, read-only; 0 while the store or its
    tables are not made yet."""
    try:
        db = sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=30)
    except sqlite3.OperationalError:
        return 0
    try:
        return db.execute(sql).fetchone()[0]
    except sqlite3.OperationalError:
        return 0
    finally:
        db.close()


def fixed_secret(store_dir: Path, fill: int = 7) -> None:
    """A known deal secret for a test's store: the same deals on every run, so a test that reads
    game outcomes (an SPRT's verdict, a ranking) cannot pass or fail by the luck of a fresh secret."""
    from arena.tournament.seeds import SECRET_BYTES, SECRET_FILE
    store_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(store_dir / SECRET_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(bytes([fill]) * SECRET_BYTES)


def recorded_build_copies(monkeypatch: Any) -> list[Path]:
    """The build copies the launcher makes from now on (the folder each build runs in), each
    recorded as it is made: a test checks that nothing of them stays."""
    from arena.bots import launch
    copies: list[Path] = []
    copy_of = launch.bot_copy

    def recorded(spec: Any, prefix: str, **kw: Any) -> Path:
        copies.append(copy_of(spec, prefix, **kw))
        return copies[-1]
    monkeypatch.setattr(launch, "bot_copy", recorded)
    return copies


def on_thread(fn: Any) -> Any:
    """``fn()`` on a thread of its own, its result or its exception brought back to this one: a
    Dask worker plays a run's games on a task's thread and tears the run down on the plugin's, and
    the worker-side tests do the same."""
    import threading
    out: list[Any] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            out.append(fn())
        except BaseException as e:  # noqa: BLE001 - raised below, on the caller's thread
            errors.append(e)

    t = threading.Thread(target=run)
    t.start()
    t.join()
    if errors:
        raise errors[0]
    return out[0]


class Ran(NamedTuple):
    """What :func:`arena_here` ran: named as a finished ``subprocess`` is, and unpacked as
    ``code, out, err``."""
    returncode: int
    stdout: str
    stderr: str


def arena_here(*args: str, cwd: Path | None = None, env: dict[str, str | None] | None = None) -> Ran:
    """``arena ARGS`` run in this process by typer's runner, at 200 columns: for what a command
    prints, stores and exits with. A test about the process itself (Ctrl-C, kill -9, the status a
    shell sees, a fresh interpreter's imports) runs a real one. An exception other than SystemExit
    is raised here: a real process would have printed it as a traceback."""
    from typer.testing import CliRunner

    from arena.cli.main import app
    with contextlib.chdir(cwd or Path.cwd()):
        done = CliRunner().invoke(app, list(args), env={"COLUMNS": "200", **(env or {})})
    if done.exception is not None and not isinstance(done.exception, SystemExit):
        raise done.exception
    return Ran(done.exit_code, done.stdout, done.stderr)


def bwrap_or_skip(why: str = "bubblewrap cannot run here") -> None:
    """Skip, saying ``why``, where bubblewrap is missing or cannot make its namespaces here."""
    import shutil
    import subprocess

    import pytest
    bwrap = shutil.which("bwrap")
    if bwrap is None or subprocess.run([bwrap, "--unshare-all", "--ro-bind", "/", "/", "true"]).returncode:
        pytest.skip(why)


@contextlib.asynccontextmanager
async def running(*tasks: Callable[[], Awaitable[object]], bound_s: float = 60.0) -> AsyncIterator[Any]:
    """The server's background tasks (a webhook deliverer, a queue runner, a store follower) started
    in a nursery while the test drives them, and cancelled when it is done; yields the nursery.
    ``bound_s`` ends a test that would otherwise hang (behind an hour's look): a bound, not a timing."""
    import trio
    with trio.fail_after(bound_s):
        async with trio.open_nursery() as nursery:
            for task in tasks:
                nursery.start_soon(task)
            yield nursery
            nursery.cancel_scope.cancel()


async def until(condition: Callable[[], object]) -> None:
    """Wait, under trio, for ``condition()`` to hold (a state reached, never a length of time)."""
    import trio
    while not condition():
        await trio.sleep(0.01)
