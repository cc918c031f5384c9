"""A bot's conversation without I/O: bytes and times in, lines, faults and "wait until T" out
(the way h11 separates HTTP from sockets).

:class:`Conversation` is the one statement of how a bot is talked to: a line goes out under a
send deadline, a reply comes back under the decision's deadline, the bot's CPU and pipes are
looked at every ``watch_s`` of a wait, and the end of its stdout or of its time is a fault.
It reads no clock and touches no pipe: the shell (:mod:`.blocking`'s poll loop, or the test
double :class:`arena.referee.testing.MockBot` on a fake clock) tells it the time and the bytes
and does what the answer says, so a test's fake bot gets the verdict a real one would.

:class:`LineChannel` holds what the protocol says about the bytes on a bot's pipes: lines end
with ``\\n`` (a ``\\r`` before it is dropped), no line is longer than ``max_line`` bytes, the
whole output is at most ``max_total`` bytes, and every line is strict UTF-8. It never reads or
writes: a shell (:mod:`.process` on trio, :mod:`.blocking` on ``selectors``) moves the bytes
and asks it for the next line, so both shells give every bot the same verdict. Whatever a bot
writes, the channel holds at most one line plus one read of it.

:class:`StderrBuffer` keeps the first part of a bot's stderr as lines, for the game log.
"""

from __future__ import annotations

from typing import NamedTuple

from .errors import BotError, BotTimeout, LineTooLong, NotUtf8, OutputLimitExceeded


READ_CHUNK = 64 * 1024
"""Bytes a shell reads from a pipe at once: the most the channel holds beyond one line."""


def encode_line(text: str | bytes) -> bytes:
    """One protocol line as bytes for a bot's stdin (the newline appended). A request comes as
    the UTF-8 bytes the core encoded (no decode and re-encode per decision)."""
    data = text if type(text) is bytes else text.encode("utf-8")
    # find, not ``in``: bytes' ``in`` first tries the needle as an int, and builds and drops a
    # TypeError for it (about 4k instructions per request line)
    if data.find(b"\n") >= 0 or data.find(b"\r") >= 0:
        raise ValueError("a protocol line must not contain newlines")
    return data + b"\n"


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


EXIT_GRACE = 1.0
"""Seconds EOF on stdout may precede the exit of the process: within them the exit is the fault."""
WATCH_S = 0.25
"""While waiting for a reply, the shell looks this often at the bot's CPU use this game and,
under bubblewrap, at whether any bot process still holds its stdin and stdout."""


class Watch:
    """A wait reached its next look: the shell checks the bot's CPU and pipes (faults raise)."""


WATCH = Watch()


class Ended(NamedTuple):
    """The bot's stdout ended: the fault is its exit if the process ends by ``until``, else
    :class:`~arena.bots.errors.BotClosedOutput`."""

    until: float


class Expired(NamedTuple):
    """The reply's time is up: the fault is the bot's exit if the process is already gone (a
    descendant holds stdout open), else ``fault``."""

    fault: BotTimeout


Event = str | float | BotError | Ended | Expired | Watch
"""What :meth:`Conversation.next_event` says: a reply line (``str``); "wait until T" (a ``float``
on the shell's clock, for stdout to be readable); a fault (a :class:`BotError`, to raise); or
one of the ends the shell settles with the process's exit (:class:`Ended`, :class:`Expired`);
or :data:`WATCH`."""


class Conversation:
    """One bot's conversation, for every shell: :meth:`send` a line, write :meth:`data_to_send`
    and report it :meth:`sent`, following :meth:`send_event`; :meth:`expect` a reply, feed what
    stdout gave (:meth:`receive_data`, empty bytes at EOF) and follow :meth:`next_event` until it
    gives a line or a fault. Times are seconds on whatever clock the shell passes in."""

    __slots__ = ("channel", "watch_s", "_out", "_send_deadline", "_send_timeout", "_deadline",
                 "_timeout", "_watch_at")

    def __init__(self, max_line: int, max_total: int, watch_s: float):
        self.channel = LineChannel(max_line, max_total)
        self.watch_s = watch_s
        self._out = b""
        self._send_deadline = self._send_timeout = 0.0
        self._deadline = self._timeout = self._watch_at = 0.0

    # -- the referee's line out ----------------------------------------------

    def send(self, data: bytes, now: float, timeout: float) -> None:
        """``data`` (one encoded line) is to be written, all of it within ``timeout``."""
        self._out = data
        self._send_deadline = now + timeout
        self._send_timeout = timeout

    def data_to_send(self) -> bytes:
        return self._out

    def sent(self, n: int) -> None:
        """The shell wrote ``n`` bytes of :meth:`data_to_send`."""
        self._out = self._out[n:]

    def send_event(self, now: float) -> float | BotTimeout | None:
        """None once the line is written; else wait until T (a ``float``) for stdin to take more,
        or the send's fault once its time is up (the rest of the line is dropped)."""
        if not self._out:
            return None
        if now >= self._send_deadline:
            self._out = b""
            return BotTimeout(self._send_timeout, during="send")
        return self._send_deadline

    # -- the bot's reply -------------------------------------------------------

    def expect(self, now: float, timeout: float) -> float | None:
        """A reply is due within ``timeout`` seconds of ``now``. Returns when the shell's first
        wait for stdout ends (what :meth:`next_event` would say) where nothing is pending (no
        line, fault or end already read: the usual case, so a decision's first wait costs no
        further call); None where something is, and :meth:`next_event` tells what."""
        self._timeout = timeout
        self._deadline = deadline = now + timeout
        self._watch_at = watch_at = now + self.watch_s
        channel = self.channel
        if channel._pos != len(channel._buf) or channel._eof or channel._failed is not None or now >= deadline:
            return None
        return deadline if deadline < watch_at else watch_at

    def receive_data(self, data: bytes) -> None:
        """What a read of stdout gave (empty: the end of the stream)."""
        self.channel.receive_data(data)

    def next_event(self, now: float) -> Event:
        """What the shell does next for the reply it expects (see :data:`Event`). A line
        that came with an earlier read is given at once; a late one stays for the next call."""
        channel = self.channel
        try:
            line = channel.next_line()
        except BotError as fault:
            return fault
        if line is not None:
            return line
        if channel.at_eof:
            return Ended(now + min(EXIT_GRACE, max(self._deadline - now, 0.05)))
        if now >= self._deadline:
            return Expired(BotTimeout(self._timeout))
        if now >= self._watch_at:  # in slices of watch_s: a fast reply never sees more than the first
            self._watch_at = now + self.watch_s
            return WATCH
        return self._deadline if self._deadline < self._watch_at else self._watch_at


class StderrBuffer:
    """Keeps the first ``cap`` bytes of stderr as lines; counts the rest. ``lines`` (those not yet
    taken) is one list for the buffer's life, so a referee can look whether any came without a
    call (most decisions bring none)."""

    def __init__(self, cap: int):
        self.cap = cap
        self.kept = 0
        self.dropped = 0
        self._pending = bytearray()
        self.lines: list[str] = []

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
        self.lines.extend(line.decode("utf-8", "replace") for line in complete)
        self._pending = bytearray(rest)
        if self.kept >= self.cap:
            self.finish()  # nothing more will be kept: flush the partial line

    def finish(self) -> None:
        if self._pending:
            self.lines.append(self._pending.decode("utf-8", "replace"))
            self._pending = bytearray()

    def take(self) -> list[str]:
        taken = self.lines[:]
        self.lines.clear()
        return taken
