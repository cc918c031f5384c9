"""Bot programs as opponents in the synchronous environments: real processes, contained and
spoken to exactly as in a tournament.

A program opponent is a :class:`arena.referee.blocking.BlockingPlayer` started by the arena's
:class:`arena.bots.launch.Launcher` (the same containment, limits and ``python3`` as in
tournaments), so it gets the referee's messages, clock and fault rules: a bot that times
out, crashes or breaks the protocol forfeits that game, is stopped, and is started again
for the next one.

The bots run on the blocking shell (:mod:`arena.bots.blocking`, :mod:`arena.referee.blocking`):
a decision is a write and a ``poll`` on the caller's own thread, with no event loop anywhere,
and the environment's API stays plain and synchronous. Nothing waits without a deadline: an
answer is waited for at most the seat's move time plus its bank, as in the referee, and
closing gives each bot the referee's shutdown grace (run by the shell's hub, all bots at once)
before it is killed. The launcher's own work (choosing the containment) is plain code too; only
a bot with a build step has its contained build run once, through trio, on a short-lived loop.

This module is the environments' only door to the process layer.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arena.referee import BotFault, TimeControl
from arena.referee.blocking import BlockingLaunch, BlockingPlayer, run_async, settle
from arena.referee.core import Answered, Faulted, Outcome, Request


@dataclass(frozen=True)
class Program:
    """An opponent to run as a bot program: a bot.toml, a directory holding one, or a bundled
    bot's name (``Program("lowest")`` runs ``bots/lowest`` as a process; plain ``"lowest"``
    is the same bot in process)."""

    ref: str | Path


Answer = Answered  # the names this module used to give them
__all__ = ["Answered", "Faulted", "Program", "ProgramOpponent", "BotHost", "BlockingLaunch"]


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
    """The environment's bot programs: shut down together when it closes."""

    def __init__(self) -> None:
        self.players: list[BlockingPlayer] = []

    def close(self) -> None:
        """Shut every bot down (the referee's grace, all at once, then kill)."""
        for p in self.players:
            p.shutdown()
        settle()
        self.players = []


class ProgramOpponent:
    """One seat's bot program; the environment's side of a BlockingPlayer."""

    def __init__(self, spec, launcher, clock: TimeControl, host: BotHost):
        self.host = host
        if not isinstance(launcher, BlockingLaunch):
            launcher = BlockingLaunch(launcher)
        self.player = BlockingPlayer(spec, launcher, clock)
        self.name = spec.name
        host.players.append(self.player)

    def begin(self, message: dict[str, Any]) -> Faulted | None:
        """Send ``start`` (starting the process if needed); a bot that cannot start faults."""
        try:
            self.player.begin(message)
        except BotFault as f:
            self.player.fault(f.reason, f.message, None)
            return Faulted(f.reason, f.message, 0.0, self.player.take_stderr())
        return None

    def decide(self, req: Request) -> Outcome:
        """The bot's answer to ``req``, timed as the referee times it, or the fault it made."""
        return self.player.decide(req)

    def end(self, message: dict[str, Any]) -> None:
        self.player.finish(message)

    def abandon(self) -> None:
        """The game was left unfinished (a reset mid-game): stop the process; the next game
        starts a fresh one, since the protocol has no way to call a game off."""
        self.player.close()


def preflight(host: BotHost, launcher, specs) -> None:
    """Fail now, with the launcher's ContainmentError, when these bots cannot be contained
    here (rather than letting every game be a forfeit the learner wins)."""
    run_async(launcher.preflight, list(specs))
