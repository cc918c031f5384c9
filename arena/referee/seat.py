"""What a bot's seat decides, apart from the I/O of :class:`~arena.referee.blocking.BlockingPlayer`.

What a failed start costs and whom, the handshake's faults, a game's clock on a fixed schedule,
what a decision's outcome says; and the :class:`Timer` a seat's decisions are timed on. The one
player, :class:`~arena.referee.blocking.BlockingPlayer`, writes the I/O around these steps.
"""

from __future__ import annotations

import dataclasses
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


REFEREE_SHARE = 10
"""On a fixed schedule, one part in this many of each ``move_ms`` slot is the referee's (sending the
request, reading and applying the answer, freezing the seat), and the bot's move time is the rest:
with the whole slot the bot's, an answer in time that the referee's work carried past the slot took
two, and a sender answering at the edge for a 1 passed 1.4 bits/s to the seat timing its requests."""


def game_clock(clock: TimeControl, fixed_schedule: bool) -> TimeControl:
    """The clock a game's bots are told and held to: on a fixed schedule there is no bank, and the
    move time leaves :data:`REFEREE_SHARE` of the slot to the referee (see ``play_game``)."""
    if not fixed_schedule:
        return clock
    return dataclasses.replace(clock, bank_ms=0, move_ms=clock.move_ms - clock.move_ms // REFEREE_SHARE)


def slot_end(start: float, now: float, slot: float) -> float:
    """On a fixed schedule, when the next request may go: one slot of ``slot`` seconds after
    ``start``, or ``now`` if the referee's own work ran past it (then the schedule moves by that
    overrun, never by a whole slot a sender could choose to take)."""
    return max(start + slot, now)


def answered(player: Any, reply: tuple[int, dict[str, Any] | None], seconds: float) -> Answered:
    """A decision answered after ``seconds``: the reply's choice and note (its ``info``, as
    :func:`protocol.read_reply` gives them), with the stderr since the last one."""
    return Answered(reply[0], seconds, player.take_stderr(), reply[1])


def faulted(player: Any, fault: BotFault, seconds: float) -> Faulted:
    """A decision that faulted, taken once the player is stopped: what it wrote while dying
    belongs to this game."""
    return Faulted(fault.reason, fault.message, seconds, player.take_stderr())


BETWEEN_GAMES = "(between games) "  # before a stderr line the bot wrote after its last game ended
