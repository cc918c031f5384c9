"""The one shell of a bot: its pipes waited on with ``poll``, no event loop.

A bot's round trip needs no scheduler: write the line, ``poll`` its stdout, read.
:class:`BlockingBot` does that over :class:`~arena.bots.process.BotBase` (the decisions that need
no waiting: the exit, the CPU allowance, the teardown), and its one ``poll`` loop does what the
bot's :class:`~arena.bots.channel.Conversation` says (a line, a fault, or wait until T). One :class:`Hub` per
thread polls the stderr of every bot that thread started during every wait, so no bot ever
blocks on a full stderr pipe while another is asked, and finishes the bots closed with a grace
period, so no caller waits out anyone's grace. A hub is per thread, not per process, so that an
event loop can run whole games or checks in worker threads (``trio.to_thread``) side by side:
each thread waits on its own bots only. A bot is used by the thread that started it.

Typical use::

    bot = start_bot(["python3", "bot.py"], bot_dir, limits=Limits())
    try:
        bot.send_line(json.dumps(hello))
        reply = bot.receive_line(timeout=1.0)   # raises a BotError subclass
    finally:
        bot.close()
"""

from __future__ import annotations

import array
import fcntl
import os
import select
import termios
import threading
import time

from ..errors import ArenaError
from collections.abc import Callable

from .errors import BotClosedInput, BotClosedOutput, BotError, BotExited, BotTimeout, NotUtf8
from .process import KILL_DEADLINE, SHUTDOWN_GRACE, STDERR_GRACE, BotBase
from .channel import WATCH, Ended, Expired, encode_line
from . import native

# a decision's usual round trip in one call (_pipe.c); without it, the general loop does all
_round_trip = native.pipe.ask if native.pipe is not None else None

_IN = select.POLLIN | select.POLLHUP | select.POLLERR
_OUT = select.POLLOUT | select.POLLHUP | select.POLLERR
SEND_S = 10.0
"""Seconds a line may wait for room in a bot's stdin (a bot that reads nothing meanwhile faults)."""
ROOM_MAX = 1 << 20
"""The most :meth:`BlockingBot.make_room` grows a stdin pipe to (Linux's default ``pipe-max-size``;
a game's ``end`` holds at most its events, far less)."""


class BotClosed(ArenaError, OSError):
    """The bot was closed by the referee: nothing can be sent or received any more."""


class Interrupted(BaseException):
    """Another thread called off this thread's work (:meth:`Hub.interrupt`): a game whose caller
    was cancelled. A BaseException, so no bot-fault handler mistakes it for a bot's doing."""


