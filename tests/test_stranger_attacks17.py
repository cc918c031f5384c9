"""#35, the loose ends the fourth round left: what the upload worker's view binds of the server's
import path, a gVisor seat whose bot runs in a folder below its root, and the primary-group test's
own strength.

As in tests/test_stranger_attacks13.py, an attacker's program takes the upload worker's place and
answers with what it managed, as a refusal the server passes on.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from tests.test_stranger_attacks10 import READ_JOB, _refusal, _view
from tests.test_stranger_attacks14 import _served

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="a root server's worker needs a root test")

# -- the upload worker's view of the server's import path ----------------------------------------------

NOSY = READ_JOB + """
found = {}
for name, path in PATHS.items():  # (PATHS set first: files of the operator's working folder)
    try:
        with open(path, "rb") as f:
            found[name] = f.read().decode()
    except OSError as e:
        found[name] = type(e).__name__
answer(found)
"""


@as_root
@pytest.mark.parametrize("view", ["under bubblewrap", "where bubblewrap cannot start"])
def test_an_upload_worker_sees_nothing_of_the_folder_the_server_was_started_from(
        view: str, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """``python -m arena serve`` (or ``PYTHONPATH=.``) puts the working folder on the server's import
    path, and the worker's view bound every entry of that path whole: the operator's folder (its
    notes, another store's files, whatever lies there) was readable by the worker that unpacks a
    stranger's upload. On the old code: both files read, in both views. Now the view holds only
    what the worker's imports load (Python's own folders, the site-packages they come from, and
    each package itself where it lies elsewhere): neither is there."""
    from tests.test_serve import LIMITS
    _view(view, monkeypatch)
    if not os.access("/run", os.W_OK):
        pytest.skip("a folder outside /tmp (which a private uid's worker does not see) is made in /run")
    started = Path(tempfile.mkdtemp(prefix="a21-started-", dir="/run"))  # where the operator ran the server
    store = Path(tempfile.mkdtemp(prefix="a21-store-", dir="/run"))
    request.addfinalizer(lambda: [shutil.rmtree(p, ignore_errors=True) for p in (started, store)])
    started.chmod(0o755)
    (started / "notes.txt").write_text("the operator's notes")
    (started / "other-arena-data").mkdir(mode=0o755)
    (started / "other-arena-data" / "ladder.toml").write_text("another arena's ladder")
    for p in (started / "notes.txt", started / "other-arena-data" / "ladder.toml"):
        p.chmod(0o644)
    (store / "uploads").mkdir(mode=0o700)
    monkeypatch.syspath_prepend(str(started))  # as `python -m` puts the working folder first
    paths = {"notes": str(started / "notes.txt"), "ladder": str(started / "other-arena-data" / "ladder.toml")}
    found = _refusal(monkeypatch, f"PATHS = {paths!r}\n" + NOSY, store / "uploads" / "job", LIMITS)
    assert found == {"notes": "FileNotFoundError", "ladder": "FileNotFoundError"}, found


PLUGIN = {  # an upload that is also a distribution with a pydantic plugin, which pydantic loads at its first model
    "bot.toml": b'name = "upl"\nversion = "1.0"\ncommand = ["python3", "bot.py"]\n',
    "bot.py": b"",
    "upl_plugin-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: upl-plugin\nVersion: 1.0\n",
    "upl_plugin-1.0.dist-info/entry_points.txt": b"[pydantic]\nupl = upl_plugin\n",
    "upl_plugin.py": b"import json\nprint(json.dumps({'refused': 'the upload ran in its worker'}), flush=True)\n",
}


@pytest.mark.parametrize("view", ["under bubblewrap", "where bubblewrap cannot start"])
def test_a_relative_entry_of_the_servers_pythonpath_never_imports_from_the_upload(
        view: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server started with ``PYTHONPATH=.`` passed that entry on to the worker as it was: relative,
    so the worker's own folder, where it unpacks the upload, was on its import path. pydantic
    looks for plugins in every distribution on that path when the manifest's model is first
    built, after the upload is unpacked: an upload holding a ``.dist-info`` with a ``pydantic``
    entry point had its module run in the worker, which answered for it. On the old code: the
    upload's answer, in both views. Now the worker gets the entry made absolute (the server's
    folder, as the server's own import path has it): the upload is read as any other."""
    import trio

    from arena.serve import unpacker
    from tests.test_serve import LIMITS, zip_bytes
    _view(view, monkeypatch)
    monkeypatch.setenv("PYTHONPATH", ".")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "uploads").mkdir()
    got = trio.run(lambda: unpacker.unpack_apart(zip_bytes(PLUGIN), tmp_path / "uploads" / "job", **LIMITS))
    assert (got.name, got.label) == ("upl", "upl@1.0")


