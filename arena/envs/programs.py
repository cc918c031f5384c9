"""Bot programs as opponents in the synchronous environments: real processes, contained and
spoken to exactly as in a tournament.

A program opponent is a :class:`arena.referee.BotPlayer` started by the arena's
:class:`arena.bots.launch.Launcher` (the same containment, limits and ``python3`` as in
tournaments), so it gets the referee's messages, clock and fault rules: a bot that times
out, crashes or breaks the protocol forfeits that game, is stopped, and is started again
for the next one.

Why a trio loop on a thread: the launcher and ``BotPlayer`` are trio code, and a bot
process belongs to the loop that started it, so it needs one loop that lives as long as
the environment (a ``trio.run`` per call would orphan the process). :class:`BotHost` runs
that loop on a daemon thread and each call blocks on it (``trio.from_thread.run``); the
environment's API stays plain and synchronous, and the caller's own code needs no event
loop. Nothing waits without a deadline: an answer is waited for at most the seat's move
time plus its bank, as in the referee, and closing gives each bot the referee's shutdown
grace before it is killed.

This module is the environments' only door to the process layer.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import trio

from arena.referee import BotFault, BotPlayer, TimeControl
from arena.referee.core import Request


@dataclass(frozen=True)
class Program:
    """An opponent to run as a bot program: a bot.toml, a directory holding one, or a bundled
    bot's name (``Program("lowest")`` runs ``bots/lowest`` as a process; plain ``"lowest"``
    is the same bot in process)."""

    ref: str | Path


class Answer(NamedTuple):
    choice: int
    ms: float
    stderr: list[str]


class Faulted(NamedTuple):
    """A program's answer that is no answer: the fault that forfeits its seat."""

    reason: str
    message: str
    ms: float
    stderr: list[str]


def is_program(spec: Any) -> bool:
    """Whether an opponent runs as a bot program: a Program, a path (a string with a ``/`` or
    naming a bot.toml) or a BotSpec; a plain name is an in-process reference bot."""
    from arena.bots.manifest import BotSpec
    if isinstance(spec, str):
        return "/" in spec or spec.endswith(".toml")
    return isinstance(spec, (Program, Path, BotSpec))


def load(ref: Any):
    """The ``BotSpec`` of a Program, a path, or a spec itself."""
    from arena.bots.manifest import BotSpec, load_bot
    if isinstance(ref, BotSpec):
        return ref
    return load_bot(ref.ref if isinstance(ref, Program) else ref)


def default_launcher():
    from arena.bots.launch import Launcher
    return Launcher()


class BotHost:
    """A trio loop on a daemon thread that owns the environment's bot processes."""

    def __init__(self) -> None:
        self._token: trio.lowlevel.TrioToken | None = None
        self._stop: trio.Event | None = None
        self._thread: threading.Thread | None = None
        self.players: list[BotPlayer] = []

    def call(self, afn, *args):
        """Run ``await afn(*args)`` on the loop and return its result (its exception is raised here)."""
        if self._thread is None:
            ready = threading.Event()

            async def serve() -> None:
                self._token = trio.lowlevel.current_trio_token()
                self._stop = trio.Event()
                ready.set()
                await self._stop.wait()

            self._thread = threading.Thread(target=trio.run, args=(serve,), name="arena-env-bots", daemon=True)
            self._thread.start()
            ready.wait()
        return trio.from_thread.run(afn, *args, trio_token=self._token)

    def close(self) -> None:
        """Shut every bot down (the referee's grace, then kill) and stop the loop."""
        if self._thread is None:
            return

        async def stop() -> None:
            for p in self.players:
                await p.shutdown()
            assert self._stop is not None
            self._stop.set()

        try:
            trio.from_thread.run(stop, trio_token=self._token)
        except trio.RunFinishedError:
            pass
        self._thread.join()
        self._thread = None
        self.players = []


class ProgramOpponent:
    """One seat's bot program, served through ``host``; the environment's side of a BotPlayer."""

    def __init__(self, spec, launcher, clock: TimeControl, host: BotHost):
        self.host = host
        self.player = BotPlayer(spec, launcher, clock)
        self.name = spec.name
        host.players.append(self.player)

    def begin(self, message: dict[str, Any]) -> Faulted | None:
        """Send ``start`` (starting the process if needed); a bot that cannot start faults."""
        async def run() -> Faulted | None:
            try:
                await self.player.begin(message)
            except BotFault as f:
                await self.player.fault(f.reason, f.message, None)
                return Faulted(str(f.reason), f.message, 0.0, self.player.take_stderr())
            return None
        return self.host.call(run)

    def decide(self, req: Request) -> Answer | Faulted:
        """The bot's answer to ``req``, timed as the referee times it, or the fault it made."""
        async def run() -> Answer | Faulted:
            start = trio.current_time()
            try:
                choice = await self.player.decide(req.message, req.timeout)
            except BotFault as f:
                ms = (trio.current_time() - start) * 1000
                await self.player.fault(f.reason, f.message, req.id)
                return Faulted(str(f.reason), f.message, ms, self.player.take_stderr())
            return Answer(choice, (trio.current_time() - start) * 1000, self.player.take_stderr())
        return self.host.call(run)

    def end(self, message: dict[str, Any]) -> None:
        self.host.call(self.player.finish, message)

    def abandon(self) -> None:
        """The game was left unfinished (a reset mid-game): stop the process; the next game
        starts a fresh one, since the protocol has no way to call a game off."""
        self.host.call(self.player.close)


def preflight(host: BotHost, launcher, specs) -> None:
    """Fail now, with the launcher's ContainmentError, when these bots cannot be contained
    here (rather than letting every game be a forfeit the learner wins)."""
    host.call(launcher.preflight, list(specs))
