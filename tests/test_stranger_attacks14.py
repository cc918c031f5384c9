"""#35, a fifth round: a seat is served only what the run checked, in every mode.

The folder's reader leaves build outputs and environments out of a bot's files hash (``.class``,
``.o``, ``target/``, ``node_modules/``, ``.venv/``). A seat served from its author's live folder
(bubblewrap and the namespace root bind it; a gVisor seat's own copy was made from it at every
start) was then served files nobody checked, and files edited after the run read the bot: the
store, the replays and the ladder recorded one bot while another played. An author (or anyone who
can write that folder) swaps a ``.class``, a ``node_modules`` package or a ``.venv`` module
between runs, or during one.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from arena.bots.containment import Containment
from tests.checks import bwrap_or_skip
from tests.test_stranger_attacks11 import use_fake_runsc

BOT_SH = """\
for f in target/cheat node_modules/cheat .venv/cheat Cheat.class reply; do
    [ -f "$f" ] && exec cat "$f"
done
"""
"""The bot: it says the first of the planted files it can read, else its checked ``reply``."""

FAKE_RUNSC = """#!/bin/sh
# runsc's place: started where the seat's copy is bound (gvisor.bind_checked), runs what it would serve
cd folder && exec bash bot.sh
"""

PLANTED = ("target/cheat", "node_modules/cheat", ".venv/cheat", "Cheat.class")


def _author_bot(request: pytest.FixtureRequest) -> Path:
    """A bash bot in a folder of its author's that a seat's private uid can reach."""
    home = Path(tempfile.mkdtemp(prefix="a20-author-"))
    request.addfinalizer(lambda: shutil.rmtree(home, ignore_errors=True))
    bot = home / "bot"
    bot.mkdir()
    (bot / "bot.toml").write_text('name = "planted"\nversion = "1.0"\ncommand = ["bash", "bot.sh"]\n')
    (bot / "bot.sh").write_text(BOT_SH)
    (bot / "reply").write_text("honest\n")
    for p in (home, bot, *bot.iterdir()):
        p.chmod(0o755)
    return bot


def _plan(mode: str, bot: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The run's plan for ``bot`` in ``mode``, the bot read by the run first (its files hash)."""
    from arena.bots.launch import Launcher
    from arena.bots.manifest import load_bot
    if mode == "bubblewrap":
        bwrap_or_skip()
    elif os.geteuid() != 0:
        pytest.skip(f"{mode} seats need a root referee and private uids")
    containment = {"bubblewrap": Containment.BUBBLEWRAP, "namespaces": Containment.NAMESPACES,
                   "gvisor": Containment.GVISOR}[mode]
    if mode == "gvisor":  # runsc's place taken by a program that runs the seat's copy on the host
        use_fake_runsc(FAKE_RUNSC, tmp_path, monkeypatch)
    spec = load_bot(bot)
    spec.files_hash()  # the run reads it
    return Launcher(containment=containment).plan_now(spec)


def _served(plan) -> str:
    from arena.bots.errors import BotCommandError
    try:
        with plan.start() as seat:
            return seat.receive_line(10.0) or ""
    except BotCommandError as e:
        return f"refused: {e}"


