"""Attacks of a bot author with the docs and the code, fourth round (docs/SANDBOX.md): each test is
an attack that worked against the arena before its fix, written from the author's side.

* A folder whose paths are longer than the kernel takes (22 folders of 250-byte names: inside the
  32-level and 255-byte caps) was read and hashed, but every copy of it failed with
  ``ENAMETOOLONG``: a bot with a ``build`` made every one of its games "could not be played" and
  the tournament could never finish. A path inside a bot folder is now capped like an upload's.
* A contained ``build`` that made the same deep folders in its own copy did the same: copying its
  output to the disk failed with ``ENAMETOOLONG``, an arena failure at every game. A build's
  output is held to the same cap, as the build's fault.
* On a fixed schedule (the strangers' ladder's table rule) the next request goes when the
  referee's work on an answer ends, if that runs past the slot. A sender that answered with a
  1 MiB line of arrays nested 31 deep (within the 32 levels a line may hold) made the referee
  spend about 250 ms reading it, and the receiver saw its next request 220-250 ms late for a 1
  and on time for a 0: 68 of 68 bits right under gVisor, 0.9 bits/s at move_ms 200, 1.4 at 100
  (bench/bench_overrun_channel.py). A line may now hold at most a few thousand brackets and
  commas, so no line costs the referee more than a fraction of its share of the slot.
* A bot's folder swapped for a link to another folder between two of its starts (``arena
  tournament -j 1``, 1 s into the run): every later start followed the link (the start resolved
  its directory before opening it without links), so the run played the other folder's code under
  the files hash it had read, for every game after the swap. A start now opens the path it was
  given without following any link, and refuses it, as the bot's fault.
* Where a build's copy cannot be a bounded tmpfs (a referee that is not root, or one that may not
  mount, as in many containers), the watcher that measures the copy is its only bound on the disk.
  It walked the copy by path and skipped any folder it could not open, so a build that hid its
  bytes below 22 folders of 250-byte names (past the kernel's 4,096-byte path) wrote as much as it
  liked, unseen. The watcher now walks by descriptor, and a folder it cannot read is counted as
  over the bound.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from arena.bots.containment import Containment
from arena.bots.errors import BotCommandError
from arena.bots.launch import BuildError, Launcher
from arena.bots.folder import CAPS, Caps, FolderError, read_folder
from arena.engine import PRESETS
from arena.referee import TimeControl, protocol
from arena.referee.testing import MockBot, action_line, hello_line
from arena.bots.manifest import load_bot
from arena.cli.main import app

from .fakes import play_mocks

REPO = Path(__file__).resolve().parent.parent


def bot(where: Path, name: str, build: str = "") -> Path:
    d = where / name
    shutil.copytree(REPO / "bots" / "random", d)
    toml = (d / "bot.toml").read_text().replace('name = "random"', f'name = "{name}"')
    (d / "bot.toml").write_text(toml + (f"build = {build}\n" if build else ""))
    return d


def tournament_beside_two(where: Path, d: Path):
    """`arena tournament` of the bot folder ``d`` against random and lowest, one deal, one worker:
    the CLI's result."""
    toml = where / "t.toml"
    toml.write_text(f'name = "t"\nbots = ["random", "lowest", "{d}"]\ndeals = 1\nseed = 1\n'
                    "[time]\nmove_ms = 200\n")
    return CliRunner().invoke(app, ["tournament", str(toml), "-j", "1", "--store", str(where / "s" / "s.sqlite"),
                                    "--plain"])


