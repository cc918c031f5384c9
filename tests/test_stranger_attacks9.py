"""#35 again, as an attacking author with the docs and the code: what the last stop changed.

A gVisor seat's own copy of its bot's folder (``gvisor.own_copy``) is made by the referee, often
root, at every start of the seat, from the folder the run checked, long after the check. It holds
more than the check saw: the folder's reader skips build outputs and environments (``target``,
``node_modules``, ``.venv``...), which a bot run from its author's folder needs and which nobody
counted; and a local author can change the folder while a tournament runs. So the copy must count
what it writes as the reader counts, and refuse what changes under it, as the bot's own fault.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from arena.bots import gvisor
from arena.bots.errors import BotCommandError
from arena.bots.filesystem import open_bot_dir


def _copy(bot: Path, where: Path) -> Path | None:
    fd = open_bot_dir(bot)
    try:
        where.mkdir()
        return gvisor.own_copy(fd, where)
    finally:
        os.close(fd)


def test_a_sparse_terabyte_in_a_skipped_folder_is_refused_before_a_byte_is_copied(tmp_path: Path,
                                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A local author's ``node_modules/zeros``, a sparse file of 1 TiB: no blocks, so it costs its
    author nothing, and the folder's reader never sees it (a skipped folder). The copy wrote it out
    in zeros at every seat's start (20 GiB in 25 s here, until the disk is full). Now it is counted
    by its length and refused, named, before it is read. Planted (no count): the copy read it."""
    bot = tmp_path / "bot"
    (bot / "node_modules").mkdir(parents=True)
    (bot / "bot.py").write_text("print('hi')\n")
    with open(bot / "node_modules" / "zeros", "wb") as f:
        f.truncate(1 << 40)
    sent = []
    real = os.sendfile

    def counted(out: int, fin: int, offset: int | None, count: int) -> int:
        n = real(out, fin, offset, min(count, 1 << 20))
        sent.append(n)
        assert sum(sent) <= 1 << 26, "the copy is writing out the sparse file"
        return n
    monkeypatch.setattr(os, "sendfile", counted)
    with pytest.raises(BotCommandError, match=r"'node_modules/zeros'.*1024 MiB"):
        _copy(bot, tmp_path / "home")
    assert list((tmp_path / "home").iterdir()) == []


def test_folders_nested_past_the_copys_depth_are_refused_not_a_recursion_error(tmp_path: Path) -> None:
    """``target`` nested deep (the reader skips ``target``; 1,100 folders here at first, 100 kept for speed): the copy's recursion ended
    the seat's start in a RecursionError (an arena failure, not the bot's) and left its half copy
    behind. Now refused as the bot's, at :data:`gvisor.OWN_COPY`'s depth, with nothing left.
    Planted (no depth cap): RecursionError."""
    bot = tmp_path / "bot"
    (bot / "target").mkdir(parents=True)
    fd = os.open(bot / "target", os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(100):
            os.mkdir("d", dir_fd=fd)
            sub = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = sub
    finally:
        os.close(fd)
    with pytest.raises(BotCommandError, match=r"'target(/d)+'.*deeper than 64"):
        _copy(bot, tmp_path / "home")
    assert list((tmp_path / "home").iterdir()) == []


def test_a_file_that_grows_or_swells_in_entries_while_copied_is_refused(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The author appends to a file while the seat's copy reads it (a writer racing the copy, here
    the copy's own first read): the copy followed it to its end, however long, and served bytes no
    one counted. Now a file is copied to the length it had when opened and refused if it moved.
    And entries past :data:`gvisor.OWN_COPY`'s count (a million empty files cost their author
    nothing) are refused, named (the cap made small here; planted without a count: copied all)."""
    bot = tmp_path / "bot"
    bot.mkdir()
    (bot / "bot.py").write_text("x" * 100)
    real = os.sendfile

    def racing(out: int, fin: int, offset: int | None, count: int) -> int:
        with open(bot / "bot.py", "a") as f:
            f.write("y" * 100)
        return real(out, fin, offset, count)
    monkeypatch.setattr(os, "sendfile", racing)
    with pytest.raises(BotCommandError, match=r"'bot.py'.*changed length"):
        _copy(bot, tmp_path / "one")
    assert list((tmp_path / "one").iterdir()) == []
    monkeypatch.setattr(os, "sendfile", real)

    monkeypatch.setattr(gvisor, "OWN_COPY", gvisor.Caps(files=50, bytes=gvisor.OWN_COPY.bytes,
                                                        depth=gvisor.OWN_COPY.depth, path=gvisor.OWN_COPY.path))
    (bot / ".venv").mkdir()
    for i in range(60):
        (bot / ".venv" / f"f{i}\x1b[2J").touch()  # and a name that would clear the operator's screen
    with pytest.raises(BotCommandError, match=r"more than 50 entries") as refused:
        _copy(bot, tmp_path / "two")
    assert "\x1b" not in str(refused.value)
    assert list((tmp_path / "two").iterdir()) == []
    monkeypatch.setattr(gvisor, "OWN_COPY", gvisor.Caps(files=70, bytes=gvisor.OWN_COPY.bytes,
                                                        depth=gvisor.OWN_COPY.depth, path=gvisor.OWN_COPY.path))
    own = _copy(bot, tmp_path / "three")  # within the caps: copied whole, the odd names as they are
    assert own is not None and sorted(p.name for p in (own / ".venv").iterdir()) == \
        sorted(p.name for p in (bot / ".venv").iterdir())