@pytest.mark.parametrize("mode", ["bubblewrap", "namespaces", "gvisor"])
def test_a_seat_is_served_the_checked_files_never_what_its_author_plants_later(
        mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """After the run read the bot, its author puts a ``target/``, ``node_modules/``, ``.venv/`` file
    and a ``.class`` beside it (in no files hash), then edits its checked ``reply``. On the old code:
    ``cheat`` served in every mode (bubblewrap and namespaces bind the live folder; a gVisor seat's
    copy took everything but compiled Python and checked only what the hash covers); the edit too
    under bubblewrap and namespaces. Now every contained seat is served the arena's copy of the
    bot, written from the run's reading and checked against it: ``honest`` at every start.
    Planted (``launch.runnable`` giving the live folder back): ``cheat:target``."""
    bot = _author_bot(request)
    plan = _plan(mode, bot, tmp_path, monkeypatch)
    for path in PLANTED:  # the author, after the check: outputs the hash never sees
        (bot / path).parent.mkdir(exist_ok=True)
        (bot / path).write_text(f"cheat:{path.split('/')[0]}\n")
    assert _served(plan) == "honest"
    (bot / "reply").write_text("cheat:edited\n")  # and a checked file, edited
    assert _served(plan) == "honest"
    assert not plan.workdir.is_relative_to(bot.parent)  # (not the author's folder)


def test_a_bot_shipping_build_outputs_without_a_build_is_refused_alike_on_every_path(tmp_path: Path) -> None:
    """A bot folder holding a prebuilt ``Bot.class`` (or ``target/``, ``node_modules/``...) and no
    ``build``: the reader leaves the output out, so such a bot ran with it where a seat was served
    its author's folder and without it in a ladder's snapshot or a cluster's bundle ("could not
    find or load main class"). Now it is refused wherever it is read, before any game, naming the
    output and saying what to do; with a ``build`` the same folder loads (its outputs made anew in
    the arena's copy). Planted (no refusal): ``arena check`` went on to start the bot."""
    from arena.bots.bundles import pack_bot
    from arena.bots.manifest import FolderError, load_bot
    from arena.cli.main import app
    bot = tmp_path / "bot"
    bot.mkdir()
    (bot / "bot.toml").write_text('name = "prebuilt"\nversion = "1.0"\ncommand = ["java", "-cp", ".", "Bot"]\n')
    (bot / "Bot.java").write_text("class Bot {}\n")
    (bot / "Bot.class").write_bytes(b"\xca\xfe\xba\xbe")
    res = CliRunner().invoke(app, ["check", str(bot)])
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    said = " ".join(res.output.split())
    assert "'Bot.class'" in said and "add a `build` to bot.toml" in said, res.output
    for read in (lambda: load_bot(bot).files_hash(), lambda: pack_bot(load_bot(bot))):  # a run, a cluster
        with pytest.raises(FolderError, match=r"'Bot.class'.*add a `build`"):
            read()
    (bot / "node_modules").mkdir()
    with pytest.raises(FolderError, match=r"'Bot.class', 'node_modules/'"):
        load_bot(bot).files_hash()
    (bot / "bot.toml").write_text((bot / "bot.toml").read_text() + 'build = ["javac", "Bot.java"]\n')
    assert load_bot(bot).files_hash().startswith("v3:")
    (bot / "bot.toml").write_text('name = "py"\nversion = "1.0"\ncommand = ["python3", "bot.py"]\n')
    for kept in ("Bot.class", "node_modules"):
        shutil.rmtree(bot / kept) if (bot / kept).is_dir() else (bot / kept).unlink()
    (bot / "__pycache__").mkdir()  # a source's cache and history are no build outputs
    (bot / "__pycache__" / "bot.cpython-311.pyc").write_bytes(b"")
    (bot / ".git").mkdir()
    assert load_bot(bot).files_hash().startswith("v3:")


def test_a_bots_copy_keeps_its_reading_and_its_venv(tmp_path: Path) -> None:
    """A spec moved to the arena's copy of its folder runs the copy's own ``venv`` (bot.toml's
    interpreter inside the folder), not its author's, and keeps the run's reading of its files
    (not read again: the copy may be a gVisor seat's source while another lane plans). Planted
    (the venv left where it was): the author's interpreter."""
    from arena.bots.launch import _relocated
    from arena.bots.manifest import load_bot
    bot = tmp_path / "bot"
    (bot / "env" / "bin").mkdir(parents=True)
    (bot / "env" / "bin" / "python").write_text("")
    (bot / "bot.toml").write_text('name = "v"\nversion = "1"\ncommand = ["python3", "bot.py"]\nvenv = "env"\n')
    spec = load_bot(bot)
    moved = _relocated(spec, tmp_path / "copy", same_files=True)  # (never made: it is not read)
    assert moved.python == str(tmp_path / "copy" / "env" / "bin" / "python")
    assert moved.files_hash() == spec.files_hash()


def test_trusted_bots_run_from_their_own_folder_under_the_same_reading_rules(tmp_path: Path) -> None:
    """``--trusted-bots`` (the author's own machine) plans a bot from its folder, not a copy: the bot
    runs as the operator's user and reads and writes that folder anyway. Its folder is read by the
    same rules, so a bot shipping build outputs without a ``build`` is refused there too."""
    from arena.bots.launch import Launcher
    from arena.bots.manifest import load_bot
    from arena.cli.main import app
    bot = tmp_path / "bot"
    bot.mkdir()
    (bot / "bot.toml").write_text('name = "mine"\nversion = "1"\ncommand = ["bash", "bot.sh"]\n')
    (bot / "bot.sh").write_text("echo hi\n")
    launcher = Launcher(containment=Containment.TRUSTED)
    assert launcher.plan_now(load_bot(bot)).workdir == bot.resolve()
    (bot / "helper.o").write_bytes(b"")
    res = CliRunner().invoke(app, ["check", str(bot), "--trusted-bots"])  # the run's reading, before any game
    assert res.exit_code == 2 and "'helper.o'" in res.output and "Traceback" not in res.output, res.output
