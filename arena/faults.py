"""Why a bot loses a game: the fault reasons and one exception class per reason.

A fault is always the bot's doing (it timed out, crashed, broke the protocol) and
always ends in a forfeit. Each class carries its reason on the class, as
python-chess's ``EngineError`` family and ``Termination`` do, so code that catches
a fault reads ``fault.reason`` and never guesses. :class:`FaultReason` is a
``StrEnum``: its members are the JSON strings of ``protocol/schemas`` unchanged.

The bot-process layer's errors (:mod:`arena.bots.errors`) subclass these, so a fault
raised anywhere, by the process, the protocol parser or the referee, is one of them.
:class:`ArenaFailure` is the other side: the arena could not do its part, no bot is blamed.
"""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar

from .errors import ArenaError


class FaultReason(StrEnum):
    """Why a bot forfeited. Order and values are those of ``defs.schema.json#/$defs/fault_reason``."""

    TIMEOUT = "timeout"
    CRASH = "crash"
    BAD_JSON = "bad_json"
    SCHEMA = "schema"
    ILLEGAL_ACTION = "illegal_action"
    WRONG_REQUEST = "wrong_request"
    LINE_TOO_LONG = "line_too_long"
    BAD_ENCODING = "bad_encoding"
    HANDSHAKE = "handshake"
    BAD_VERSION = "bad_version"
    CLOSED_INPUT = "closed_input"
    CLOSED_OUTPUT = "closed_output"
    START_FAILED = "start_failed"
    CPU_LIMIT = "cpu_limit"
    MEMORY_LIMIT = "memory_limit"
    OUTPUT_LIMIT = "output_limit"
    BOT_ERROR = "bot_error"


FAULT_REASONS: tuple[FaultReason, ...] = tuple(FaultReason)


class BotFault(ArenaError):
    """The bot's fault: the game is forfeited. Subclasses fix :attr:`reason`."""

    reason: ClassVar[FaultReason] = FaultReason.BOT_ERROR

    def __init__(self, message: str = "") -> None:
        super().__init__(message or str(self.reason))

    @property
    def message(self) -> str:
        return str(self)


class Timeout(BotFault):
    """No complete line within the move time plus what was left of the bank."""

    reason = FaultReason.TIMEOUT


class Crash(BotFault):
    """The bot's process is gone."""

    reason = FaultReason.CRASH


class CpuLimit(Crash):
    reason = FaultReason.CPU_LIMIT


class MemoryLimit(Crash):
    reason = FaultReason.MEMORY_LIMIT


class StartFailed(BotFault):
    """The bot could not be started (missing command, failed build)."""

    reason = FaultReason.START_FAILED


class ClosedInput(BotFault):
    reason = FaultReason.CLOSED_INPUT


class ClosedOutput(BotFault):
    reason = FaultReason.CLOSED_OUTPUT


class LineTooLong(BotFault):
    reason = FaultReason.LINE_TOO_LONG


class BadEncoding(BotFault):
    reason = FaultReason.BAD_ENCODING


class OutputLimit(BotFault):
    reason = FaultReason.OUTPUT_LIMIT


class ProtocolError(BotFault, ValueError):
    """A line that breaks the protocol (see :mod:`arena.referee.protocol`). Abstract: raise a subclass."""


class BadJson(ProtocolError):
    reason = FaultReason.BAD_JSON


class SchemaViolation(ProtocolError):
    reason = FaultReason.SCHEMA


class IllegalAction(ProtocolError):
    reason = FaultReason.ILLEGAL_ACTION


class WrongRequest(ProtocolError):
    reason = FaultReason.WRONG_REQUEST


class HandshakeFailed(ProtocolError):
    reason = FaultReason.HANDSHAKE


class BadVersion(ProtocolError):
    reason = FaultReason.BAD_VERSION


def _leaves(cls: type[BotFault]) -> list[type[BotFault]]:
    out = [cls]
    for sub in cls.__subclasses__():
        out += _leaves(sub)
    return out


_BY_REASON: dict[FaultReason, type[BotFault]] = {}
for _cls in _leaves(BotFault):
    if _cls.__module__ == __name__ and _cls is not ProtocolError:
        _BY_REASON.setdefault(_cls.reason, _cls)
del _cls


class ArenaFailure(ArenaError):
    """The arena could not do its part (start a bot's process: no cgroup, no sandbox, a failed fork):
    no bot's doing, so no bot forfeits. A game it stops is not recorded: the tournament leaves it
    unstored and plays it on its next run; a ladder suspends no one for it. A run that ends with
    such games unplayed raises its subclass ``arena.tournament.run.TournamentIncomplete``."""


def fault_class(reason: str) -> type[BotFault]:
    """The class for a reason string (``ValueError`` for a string that is no fault reason)."""
    return _BY_REASON[FaultReason(reason)]


def from_reason(reason: str, message: str = "") -> BotFault:
    """A fault from its stored reason, as a log or another process reports it."""
    return fault_class(reason)(message)