def deep_path(d: Path, levels: int, name_bytes: int) -> str:
    """Folders ``levels`` deep, each name ``name_bytes`` long, and a file at the bottom, made
    through descriptors (the whole path is longer than the kernel takes in one call); the path."""
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    name = "e" * name_bytes
    try:
        for _ in range(levels):
            os.mkdir(name, 0o755, dir_fd=fd)
            sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = sub
        os.close(os.open("f", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    finally:
        os.close(fd)
    return "/".join([name] * levels + ["f"])


def test_a_path_longer_than_a_bot_folder_may_hold_is_refused_naming_it(tmp_path):
    d = tmp_path / "b"
    d.mkdir()
    (d / "bot.toml").write_text("x")
    path = deep_path(d, 5, 40)
    assert len(path) == 206
    assert len(read_folder(d, Caps(path=206)).entries) == 7
    with pytest.raises(FolderError, match=r"eeee/f: a path longer than 205 bytes"):
        read_folder(d, Caps(path=205))


def test_a_bot_whose_paths_the_kernel_cannot_copy_is_refused_before_any_game(open_tmp):
    """22 folders of 250-byte names: within the caps on depth and names, but the copy a build
    runs in could not be written (ENAMETOOLONG), and every game of the bot was the arena's
    failure: "4 of 6 game(s) could not be played". Now one error line naming the path."""
    assert 22 < CAPS.depth
    d = bot(open_tmp, "deep", build='["true"]')
    path = deep_path(d, 22, 250)
    assert len(path) > 4096
    res = tournament_beside_two(open_tmp, d)
    assert res.exit_code == 2, res.output
    assert "could not be played" not in res.output and "Traceback" not in res.output, res.output
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert lines[-1].startswith("error:") and "a path longer than" in lines[-1], res.output


DEEP_BUILD = """
import os
for _ in range(22):
    os.mkdir("e" * 250)
    os.chdir("e" * 250)
open("f", "w").write("x")
"""


def test_a_build_s_output_is_copied_off_its_tmpfs_only_within_the_path_cap(tmp_path):
    from arena.bots.launch import copy_out
    src = tmp_path / "out"
    src.mkdir()
    deep_path(src, 22, 250)
    with pytest.raises(FolderError, match="a path longer than 1024 bytes"):
        copy_out(src, tmp_path / "copy")


@pytest.mark.skipif(os.geteuid() != 0, reason="a contained build on its bounded tmpfs needs a root referee")
def test_a_build_that_leaves_paths_the_kernel_cannot_copy_fails_as_the_bots_own(open_tmp):
    d = bot(open_tmp, "deepbuild", build='["python3", "mk.py"]')
    (d / "mk.py").write_text(DEEP_BUILD)
    with pytest.raises(BuildError, match="nested past 1024 bytes of path|a path longer than 1024 bytes"):
        Launcher().build_now(load_bot(d))
    res = tournament_beside_two(open_tmp, d)
    assert res.exit_code == 0, res.output
    assert "could not be played" not in res.output and "6/6 games stored" in res.output, res.output


# ---------------------------------------------------------------------------------------------
# The referee's reading of an answer, on a fixed schedule
# ---------------------------------------------------------------------------------------------

MIB = (1 << 20) - 100  # the most a line may hold, less the envelope
ENVELOPE = '{"type":"action","request":%d,"action":%d,"pad":[%s]}'
COSTLY = {  # each about 1 MiB, valid JSON, no deeper than the 32 levels a line may be
    "arrays nested 31 deep": ",".join(["[" * 30 + "0" + "]" * 30] * (MIB // 64)),
    "empty objects": ",".join(["{}"] * (MIB // 3)),
    "small objects": ",".join(['{"a":1}'] * (MIB // 8)),
    "numbers": ",".join(["0"] * (MIB // 2)),
    "empty strings": ",".join(['""'] * (MIB // 3)),
}
LONG_INTEGERS = ",".join(["9" * 4300] * (MIB // 4301))  # 22 ms: Python reads digits in quadratic time


@pytest.mark.parametrize("shape", sorted(COSTLY))
def test_a_line_too_costly_to_read_is_refused_before_it_is_parsed(shape, monkeypatch):
    """The referee took about 250 ms to read the first shape (about 110 ms the second) where a
    usual answer takes microseconds; the time is not a clock's here but the parser's work: the
    line is refused as bad JSON without the JSON parser (or the regex that blanks strings) ever
    seeing it."""
    line = ENVELOPE % (5, 1, COSTLY[shape])
    assert len(line) <= protocol.MAX_LINE_BYTES
    parsed: list[int] = []
    loads = protocol.json.loads
    monkeypatch.setattr(protocol.json, "loads", lambda text, *a, **k: parsed.append(len(text)) or loads(text, *a, **k))
    with pytest.raises(protocol.ProtocolError) as info:
        protocol.read_reply(line, 5, 3)
    assert info.value.reason == "bad_json" and "brackets and commas" in str(info.value)
    assert not parsed


def test_a_line_of_long_integers_is_refused_at_the_first():
    """Within the count of brackets and commas, 240 integers of 4,300 digits still cost 22 ms."""
    with pytest.raises(protocol.ProtocolError) as info:
        protocol.read_reply(ENVELOPE % (5, 1, LONG_INTEGERS), 5, 3)
    assert info.value.reason == "bad_json" and "more than 100 digits" in str(info.value)
    assert protocol.read_reply(ENVELOPE % (5, 1, "9" * 100), 5, 3) == (1, None)


def test_a_line_with_a_few_values_and_long_strings_is_still_read():
    """What a bot writes in earnest still reads: an info of every field, text with brackets and
    commas, a string as long as a line may hold, and a hello with an unknown field of 500 values
    (the count includes strings: 1,000 commas in a note are fine, a megabyte of them is not)."""
    info = {"eval": 1.5, "win_prob": 0.5, "nodes": 10, "iterations": 3, "text": "a, [b], {c}"}
    line = '{"type":"action","request":5,"action":2,"info":%s,"x":"%s","y":"%s"}' % (
        protocol.json.dumps(info), "[a, b]" * 1000, "ab" * (MIB // 2 - 4000))
    assert len(line) <= protocol.MAX_LINE_BYTES
    assert protocol.read_reply(line, 5, 3) == (2, {"info": info})
    hello = protocol.json.dumps({"type": "hello", "protocol": 1, "name": "b", "notes": ["x"] * 500})
    assert protocol.read_bot_hello(hello)["name"] == "b"


def test_a_sender_spelling_bits_in_costly_answers_forfeits_at_its_first(monkeypatch):
    """Through the referee's game loop on a fixed schedule: the costly answer is the sender's
    fault at once, so what it can spell that way is one bit a game (when it forfeits), never one a
    decision."""
    def sender(msg):
        if msg["type"] == "hello":
            return [hello_line("sender")]
        if msg["type"] == "request":
            return [ENVELOPE % (msg["id"], 0, COSTLY["arrays nested 31 deep"])]
        return []

    def receiver(msg):
        if msg["type"] == "hello":
            return [hello_line("receiver")]
        return [action_line(msg, 0)] if msg["type"] == "request" else []

    clock = TimeControl(move_ms=200, bank_ms=0, handshake_ms=1000)
    rec = play_mocks([MockBot(receiver), MockBot(sender)], PRESETS["classic"], 11, clock=clock,
                     names=["receiver", "sender"], game_id="g", max_turns=60, fixed_schedule=True)
    assert [(f["bot"], f["reason"]) for f in rec.faults] == [("sender", "bad_json")]
    assert rec.decisions[1] == 0  # its first answer was its last


# ---------------------------------------------------------------------------------------------
# A bot's folder swapped for a link between two starts
# ---------------------------------------------------------------------------------------------

HELLO_BOT = """#!/bin/sh
read line
echo '{"type":"hello","protocol":1,"name":"%s","version":"1"}'
read line
"""


def _hello_bot(d: Path, said: str) -> Path:
    d.mkdir(mode=0o755)
    (d / "bot.sh").write_text(HELLO_BOT % said)
    (d / "bot.sh").chmod(0o755)
    (d / "bot.toml").write_text('name = "swapped"\nversion = "1"\ncommand = ["sh", "bot.sh"]\n')
    (d / "bot.toml").chmod(0o644)
    return d


def _said(plan) -> str:
    with plan.start() as bot:
        bot.send_line(b'{"type":"hello","protocol":1}')
        return protocol.json.loads(bot.receive_line(30))["name"]


@pytest.mark.skipif(os.geteuid() != 0, reason="both contained modes with a private uid need a root referee")
@pytest.mark.parametrize("mode", [Containment.BUBBLEWRAP, Containment.NAMESPACES], ids=["bubblewrap", "namespaces"])
def test_a_folder_swapped_for_a_link_between_two_starts_is_refused_never_followed(open_tmp, mode):
    """A bot's folder swapped for a link to another folder after its first start: the path was
    looked up again at every start (refused where it led through a link). Since attack20 every
    start of a contained seat runs the arena's checked copy of the bot (``launch.runnable``), so the
    swap reaches no seat at all; the refusal of a link at the mount (``open_bot_dir``) is held by
    ``test_a_folder_swapped_for_a_link_after_its_check_is_never_what_is_mounted``."""
    mine = _hello_bot(open_tmp / "mine", "the files the run read")
    _hello_bot(open_tmp / "other", "another folder")
    plan = Launcher(containment=mode).plan_now(load_bot(mine))
    assert _said(plan) == "the files the run read"
    mine.rename(open_tmp / "mine.old")
    mine.symlink_to(open_tmp / "other")
    assert _said(plan) == "the files the run read"  # the arena's copy, never the folder's path again


# ---------------------------------------------------------------------------------------------
# A build's disk, where only the watcher bounds it
# ---------------------------------------------------------------------------------------------

HIDDEN_BUILD = """
import os
for _ in range(22):
    os.mkdir("e" * 250)
    os.chdir("e" * 250)
fd = os.open("big", os.O_WRONLY | os.O_CREAT, 0o644)
os.posix_fallocate(fd, 0, 256 << 20)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="a contained build with a private uid needs a root referee")
def test_a_build_that_hides_its_bytes_past_the_longest_path_is_still_bounded(open_tmp, monkeypatch):
    import arena.bots.launch as launch
    monkeypatch.setattr(launch, "bounded_space", lambda *a: None)  # as for a referee that may not mount
    monkeypatch.setattr(launch, "BUILD_DISK_MB", 64)
    d = bot(open_tmp, "hider", build='["python3", "mk.py"]')
    (d / "mk.py").write_text(HIDDEN_BUILD)
    with pytest.raises(BuildError, match="wrote more than its folder may hold .*nested past 1024 bytes of path"):
        Launcher().build_now(load_bot(d))


@pytest.mark.skipif(os.geteuid() != 0, reason="both contained modes with a private uid need a root referee")
def test_the_arena_s_own_copies_start_where_the_temporary_folder_is_reached_through_a_link(open_tmp, monkeypatch):
    """The refusal above is for the bot's folder, not the arena's: a built bot's copy lives in the
    temporary folder, which a machine may reach through a link (TMPDIR on another disk); it is
    resolved once, when the run makes it, and starts as before."""
    real = open_tmp / "real-tmp"
    real.mkdir(mode=0o755)
    (open_tmp / "tmp-link").symlink_to(real)
    monkeypatch.setattr(tempfile, "tempdir", str(open_tmp / "tmp-link"))
    d = _hello_bot(open_tmp / "built", "built")
    (d / "bot.toml").write_text((d / "bot.toml").read_text() + 'build = ["true"]\n')
    plan = Launcher(containment=Containment.BUBBLEWRAP).plan_now(load_bot(d))
    assert plan.workdir.is_relative_to(real)
    assert _said(plan) == "built"
