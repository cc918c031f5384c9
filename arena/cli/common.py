"""What every ``arena`` command shares: one error style, Ctrl-C and failures without tracebacks.

Every command registered on :class:`ArenaTyper` (the ladder, replay and serve commands too)
runs inside :func:`guard`: a Ctrl-C anywhere, even one trio wraps in an exception group,
ends in a single "interrupted ..." line and exit status 130; a full disk, an unusable store
or a bad config file ends in a single ``error:`` line and exit status 2, and anything else (an
arena bug) in one line and exit status 70, so that a verdict's 1 (``arena check`` found a fault,
``arena match`` accepted H0) is never mistaken for a crash. Messages are escaped
before Rich sees them, so a bracketed name such as ``palace-arena[dask]`` prints as written.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
import threading
from pathlib import Path
from collections.abc import Callable
from enum import Enum
from typing import Annotated, Optional, Any

import typer
from rich.markup import escape

from ..safetext import SafeConsole, escape_logs
from ..groups import is_cancel, leaves
# typer (0.29 on) carries its own copy of click; its exceptions are the ones a command raises
from typer import exceptions as _typer_exc
from typer._click import exceptions as _click_exc

_CLICK_ERRORS: tuple[type[BaseException], ...] = (_click_exc.ClickException,)
_NO_ARGS: tuple[type[BaseException], ...] = (_click_exc.NoArgsIsHelpError,)
_ABORTS: tuple[type[BaseException], ...] = (_typer_exc.Abort,)
_EXITS: tuple[type[BaseException], ...] = (_typer_exc.Exit,)

GvisorOpt = Annotated[bool, typer.Option("--gvisor", help="Run every bot under gVisor (runsc), which shares no "
                                          "kernel with the host; an error where runsc cannot run, never a "
                                          "weaker mode (docs/SANDBOX.md).")]
"""The one spelling of the gVisor choice, for every command that starts bots."""

SystemOpt = Annotated[Optional[list[str]], typer.Option("--system", metavar="PRESET|PATH",
                      help="Under --gvisor: what a seat sees of the system besides Python 3 and bash, for its "
                           "bots' languages: javascript, java, or an absolute path (repeatable; docs/SANDBOX.md).")]
"""The one spelling of a gVisor seat's extra system view."""


def gvisor_system(system: list[str] | None, gvisor: bool, store: Path | None = None) -> tuple[str, ...]:
    """``--system`` as a Launcher takes it, checked as a tournament's list is
    (:func:`arena.bots.filesystem.run_system`, the store's folder refused); a refusal is a
    :class:`~arena.bots.filesystem.SystemViewError`, one ``error:`` line."""
    from ..bots.filesystem import run_system
    from ..tournament import DEFAULT_STORE
    return run_system(system or (), stranger_view=gvisor, refused=(Path(store or DEFAULT_STORE).resolve().parent,))

INTERRUPTED = 130
USAGE = 2
BUG = 70  # sysexits' EX_SOFTWARE: apart from 1, which commands use for a verdict (a fault, H0 accepted)

err = (SafeConsole(stderr=True, highlight=False) if sys.stderr.isatty()
       else SafeConsole(stderr=True, width=160, highlight=False))


