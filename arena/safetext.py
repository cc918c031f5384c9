"""Text from bots is data: what a bot wrote (its name, version and author in bot.toml, its stderr,
its ``info``) reaches the operator's terminal with every non-printable character shown escaped,
never as a control sequence (a window title, a cleared screen, fake colours, reversed text).

An allow list: a character passes if Python calls it printable (letters, marks, digits,
punctuation, symbols, the space), a newline where lines are allowed; anything else is written as
its escape (``\\x1b``, ``\\u202e``). :class:`SafeConsole` applies it to everything a Rich console
prints except the control codes Rich makes itself (colours, cursor moves), so a command that
prints through one cannot forget a field.
"""

from __future__ import annotations

from collections.abc import Iterable

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