class Hub:
    """Every blocking bot of one thread: their stderr, drained during every wait, and the bots
    closing with a grace period, finished during waits (or by :meth:`settle`)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self._poll = select.poll()
        self._stderr: dict[int, BlockingBot] = {}
        self._closing: dict[int, tuple[BlockingBot, float]] = {}  # pidfd (or -pid) -> bot, kill time
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._poll.register(self._wake_r, select.POLLIN)
        self.fds: tuple[int, ...] = (self._wake_r,)  # what the poll watches but closing bots: for _pipe.ask

    def interrupt(self) -> None:
        """From any thread: the hub's next wait (or the one under way) raises :class:`Interrupted`,
        once; the waits of the cleanup after it then work as usual."""
        try:
            os.write(self._wake_w, b"!")
        except BlockingIOError:  # already pending
            pass

    def __del__(self) -> None:
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass

    def clear_interrupt(self) -> None:
        """Forget an interrupt not yet raised (it came after the work it was meant for)."""
        try:
            while os.read(self._wake_r, 64):
                pass
        except BlockingIOError:
            pass

    def add(self, bot: BlockingBot) -> None:
        fd = bot._fds[2]
        self._stderr[fd] = bot
        self._poll.register(fd, _IN)
        self.fds = (self._wake_r, *self._stderr)

    def _drop_stderr(self, fd: int) -> None:
        if self._stderr.pop(fd, None) is not None:
            self._poll.unregister(fd)
            self.fds = (self._wake_r, *self._stderr)

    def wait(self, fd: int | None, events: int, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for ``events`` on ``fd`` (None: just serve the others),
        keeping every bot's stderr read meanwhile; True if ``fd`` is ready."""
        return self.wait_until(fd, events, time.monotonic() + timeout)

    def wait_until(self, fd: int | None, events: int, deadline: float) -> bool:
        """:meth:`wait` until the ``time.monotonic()`` ``deadline``."""
        poll = self._poll
        watched = fd is not None and fd not in self._stderr
        if watched:
            poll.register(fd, events)
        try:
            while True:
                wait = deadline - time.monotonic()
                if self._closing:
                    wait = min(wait, min(t for _, t in self._closing.values()) - time.monotonic())
                hit = False
                for ready, _ in poll.poll(int(wait * 1000 + 0.999) if wait > 0 else 0):
                    if ready == self._wake_r:
                        self.clear_interrupt()
                        raise Interrupted
                    if ready == fd:
                        hit = True
                        continue
                    bot = self._stderr.get(ready)
                    if bot is not None:
                        if not bot._feed_stderr():
                            self._drop_stderr(ready)
                        continue
                    closing = self._closing.get(ready)
                    if closing is not None:
                        self._finish(ready)
                if self._closing:
                    self._finish_due()
                if hit or time.monotonic() >= deadline:
                    return hit
        finally:
            if watched:
                poll.unregister(fd)

    def close_later(self, bot: BlockingBot, grace: float) -> None:
        """``bot`` has its stdin closed: finish it once it exits, or kill it after ``grace``."""
        key = bot._pidfd if bot._pidfd is not None else -bot.pid
        self._closing[key] = (bot, time.monotonic() + grace)
        if key >= 0:
            self._poll.register(key, select.POLLIN)

    def _finish(self, key: int) -> None:
        closing = self._closing.pop(key, None)
        if closing is None:  # finished meanwhile (a teardown waits, and so serves the others)
            return
        bot = closing[0]
        if key >= 0:
            self._poll.unregister(key)
        bot._teardown()

    def _finish_due(self) -> None:
        now = time.monotonic()
        for key, (bot, at) in list(self._closing.items()):
            if at <= now or bot._poll_exit():
                self._finish(key)

    def settle(self, timeout: float | None = None) -> None:
        """Wait until every bot closed with a grace period is finished (at most ``timeout``
        seconds, then the rest are killed now)."""
        end = time.monotonic() + (SHUTDOWN_GRACE + KILL_DEADLINE if timeout is None else timeout)
        while self._closing and time.monotonic() < end:
            self.wait(None, 0, min(0.05, end - time.monotonic()))
        for key in list(self._closing):
            self._finish(key)

    @property
    def closing(self) -> int:
        return len(self._closing)


_local = threading.local()


def hub() -> Hub:
    """This thread's hub (a new one after a fork). A thread that ends with bots still in their
    grace must :meth:`Hub.settle` first: nobody else waits on them."""
    current = getattr(_local, "hub", None)
    if current is None or current.pid != os.getpid():
        current = _local.hub = Hub()
    return current


def adopt_hub(given: Hub | None) -> None:
    """Make ``given`` this thread's hub: a thread's owner made it first, to interrupt it later
    (None: the thread's next :func:`hub` is a new one)."""
    _local.hub = given


