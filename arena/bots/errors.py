"""How a bot process misbehaves, one exception class each, and why one could not be started.

Each error is also the :mod:`arena.faults` class of its reason, so the referee forfeits the bot
with the error as it is; :class:`BotStartError` is the arena's trouble starting it, except
:class:`BotCommandError`, a start that fails on the bot's own files.
"""

from __future__ import annotations

import signal
from enum import Enum

from .. import faults
from ..errors import ArenaError


class BotError(faults.BotFault):
    """The bot misbehaved at the process level. Every subclass is also the
    :mod:`arena.faults` class of its fault, so ``reason`` comes from there and the
    referee needs no mapping."""


class BotTimeout(BotError, faults.Timeout):
    def __init__(self, timeout: float, during: str = "receive"):
        super().__init__(f"no complete line within {timeout:g}s" if during == "receive"
                         else f"bot did not read its input within {timeout:g}s")
        self.timeout = timeout
        self.during = during


class BotExited(BotError, faults.Crash):
    """The bot's main process is gone.  ``returncode`` is its exit status (None
    if killed by a signal), ``signal`` the killing signal (None if it exited).
    In sandbox mode bwrap reports a signal death as status 128+N; then both
    are set (e.g. 139 and 11)."""

    def __init__(self, returncode: int | None, signal_: int | None, detail: str = ""):
        if signal_ is not None:
            try:
                what = f"killed by {signal.Signals(signal_).name}"
            except ValueError:
                what = f"killed by signal {signal_}"
        elif returncode is not None:
            what = f"exited with status {returncode}"
        else:
            what = "exited (status unknown)"
        super().__init__(f"bot {what}{': ' + detail if detail else ''}")
        self.returncode = returncode
        self.signal = signal_


class CpuLimitExceeded(BotExited, faults.CpuLimit):
    @classmethod
    def over_allowance(cls, used: float, allowed: float) -> CpuLimitExceeded:
        """The bot is still running but has used more CPU this game than it may."""
        exc = cls(None, None)
        exc.args = (f"bot used {used:.2f} s of CPU this game, over its allowance of {allowed:.2f} s",)
        return exc


class MemoryLimitExceeded(BotExited, faults.MemoryLimit):
    pass


class LineTooLong(BotError, faults.LineTooLong):
    """A line exceeded Limits.max_line_bytes.  Sticky: the output stream is
    not resynchronised, every later receive raises this again."""

    def __init__(self, limit: int):
        super().__init__(f"line longer than {limit} bytes")
        self.limit = limit


class NotUtf8(BotError, faults.BadEncoding):
    """One line was not valid UTF-8 (the line is consumed; the next one may be fine)."""

    def __init__(self, raw: bytes, error: UnicodeDecodeError):
        super().__init__(f"line is not UTF-8 ({error.reason} at byte {error.start}): {raw[:60]!r}")
        self.raw_prefix = raw[:200]


class OutputLimitExceeded(BotError, faults.OutputLimit):
    """Total stdout exceeded Limits.max_output_bytes (sticky)."""


class BotClosedInput(BotError, faults.ClosedInput):
    """The bot closed its stdin but is still running."""


class BotClosedOutput(BotError, faults.ClosedOutput):
    """The bot closed its stdout but is still running."""


class StartErrorKind(Enum):
    """Why a start failed, for whoever must decide what it costs (never read from the words)."""

    ARENA = "arena"  # the arena's own trouble: no cgroup, a failed fork, a bad directory...
    COMMAND = "command"  # the bot's own command cannot start (BotCommandError)
    SANDBOX = "sandbox"  # the containment cannot run on this machine (SandboxUnavailable)
    UID_DENIED = "uid_denied"  # the bot's private uid may not use a file the bot needs


class BotStartError(ArenaError):
    """The referee could not start the bot (missing command, bad directory,
    permissions, no cgroups when required...).  Not the bot's fault. ``kind`` says which."""

    kind: StartErrorKind = StartErrorKind.ARENA

    def __init__(self, message: str = "", kind: StartErrorKind | None = None):
        super().__init__(message)
        if kind is not None:
            self.kind = kind


class BotCommandError(BotStartError, faults.StartFailed):
    """The bot's own command cannot start: its manifest names a program that is not there, not
    runnable or not visible in the sandbox, or a directory that does not exist or is a system
    directory. The bot's fault (it forfeits), unlike the arena's troubles above (no cgroup, no
    sandbox, a failed fork), which void the game instead: nothing in a bot's directory may turn
    its games into the arena's failures."""

    kind = StartErrorKind.COMMAND


class SandboxUnavailable(BotStartError):
    """bwrap is missing or cannot create namespaces on this machine."""

    kind = StartErrorKind.SANDBOX