class Progress:
    """How far the running command got, for the line printed when it is interrupted."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.done: int | None = None
        self.total: int | None = None
        self.resumable = True
        self.what = "games"
        self.message: str | None = None  # a command's own line, in place of the count

    def set(self, done: int, total: int | None = None, *, resumable: bool = True, what: str = "games") -> None:
        self.done, self.total, self.resumable, self.what = done, total, resumable, what

    def interrupted_line(self) -> str:
        if self.message is not None:
            return self.message
        if self.done is None:
            text = "interrupted"
        elif self.total is None:
            text = f"interrupted after {self.done} {self.what}"
        else:
            text = f"interrupted after {self.done}/{self.total} {self.what}"
        return text + ("; run the same command again to resume" if self.resumable else "")


progress = Progress()


def fail(message: str, code: int = USAGE) -> None:
    """The one error style: ``error: <message>`` on stderr, the message printed as written."""
    err.print(f"[red]error:[/] {escape(str(message))}", soft_wrap=True)
    raise typer.Exit(code)


def warn(message: str) -> None:
    err.print(f"[yellow]warning:[/] {escape(str(message))}", soft_wrap=True)


def is_interrupt(exc: BaseException) -> bool:
    """Ctrl-C, as trio raises it: bare, or inside an exception group with other cancellations."""
    return any(isinstance(e, KeyboardInterrupt) for e in leaves(exc))


def _known_errors() -> tuple[type[BaseException], ...]:
    """User-facing failures, each reported in one line: the arena's own (:class:`~arena.errors.ArenaError`),
    the engine's rules (the engine is a library below the arena), the store's SQLite and the system's."""
    import sqlite3
    from ..engine import RulesError
    from ..errors import ArenaError
    return (ArenaError, RulesError, sqlite3.Error, OSError)


class StoreTrouble(Enum):
    """Why the store could not be written, told by SQLite's result code or the system's errno (never
    by the words of a message, which a bot's name or a path may carry too)."""

    FULL = "full"  # SQLITE_FULL, SQLITE_IOERR, SQLITE_TOOBIG; ENOSPC, EDQUOT
    READ_ONLY = "read-only"  # SQLITE_READONLY
    OTHER = "other"  # any other SQLite error


def store_trouble(e: BaseException) -> StoreTrouble | None:
    """The kind of ``e``, or of the error it was raised from or while handling (a StoreError keeps
    the SQLite error it stands for as its context); None for an error that is no store trouble."""
    import errno
    import sqlite3
    seen: BaseException | None = e
    for _ in range(8):  # a chain is short; a cycle is not followed forever
        if seen is None:
            return None
        code = getattr(seen, "sqlite_errorcode", None)
        if isinstance(seen, sqlite3.Error) and isinstance(code, int):
            primary = code & 0xFF  # an extended code's low byte is its primary code
            if primary in (sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_TOOBIG):
                return StoreTrouble.FULL
            return StoreTrouble.READ_ONLY if primary == sqlite3.SQLITE_READONLY else StoreTrouble.OTHER
        if isinstance(seen, sqlite3.Error):
            return StoreTrouble.OTHER
        if isinstance(seen, OSError) and seen.errno in (errno.ENOSPC, errno.EDQUOT):
            return StoreTrouble.FULL
        seen = seen.__cause__ or seen.__context__
    return None


def describe_error(e: BaseException) -> str:
    """One line for a failure; the disk-full and read-only cases say what to do."""
    import sqlite3
    text = str(e) or type(e).__name__
    trouble = store_trouble(e)
    if trouble is StoreTrouble.FULL:
        return (f"could not store a game: {text}; the games stored before it are kept; "
                "free some space (or pass another --store) and run the same command again to resume")
    if trouble is StoreTrouble.READ_ONLY:
        return f"the store is read-only: {text}; pass a writable --store"
    if trouble is StoreTrouble.OTHER and isinstance(e, sqlite3.Error):  # SQLite's own, unwrapped
        return f"store: {text}"
    if isinstance(e, OSError) and e.filename:
        return f"{e.filename}: {e.strerror or text}"
    return text


def outcome_of(exc: BaseException) -> tuple[int, str] | None:
    """(exit status, line) for an interrupt or a known failure, None for a bug (its traceback shows)."""
    found = leaves(exc)
    if any(isinstance(e, KeyboardInterrupt) for e in found):
        return INTERRUPTED, progress.interrupted_line()
    known = _known_errors()
    real = [e for e in found if not is_cancel(e)]
    for e in real:
        if isinstance(e, known):
            return USAGE, describe_error(e)
    return None