# -- a gVisor seat whose bot runs in a folder below its root ---------------------------------------------

BOT_SH = """\
for f in target/cheat node_modules/cheat reply; do
    [ -f "$f" ] && exec cat "$f"
done
"""
"""The bot: it says the first of the planted files it can read, else its checked ``reply``."""

FAKE_RUNSC = """#!/bin/sh
# runsc's place: started where the seat's copy is bound (gvisor.bind_checked), runs what it would serve
cd folder && exec bash bot.sh
"""


def _sub_bot(request: pytest.FixtureRequest, workdir: str) -> Path:
    """A bash bot whose command runs in ``workdir`` (its root, or a folder below it), in a folder of
    its author's that a seat's private uid can reach."""
    home = Path(tempfile.mkdtemp(prefix="a21-author-"))
    request.addfinalizer(lambda: shutil.rmtree(home, ignore_errors=True))
    bot = home / "bot"
    (bot / workdir).mkdir(parents=True, exist_ok=True)
    (bot / "bot.toml").write_text(f'name = "sub"\nversion = "1.0"\ncommand = ["bash", "bot.sh"]\n'
                                  f'workdir = "{workdir}"\n')
    (bot / workdir / "bot.sh").write_text(BOT_SH)
    (bot / workdir / "reply").write_text("honest\n")
    for p in (home, *home.rglob("*")):
        p.chmod(0o755)
    return bot


def _gvisor_plan(bot: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The run's gVisor plan for ``bot`` (read by the run first), runsc's place taken by
    :data:`FAKE_RUNSC`."""
    from arena.bots.containment import Containment
    from arena.bots.launch import Launcher
    from arena.bots.manifest import load_bot
    from tests.test_stranger_attacks11 import use_fake_runsc
    use_fake_runsc(FAKE_RUNSC, tmp_path, monkeypatch)
    spec = load_bot(bot)
    spec.files_hash()  # the run reads it
    return Launcher(containment=Containment.GVISOR).plan_now(spec)


@as_root
@pytest.mark.parametrize("workdir", [".", "sub", "sub/deeper"])
def test_a_gvisor_seat_below_its_bots_root_is_served_only_the_runs_reading(
        workdir: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """A bot whose ``workdir`` is a folder below its root. Its author, after the run read it, edits
    its checked ``reply`` and plants build outputs beside it: the seat is served the arena's copy
    of the reading (``launch.runnable``), ``honest``, on the old code too. But the second check, the
    seat's own copy compared with the run's reading at every start, was skipped for such a bot
    (its copy held only the folder below, which no reading names): a change to the folder the seat
    is served, after the run read the bot, reached the seat. On the old code: ``cheat:edited`` for
    a folder below the root, the bot's refusal at its root. Now the seat's copy is of the bot's
    whole root, compared with the run's reading, and the folder below served from it: refused,
    whatever the workdir. Planted (no comparison below the root): ``cheat:edited``."""
    bot = _sub_bot(request, workdir)
    plan = _gvisor_plan(bot, tmp_path, monkeypatch)
    for path in ("target/cheat", "node_modules/cheat"):  # the author, after the check
        (bot / workdir / path).parent.mkdir(exist_ok=True)
        (bot / workdir / path).write_text(f"cheat:{path.split('/')[0]}\n")
    (bot / workdir / "reply").write_text("cheat:author\n")
    assert _served(plan) == "honest"
    assert not plan.workdir.is_relative_to(bot.parent)  # (the arena's copy, not the author's folder)
    (plan.workdir / "reply").chmod(0o644)
    (plan.workdir / "reply").write_text("cheat:edited\n")  # the served folder itself, changed after the reading
    said = _served(plan)
    assert said.startswith("refused: ") and "changed since the run read them" in said, said
