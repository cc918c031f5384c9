"""Attacks of a bot author with the docs and the code, fourth round (docs/SANDBOX.md): each test is
an attack that worked against the arena before its fix, written from the author's side.

* A folder whose paths are longer than the kernel takes (22 folders of 250-byte names: inside the
  32-level and 255-byte caps) was read and hashed, but every copy of it failed with
  ``ENAMETOOLONG``: a bot with a ``build`` made every one of its games "could not be played" and
  the tournament could never finish. A path inside a bot folder is now capped like an upload's.
* A contained ``build`` that made the same deep folders in its own copy did the same: copying its
  output to the disk failed with ``ENAMETOOLONG``, an arena failure at every game. A build's
  output is held to the same cap, as the build's fault.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from arena.bots.launch import BuildError, Launcher
from arena.bots.folder import CAPS, Caps, FolderError, read_folder
from arena.bots.manifest import load_bot
from arena.cli.main import app

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def open_tmp():
    """A directory a bot's private uid can enter (pytest's tmp_path is 0700)."""
    d = Path(tempfile.mkdtemp(prefix="arena-attack4-"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def bot(where: Path, name: str, build: str = "") -> Path:
    d = where / name
    shutil.copytree(REPO / "bots" / "random", d)
    toml = (d / "bot.toml").read_text().replace('name = "random"', f'name = "{name}"')
    (d / "bot.toml").write_text(toml + (f"build = {build}\n" if build else ""))
    return d


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
    toml = open_tmp / "t.toml"
    toml.write_text(f'name = "t"\nbots = ["random", "lowest", "{d}"]\ndeals = 1\nseed = 1\n'
                    "[time]\nmove_ms = 200\n")
    res = CliRunner().invoke(app, ["tournament", str(toml), "-j", "1", "--store",
                                   str(open_tmp / "s" / "s.sqlite"), "--plain"])
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


@pytest.mark.skipif(os.geteuid() != 0, reason="a contained build on its bounded tmpfs needs a root referee")
def test_a_build_that_leaves_paths_the_kernel_cannot_copy_fails_as_the_bots_own(open_tmp):
    d = bot(open_tmp, "deepbuild", build='["python3", "mk.py"]')
    (d / "mk.py").write_text(DEEP_BUILD)
    with pytest.raises(BuildError, match="a path longer than 1024 bytes"):
        Launcher().build_now(load_bot(d))
    toml = open_tmp / "t.toml"
    toml.write_text(f'name = "t"\nbots = ["random", "lowest", "{d}"]\ndeals = 1\nseed = 1\n'
                    "[time]\nmove_ms = 200\n")
    res = CliRunner().invoke(app, ["tournament", str(toml), "-j", "1", "--store",
                                   str(open_tmp / "s" / "s.sqlite"), "--plain"])
    assert res.exit_code == 0, res.output
    assert "could not be played" not in res.output and "6/6 games stored" in res.output, res.output
