"""Text from bots is data: what a bot wrote (its name, version and author in bot.toml, its stderr,
its ``info``) reaches the operator's terminal with every non-printable character shown escaped,
never as a control sequence (a window title, a cleared screen, fake colours, reversed text).

An allow list: a character passes if Python calls it printable (letters, marks, digits,
punctuation, symbols, the space), a newline where lines are allowed; anything else is written as
its escape (``\\x1b``, ``\\u202e``). :class:`SafeConsole` applies it to everything a Rich console
prints except the control codes Rich makes itself (colours, cursor moves), so a command that
prints through one cannot forget a field. :func:`escape_logs` does the same for every log line
a process writes, whoever made the handler (the root logger's, uvicorn's, hypercorn's, Dask's).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from rich.console import Console
from rich.segment import Segment


def printable(text: object, lines: bool = False) -> str:
    """TEXT with each non-printable character escaped; newlines kept when LINES."""
    s = str(text)
    if s.isprintable():
        return s
    return "".join(c if c.isprintable() or (lines and c == "\n") else c.encode("unicode_escape").decode("ascii")
                   for c in s)


class SafeConsole(Console):
    """A Rich console whose printed text passes through :func:`printable` (newlines kept)."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(
            seg if seg.control else Segment(printable(seg.text, lines=True), seg.style, seg.control) for seg in buffer)


class ShownRecord(logging.LogRecord):
    """A log record whose text is shown escaped, whatever handler and formatter write it: a visitor's
    path, a form field, a bot's words or an exception's text carrying them reach a terminal or a log
    file as data. A text argument is escaped whole (a newline in it cannot forge a log line); the
    message made from them and the traceback keep their own newlines, nothing else non-printable."""

    def getMessage(self) -> str:  # noqa: N802 - logging's name
        args: Any = self.args
        if isinstance(args, tuple):
            args = tuple(printable(a) if isinstance(a, str) else a for a in args)
        elif isinstance(args, Mapping):
            args = {k: printable(v) if isinstance(v, str) else v for k, v in args.items()}
        msg = str(self.msg)
        return printable(msg % args if args else msg, lines=True)

    # a formatter writes the traceback's text here once, then every handler prints it
    @property
    def exc_text(self) -> str | None:
        return self._exc_text

    @exc_text.setter
    def exc_text(self, text: str | None) -> None:
        self._exc_text = None if text is None else printable(text, lines=True)

    @property
    def stack_info(self) -> str | None:
        return self._stack_info

    @stack_info.setter
    def stack_info(self, text: str | None) -> None:
        self._stack_info = None if text is None else printable(text, lines=True)


def escape_logs() -> None:
    """Make every log record of this process a :class:`ShownRecord` (once per process: the CLI's
    commands and a Dask worker's run plugin call it)."""
    if logging.getLogRecordFactory() is not ShownRecord:
        logging.setLogRecordFactory(ShownRecord)
