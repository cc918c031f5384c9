"""The freezer's knob (``arena.bots.cgroups``): a control file kept open and written one of two
values, twice a decision (the referee thaws a seat before its request and freezes it after its
answer). The C helper's ``Knob`` (``arena/bots/_pipe.c``) and the Python ``FileKnob`` it stands
in for must behave alike, on a pipe of the test's own: the value written whole, False (never an
exception) when the write fails, and nothing at all written once closed, even where the closed
file's number now belongs to another file.
"""

from __future__ import annotations

import os

import pytest

from arena.bots import cgroups
from arena.bots.cgroups import FileKnob

try:
    from arena.bots._pipe import Knob as CKnob
except ImportError:  # not built: cgroups uses FileKnob
    CKnob = None

KINDS = [FileKnob] + ([CKnob] if CKnob is not None else [])


def test_the_cgroups_use_the_c_knob_where_it_is_built() -> None:
    assert cgroups.Knob is (CKnob if CKnob is not None else FileKnob)


@pytest.fixture
def pipe():
    r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    yield r, w
    for fd in (r, w):
        try:
            os.close(fd)
        except OSError:  # the knob owned it and closed it
            pass


@pytest.mark.parametrize("kind", KINDS)
def test_a_knob_writes_its_two_values_whole(kind, pipe) -> None:
    r, w = pipe
    knob = kind(w, b"FROZEN", b"THAWED")
    assert knob(True) is True and knob(False) is True and knob(1) is True and knob(0) is True
    assert os.read(r, 100) == b"FROZENTHAWEDFROZENTHAWED"
    assert knob.closed is False


@pytest.mark.parametrize("kind", KINDS)
def test_a_failed_write_says_false(kind) -> None:
    fd = os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC)  # no writing there: EBADF
    knob = kind(fd, b"1", b"0")
    try:
        assert knob(True) is False and knob(False) is False
    finally:
        knob.close()


@pytest.mark.parametrize("kind", KINDS)
def test_a_closed_knob_closes_its_file_and_writes_nowhere_after(kind, pipe) -> None:
    r, w = pipe
    knob = kind(w, b"1", b"0")
    knob.close()
    assert knob.closed is True
    with pytest.raises(OSError):
        os.fstat(w)  # the knob owned the file and closed it
    r2, w2 = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)  # takes the lowest free number: likely the knob's old one
    try:
        assert knob(True) is False and knob(False) is False
        knob.close()  # twice: nothing more happens
        with pytest.raises(BlockingIOError):
            os.read(r2, 10)  # nothing reached whichever file has the number now
    finally:
        os.close(r2)
        os.close(w2)


@pytest.mark.skipif(CKnob is None, reason="the C helper is not built")
def test_the_c_knob_refuses_what_it_cannot_hold() -> None:
    r, w = os.pipe()
    try:
        with pytest.raises(ValueError):
            CKnob(w, b"x" * 17, b"0")  # longer than any freezer's value
        with pytest.raises(TypeError):
            CKnob(w, "1", b"0")  # text, not bytes
        knob = CKnob(w, b"1", b"0")
        with pytest.raises(TypeError):
            knob()
        with pytest.raises(TypeError):
            knob(True, False)
        w = -1  # the knob owns it now
        knob.close()
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)
