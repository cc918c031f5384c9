"""The C helper of a decision's round trip (``arena/bots/_pipe.c``), on pipes of the test's own.

``BlockingBot.ask`` hands the usual case to it and everything else to the general loop, which
holds every limit; so the helper's whole duty is to answer only when the answer is certainly
the usual one: one ASCII line in one read, within the line limit and the output still allowed,
with no other pipe of the hub ready. Each case here is one of its four answers. (Through a
real bot, ``test_bot_process.py`` holds the same limits with and without the helper.)
"""

from __future__ import annotations

import fcntl
import os

import pytest

from arena.engine import IMPLEMENTATION

try:
    from arena.bots import _pipe
except ImportError:  # not built: the shell's general loop does every round trip
    _pipe = None

pytestmark = pytest.mark.skipif(_pipe is None and IMPLEMENTATION == "python",
                                reason="nothing was compiled: the shell runs without its helper")

MAX_LINE, ROOM = 32, 1000


@pytest.fixture
def pipes():
    """(bot's stdin: read end, write end), (bot's stdout: read end, write end), all non-blocking."""
    made = [os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC) for _ in range(3)]
    yield made
    for r, w in made:
        os.close(r)
        os.close(w)


def ask(pipes, line: bytes, timeout_ms: int = 0, *, others=(), max_line: int = MAX_LINE, room: int = ROOM):
    (_, stdin), (stdout, _), _ = pipes
    return _pipe.ask(stdin, line, stdout, others, timeout_ms, max_line, room)


def test_the_helper_is_built_with_the_engine():
    assert _pipe is not None, "setup.py builds arena.bots._pipe beside the engine's C helpers"


def test_the_usual_reply_is_the_line_and_the_request_went_out_whole(pipes):
    (bot_in, _), (_, bot_out), _ = pipes
    os.write(bot_out, b'{"request":1,"action":3}\n')
    assert ask(pipes, b'{"type":"request"}') == '{"request":1,"action":3}'
    assert os.read(bot_in, 100) == b'{"type":"request"}\n'


@pytest.mark.parametrize("wrote", [
    b"one\ntwo\n",  # two lines: the second stays the channel's
    b"no newline yet",  # a part line
    "caf\u00e9\n".encode(),  # not ASCII: the channel decodes (or names the bad encoding)
    b"\xff\xfe\n",
    b"crlf\r\n",  # the channel drops the \r
    b"x" * (MAX_LINE + 1) + b"\n",  # over the line limit: the channel's fault
])
def test_anything_but_one_plain_line_goes_to_the_channel_as_read(pipes, wrote):
    (_, _), (_, bot_out), _ = pipes
    os.write(bot_out, wrote)
    assert ask(pipes, b"req") == wrote


def test_a_line_at_the_limit_is_a_reply(pipes):
    (_, _), (_, bot_out), _ = pipes
    os.write(bot_out, b"x" * MAX_LINE + b"\n")
    assert ask(pipes, b"req") == "x" * MAX_LINE


def test_a_reply_past_the_output_allowed_goes_to_the_channel(pipes):
    (_, _), (_, bot_out), _ = pipes
    os.write(bot_out, b"12345\n")
    assert ask(pipes, b"req", room=6) == "12345"
    os.write(bot_out, b"12345\n")
    assert ask(pipes, b"req", room=5) == b"12345\n"  # the channel counts it, and faults


def test_the_end_of_the_stream_is_empty_bytes(pipes):
    (_, _), (stdout, bot_out), _ = pipes
    os.close(bot_out)
    pipes[1] = (stdout, os.open("/dev/null", os.O_WRONLY))  # (closed by the fixture)
    assert ask(pipes, b"req") == b""


def test_nothing_read_is_none_after_the_wait(pipes):
    assert ask(pipes, b"req", timeout_ms=20) is None


def test_another_ready_pipe_wins_over_the_reply(pipes):
    """Another bot's stderr (or the hub's wake pipe) ready: the shell's own poll serves it first."""
    (_, _), (_, bot_out), (other, other_w) = pipes
    os.write(bot_out, b"7\n")
    os.write(other_w, b"a traceback\n")
    assert ask(pipes, b"req", others=(other,)) is None
    assert os.read(other, 100) == b"a traceback\n"  # nothing of it was taken
    assert ask(pipes, b"req", others=(other,)) == "7"


def test_a_full_stdin_says_how_much_it_took(pipes):
    """The shell writes the rest under its send deadline and then waits for the reply itself."""
    (_, stdin), (stdout, bot_out), _ = pipes
    room = fcntl.fcntl(stdin, 1032)  # F_GETPIPE_SZ
    os.write(stdin, b"x" * (room - 4096))  # one page left
    os.write(bot_out, b"7\n")
    assert ask(pipes, b"y" * 10_000) == 4096
    assert ask(pipes, b"short") == 0  # full: nothing taken (a line under PIPE_BUF goes whole or not at all)
    assert os.read(stdout, 10) == b"7\n"  # and no reply was read meanwhile


def test_a_line_with_a_newline_is_refused(pipes):
    for bad in (b"a\nb", b"a\rb"):
        with pytest.raises(ValueError):
            ask(pipes, bad)