class BlockingBot(BotBase):
    """A running bot waited on with ``poll``. Create with :func:`~arena.bots.start.start_bot`; always
    :meth:`close` (or :meth:`close_gracefully`)."""

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        for fd in self._fds:
            os.set_blocking(fd, False)
        self._hub = hub()
        self._hub.add(self)
        self._stdin_open = True

    # -- talking ---------------------------------------------------------

    def send_line(self, text: str | bytes, *, timeout: float = SEND_S) -> None:
        """Write one line (a newline is appended), waiting at most ``timeout`` seconds for room in
        the pipe; a BotError subclass (the bot exited, closed its stdin, or never read) if not."""
        data = encode_line(text)
        if self._stdin_error is not None:
            raise self._stdin_error
        if self._closed or not self._stdin_open:
            raise BotClosed("the bot's stdin was closed")
        written = self._write_now(data)
        if written != len(data):
            self._send_rest(data[written:], timeout)

    def make_room(self, size: int) -> bool:
        """Grow the stdin pipe (up to :data:`ROOM_MAX`) so that ``size`` more bytes fit beside what
        is queued, and a line that long is written whole without the bot reading; False where that
        cannot be (stdin closed, or the kernel refuses: a referee that is not root, past its pipe
        limits). A bot may set its pipe's size itself (``F_SETPIPE_SZ``), down to one page."""
        fd = self._fds[0]
        if self._closed or not self._stdin_open or self._stdin_error is not None:
            return False
        try:
            queued = array.array("i", [0])
            fcntl.ioctl(fd, termios.FIONREAD, queued, True)
            need = queued[0] + size
            if need <= fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ):
                return True
            if need > ROOM_MAX:
                return False
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, need)
        except OSError:
            return False
        return True

    def _send_rest(self, data: bytes, timeout: float) -> None:
        """The part of a line the pipe did not take at once, as the conversation says."""
        conv = self._conv
        conv.send(data, time.monotonic(), timeout)
        while (event := conv.send_event(time.monotonic())) is not None:
            if not isinstance(event, float):
                self._stdin_error = event  # the send's timeout: stdin is unusable from now on
                raise event
            if not self._hub.wait_until(self._fds[0], _OUT, event):
                continue
            try:
                conv.sent(os.write(self._fds[0], conv.data_to_send()))
            except BlockingIOError:
                continue
            except OSError:  # broken: the bot is gone, or closed its stdin
                if self._wait_exit(0.2):
                    self._stdin_error = self._exit_fault()
                else:
                    self._stdin_error = BotClosedInput("bot closed its stdin")
                raise self._stdin_error from None

    def ask(self, line: str | bytes, timeout: float) -> str:
        """:meth:`send_line`, then :meth:`receive_line`: one decision's round trip. The usual
        case (nothing pending, the line written whole, the reply one plain line in the first
        read, before the first watch, and no bot of this thread in its grace) is one call of the
        C helper (``_pipe.ask``: a write, one ``poll`` on this bot's stdout and the
        :class:`Hub`'s other pipes, a read); anything else goes on in :meth:`receive_line`'s loop,
        whose ``poll`` sees it again (``poll`` is level-triggered: no other bot's stderr, no
        interrupt is lost or served late) and whose conversation holds every limit."""
        conv = self._conv
        now = time.monotonic()
        until = conv.expect(now, timeout)  # (the reply's time counts from before the write)
        hub = self._hub
        if (until is None or hub._closing or self._stdin_error is not None or self._closed or not self._stdin_open
                or type(line) is not bytes or _round_trip is None):
            self.send_line(line)  # (its faults)
            return self.receive_line(timeout)
        if self.sandboxed:
            self._check_stdin(now=now)  # (under bubblewrap, on its throttle, as every write)
        channel = self._channel
        got = _round_trip(self._fds[0], line, self._fds[1], hub.fds, until - now, channel.max_line,
                          channel.max_total - channel._total)
        if type(got) is str:
            channel._total += len(got) + 1  # (ASCII: a character a byte)
            self.last_line = got
            self._got_reply(now)
            return got
        if type(got) is int:  # the pipe took part of the line: the rest under the send deadline
            self._send_rest(line[got:] + b"\n", SEND_S)
            return self.receive_line(timeout)
        if got is not None:
            channel.receive_data(got)
        return self._receive(time.monotonic())

    def receive_line(self, timeout: float) -> str:
        """The next line from the bot's stdout within ``timeout`` seconds; a BotError subclass
        (timeout, exit, a line or output over its cap, bad UTF-8) if not."""
        now = time.monotonic()
        self._conv.expect(now, timeout)
        return self._receive(now)

    def _receive(self, now: float) -> str:
        """:meth:`receive_line` once the conversation expects the reply."""
        if self._closed:
            raise BotClosed("the bot was closed")
        conv = self._conv
        fd = self._fds[1]
        while True:  # the one poll loop: the conversation decides (arena.bots.channel), this waits
            event = conv.next_event(now)
            if type(event) is str:
                self.last_line = event
                self._got_reply(now)
                return event
            if type(event) is float:
                if self._hub.wait_until(fd, _IN, event):
                    self._feed_stdout()
                now = time.monotonic()
            elif event is WATCH:
                self._watch()
            elif type(event) is Ended:
                if self._wait_exit(event.until - now):
                    raise self._exit_fault()
                raise BotClosedOutput("bot closed its stdout")
            elif type(event) is Expired:
                if self._wait_exit(0):  # dead, but a descendant holds stdout open
                    raise self._exit_fault()
                raise event.fault
            else:
                raise event  # type: ignore[misc]

    def run_to_end(self, timeout: float, *, stop: Callable[[], bool] = lambda: False,
                   look_every: float = 1.0) -> tuple[int | None, list[str]]:
        """For a command that is no bot (a contained build): close its stdin, collect its stdout
        and stderr lines until it exits, at most ``timeout`` seconds, or until ``stop()`` (asked
        at once and then every ``look_every`` seconds) says so. Returns its exit status (None if
        it did not exit in time) and its output; the caller still closes it (:meth:`close`),
        which kills whatever it left running."""
        self._close_stdin()
        lines: list[str] = []
        now = time.monotonic()
        deadline, look = now + timeout, now
        while now < deadline:
            if now >= look:
                if stop():
                    break
                look = now + look_every
            try:
                lines.append(self.receive_line(min(look, deadline) - now))
            except NotUtf8:  # that line is consumed; the next may be fine
                pass
            except BotExited:
                break
            except BotTimeout:  # a slice without a line: look again (a timeout is not sticky)
                pass
            except BotError:  # stdout closed, a line or all of it over its limit: wait for the exit
                self._wait_exit(max(deadline - time.monotonic(), 0))
                break
            now = time.monotonic()
        self._drain_stderr(STDERR_GRACE)
        return self.returncode, lines + self.take_stderr()

    # -- exit -------------------------------------------------------------

    def _wait_exit(self, timeout: float) -> bool:
        """True once the main process has exited, waiting up to ``timeout``."""
        if self._poll_exit():
            return True
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return self._poll_exit()
            if self._pidfd is not None:
                self._hub.wait(self._pidfd, select.POLLIN, left)
            else:
                self._hub.wait(None, 0, min(left, 0.005))
            if self._poll_exit():
                return True

    def _exit_fault(self) -> BotExited:
        """The exit as a fault, once the last of stderr is in (a dying bot's traceback)."""
        self._drain_stderr(STDERR_GRACE)
        return self._exited_error()

    def _drain_stderr(self, grace: float) -> None:
        """Read stderr to its end, at most ``grace`` seconds (a descendant may hold it open)."""
        fd = self._fds[2]
        if fd not in self._hub._stderr:
            return
        deadline = time.monotonic() + grace
        poll = select.poll()
        poll.register(fd, _IN)
        while time.monotonic() < deadline:
            if not poll.poll(max(0, int((deadline - time.monotonic()) * 1000 + 0.999))):
                break
            if not self._feed_stderr():
                self._hub._drop_stderr(fd)
                return

    # -- teardown ----------------------------------------------------------

    def __enter__(self) -> BlockingBot:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close_gracefully(self) -> None:
        """After ``shutdown``: close stdin and return at once; the bot has SHUTDOWN_GRACE seconds
        to exit by itself, then whatever is left is killed (by this process's :class:`Hub`, during
        later waits or :meth:`Hub.settle`)."""
        self.close(grace=SHUTDOWN_GRACE)

    def close(self, grace: float = 0.0) -> None:
        """Kill the bot and everything it started, reap it all, free its cgroup, uid and temp dir.
        Idempotent. With ``grace`` > 0 and the bot alive, its stdin is closed and the rest is left
        to the hub (this returns at once)."""
        if self._closed:
            return
        self._closed = True
        if grace > 0 and not self._poll_exit():
            self._close_stdin()
            self._hub.close_later(self, grace)
            return
        self._teardown()

    def _close_stdin(self) -> None:
        if self._stdin_open:
            self._stdin_open = False
            os.close(self._fds[0])

    def _teardown(self) -> None:
        clean = self._kill_everything()
        self._drain_stderr(STDERR_GRACE)
        self._hub._drop_stderr(self._fds[2])
        self._stderr_buf.finish()
        self._close_stdin()
        os.close(self._fds[1])
        os.close(self._fds[2])
        self._release(clean)

    def _kill_everything(self) -> bool:
        """SIGKILL and reap every process of the bot until none is left."""
        deadline = time.monotonic() + KILL_DEADLINE
        while True:
            self._kill_round()
            self._wait_exit(0.05)  # SIGKILL takes effect asynchronously
            if self._kill_settled():
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.002)


__all__ = ["BlockingBot", "BotClosed", "BotError", "Hub", "Interrupted", "adopt_hub", "hub"]
