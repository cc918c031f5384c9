"""What a bot's seat decides, apart from the I/O of :class:`~arena.referee.blocking.BlockingPlayer`.

What a failed start costs and whom, the handshake's faults, a game's clock on a fixed schedule,
what a decision's outcome says; and the :class:`Timer` a seat's decisions are timed on. The one
player, :class:`~arena.referee.blocking.BlockingPlayer`, writes the I/O around these steps.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any, Protocol

from ..faults import BotFault, Crash, FaultReason, HandshakeFailed, Timeout
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


def bots_doing(exc: Exception) -> bool:
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


def answered(player: Any, reply: tuple[int, dict[str, Any] | None], seconds: float) -> Answered:
    """A decision answered after ``seconds``: the reply's choice and note (its ``info``, as
    :func:`protocol.read_reply` gives them), with the stderr since the last one."""
    return Answered(reply[0], seconds, player.take_stderr(), reply[1])


def faulted(player: Any, fault: BotFault, seconds: float) -> Faulted:
    """A decision that faulted, taken once the player is stopped: what it wrote while dying
    belongs to this game."""
    return Faulted(fault.reason, fault.message, seconds, player.take_stderr())


BETWEEN_GAMES = "(between games) "  # before a stderr line the bot wrote after its last game ended
