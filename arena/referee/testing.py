"""A bot connection acted out in-process, for tests of anything that talks to bots.

:class:`MockBot` stands where a bot process would (it is what a
:class:`~arena.referee.blocking.BlockingPlayer` talks to), like python-chess's ``MockTransport``:
script it with :meth:`MockBot.expect` (expect this line, answer that), or give it a
``respond`` function for whole games, or both (expectations first). Answers are lines,
or the things a process does instead of answering: :class:`Sleep` (think this long, on a
:class:`FakeClock`: no real time passes), :data:`EXIT` (the process exits), a
:class:`~arena.faults.BotFault` (what reading raises), or :class:`Refuse` (the
referee's write fails). Every line the referee wrote is kept in :attr:`MockBot.lines`,
parsed in :attr:`MockBot.messages`.

The bot's lines reach the referee as bytes through the shells' own
:class:`~arena.bots.channel.Conversation`, on the fake clock the test gives the players and
:func:`~arena.referee.blocking.play_game` too: the fault table runs the production loop on fake
time.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from ..bots.channel import WATCH, WATCH_S, Conversation, Ended, Expired
from ..faults import BotFault, Crash
from ..limits import Limits


class FakeClock:
    """A :class:`~arena.referee.seat.Timer` whose time passes only when someone sleeps on it
    (a scripted bot thinking, a referee keeping a fixed schedule)."""

    def __init__(self, start: float = 0.0):
        self.t = start

    def now(self) -> float:
        return self.t

    def sleep_until(self, t: float) -> None:
        self.t = max(self.t, t)


class Sleep(float):
    """In a bot's answers: the bot thinks this many seconds before the next item."""


EXIT: Any = object()  # in a bot's answers: the bot process exits here


class Refuse:
    """An answer that makes the referee's write fail, then and afterwards (the bot closed its stdin)."""

    def __init__(self, exc: BaseException):
        self.exc = exc


Item = Any  # str | Sleep | EXIT | BaseException
Respond = Callable[[dict[str, Any]], Iterable[Item] | Refuse | None]


def hello_line(name: str = "mock", version: str = "1") -> str:
    return json.dumps({"type": "hello", "protocol": 1, "name": name, "version": version})


def action_line(msg: dict[str, Any], action: int) -> str:
    return json.dumps({"type": "action", "request": msg["id"], "action": action})


def policy(choose: Callable[[dict[str, Any]], int], name: str = "mock") -> Respond:
    """A well-behaved bot around a request -> action id function: it greets, answers every
    request with an ``action`` message and exits on ``shutdown``."""
    def respond(msg: dict[str, Any]) -> list[Item]:
        kind = msg["type"]
        if kind == "hello":
            return [hello_line(name)]
        if kind == "request":
            return [action_line(msg, choose(msg))]
        if kind == "shutdown":
            return [EXIT]
        return []
    return respond


