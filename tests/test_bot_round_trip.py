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


def ask(pipes, line: bytes, timeout: float = 0.0, *, others=(), max_line: int = MAX_LINE, room: int = ROOM):
    (_, stdin), (stdout, _), _ = pipes
    return _pipe.ask(stdin, line, stdout, others, timeout, max_line, room)


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
    assert ask(pipes, b"req", timeout=0.02) is None


def test_the_wait_is_never_shorter_than_asked(pipes):
    """The time comes in seconds and poll counts milliseconds: rounded up, so the shell's loop
    never wakes before its deadline to find the reply's time not yet up (a lower bound only: a
    busy machine makes every wait longer, never shorter)."""
    import time
    for timeout in (0.0209, 0.0001):
        t0 = time.monotonic()
        assert ask(pipes, b"req", timeout=timeout) is None
        assert time.monotonic() - t0 >= timeout


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


# -- what a hostile bot writes: the helper against the channel ----------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from arena.bots.channel import Conversation  # noqa: E402
from arena.bots.errors import BotError  # noqa: E402

HELPER_READ = 16 * 1024  # _pipe.c's READ_BYTES: what one call reads at most

# Bytes a bot may write, weighted to the ones a parser trips on: NUL, the newline and carriage
# return, the last ASCII byte, the first byte past it, a UTF-8 lead byte and a lone continuation.
_edge_bytes = st.sampled_from([b"\x00", b"\n", b"\r", b"\x7f", b"\x80", b"\xc3", b"\xa9", b"\xff", b"x", b"{}"])
_plain = st.sampled_from([b"a", b"{", b'"x":1', b" ", b"}"])
_lines = st.builds(  # a line's body, mostly plain with an odd byte or two, and how it ends
    lambda body, end: b"".join(body) + end,
    st.lists(st.one_of(_plain, _plain, _plain, _edge_bytes), max_size=10),
    st.sampled_from([b"\n", b"\r\n", b"", b"\n\n", b"\r", b"\n{}\n"]))
_pieces = st.one_of(
    _lines,
    st.binary(max_size=40),
    st.integers(0, 3).map(lambda k: b"y" * (MAX_LINE - 1 + k) + b"\n"),  # about the line limit
    st.sampled_from([HELPER_READ - 1, HELPER_READ, HELPER_READ + 1]).map(lambda n: b"z" * (n - 1) + b"\n"),
)


def verdict(conv: Conversation, reads: list[bytes], eof: bool) -> list[object]:
    """What the general loop makes of these reads, in order: every line, then the fault (its
    type), the end of the stream, or a wait for more."""
    conv.expect(0.0, 10.0)
    for data in reads:
        conv.receive_data(data)
    if eof:
        conv.receive_data(b"")
    said: list[object] = []
    while type(event := conv.next_event(0.0)) is str:
        said.append(event)
    said.append("wait" if type(event) is float else type(event).__name__)
    return said


def drain(fd: int) -> bytes:
    """Everything left in a non-blocking pipe."""
    left = b""
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return left
        if not chunk:
            return left
        left += chunk


@settings(max_examples=400, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(written=st.lists(_pieces, max_size=3), eof=st.booleans(), max_line=st.sampled_from([0, 1, MAX_LINE, 1 << 20]),
       used=st.integers(0, 40), max_total=st.sampled_from([0, 5, 40, 100, 1 << 20]))
def test_the_helper_agrees_with_the_conversation_or_hands_back_every_byte(written, eof, max_line, used, max_total):
    """Whatever a bot wrote before the request (any bytes, in any pieces, with or without the end
    of its stdout), the helper either gives the very line the bot's Conversation would give from
    that one read, with nothing left over, or hands back exactly the bytes it read (nothing lost,
    nothing altered) for the Conversation to judge, or, with nothing to read, nothing; and the
    shell's whole verdict (every line, then the fault, the end or a wait) is then the general
    loop's on the same reads."""
    data = b"".join(written)
    stdin_r, stdin_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    out_r, out_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if data:
            assert os.write(out_w, data) == len(data)
        if eof:
            os.close(out_w)
            out_w = -1
        used = min(used, max_total)  # what the bot wrote in earlier decisions
        got = _pipe.ask(stdin_w, b'{"type":"request"}', out_r, (), 0, max_line, max_total - used)
        assert os.read(stdin_r, 100) == b'{"type":"request"}\n'
        rest = drain(out_r)
        shell = Conversation(max_line, max_total, 0.25)  # the bot's, in BlockingBot.ask
        shell.channel._total = used
        if type(got) is str:
            read = got.encode() + b"\n"
            assert data.startswith(read)
            alone = Conversation(max_line, max_total, 0.25)
            alone.channel._total = used
            assert verdict(alone, [read], False) == [got, "wait"], "the helper took a line the channel would not"
            shell.channel._total += len(read)  # as BlockingBot.ask counts it
            said = [got, *verdict(shell, [rest] if rest else [], eof)]
        elif type(got) is bytes:
            read = got
            assert got == data[:HELPER_READ] and (got or eof), "the helper handed back other bytes than it read"
            said = verdict(shell, [got, *([rest] if rest else [])] if got else [], eof)
        else:
            assert got is None and data == b"" and not eof, "the helper read a bot's bytes and dropped them"
            read, said = b"", verdict(shell, [], False)
        assert read + rest == data, "bytes were lost between the helper and the channel"
        general = Conversation(max_line, max_total, 0.25)
        general.channel._total = used
        assert said == verdict(general, [r for r in (read, rest) if r], eof)
    finally:
        for fd in (stdin_r, stdin_w, out_r, out_w):
            if fd >= 0:
                os.close(fd)
