"""The bot's conversation without I/O: bytes and times in; lines, faults and waits out, whatever the
chunking and whatever the clock."""

from __future__ import annotations

import pytest

from arena.bots.channel import EXIT_GRACE, READ_CHUNK, WATCH, Conversation, Ended, Expired, LineChannel, encode_line
from arena.bots.errors import BotTimeout, LineTooLong, NotUtf8, OutputLimitExceeded
from arena.faults import FaultReason


def lines(ch: LineChannel) -> list[str]:
    out = []
    while (line := ch.next_line()) is not None:
        out.append(line)
    return out


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64])
def test_lines_come_out_whole_however_the_bytes_arrive(size: int) -> None:
    data = b'{"a": 1}\r\n2\n\nlast without newline'
    ch = LineChannel(max_line=100, max_total=1000)
    got = []
    for i in range(0, len(data), size):
        ch.receive_data(data[i:i + size])
        got += lines(ch)
    assert got == ['{"a": 1}', "2", ""]  # \r dropped; an empty line is a line
    ch.receive_eof()
    assert lines(ch) == ["last without newline"] and ch.at_eof


def test_a_line_over_the_cap_is_a_sticky_fault_and_the_memory_goes() -> None:
    ch = LineChannel(max_line=10, max_total=10**9)
    ch.receive_data(b"0123456789\n")  # exactly at the cap: fine
    assert ch.next_line() == "0123456789"
    ch.receive_data(b"x" * 11)  # no newline yet, already too long
    with pytest.raises(LineTooLong):
        ch.next_line()
    ch.receive_data(b"\nok\n")
    with pytest.raises(LineTooLong):  # not resynchronised
        ch.next_line()
    assert ch.unread == 0


def test_a_long_line_with_its_newline_in_one_chunk_is_refused_too() -> None:
    ch = LineChannel(max_line=10, max_total=10**9)
    ch.receive_data(b"y" * 50 + b"\n")
    with pytest.raises(LineTooLong):
        ch.next_line()


def test_not_utf8_costs_its_line_only() -> None:
    ch = LineChannel(max_line=100, max_total=1000)
    ch.receive_data(b"\xff\xfe\nfine\n")
    with pytest.raises(NotUtf8):
        ch.next_line()
    assert ch.next_line() == "fine"


def test_the_output_cap_counts_every_byte_and_sticks() -> None:
    ch = LineChannel(max_line=100, max_total=20)
    ch.receive_data(b"0123456789\n")
    assert ch.next_line() == "0123456789"
    ch.receive_data(b"0123456789\n")
    with pytest.raises(OutputLimitExceeded):
        ch.next_line()
    assert not ch.wants_data()


def test_the_buffer_never_holds_more_than_a_line_and_a_read() -> None:
    ch = LineChannel(max_line=1000, max_total=10**9)
    for _ in range(100):
        ch.receive_data(b"z" * 999 + b"\n")
        assert lines(ch) == ["z" * 999]
    assert ch.peak_buffer <= 1000 + READ_CHUNK


def test_encode_line_refuses_a_newline() -> None:
    assert encode_line("é") == "é\n".encode()
    with pytest.raises(ValueError):
        encode_line("two\nlines")
    assert encode_line("é".encode()) == "é\n".encode()  # a request's line: bytes, written as they are
    for bad in (b"two\nlines", b"a\rb"):
        with pytest.raises(ValueError):
            encode_line(bad)


# -- the conversation: times in, a line, a fault or "wait until T" out (no clock inside) ---------


def _conv(max_line: int = 100) -> Conversation:
    return Conversation(max_line, 10_000, watch_s=0.25)


def test_a_reply_wait_says_when_to_wake_and_gives_the_line_when_it_is_whole() -> None:
    conv = _conv()
    conv.expect(10.0, timeout=1.0)
    assert conv.next_event(10.0) == 10.25  # wait for stdout, no later than the first look
    conv.receive_data(b'{"a"')
    assert conv.next_event(10.1) == 10.25  # half a line is no reply
    assert conv.next_event(10.25) is WATCH and conv.next_event(10.25) == 10.5  # a look, then the next slice
    conv.receive_data(b': 1}\r\n{"b": 2}\n')
    assert conv.next_event(10.3) == '{"a": 1}'
    conv.expect(10.3, timeout=1.0)
    assert conv.next_event(10.3) == '{"b": 2}'  # came with the earlier read: no wait at all


def test_the_deadline_is_the_reply_timeout_and_a_late_line_waits_for_the_next_ask() -> None:
    conv = _conv()
    conv.expect(0.0, timeout=0.1)
    assert conv.next_event(0.0) == 0.1  # the deadline comes before the first look
    expired = conv.next_event(0.1)
    assert isinstance(expired, Expired) and isinstance(expired.fault, BotTimeout)
    assert expired.fault.reason == FaultReason.TIMEOUT and "0.1s" in expired.fault.message
    conv.receive_data(b"late\n")
    conv.expect(5.0, timeout=1.0)
    assert conv.next_event(5.0) == "late"


def test_the_end_of_stdout_gives_the_exit_a_grace_bounded_by_the_deadline() -> None:
    conv = _conv()
    conv.expect(0.0, timeout=10.0)
    conv.receive_data(b"")
    assert conv.next_event(1.0) == Ended(1.0 + EXIT_GRACE)
    conv = _conv()
    conv.expect(0.0, timeout=0.3)
    conv.receive_data(b"last words, unterminated")
    conv.receive_data(b"")
    assert conv.next_event(0.2) == "last words, unterminated"  # a final line without its newline is a line
    conv.expect(0.2, timeout=0.3)
    assert conv.next_event(0.2) == Ended(0.5)  # what is left of the deadline
    assert conv.next_event(0.6) == Ended(0.65)  # never less than a short look


def test_a_fault_in_the_bytes_comes_out_as_a_fault_not_a_raise() -> None:
    conv = _conv(max_line=10)
    conv.expect(0.0, timeout=1.0)
    conv.receive_data(b"x" * 11)
    fault = conv.next_event(0.0)
    assert isinstance(fault, LineTooLong) and conv.next_event(0.5) is fault  # sticky


def test_a_send_waits_for_room_until_its_deadline_then_faults_once() -> None:
    conv = _conv()
    conv.send(b"hello\n", 3.0, timeout=0.5)
    assert conv.send_event(3.0) == 3.5 and conv.data_to_send() == b"hello\n"
    conv.sent(2)
    assert conv.data_to_send() == b"llo\n" and conv.send_event(3.4) == 3.5
    timed_out = conv.send_event(3.5)
    assert isinstance(timed_out, BotTimeout) and "0.5s" in timed_out.message
    assert conv.send_event(3.6) is None and conv.data_to_send() == b""
    conv.send(b"ok\n", 4.0, timeout=0.5)
    conv.sent(3)
    assert conv.send_event(9.0) is None  # written whole: no deadline applies
