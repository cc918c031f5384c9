"""An error is told by its kind, never by its words: the command line's advice for a full disk or a
read-only store follows SQLite's result code or the system's errno (arena.cli.common.store_trouble),
so a message that merely says "disk is full" (a bot's name, a path, a bot's own output) gets none,
and a full disk that SQLite words otherwise still gets it. Each kind from a real SQLite error."""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

import pytest

from arena.cli.common import StoreTrouble, describe_error, store_trouble
from arena.errors import ArenaError
from arena.tournament.store import StoreError

FULL_ADVICE = "free some space"
READ_ONLY_ADVICE = "pass a writable --store"


def _full() -> sqlite3.Error:
    db = sqlite3.connect(":memory:")
    db.execute("PRAGMA max_page_count = 2")  # a database that may not grow: SQLite's own SQLITE_FULL
    db.execute("CREATE TABLE t (a)")
    with pytest.raises(sqlite3.Error) as info:
        db.execute("INSERT INTO t VALUES (zeroblob(100000))")
    return info.value


def _read_only(tmp_path: Path) -> sqlite3.Error:
    path = tmp_path / "s.sqlite"
    sqlite3.connect(path).execute("CREATE TABLE t (a)")
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    with pytest.raises(sqlite3.Error) as info:
        db.execute("INSERT INTO t VALUES (1)")
    return info.value


def test_a_full_database_by_its_code() -> None:
    e = _full()
    assert store_trouble(e) is StoreTrouble.FULL
    assert FULL_ADVICE in describe_error(e) and "could not store a game" in describe_error(e)


def test_a_read_only_store_by_its_code(tmp_path: Path) -> None:
    e = _read_only(tmp_path)
    assert store_trouble(e) is StoreTrouble.READ_ONLY
    assert describe_error(e).startswith("the store is read-only") and READ_ONLY_ADVICE in describe_error(e)


def test_another_sqlite_error_is_the_stores_without_advice() -> None:
    with pytest.raises(sqlite3.Error) as info:
        sqlite3.connect(":memory:").execute("SELEC 1")
    assert store_trouble(info.value) is StoreTrouble.OTHER
    line = describe_error(info.value)
    assert line.startswith("store: ") and FULL_ADVICE not in line and READ_ONLY_ADVICE not in line


def test_no_space_left_by_its_errno() -> None:
    for code in (errno.ENOSPC, errno.EDQUOT):
        e = OSError(code, "a system's own words", "/data/arena.sqlite")
        assert store_trouble(e) is StoreTrouble.FULL and FULL_ADVICE in describe_error(e)


def test_a_store_error_standing_for_a_full_disk_keeps_its_kind() -> None:
    try:
        try:
            raise _full()
        except sqlite3.Error as e:
            raise StoreError(f"s.sqlite is not a usable arena store: {e}") from None  # as Store() raises it
    except StoreError as wrapped:
        assert store_trouble(wrapped) is StoreTrouble.FULL and FULL_ADVICE in describe_error(wrapped)


@pytest.mark.parametrize("error", [
    ArenaError("bot 'disk is full' failed its build: no space left in its folder"),
    ArenaError("the bot wrote: readonly filesystem, database or disk is full"),
    OSError(errno.EACCES, "No space left on device (not really)", "/srv/read-only/bot"),
    StoreError("s.sqlite is not a usable arena store: file is not a database"),
])
def test_words_alone_are_no_kind(error: BaseException) -> None:
    """What a message says is not what happened: a bot's name or output may say anything."""
    assert store_trouble(error) is None
    line = describe_error(error)
    assert FULL_ADVICE not in line and READ_ONLY_ADVICE not in line