class MockBot:
    """A scripted bot connection. Unscripted lines go to ``respond`` (by default: a bot that
    greets and always takes action 0). A line that breaks an expectation raises
    ``AssertionError`` in the referee's write, so the test fails where the conversation did."""

    def __init__(self, respond: Respond | None = None, *, name: str = "mock",
                 transcript: list[dict[str, Any]] | None = None, label: Any = None,
                 clock: FakeClock | None = None, limits: Limits = Limits()):
        self.clock = clock if clock is not None else FakeClock()
        self._conv = Conversation(limits.max_line_bytes, limits.max_output_bytes, WATCH_S)
        self.respond = respond if respond is not None else policy(lambda msg: 0, name)
        self.expected: deque[tuple[Callable[[str, dict[str, Any]], bool], str, list[Item]]] = deque()
        self.lines: list[str] = []
        self.messages: list[dict[str, Any]] = []
        self.out: deque[Item] = deque()
        self.stderr: list[str] = []
        self.transcript = transcript
        self.label = label
        self.exited = False
        self.closed = False
        self.refused: BaseException | None = None
        self.last_line: str | None = None  # the last line it wrote, as a real connection keeps it

    # ------------------------------------------------------------ scripting

    def expect(self, line: str | dict[str, Any] | Callable[[dict[str, Any]], bool], *answers: Item) -> MockBot:
        """The next line the referee writes must be ``line`` (exact text), contain the items of a
        dict, or satisfy a predicate on the parsed message; the bot then gives ``answers``."""
        if isinstance(line, str):
            text = line
            self.expected.append((lambda raw, msg: raw == text, repr(text), list(answers)))
        elif isinstance(line, dict):
            want = line
            self.expected.append((lambda raw, msg: all(msg.get(k) == v for k, v in want.items()),
                                  repr(want), list(answers)))
        else:
            pred = line
            self.expected.append((lambda raw, msg: bool(pred(msg)), getattr(pred, "__name__", "predicate"),
                                  list(answers)))
        return self

    def assert_done(self) -> None:
        assert not self.expected, f"the referee never wrote: {[d for _, d, _ in self.expected]}"

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        """The messages of one type the referee wrote to this bot."""
        return [m for m in self.messages if m["type"] == kind]

    # ------------------------------------------------------------ the connection

    def send_line(self, text: str | bytes, *, timeout: float = 10.0) -> None:
        if isinstance(text, bytes):  # a request line, as the core encoded it
            text = text.decode("utf-8")
        if self.exited or self.closed:
            raise Crash("bot exited with status 1")
        if self.refused is not None:
            raise self.refused
        msg = json.loads(text)
        if self.expected:
            matches, description, answers = self.expected.popleft()
            assert matches(text, msg), f"expected {description}, the referee wrote {text[:300]!r}"
            items: Any = answers
        else:
            items = self.respond(msg)
        if isinstance(items, Refuse):
            self.refused = items.exc
            raise items.exc
        self.lines.append(text)
        self.messages.append(msg)
        if self.transcript is not None:
            self.transcript.append({"bot": self.label, "line": text, "msg": msg})
        if msg["type"] == "error":  # as arena.botkit does: a bot logs why it lost while being stopped
            self.stderr.append(f"referee says: {msg['reason']}")
        if items is None:
            items = [EXIT]
        self.out.extend(items)

    def ask(self, line: str | bytes, timeout: float) -> str:
        """A decision's round trip, as the blocking shell's :meth:`~arena.bots.blocking.BlockingBot.ask`."""
        self.send_line(line)
        return self.receive_line(timeout)

    def receive_line(self, timeout: float) -> str:
        """The next line as the blocking shell reads it: the conversation says when to wait, and
        the bot's script runs on the fake clock until then."""
        conv, clock = self._conv, self.clock
        conv.expect(clock.now(), timeout)
        while True:
            event = conv.next_event(clock.now())
            if type(event) is str:
                if self.transcript is not None:
                    self.transcript.append({"bot": self.label, "reply": event})
                self.last_line = event
                return event
            if type(event) is float:
                self._act_until(event)
            elif event is WATCH:
                continue
            elif type(event) is Ended:
                raise Crash("bot exited with status 0")
            elif type(event) is Expired:
                if self.exited:
                    raise Crash("bot exited with status 0")
                raise event.fault
            else:
                raise event  # type: ignore[misc]

    def _act_until(self, until: float) -> None:
        """Play the script until the bot writes a line, exits or raises, or the clock reaches ``until``."""
        clock = self.clock
        while self.out:
            item = self.out[0]
            if isinstance(item, Sleep):
                left = until - clock.now()
                if item > left:
                    self.out[0] = Sleep(item - left)  # a late reply stays queued, like a pipe
                    clock.sleep_until(until)
                    return
                clock.sleep_until(clock.now() + item)
                self.out.popleft()
                continue
            self.out.popleft()
            if item is EXIT:
                self.exited = True
                self._conv.receive_data(b"")
                return
            if isinstance(item, BaseException):
                raise item  # the process lives on unless EXIT says otherwise
            self._conv.receive_data(item.encode() + b"\n")
            return
        if self.exited:
            self._conv.receive_data(b"")
        clock.sleep_until(until)  # nothing more to say: silent until then

    @property
    def stderr_lines(self) -> list[str]:
        """What :meth:`take_stderr` would hand out now, as a real bot's connection says it."""
        return self.stderr

    def take_stderr(self) -> list[str]:
        out, self.stderr = self.stderr, []
        return out

    def close(self, grace: float = 0.0) -> None:
        self.closed = True

    def close_gracefully(self) -> None:
        self.close()


__all__ = ["EXIT", "BotFault", "FakeClock", "MockBot", "Refuse", "Sleep", "action_line",
           "hello_line", "policy"]