def guard(f: Callable[..., Any]) -> Callable[..., Any]:
    """Run a command so that Ctrl-C and known failures end in one line, never a traceback."""

    @functools.wraps(f)
    def run(*args: Any, **kwargs: Any) -> Any:
        progress.reset()
        escape_logs()  # every log line the command writes (uvicorn's, Dask's, the arena's) shows its text escaped
        try:
            return f(*args, **kwargs)
        except (*_EXITS, *_CLICK_ERRORS, *_ABORTS):
            raise
        except BaseException as exc:  # noqa: BLE001 - sorted below; anything unknown is re-raised
            if isinstance(exc, SystemExit):
                raise
            result = outcome_of(exc)
            if result is None:
                if os.environ.get("ARENA_DEBUG"):
                    raise
                first = next((e for e in leaves(exc) if not is_cancel(e)), exc)
                err.print(f"[red]error:[/] {escape(type(first).__name__)}: {escape(str(first))} "
                          "(an arena bug: set ARENA_DEBUG=1 for the traceback and report it)", soft_wrap=True)
                raise typer.Exit(BUG) from None
            code, line = result
            if code == INTERRUPTED:
                err.print(escape(line), soft_wrap=True)
            else:
                err.print(f"[red]error:[/] {escape(line)}", soft_wrap=True)
            raise typer.Exit(code) from None

    return run


def _term_as_interrupt(signum: int, frame: Any) -> None:
    """SIGTERM (a service manager, ``kill``, a CI timeout) stops a command the way Ctrl-C does:
    trio's SIGINT handler delivers it where it is safe, games in flight are abandoned, bots and
    their cgroups are cleaned up, and one "interrupted" line says what was kept. Where SIGINT has
    no Python handler (a thread that is not the main one), SIGTERM keeps its default action."""
    if signal.getsignal(signal.SIGINT) in (signal.SIG_IGN, signal.SIG_DFL, None):
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        return
    signal.raise_signal(signal.SIGINT)


def handle_sigterm() -> None:
    """Treat SIGTERM like Ctrl-C from here on (main thread only, and only over the default action).

    A job a script starts in the background (``arena tournament … &``, as CI scripts do) inherits
    SIGINT ignored; SIGTERM is delivered through SIGINT's handler, so that handler is put back:
    otherwise ``kill`` would end such a run without its "interrupted" line and leave its bots'
    cgroups for the next run to clean."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, _term_as_interrupt)


class ArenaTyper(typer.Typer):
    """A Typer whose every command runs inside :func:`guard`, whoever registers it.

    Help is plain text (``rich_markup_mode=None``): typer's Rich help alone takes about six
    times the interpreter's start to import (bench/bench_cli.py), and plain help shows a
    ``[limits]`` in a help string as written instead of reading it as markup.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("rich_markup_mode", None)
        super().__init__(*args, **kwargs)

    def command(self, *args: Any, **kwargs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        register = super().command(*args, **kwargs)

        def decorator(f: Callable[..., Any]) -> Callable[..., Any]:
            register(guard(f))
            return f

        return decorator

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the app; a usage error prints in the same one-line style as every other error."""
        try:
            self._run(*args, **kwargs)
        finally:
            # The command is over, its output written: a Ctrl-C now would only interrupt the
            # interpreter's exit (joining threads, exit handlers) with a KeyboardInterrupt traceback
            # and a status that says nothing of the command (seen as the run ended: exit -2).
            if threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGINT, signal.SIG_IGN)

    def _run(self, *args: Any, **kwargs: Any) -> None:
        command = typer.main.get_command(self)
        handle_sigterm()
        try:
            code = command.main(*args, standalone_mode=False, **kwargs)
        except _NO_ARGS as e:
            print(e.ctx.get_help())  # type: ignore[attr-defined]
            sys.exit(0)
        except _CLICK_ERRORS as e:
            hint = ""
            ctx = getattr(e, "ctx", None)
            if ctx is not None:
                hint = f" (see: {ctx.command_path} -h)"
            err.print(f"[red]error:[/] {escape(e.format_message())}{escape(hint)}", soft_wrap=True)  # type: ignore[attr-defined]
            sys.exit(e.exit_code)
        except _ABORTS:
            err.print(escape(progress.interrupted_line()), soft_wrap=True)
            sys.exit(INTERRUPTED)
        sys.exit(code if isinstance(code, int) else 0)
