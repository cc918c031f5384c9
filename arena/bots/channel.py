"""A bot's line channel without I/O: bytes in, lines and faults out (the way h11 separates HTTP
from sockets).

:class:`LineChannel` holds what the protocol says about the bytes on a bot's pipes: lines end
with ``\\n`` (a ``\\r`` before it is dropped), no line is longer than ``max_line`` bytes, the
whole output is at most ``max_total`` bytes, and every line is strict UTF-8. It never reads or
writes: a shell (:mod:`.process` on trio, :mod:`.blocking` on ``selectors``) moves the bytes
and asks it for the next line, so both shells give every bot the same verdict. Whatever a bot
writes, the channel holds at most one line plus one read of it.

:class:`StderrBuffer` keeps the first part of a bot's stderr as lines, for the game log.
"""

from __future__ import annotations

from .errors import BotError, LineTooLong, NotUtf8, OutputLimitExceeded


READ_CHUNK = 64 * 1024
"""Bytes a shell reads from a pipe at once: the most the channel holds beyond one line."""


def encode_line(text: str) -> bytes:
    """One protocol line as bytes for a bot's stdin (the newline appended)."""
    if "\n" in text or "\r" in text:
        raise ValueError("a protocol line must not contain newlines")
    return text.encode("utf-8") + b"\n"


class LineChannel:
    """Splits a bot's stdout into lines. ``receive_data`` and ``receive_eof`` take what the shell
    read; ``next_line`` gives the next whole line (a ``str``), None if none is whole yet, or
    raises the fault: :class:`LineTooLong` and :class:`OutputLimitExceeded` are sticky (the
    stream is not resynchronised), :class:`NotUtf8` consumes its line only. At EOF a final
    unterminated line is a line; after it, ``at_eof`` is True and ``next_line`` None."""

    def __init__(self, max_line: int, max_total: int):
        self.max_line = max_line
        self.max_total = max_total
        self._buf = bytearray()
        self._pos = 0  # start of the unread part of _buf
        self._scanned = 0  # _buf[:_scanned] holds no unread newline
        self._total = 0
        self._eof = False
        self._failed: BotError | None = None
        self.peak_buffer = 0  # largest buffer held, for tests and curiosity

    @property
    def unread(self) -> int:
        """Bytes received and not yet handed out as lines."""
        return len(self._buf) - self._pos

    @property
    def at_eof(self) -> bool:
        """The stream ended and every line of it was handed out."""
        return self._eof and self._pos == len(self._buf)

    @property
    def failed(self) -> BotError | None:
        return self._failed

    def wants_data(self) -> bool:
        """Whether reading more could help: no sticky fault, no EOF yet."""
        return self._failed is None and not self._eof

    def receive_data(self, data: bytes) -> None:
        if not data:
            self.receive_eof()
            return
        if self._failed is not None:
            return
        self._total += len(data)
        if self._total > self.max_total:
            self._fail(OutputLimitExceeded(f"bot wrote more than {self.max_total} bytes to stdout"))
            return
        if self._pos == len(self._buf):  # everything handed out: start afresh
            self._buf = bytearray(data)
            self._pos = self._scanned = 0
        else:
            self._buf += data
        if len(self._buf) > self.peak_buffer:
            self.peak_buffer = len(self._buf)

    def receive_eof(self) -> None:
        self._eof = True

    def _fail(self, exc: BotError) -> None:
        self._failed = exc
        self._buf, self._pos, self._scanned = bytearray(), 0, 0  # release the memory now

    def next_line(self) -> str | None:
        """The next whole line as text (without ``\\n``, a trailing ``\\r`` dropped), None if none
        is whole yet (or at EOF)."""
        if self._failed is not None:
            raise self._failed
        buf = self._buf
        pos = self._pos
        if pos == len(buf):  # nothing unread: the usual case before a wait
            return None
        i = buf.find(b"\n", self._scanned)  # (_scanned >= _pos always)
        if i >= 0:
            if i - pos > self.max_line:
                self._fail(LineTooLong(self.max_line))
                raise self._failed  # type: ignore[misc]
            self._pos = self._scanned = i + 1
            raw = buf[pos:i]
        else:
            if pos:  # compact once per wait, not once per line
                del buf[:pos]
                self._pos = 0
            self._scanned = len(buf)
            if len(buf) > self.max_line:
                self._fail(LineTooLong(self.max_line))
                raise self._failed  # type: ignore[misc]
            if not (self._eof and buf):
                return None
            raw, self._buf, self._scanned = buf, bytearray(), 0  # the last line, unterminated
        if raw and raw[-1] == 13:  # b"\r"
            del raw[-1]
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise NotUtf8(bytes(raw), exc) from None


class StderrBuffer:
    """Keeps the first ``cap`` bytes of stderr as lines; counts the rest."""

    def __init__(self, cap: int):
        self.cap = cap
        self.kept = 0
        self.dropped = 0
        self._pending = bytearray()
        self._lines: list[str] = []

    def feed(self, data: bytes) -> None:
        room = self.cap - self.kept
        if room <= 0:
            self.dropped += len(data)
            return
        take = data[:room]
        self.dropped += len(data) - len(take)
        self.kept += len(take)
        self._pending += take
        *complete, rest = self._pending.split(b"\n")
        self._lines.extend(line.decode("utf-8", "replace") for line in complete)
        self._pending = bytearray(rest)
        if self.kept >= self.cap:
            self.finish()  # nothing more will be kept: flush the partial line

    def finish(self) -> None:
        if self._pending:
            self._lines.append(self._pending.decode("utf-8", "replace"))
            self._pending = bytearray()

    def take(self) -> list[str]:
        lines, self._lines = self._lines, []
        return lines
