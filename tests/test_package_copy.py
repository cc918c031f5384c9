"""The copy of the ``arena`` package that contained Python bots import (``launch._package_copy``):
one per machine and package content (``launch.package_copies``), made whole or not at all, changed
by nobody but the referee's uid, and used only while it holds exactly the package a process read.

The package is copied once to a source folder (``ARENA_SOURCE``) that the module's tests share, and
to one of its own for a test that edits it; each test makes the copies in a temporary folder of its
own; ``fresh()`` is the next process (nothing remembered, nothing held).
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import stat
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from arena.bots import launch
from arena.bots.bundles import Holds
from arena.bots.folder import read_folder
from arena.bots.launch import ContainmentError
from arena.bots.uids import BOT_UID_BASE, BOT_UID_COUNT
from tests.test_stranger_attacks10 import EVE, _as_eve

ROOT = Path(__file__).resolve().parents[1]
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="acting as another uid needs a root referee")


def _source(folder: Path) -> Path:
    """``folder`` made a source the copies are made from: this checkout's package and engine library."""
    shutil.copytree(ROOT / "arena", folder / "arena", ignore=shutil.ignore_patterns("__pycache__"))
    for lib in ROOT.glob(launch.PACKAGE_LIBS):
        shutil.copy(lib, folder / lib.name)
    return folder


@pytest.fixture(scope="module")
def source() -> Iterator[Path]:
    """One source for the module's tests that leave it as it is (each checks that it did)."""
    folder = Path(tempfile.mkdtemp(prefix="arena-test-"))
    folder.chmod(0o755)
    yield _source(folder / "src")
    shutil.rmtree(folder, ignore_errors=True)


