"""Bounded reads of a bot's output: stdout split into lines, and the first part of stderr.

Whatever a bot writes, the referee never holds more than one line plus one read of it.
"""

from __future__ import annotations

import errno
import os

import trio

from .errors import BotError, LineTooLong, OutputLimitExceeded


READ_CHUNK = 64 * 1024


class LineReader:
    """Splits a byte stream into lines without ever holding more than
    max_line + READ_CHUNK bytes, whatever the peer sends."""

    def __init__(self, stream: trio.abc.ReceiveStream, max_line: int, max_total: int):
        self._stream = stream
        self._pipe = stream if isinstance(stream, trio.lowlevel.FdStream) else None
        self._max_line = max_line
        self._max_total = max_total
        self._buf = bytearray()
        self._pos = 0  # start of the unread part of _buf
        self._scanned = 0  # _buf[:_scanned] holds no unread newline
        self._total = 0
        self._eof = False
        self._failed: BotError | None = None
        self.peak_buffer = 0  # largest _buf seen, for tests and curiosity

    async def _receive_some(self) -> bytes:
        """The next chunk. For a pipe, wait for it first and then read: the reader only gets
        here with no whole line buffered, when a bot has nearly always not answered yet, so an
        optimistic read would cost a failed syscall per reply (and trio's receive_some a whole
        extra scheduler pass)."""
        stream = self._pipe
        if stream is None:
            return await self._stream.receive_some(READ_CHUNK)
        while True:  # fileno() each time: a closed stream says -1, never a reused number
            try:
                await trio.lowlevel.wait_readable(stream.fileno())
                return os.read(stream.fileno(), READ_CHUNK)
            except BlockingIOError:  # woken, but another reader took the bytes: wait again
                continue
            except (OSError, ValueError) as exc:  # ValueError: the fd was closed meanwhile
                if isinstance(exc, ValueError) or exc.errno == errno.EBADF:
                    raise trio.ClosedResourceError("file was already closed") from None
                raise trio.BrokenResourceError from exc

    def _fail(self, exc: BotError) -> BotError:
        self._failed = exc
        self._buf, self._pos, self._scanned = bytearray(), 0, 0  # release the memory now
        return exc

    @property
    def unread(self) -> int:
        """Bytes read from the stream and not yet handed out as lines."""
        return len(self._buf) - self._pos

    def buffered_line(self) -> bytes | None:
        """The next line if one is already whole in the buffer (no I/O); else None."""
        if self._failed is not None:
            raise self._failed
        i = self._buf.find(b"\n", max(self._pos, self._scanned))
        if i < 0:
            return None
        if i - self._pos > self._max_line:
            raise self._fail(LineTooLong(self._max_line))
        line = bytes(self._buf[self._pos:i])
        self._pos = self._scanned = i + 1
        return line

    async def read_line(self) -> bytes | None:
        """Next line without its newline; None at EOF.  A final unterminated
        line is returned as a line."""
        while True:
            line = self.buffered_line()
            if line is not None:
                return line
            del self._buf[: self._pos]  # compact once per read, not once per line
            self._pos = 0
            self._scanned = len(self._buf)
            if len(self._buf) > self._max_line:
                raise self._fail(LineTooLong(self._max_line))
            if self._eof:
                if not self._buf:
                    return None
                line, self._buf, self._scanned = bytes(self._buf), bytearray(), 0
                return line
            data = await self._receive_some()
            if not data:
                self._eof = True
                continue
            self._total += len(data)
            if self._total > self._max_total:
                raise self._fail(OutputLimitExceeded(
                    f"bot wrote more than {self._max_total} bytes to stdout"))
            self._buf += data
            self.peak_buffer = max(self.peak_buffer, len(self._buf))


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
