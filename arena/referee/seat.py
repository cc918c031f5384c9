"""What a bot's seat decides, apart from the I/O of :class:`~arena.referee.blocking.BlockingPlayer`.

What a failed start costs and whom, the handshake's faults, when a process is too spent to serve
another game, the game's clock handed to the process, the reply's check, what a decision's
outcome says, and the stderr a closed process leaves for the game's record; and the
:class:`Timer` a seat's decisions are timed on. The player subclasses :class:`BotSeat` and writes
the I/O around these steps.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any, NoReturn, Protocol

from ..bots.manifest import BotSpec
from ..faults import ArenaFailure, BotFault, Crash, FaultReason, HandshakeFailed, StartFailed, Timeout
from . import protocol
from .core import Answered, Faulted, TimeControl


class Timer(Protocol):
    """The referee's clock, in seconds: the wall clock in play, a fake one in tests
    (:class:`arena.referee.testing.FakeClock`), so the production loop runs on fake time."""

    def now(self) -> float: ...
    def sleep_until(self, t: float) -> None: ...


class WallClock:
    """:class:`Timer` on ``time.monotonic``."""

    now = staticmethod(time.monotonic)

    def sleep_until(self, t: float) -> None:
        time.sleep(max(0.0, t - time.monotonic()))


WALL = WallClock()


def as_fault(exc: BaseException) -> BotFault:
    """Any error from a player's connection, as the fault it costs the bot: the process
    layer's errors are faults already; anything else a connection raises is a crash of
    that bot, never of the referee."""
    if isinstance(exc, BotFault):
        return exc
    return Crash(f"{type(exc).__name__}: {exc}")


_HANDSHAKE_FAULTS = (FaultReason.BAD_JSON, FaultReason.SCHEMA, FaultReason.CRASH)


def _bots_doing(exc: Exception) -> bool:
    """Whether a launcher's error is the bot's: a fault (its command cannot start,
    :class:`~arena.bots.errors.BotCommandError`) or its build failing. Anything else (no
    containment here, no cgroup, a failed fork, a bug) is the arena's, so a bot never
    forfeits, nor is suspended, for it."""
    from ..bots.launch import BuildError, ContainmentError
    return isinstance(exc, BotFault) or (isinstance(exc, BuildError) and not isinstance(exc, ContainmentError))


def handshake_fault(exc: BaseException) -> BotFault:
    """What a failed handshake costs: a bad or missing hello is ``handshake_failed``, silence a timeout."""
    fault = as_fault(exc)
    if fault.reason in _HANDSHAKE_FAULTS:
        return HandshakeFailed(f"handshake failed: {fault.message}")
    if fault.reason == FaultReason.TIMEOUT:
        return Timeout(f"handshake failed: {fault.message}")
    return fault


def game_clock(clock: TimeControl, fixed_schedule: bool) -> TimeControl:
    """The clock a game runs on: on a fixed schedule there is no bank (see ``play_game``)."""
    return dataclasses.replace(clock, bank_ms=0) if fixed_schedule else clock


def slot_end(start: float, now: float, slot: float) -> float:
    """On a fixed schedule, when the next request may go: the end of the decision's last
    whole slot of ``slot`` seconds counted from ``start``."""
    return start + max(1, math.ceil((now - start) / slot)) * slot


def hold(player: Any, frozen: bool) -> None:
    """Freeze a bot's seat off its turn, or thaw it for its request (a person's seat, or a
    scripted one, is left alone). The game loops thaw a seat before its clock starts, so the
    thaw costs it no time; ``ponder`` tables never freeze (see ``play_game``)."""
    if isinstance(player, BotSeat):
        player.hold(frozen)


def answered(player: Any, reply: tuple[int, dict[str, Any] | None], seconds: float) -> Answered:
    """A decision answered after ``seconds``: the reply's choice and note (its ``info``, as
    :func:`protocol.read_reply` gives them), with the stderr since the last one."""
    return Answered(reply[0], seconds, player.take_stderr(), reply[1])


def faulted(player: Any, fault: BotFault, seconds: float) -> Faulted:
    """A decision that faulted, taken once the player is stopped: what it wrote while dying
    belongs to this game."""
    return Faulted(fault.reason, fault.message, seconds, player.take_stderr())


BETWEEN_GAMES = "(between games) "  # before a stderr line the bot wrote after its last game ended


class BotSeat:
    """A bot process serving a match: started and greeted on first use, restarted after a fault.
    Holds its connection (``conn``), its hello, how often it started, and the stderr lines of
    processes already closed (handed out once, by :meth:`take_stderr`). A reply's note travels
    in the decision's outcome, not here."""

    def __init__(self, spec: BotSpec, launcher: Any, clock: TimeControl, *, restart_each_game: bool = False):
        self.spec = spec
        self.name = spec.name
        self.launcher = launcher
        self.clock = clock
        self.restart_each_game = restart_each_game
        self.conn: Any = None
        self.hello: dict[str, Any] | None = None
        self.starts = 0
        self._stderr: list[str] = []
        self.games = 0  # games begun

    def _not_started(self, exc: Exception) -> NoReturn:
        """The launcher failed: the bot's own doing (its command is missing, its build failed) is
        its start fault; anything else is the arena's, which costs no bot a game."""
        if _bots_doing(exc):
            raise StartFailed(f"could not start {self.spec.label}: {exc}") from None
        raise ArenaFailure(f"the arena could not start {self.spec.label}: {type(exc).__name__}: {exc}") from exc

    def _greeted(self, line: str) -> None:
        self.hello = protocol.read_bot_hello(line)

    def _stale(self) -> bool:
        """Whether the next game needs a fresh process: asked for, or the process has used half
        of its lifetime CPU backstop (``Limits.process_cpu_seconds``)."""
        if self.restart_each_game:
            return True
        usage = getattr(self.conn, "resource_usage", None)
        limits = getattr(self.conn, "limits", None)
        if not callable(usage) or limits is None:  # (tests' scripted connections have neither)
            return False
        spent = usage().cpu_seconds
        return spent is not None and spent >= limits.process_cpu_seconds / 2

    def _between_games(self) -> None:
        """A game begins: what the bot wrote after its last game's ``end`` (and reached us by now)
        is marked as written between games, not filed as this game's first decision's own."""
        if self.games:
            self._stderr = [BETWEEN_GAMES + line for line in self.take_stderr()]
        self.games += 1

    def hold(self, frozen: bool) -> None:
        """Freeze (or thaw) the bot's processes, where its cgroup has a freezer."""
        hold = getattr(self.conn, "hold", None)  # (tests' scripted connections have none)
        if hold is not None:
            hold(frozen)

    def _clock_game(self, conn: Any) -> None:
        """A game begins: the process's CPU is counted per game (arena.limits)."""
        begin_game = getattr(conn, "begin_game", None)
        if begin_game is not None:
            begin_game(self.clock.move_s, self.clock.bank_s)

    def take_stderr(self) -> list[str]:
        fresh = self.conn.take_stderr() if self.conn is not None else []
        if not self._stderr:
            return fresh
        out, self._stderr = self._stderr + fresh, []  # lines kept from a closed process, handed out once
        return out

    def _detach(self) -> Any:
        """Forget the connection (the shell closes it, then :meth:`_keep_stderr`)."""
        conn, self.conn = self.conn, None
        return conn

    def _keep_stderr(self, conn: Any) -> None:
        self._stderr += conn.take_stderr()  # after closing, which waits for a dying bot's last lines