def _made_from(src: Path, open_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``src`` the package source, the copies made in a temporary folder of the test's own (as
    where no folder of the user's own can be had: :func:`copies`), not the machine's, which every
    arena process shares (a test that damages or evicts copies there would hit the others)."""
    (open_tmp / "tmp").mkdir(mode=0o755)
    monkeypatch.setattr(launch, "ARENA_SOURCE", src)
    monkeypatch.setattr(tempfile, "tempdir", str(open_tmp / "tmp"))
    monkeypatch.setattr(launch, "arena_place", lambda what: copies())
    fresh(monkeypatch)
    return src


@pytest.fixture
def package(source: Path, open_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The module's source, for a test that does not change it."""
    before = digest(source / "arena")
    yield _made_from(source, open_tmp, monkeypatch)
    assert digest(source / "arena") == before, "a test changed the shared source: give it own_package"


@pytest.fixture
def own_package(open_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A source of the test's own, which it edits."""
    return _made_from(_source(open_tmp / "src"), open_tmp, monkeypatch)


def copies() -> Path:
    """The copies' folder where the user has no place of her own (``places.arena_place``)."""
    return Path(tempfile.gettempdir()) / f"palace-arena-package-{os.geteuid()}"


def fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """As a new process: no copy remembered, none held."""
    launch._PACKAGE_HOLD.release()
    monkeypatch.setattr(launch, "_PACKAGE_HOLD", Holds())
    monkeypatch.setattr(launch, "_package", None)


def digest(folder: Path) -> str:
    return read_folder(folder, arenas_own=True).digest


def test_one_copy_serves_every_process_until_the_package_changes(own_package: Path, monkeypatch) -> None:
    package = own_package
    first = launch._package_copy()
    made = (first / "arena" / "__init__.py").stat().st_ino
    assert digest(first / "arena") == digest(package / "arena")
    for path in [first, *first.rglob("*")]:  # the referee's, read-only to everyone else
        st = path.lstat()
        assert st.st_uid == os.geteuid() and not st.st_mode & 0o022 and st.st_mode & 0o004, path
    said = subprocess.run(["python3", "-c", "import arena; print(arena.__file__)"], env={"PYTHONPATH": str(first)},
                          capture_output=True, text=True, cwd="/", check=True).stdout
    assert said.strip() == str(first / "arena" / "__init__.py")  # what a bot imports

    fresh(monkeypatch)
    assert launch._package_copy() == first  # the next process: no copy made
    assert (first / "arena" / "__init__.py").stat().st_ino == made

    with open(package / "arena" / "__init__.py", "a") as f:  # the checkout edited
        f.write("EDITED = 1\n")
    fresh(monkeypatch)
    second = launch._package_copy()
    assert second != first and "EDITED = 1" in (second / "arena" / "__init__.py").read_text()
    assert digest(second / "arena") == digest(package / "arena")


def _drop_a_file(entry: Path) -> None:
    (entry / "arena" / "limits.py").unlink()


def _truncate(entry: Path) -> None:
    os.truncate(entry / "arena" / "limits.py", 0)


def _same_size_edit(entry: Path) -> None:
    path = entry / "arena" / "limits.py"
    text = path.read_bytes()
    path.write_bytes(text[:-2] + b"#\n")


def _a_module_beside(entry: Path) -> None:
    (entry / "json.py").write_text("raise SystemExit('not the standard library')\n")


def _closed_to_bots(entry: Path) -> None:
    (entry / "arena" / "__init__.py").chmod(0o600)


@pytest.mark.parametrize("break_it", [_drop_a_file, _truncate, _same_size_edit, _a_module_beside, _closed_to_bots])
def test_a_copy_changed_since_it_was_made_is_never_used(package: Path, monkeypatch, break_it) -> None:
    """A temp-dir cleaner's removals, a crash's empty files, anything with the referee's uid: the
    next process finds the copy no longer the package it read, sets it aside and makes it afresh."""
    entry = launch._package_copy()
    break_it(entry)
    fresh(monkeypatch)
    assert launch._package_copy() == entry
    assert digest(entry / "arena") == digest(package / "arena")
    assert sorted(p.name for p in entry.iterdir()) == sorted(["arena", *(p.name for p in package.glob(launch.PACKAGE_LIBS))])
    assert (entry / "arena" / "__init__.py").stat().st_mode & 0o004


def _left_in(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.iterdir() if p.is_dir())


def test_a_copy_cut_short_by_a_full_disk_is_never_used(package: Path, monkeypatch) -> None:
    cache = copies()

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(launch.shutil, "copy", full)  # the package written, its engine library not
    with pytest.raises(ContainmentError, match="no copy of the arena package .*No space left on device"):
        launch._package_copy()
    assert _left_in(cache) == []  # no entry, and its temporary folder removed
    monkeypatch.undo()
    monkeypatch.setattr(launch, "ARENA_SOURCE", package)
    monkeypatch.setattr(tempfile, "tempdir", str(cache.parent))
    monkeypatch.setattr(launch, "arena_place", lambda what: copies())
    fresh(monkeypatch)
    entry = launch._package_copy()
    assert digest(entry / "arena") == digest(package / "arena")


def test_a_copy_cut_short_by_kill_9_is_never_used(package: Path, monkeypatch) -> None:
    launch.package_copies()
    cache = copies()
    pid = os.fork()
    if pid == 0:  # a referee killed once the package is written, before its engine library is
        shutil.copy = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)  # type: ignore[assignment]
        try:
            launch._package_copy()
        finally:
            os._exit(3)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == -signal.SIGKILL
    left = _left_in(cache)
    assert len(left) == 1 and left[0].startswith(".")  # only its temporary folder, under no entry's name
    entry = launch._package_copy()
    assert digest(entry / "arena") == digest(package / "arena")
    assert _left_in(cache) == [entry.name]  # what the killed one left is removed by the next maker


def _try_to_change(entry: Path) -> int:
    """In a child with another uid: every change to the copy or to the cache around it, and every
    lock a referee waits on; 0 when each one was refused."""
    cache = entry.parent
    attempts = {
        "edit a module": lambda: open(entry / "arena" / "__init__.py", "a").close(),
        "add a module": lambda: (entry / "arena" / "evil.py").write_text("x = 1\n"),
        "shadow the standard library": lambda: (entry / "json.py").write_text("x = 1\n"),
        "remove a module": lambda: (entry / "arena" / "__init__.py").unlink(),
        "chmod a module": lambda: os.chmod(entry / "arena" / "__init__.py", 0o666),
        "rename the copy": lambda: os.rename(entry, cache / "elsewhere"),
        "plant an entry": lambda: (cache / ("f" * 64)).mkdir(),
        # a lock file she could open she could flock, and a referee would wait on it for ever
        "open the entry's lock": lambda: os.open(cache / f"{entry.name}.lock", os.O_RDONLY),
        "open the entry's use": lambda: os.open(cache / f"{entry.name}.use", os.O_RDONLY),
        "open the cache's lock": lambda: os.open(cache / "unpack.lock", os.O_RDONLY),
    }
    done = []
    for name, attempt in attempts.items():
        try:
            attempt()
            done.append(name)
        except PermissionError:
            pass
    if done:
        os.write(2, f"done: {done}\n".encode())
    return 1 if done else 0


@needs_root
@pytest.mark.parametrize("uid", [EVE, BOT_UID_BASE + BOT_UID_COUNT - 1], ids=["another user", "a bot's uid"])
def test_no_other_uid_changes_the_copy_or_holds_its_locks(package: Path, uid: int) -> None:
    entry = launch._package_copy()
    assert (entry.parent / "unpack.lock").exists()
    before = digest(entry / "arena")
    assert _as_eve(lambda: _try_to_change(entry), uid=uid, gid=uid) == 0
    assert digest(entry / "arena") == before and not (entry.parent / ("f" * 64)).exists()


@needs_root
def test_a_folder_another_user_made_is_refused_clearly(package: Path, monkeypatch) -> None:
    """Another user may make the copies' folder first (its name in /tmp is known): the copy is
    refused, saying what to do, rather than made where she could change it."""
    cache = copies()
    cache.mkdir()
    os.chown(cache, EVE, EVE)
    with pytest.raises(ContainmentError, match="not a folder of uid 0 .*remove it, or set TMPDIR"):
        launch._package_copy()
    assert list(cache.iterdir()) == []
    os.chown(cache, 0, 0)
    cache.chmod(0o700)  # ours, closed (by our own uid): opened again, as every bot must read it
    assert launch._package_copy().parent == cache and stat.S_IMODE(cache.stat().st_mode) == 0o755


def test_a_bot_s_traceback_names_no_path_of_the_server(package: Path) -> None:
    """What a Python bot says (a traceback through the arena it imports) reaches an uploader's
    page: the copy's folder is the server's, named by neither the copies' folder nor its own."""
    from arena.serve.submit import SERVER_PATH, hide_paths
    entry = launch._package_copy()
    said = hide_paths(f'File "{entry}/arena/botkit.py", line 3, in <module>', [])
    assert said == f'File "{SERVER_PATH}/arena/botkit.py", line 3, in <module>', said


def test_a_gvisor_seat_s_links_to_the_copy_do_not_make_it_anew(package: Path, monkeypatch, open_tmp: Path) -> None:
    """Each gVisor seat is served the copy's files through hard links of its own (gvisor.seat_copy):
    a file of the copy with another name is still the package, not a copy to set aside."""
    entry = launch._package_copy()
    made = (entry / "arena" / "__init__.py").stat().st_ino
    os.link(entry / "arena" / "__init__.py", open_tmp / "a-seat-s-link")
    fresh(monkeypatch)
    assert launch._package_copy() == entry
    assert (entry / "arena" / "__init__.py").stat().st_ino == made


def test_copies_no_process_holds_go_past_their_bound_and_a_held_one_stays(own_package: Path, monkeypatch) -> None:
    package = own_package
    monkeypatch.setattr(launch, "PACKAGE_COPIES_BYTES", 1)  # any copy is past it
    first = launch._package_copy()
    running = launch._PACKAGE_HOLD  # a process still running its bots from the first copy
    monkeypatch.setattr(launch, "_PACKAGE_HOLD", Holds())
    monkeypatch.setattr(launch, "_package", None)

    def edit(n: int) -> Path:
        with open(package / "arena" / "__init__.py", "a") as f:
            f.write(f"EDITED = {n}\n")
        fresh(monkeypatch)
        return launch._package_copy()

    second = edit(1)
    assert first.is_dir() and second.is_dir()  # held: never evicted
    running.release()
    third = edit(2)
    assert not first.exists() and not second.exists() and third.is_dir()


def test_the_system_python_is_asked_once_per_machine_and_interpreter(open_tmp: Path, monkeypatch) -> None:
    """Where the arena's own interpreter is not under /usr, bots get the system's, checked by running
    it: once per interpreter file on the machine (noted in the run directory), not in every process;
    an interpreter replaced since is asked again."""
    runs = open_tmp / "runs"
    python = open_tmp / "python3"
    python.write_text(f"#!/bin/sh\necho run >> {runs}\necho True\n")
    python.chmod(0o755)
    monkeypatch.setattr(launch, "SYSTEM_PYTHONS", (str(python),))

    def asked() -> int:
        launch._system_python.cache_clear()  # as a new process
        assert launch._system_python() == str(python)
        return len(runs.read_text().splitlines())

    run_dir = launch.process_registry().run_dir
    before = set(run_dir.glob("python-*"))
    try:
        assert asked() == 1
        assert asked() == 1  # the next process: not run again
        python.write_text(python.read_text() + "# replaced\n")
        assert asked() == 2
    finally:
        launch._system_python.cache_clear()
        for note in set(run_dir.glob("python-*")) - before:
            note.unlink()
