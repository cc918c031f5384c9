"""#35 again, as an attacking bot author with the docs and the code: the entry points nobody had
attacked yet. Here, the C round trip of a decision (``arena/bots/_pipe.c``, called by
``BlockingBot.ask`` inside the referee's process, where a crash would end the whole arena): a
bot writing what a parser trips on, through the real shell, with the helper and without it
(the general loop alone). Both must give the same verdict, and the arena must go on talking to
an honest bot on the same hub afterwards.
"""

from __future__ import annotations

import fcntl
import json
import shutil
import struct
import termios
import time
from pathlib import Path

import pytest

from arena.bots import blocking
from arena.bots.blocking import hub
from arena.bots.errors import BotError
from arena.bots.spawn import DEFAULT_PATH
from arena.bots.start import start_bot
from arena.limits import Limits
from tests.checks import reachable

HOSTILE = reachable(Path(__file__).parent / "hostile")
PY = shutil.which("python3", path=DEFAULT_PATH)
LINE = 64  # the line limit here (bytes before the newline)
LIMITS = Limits(cpu_seconds=5, memory_mb=256, max_processes=16, max_line_bytes=LINE, max_output_bytes=4096,
                stderr_cap_bytes=1024)
SLOW = 30  # a wait only a broken test reaches

pytestmark = pytest.mark.skipif(PY is None, reason="no python3 on the bots' PATH")


def steps(*items: list) -> str:
    return json.dumps(list(items)).encode().hex()


def out(data: bytes) -> list:
    return ["out", data.hex()]


# (at start, before any request; then one request's steps per ask). Each names what a bot did.
ATTACKS = {
    "nul-bytes": ([], [[out(b'{"action":\x000}\n')]]),
    "line-at-the-limit": ([], [[out(b"x" * LINE + b"\n")]]),
    "line-one-past-the-limit": ([], [[out(b"x" * (LINE + 1) + b"\n")]]),
    "part-line-then-eof-alive": ([], [[out(b"part"), ["close", 1], ["sleep", 2]], []]),
    "part-line-then-exit": ([], [[out(b"part"), ["exit", 0]], []]),
    "invalid-utf8": ([], [[out(b"\xc3\x28\n")], [out(b"ok\n")]]),
    "carriage-return": ([], [[out(b"a\r\n")], [out(b"b\rc\n")], [out(b"\r\n")], [out(b"\r\r\n")]]),
    "two-lines-in-one-write": ([], [[out(b"one\ntwo\n")], [], [out(b"three\n")]]),
    "output-before-any-request": ([out(b"early\n")], [[out(b"late\n")], []]),
    "stdout-flood": ([["flood", 1, 8192]], [[]]),  # all of it in the pipe before the request
    "stderr-flood-then-answer": ([], [[["flood", 2, 200_000], out(b"ok\n")], [out(b"ok2\n")]]),
    "stdout-closed-process-alive": ([], [[["close", 1], ["sleep", 2]]]),
    "killed-mid-line": ([], [[out(b'{"act'), ["kill"]]]),
    "stderr-closed-then-answer": ([], [[["close", 2], out(b"ok\n")], [out(b"ok2\n")]]),
}


def written(start: list) -> int:
    """Bytes the start's steps put on stdout."""
    return sum(len(bytes.fromhex(s[1])) if s[0] == "out" else s[2] if s[:2] == ["flood", 1] else 0 for s in start)


def pending(fd: int) -> int:
    return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0" * 4))[0]


def play(start: list, asks: list[list], timeout: float) -> list[str]:
    """Each ask's outcome: the line, or the fault's type and text, until the first fault. What
    the bot writes at its start is all in the pipe before the first request (so how the reads
    split it is the same with and without the helper)."""
    said = []
    with start_bot([PY, str(HOSTILE / "scripted.py"), steps(*start)], HOSTILE, limits=LIMITS) as bot:
        while pending(bot._fds[1]) < written(start):
            time.sleep(0.005)
        for request in asks:
            try:
                said.append(repr(bot.ask(steps(*request).encode(), timeout)))
            except BotError as e:
                said.append(f"{type(e).__name__}: {e}")
                break
    return said


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_a_bots_bytes_get_the_same_verdict_with_or_without_the_c_round_trip(monkeypatch, attack):
    """The helper answers only the usual case and hands the rest to the general loop: for each
    thing a hostile bot can write, the outcome of every ask (line or fault, with its text) is the
    one the general loop alone gives, and an honest bot on the same hub still answers after."""
    start, asks = ATTACKS[attack]
    with_helper = play(start, asks, 5)
    monkeypatch.setattr(blocking, "_round_trip", None)
    general = play(start, asks, 5)
    monkeypatch.undo()
    assert with_helper == general
    with start_bot([PY, str(HOSTILE / "echo.py")], HOSTILE, limits=LIMITS) as honest:
        assert honest.ask(b"hello", SLOW) == "ready"
        assert honest.receive_line(SLOW) == "hello"
    hub().settle()


def test_a_bot_flooding_or_closing_its_stderr_on_the_same_hub_never_delays_an_honest_reply():
    """Bots of one thread share a hub: the helper's poll watches the others' stderr and hands the
    round trip back whenever one is ready. A bot writing stderr without end (unfrozen, as under
    ``ponder``), and one that closed its stderr (a pipe forever hung up), make every round trip of
    the honest bot go through the general loop, which must still give each reply, at once."""
    flood = steps(["flood", 2, 1 << 40])
    with start_bot([PY, str(HOSTILE / "scripted.py"), flood], HOSTILE, limits=LIMITS) as flooder, \
            start_bot([PY, str(HOSTILE / "scripted.py"), steps(["close", 2])], HOSTILE, limits=LIMITS) as hung_up, \
            start_bot([PY, str(HOSTILE / "echo.py")], HOSTILE, limits=LIMITS) as honest:
        assert honest.receive_line(SLOW) == "ready"
        for n in range(40):
            assert honest.ask(f"move {n}".encode(), SLOW) == f"move {n}"
        assert flooder.stderr_dropped_bytes > 0  # it did flood meanwhile, and was read
        assert hung_up.returncode is None  # alive, its stderr closed
    hub().settle()
