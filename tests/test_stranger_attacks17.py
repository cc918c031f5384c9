"""#35, the loose ends the fourth round left: what the upload worker's view binds of the server's
import path (and, #39, the machine's note of it that a server reads instead of asking), a gVisor seat whose bot runs in a folder below its root, and the primary-group test's
own strength.

As in tests/test_stranger_attacks13.py, an attacker's program takes the upload worker's place and
answers with what it managed, as a refusal the server passes on.
"""

from __future__ import annotations

import json
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


# -- the machine's note of the worker's imports (#39) -----------------------------------------------

def _own_note(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest,
              path: str | None = None) -> Path:
    """The note this test's server would read: a key of its own (``path``, or an empty folder of the
    test's, on the worker's import path), asked afresh in this process, removed after the test."""
    from arena.serve import unpacker
    if path is None:
        (tmp_path / "own").mkdir()
        path = str(tmp_path / "own")
    monkeypatch.setenv("PYTHONPATH", path)
    monkeypatch.setattr(unpacker, "_imports_seen", [])
    note = unpacker.imports_note()
    request.addfinalizer(lambda: note.unlink(missing_ok=True))
    return note


def _asked(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times a worker's imports are asked from now on (each a Python started)."""
    from arena.serve import unpacker
    count = [0]
    ask = unpacker._ask_imports

    def counted():
        count[0] += 1
        return ask()
    monkeypatch.setattr(unpacker, "_ask_imports", counted)
    return count


def test_the_worker_imports_are_asked_once_a_machine(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """Each server process ran its worker's imports in a Python of its own (0.2 s of CPU) to learn
    what the worker's view must hold. Now the answer is noted once a machine: a new process (here,
    this one with its answer forgotten) reads it back, asking nothing, and gets the same paths.
    Planted (the note never read): asked again."""
    from arena.bots import launch
    from arena.serve import unpacker
    note = _own_note(tmp_path, monkeypatch, request)
    asked = _asked(monkeypatch)
    first = unpacker.worker_imports()
    assert note.is_file() and asked[0] == 2  # asked twice: the same answer, nothing changed between
    assert str(launch.ARENA_SOURCE / "arena") in first
    monkeypatch.setattr(unpacker, "_imports_seen", [])
    assert unpacker.worker_imports() == first and asked[0] == 2


SECRET = "a22-secret"


def _forged(note: Path, tmp_path: Path) -> tuple[dict, str]:
    """A note as the referee's would be, its answer widened by a folder of secrets (signed as it is,
    so that only the note's own file tells it from the referee's); and that folder."""
    from arena.bots.notes import path_seen
    noted = json.loads(note.read_text())
    secret = tmp_path / SECRET
    secret.mkdir()
    (secret / "key").write_text("the store's key")
    noted["found"].append(str(secret))
    noted["seen"][str(secret)] = path_seen(str(secret))
    return noted, str(secret)


@as_root
@pytest.mark.parametrize("forgery", ["another uid's", "writable by others", "a link"])
def test_a_note_the_referee_did_not_write_never_widens_the_workers_view(
        forgery: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """The note decides what the worker that unpacks a stranger's archive sees. One that someone else
    wrote (another uid: a bot's, a local user's), that another could write, or a link to a file
    of someone's choosing, is no note: asked again, and the view holds only what the worker's
    imports load. The same forged answer in a note of the referee's own is read (the run directory
    is the referee's alone): it is the note's file that is refused. Planted (the owner's check
    left out; the mode's; the link's): the folder of secrets in the view."""
    from arena.serve import unpacker
    from tests.test_stranger_attacks10 import EVE, _as_eve
    note = _own_note(tmp_path, monkeypatch, request)
    unpacker.worker_imports()
    noted, secret = _forged(note, tmp_path)
    note.write_text(json.dumps(noted))
    monkeypatch.setattr(unpacker, "_imports_seen", [])
    assert secret in unpacker.worker_reads()  # the referee's own note: read
    theirs = tmp_path / "theirs.json"
    theirs.write_text(json.dumps(noted))
    if forgery == "another uid's":
        os.chown(note, EVE, EVE)
    elif forgery == "writable by others":
        note.chmod(0o622)
    else:
        note.unlink()
        note.symlink_to(theirs)
    monkeypatch.setattr(unpacker, "_imports_seen", [])
    assert secret not in unpacker.worker_reads()
    assert json.loads(note.read_text())["found"] == unpacker.worker_imports()  # noted afresh, by the referee
    eve = note.parent / "eve.json"  # a note of hers: she cannot write one where the referee reads them
    assert _as_eve(lambda: os.close(os.open(eve, os.O_WRONLY | os.O_CREAT, 0o644)) or 0) != 0 and not eve.exists()


def test_a_note_of_an_import_path_that_changed_since_is_asked_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """A package the worker imports from a later entry of its import path; then another copy of it
    installed on an earlier entry, and the folder of the first used for something else. The note
    of the first answer would bind that folder in the worker's view: it names every folder of the
    import path and each path of its answer as they were, and is read back only while each still
    is. Planted (the note read whatever changed since): the old folder in the view, the new one not."""
    from arena.serve import unpacker
    first, second = tmp_path / "first", tmp_path / "second"
    for d in (first, second / "a22pkg"):
        d.mkdir(parents=True)
    (second / "a22pkg" / "__init__.py").write_text("")
    monkeypatch.setattr(unpacker, "IMPORTS_SEEN", "import a22pkg\n" + unpacker.IMPORTS_SEEN)
    note = _own_note(tmp_path, monkeypatch, request, f"{first}:{second}")
    assert str(second / "a22pkg") in unpacker.worker_reads() and note.is_file()
    (first / "a22pkg").mkdir()
    (first / "a22pkg" / "__init__.py").write_text("")
    (second / "a22pkg" / "notes.txt").write_text("the operator's notes")
    monkeypatch.setattr(unpacker, "_imports_seen", [])
    reads = unpacker.worker_reads()
    assert str(first / "a22pkg") in reads and str(second / "a22pkg") not in reads


def test_the_note_is_named_by_the_packages_content(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An edited arena package may import something else: its worker's imports are another note's,
    never the one of the package as it was. Planted (the package's content out of the name): the
    same note."""
    from arena.bots import launch
    from arena.serve import unpacker
    source = tmp_path / "source"
    shutil.copytree(launch.ARENA_SOURCE / "arena", source / "arena",
                    ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(launch, "ARENA_SOURCE", source)
    before = unpacker.imports_note()
    with open(source / "arena" / "config.py", "a") as f:
        f.write("\nimport xml  # the edit: one import more\n")
    assert unpacker.imports_note() != before


def test_the_workers_bubblewrap_is_tried_once_a_machine(open_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each server process ran the worker's imports under bubblewrap once (0.25 s of CPU) before its
    first upload, to know the worker starts there. A pass is now noted for the machine
    (:func:`arena.bots.notes.passed_here`): a process that has not tried reads it and tries nothing.
    A failure is never noted (it would send the worker out of bubblewrap): each process tries again.
    The notes here are the test's own (its folder for the run directory's). Planted (the note
    never read): tried again; (failures noted and read): the failing bwrap not tried again."""
    from arena.bots import containment, notes
    from arena.bots.seccomp import memfd
    from arena.serve import unpacker
    from tests.checks import bwrap_or_skip
    bwrap_or_skip()
    named = notes.note_named
    monkeypatch.setattr(notes, "note_named", lambda kind, asked: open_tmp / named(kind, asked).name)
    tried: list[str] = []
    real_try = unpacker._bwrap_tried
    monkeypatch.setattr(unpacker, "_bwrap_tried", lambda bwrap, *a: tried.append(bwrap) or real_try(bwrap, *a))
    fails = open_tmp / "bin" / "bwrap"
    fails.parent.mkdir()
    fails.write_text("#!/bin/sh\nexit 1\n")
    fails.chmod(0o755)
    (open_tmp / "uploads").mkdir()
    fd = memfd(worker=True)
    try:
        for bwrap in (containment.find_bwrap(), str(fails)):
            monkeypatch.setattr(containment, "BWRAP", bwrap)
            for n in range(2):  # a process, then another that has not tried
                monkeypatch.setattr(unpacker, "_bwrap_runs", {})
                argv = unpacker.confined(["worker"], open_tmp / "uploads" / "job", fd)
                assert argv[0] == (bwrap if bwrap != str(fails) else "worker"), argv
            assert tried.count(bwrap) == (1 if bwrap != str(fails) else 2), tried
    finally:
        os.close(fd)


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
