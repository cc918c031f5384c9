"""The bot's line channel without I/O: bytes in, lines and faults out, whatever the chunking."""

from __future__ import annotations

import pytest

from arena.bots.channel import READ_CHUNK, LineChannel, encode_line
from arena.bots.errors import LineTooLong, NotUtf8, OutputLimitExceeded


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
