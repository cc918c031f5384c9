"""#35 again: what code a hostile archive runs in its upload worker may still make (processes, files).

The upload worker reads hostile bytes with C decompressors, so each test here puts an attacker's
program in the confined worker's place (as tests/test_stranger_attacks9.py does) and has it answer
with what it managed, as a refusal the server passes on. Each attack is bounded by itself (200
processes, 20,000 files, 64 MiB), so that the machine is not hurt where a bound is missing.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.checks import bwrap_or_skip

ANSWER = """
def answer(found):
    print(json.dumps({"refused": json.dumps(found)}), flush=True)
"""

READ_JOB = "import json, os, sys, threading, time\n" \
           "header = json.loads(sys.stdin.buffer.readline())\nsys.stdin.buffer.read(header['size'])\n" + ANSWER

EVE = 4242  # another local user (the tests that need her run as root, who can make files of hers and act as her)


def _as_eve(work: Callable[[], int], folder: Path | None = None, gid: int = EVE, uid: int = EVE) -> int:
    """The exit status of ``work()``, run in a child as Eve alone (her uid, group ``gid``, no other),
    or as another ``uid`` (a bot's), in ``folder`` (opened first: the test's own folders above it
    are not hers to enter); 1 where it raised (said on stderr)."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY) if folder is not None else None
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
            if fd is not None:
                os.fchdir(fd)
            code = work()
        except BaseException as e:  # noqa: BLE001  the child says it and ends, whatever happened
            os.write(2, f"{e!r}\n".encode())
        os._exit(code)
    if fd is not None:
        os.close(fd)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])



def _upload_as_eve(monkeypatch: pytest.MonkeyPatch, program: str, prefix: str) -> tuple[dict, Path]:
    """The figures ``program``, in the worker's place, answered to a server run as Eve without
    bubblewrap (``{"lost": ...}`` where the upload was lost instead), and the folder her server
    kept its uploads in (made in ``/tmp`` with ``prefix``, hers; removed by the time this returns)."""
    import shutil
    import tempfile

    import trio

    from arena.serve import unpacker
    from arena.serve.upload import UploadError
    from tests.test_serve import LIMITS, MANIFEST, zip_bytes
    monkeypatch.setattr(unpacker, "_space_tried", [])
    monkeypatch.setattr(unpacker, "confined", lambda argv, *_: argv)
    monkeypatch.setattr(unpacker, "WORKER", ["/usr/bin/python3", "-c", program])
    home = Path(tempfile.mkdtemp(prefix=prefix))
    r, w = os.pipe()

    def upload() -> int:  # the server's side, as Eve
        try:
            trio.run(lambda: unpacker.unpack_apart(zip_bytes({"bot.toml": MANIFEST}), home / "job", **LIMITS))
        except UploadError as e:  # the program's figures
            os.write(w, str(e).encode())
        except Exception as e:  # noqa: BLE001  the upload lost: said
            os.write(w, json.dumps({"lost": repr(e)}).encode())
        return 0
    try:
        os.chown(home, EVE, EVE)
        assert _as_eve(upload) == 0
        os.close(w)
        with os.fdopen(r, "rb") as got:
            return json.loads(got.read() or b"{}"), home
    finally:
        shutil.rmtree(home, ignore_errors=True)

BREEDER = READ_JOB + """
kids = 0
for _ in range(200):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    kids += 1
threading.stack_size(1 << 16)
threads = 0
for _ in range(200):
    try:
        threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
    except RuntimeError:
        break
    threads += 1
answer({"processes": kids, "threads": threads})
"""


def _view(view: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker's view as a server has it: under bubblewrap, or where bubblewrap cannot start."""
    from arena.serve import unpacker
    if view == "under bubblewrap":
        bwrap_or_skip()
    else:
        monkeypatch.setattr(unpacker, "confined", lambda argv, *_: argv)


def _refusal(monkeypatch: pytest.MonkeyPatch, program: str, dest: Path, limits: dict) -> dict:
    """The figures the program in the worker's place answered with (as an upload's refusal)."""
    import trio

    from arena.serve import unpacker
    from arena.serve.upload import UploadError
    from tests.test_serve import MANIFEST, zip_bytes
    monkeypatch.setattr(unpacker, "WORKER", [sys.executable, "-c", program])
    with pytest.raises(UploadError) as refused:
        trio.run(lambda: unpacker.unpack_apart(zip_bytes({"bot.toml": MANIFEST}), dest, **limits))
    return json.loads(str(refused.value))


@pytest.mark.parametrize("view", ["under bubblewrap", "where bubblewrap cannot start"])
def test_an_upload_worker_can_start_no_process_or_thread(tmp_path: Path, view: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A fork bomb in the worker takes the server's machine (here pid_max is 32,768): the worker's
    limits were memory and file size, and ``RLIMIT_NPROC`` binds no root server (and would count
    a non-root server's own processes). Threads are tasks too, each a pid and a kernel stack that
    no memory limit counts. The worker needs neither to read a zip or tar, so its system-call
    filter refuses both, with or without bubblewrap around it. On the old code: 200 of 200
    processes and 200 of 200 threads, in both views. Planted (the worker's filter left out): the
    same."""
    from arena.serve import unpacker
    from tests.test_serve import LIMITS
    _view(view, monkeypatch)
    (tmp_path / "uploads").mkdir()
    found = _refusal(monkeypatch, BREEDER, tmp_path / "uploads" / "job", LIMITS)
    assert found == {"processes": 0, "threads": 0}


SPREADER = READ_JOB + """
empty = 0
try:
    while empty < 20_000:
        open("e%d" % empty, "xb").close()
        empty += 1
except OSError:
    pass
for name in os.listdir("."):
    os.unlink(name)
written = 0
try:
    while written < 64 << 20:
        with open("f%d" % (written >> 18), "xb") as f:
            f.write(b"x" * (1 << 18))
        written += 1 << 18
except OSError:
    pass
answer({"files": empty, "bytes": written})
"""


@pytest.mark.parametrize("view", ["under bubblewrap", "where bubblewrap cannot start"])
def test_an_upload_worker_can_fill_the_disk_with_neither_many_files_nor_many_small_ones(
        tmp_path: Path, view: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker's one writable folder was on the server's disk, where ``RLIMIT_FSIZE`` bounds one
    file (the upload's bound) but not how many: empty files cost inodes, and files each under the
    bound add up. On the old code 20,000 of 20,000 empty files and 64 of 64 MiB (in 256 KiB files,
    with an upload's bound of 1 MiB) were written to the server's disk. Now the worker writes into
    a tmpfs of its own mount namespace, of the upload's bounds in bytes and inodes (the server's
    disk is not touched until the answer is read back), so neither passes
    the upload's own bounds, with bubblewrap around the worker or without. Planted (the tmpfs left
    out): 20,000 files and 64 MiB again; (the worker's working folder left as Popen chose it, the
    host's folder below the tmpfs): the same without bubblewrap, whose ``--chdir`` hid it."""
    from arena.serve import unpacker
    from tests.test_serve import LIMITS
    if not unpacker._spaces_work(tmp_path):
        pytest.skip("no tmpfs of the worker's own can be made here (docs/SANDBOX.md)")
    _view(view, monkeypatch)
    (tmp_path / "uploads").mkdir()
    found = _refusal(monkeypatch, SPREADER, tmp_path / "uploads" / "job", LIMITS)
    space = unpacker.worker_space(**LIMITS)
    assert found["files"] < space.inodes <= 2 * LIMITS["max_files"] + 8, found
    assert found["bytes"] <= space.bytes <= LIMITS["max_bytes"] + LIMITS["max_files"] * 4096, found


def test_no_upload_worker_starts_where_its_filter_cannot_be_built(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail closed: where libseccomp cannot build the filter, no worker runs (none without it, with
    or without bubblewrap), and the upload is the arena's failure, said so, not the uploader's.
    Planted (the worker started without a filter where none is built): a worker ran."""
    import trio

    from arena.bots import seccomp
    from arena.serve import unpacker
    from tests.test_serve import LIMITS, MANIFEST, zip_bytes

    def unavailable(worker: bool = False) -> bytes:
        raise seccomp.FilterUnavailable("the system-call filter cannot be built: no libseccomp here")
    monkeypatch.setattr(seccomp, "bpf", unavailable)

    async def started(*a: object, **kw: object) -> None:
        raise AssertionError(f"a worker started without its filter: {a}")
    monkeypatch.setattr(trio.lowlevel, "open_process", started)
    with pytest.raises(unpacker.UnpackerLost, match="without its system-call filter: .*no libseccomp"):
        trio.run(lambda: unpacker.unpack_apart(zip_bytes({"bot.toml": MANIFEST}), tmp_path / "job", **LIMITS))


@pytest.mark.skipif(os.geteuid() != 0, reason="acting as another user needs a root test")
def test_a_worker_of_a_server_that_is_not_root_is_bounded_on_the_disk_too(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The same attack on a server that runs as uid 4242 (its worker unconfined here: bubblewrap
    would need the test's Python, which that user cannot read). Such a server may not mount on the
    host, and on the code before this test its worker wrote 20,000 of 20,000 files and 64 of 64 MiB
    onto the disk; its tmpfs is now mounted in a user namespace of the worker's own, its uid mapped
    to itself, and read back as a root server's is. Planted (no user namespace: the mount refused,
    so the worker writes on the disk as before, said in the log): 20,000 files and 64 MiB."""
    import tempfile

    import trio

    from arena.serve import unpacker
    from arena.serve.upload import UploadError
    from tests.test_serve import LIMITS, MANIFEST, zip_bytes
    home = Path(tempfile.mkdtemp(prefix="a17-eve-"))  # a folder she can reach (/tmp's are)
    try:
        os.chown(home, EVE, EVE)
        monkeypatch.setattr(unpacker, "confined", lambda argv, *_: argv)
        monkeypatch.setattr(unpacker, "WORKER", ["/usr/bin/python3", "-c", SPREADER])
        monkeypatch.setattr(unpacker, "_space_tried", [])
        archive = zip_bytes({"bot.toml": MANIFEST})
        r, w = os.pipe()

        def upload() -> int:  # the server's side, as Eve
            with pytest.raises(UploadError) as answered:
                trio.run(lambda: unpacker.unpack_apart(archive, home / "job", **LIMITS))
            os.write(w, json.dumps({"found": json.loads(str(answered.value)), "space": unpacker._space_tried}).encode())
            return 0
        status = _as_eve(upload)
        os.close(w)
        with os.fdopen(r, "rb") as got:
            said = json.loads(got.read() or b"{}")
    finally:
        import shutil
        shutil.rmtree(home, ignore_errors=True)
    assert status == 0, said
    found, space = said["found"], unpacker.worker_space(**LIMITS)
    assert said["space"] == [True] and found["files"] < space.inodes and found["bytes"] <= space.bytes, said


def test_where_no_tmpfs_can_be_made_uploads_are_refused_and_the_log_says_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A root server in a container without ``CAP_SYS_ADMIN``, or a machine without user namespaces:
    the worker's tmpfs cannot be made. Its files on the disk would be bounded each (``RLIMIT_FSIZE``)
    but not in number or in all, in its folder and in ``/tmp`` beside it, for its 60 s: no check
    the worker makes as it writes binds code a hostile archive runs in it. So no upload is taken
    there (decided at #35's third round; before, they went onto the disk): each is the arena's
    failure, said in one clear sentence, no worker starts, and the log says why once. Planted (the
    space not required: the old fall-back to the disk): an upload is taken."""
    import logging

    import trio

    from arena.bots.namespaces import PrivateSpace
    from arena.serve import unpacker
    from tests.test_serve import LIMITS, MANIFEST, zip_bytes

    def refused(self: PrivateSpace) -> None:
        raise PermissionError(1, "mount a tmpfs: Operation not permitted")

    async def started(*a: object, **kw: object) -> None:
        raise AssertionError(f"a worker started without a tmpfs of its own: {a}")
    monkeypatch.setattr(PrivateSpace, "enter", refused)
    monkeypatch.setattr(unpacker, "_bwrap_runs", {})  # a root server's bubblewrap runs in its tmpfs: tried anew,
    # not read from this machine's note (a pass where tmpfs mounts work: a machine unlike the one played here)
    monkeypatch.setattr(unpacker, "passed_here", lambda question, ran_through, trial: trial())
    monkeypatch.setattr(unpacker, "_space_tried", [])
    monkeypatch.setattr(unpacker, "_uid_tried", [])
    monkeypatch.setattr(trio.lowlevel, "open_process", started)
    (tmp_path / "uploads").mkdir()
    with caplog.at_level(logging.WARNING, logger="arena.serve"):
        for n in range(2):
            with pytest.raises(unpacker.UnpackerLost, match="uploads cannot be taken on this server: .* tmpfs"):
                trio.run(lambda: unpacker.unpack_apart(zip_bytes({"bot.toml": MANIFEST, "bot.py": b"x"}),
                                                       tmp_path / "uploads" / f"job{n}", **LIMITS))
    said = [r.getMessage() for r in caplog.records if "uploads are refused" in r.getMessage()]
    assert len(said) == 1 and "(mount a tmpfs: Operation not permitted)" in said[0], said
    assert sorted(p.name for p in (tmp_path / "uploads").iterdir()) == ["job0", "job1"]  # empty; the caller's to remove
    assert not any((tmp_path / "uploads").rglob("*/*"))


@pytest.mark.parametrize("made", ["a link out of the folder", "its root through a link"])
def test_what_a_worker_wrote_reaches_the_disk_only_as_the_folder_reader_lists_it(tmp_path: Path, made: str,
                                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker's answered folder is read back from its tmpfs by the server (often as root): a link there must stay a link the reader refuses (``bot.py`` -> ``/etc/passwd``), and an
    answered root that is itself a link must not be followed (``top`` -> ``real``). Each is the
    bot's refusal, named as the upload's folder (no ``/proc`` path), and nothing reaches the disk.
    Planted (the read-back opening the root with links followed): the linked root was taken."""
    import trio

    from arena.bots.folder import FolderError
    from arena.serve import unpacker
    from tests.test_serve import LIMITS, MANIFEST, zip_bytes
    if not unpacker._spaces_work(tmp_path):
        pytest.skip("no tmpfs of the worker's own can be made here (docs/SANDBOX.md)")
    dest = tmp_path / "uploads" / "job"
    dest.parent.mkdir()
    make = {"a link out of the folder": "open('bot.toml', 'wb').write(MANIFEST); os.symlink('/etc/passwd', 'bot.py')\n"
                                        "root = header['dest']\n",
            "its root through a link": "os.mkdir('real'); open('real/bot.toml', 'wb').write(MANIFEST)\n"
                                       "os.symlink('real', 'top'); root = header['dest'] + '/top'\n"}[made]
    program = READ_JOB + f"MANIFEST = {MANIFEST!r}\n" + make + \
        "print(json.dumps({'root': root, 'name': 'upl', 'label': 'upl@1.0', 'human': False}), flush=True)\n"
    monkeypatch.setattr(unpacker, "confined", lambda argv, *_: argv)  # what the server reads back is the point
    monkeypatch.setattr(unpacker, "WORKER", [sys.executable, "-c", program])
    with pytest.raises(FolderError) as refused:
        trio.run(lambda: unpacker.unpack_apart(zip_bytes({"bot.toml": MANIFEST}), dest, **LIMITS))
    said = str(refused.value)
    named = {"a link out of the folder": f"{dest / 'bot.py'}: a link to '/etc/passwd'",
             "its root through a link": f"{dest / 'top'}: cannot read the bot's folder"}[made]
    assert said.startswith(named) and "/proc" not in said, said
    assert sorted(p.name for p in dest.rglob("*")) == []


# -- the store's folder, below a folder others may write ---------------------------------------------

@pytest.mark.skipif(os.geteuid() != 0, reason="another user's files and moves need a root test")
def arenas_row_refused(store: Path) -> str:
    """The server writes a row of its own to ``store`` (opened as the server opens its store to
    write): what refused it, or "" where it was written."""
    from arena.serve import auth
    from arena.tournament.store import StoreError
    try:
        db = auth.open_write(store)
        try:
            db.execute("INSERT INTO tournaments VALUES ('the-arenas-own', '{}', 1, 'running', 0, 0)")
        finally:
            db.close()
    except StoreError as e:
        return str(e)
    return ""


def test_a_store_below_a_folder_others_may_write_is_refused_before_she_can_swap_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``/srv/arena-data/arena.sqlite`` where ``/srv`` is writable by every user (no sticky bit): the
    store's own folder is the arena's, 0700, so it was taken. But Eve may rename anything in
    ``/srv``: the server checks the store's folder at each writing connection and then opens the
    store by its path, and between the two she exchanges ``arena-data`` with a folder of her own
    that holds a store of hers (``renameat2(RENAME_EXCHANGE)`` in a loop wins some of those; done
    once here, as her, at that moment). On the old code what the server wrote then (here a
    tournament's row) went into her file. Now every folder above the store's must be root's or
    this user's and not writable by others without the sticky bit (OpenSSH's rule for its keys),
    so the store is refused before anything is written, and her file holds nothing of the arena's.
    Planted (the folders above unchecked): the row in her file."""
    from arena.serve import auth
    from arena.tournament.store import Store, StoreError
    srv = tmp_path / "srv"
    srv.mkdir()
    os.chmod(srv, 0o777)
    store = srv / "arena-data" / "arena.sqlite"
    hers = srv / "eve-data"
    Store(tmp_path / "made" / "arena.sqlite").close()  # a store of her own (her uid, readable by her)
    (tmp_path / "made").rename(hers)
    for p in (hers, *hers.iterdir()):
        os.chown(p, EVE, EVE)
        os.chmod(p, 0o777 if p.is_dir() else 0o666)
    real = auth.connect

    def swapped_meanwhile(path: Path):  # Eve, between the server's check and its open
        if not (srv / "away").exists():
            def swap() -> int:
                os.rename("arena-data", "away")
                os.rename("eve-data", "arena-data")
                return 0
            assert _as_eve(swap, srv) == 0, "Eve could not rename in a folder every user may write"
        return real(path)
    monkeypatch.setattr(auth, "connect", swapped_meanwhile)
    try:
        Store(store).close()
        refused = arenas_row_refused(store)
    except StoreError as e:
        refused = str(e)
    assert refused == "" or (f"{srv}" in refused and "writable by others" in refused), refused
    theirs = srv / "arena-data" if (srv / "away").exists() else hers
    import sqlite3
    her_db = sqlite3.connect(theirs / "arena.sqlite")
    try:
        rows = her_db.execute("SELECT id FROM tournaments").fetchall()
    finally:
        her_db.close()
    assert rows == [], "the arena wrote into her store"


@pytest.mark.skipif(os.geteuid() != 0, reason="folders of another group need a root test")
def test_a_store_below_a_folder_only_its_owners_own_group_may_write_is_taken(tmp_path: Path) -> None:
    """Where users get a group of their own (Debian's ``USERGROUPS_ENAB``, umask 002), every folder
    they make is group-writable, and nobody else is in that group: such a folder above the store
    is taken (root's own group here, named as root, with no other member); the same folder
    writable by another group (Eve's) is refused. Planted (any group-writable folder refused): the
    first is refused."""
    from arena.tournament.store import Store, StoreError
    for group, taken in ((0, True), (EVE, False)):
        srv = tmp_path / f"srv{group}"
        srv.mkdir()
        os.chown(srv, 0, group)
        os.chmod(srv, 0o775)
        store = srv / "arena-data" / "arena.sqlite"
        if taken:
            Store(store).close()
            assert store.is_file()
        else:
            with pytest.raises(StoreError, match=f"{srv} is writable by others"):
                Store(store).close()


# -- what a worker leaves behind on a server that is not root ----------------------------------------

def _removed_by_eve(folder: Path, name: str) -> bool:
    """Whether ``bots.filesystem.remove_tree`` removes ``folder/name`` when Eve runs it."""
    from arena.bots.filesystem import remove_tree

    def remove() -> int:
        remove_tree(name)
        return 0 if not os.path.lexists(name) else 3
    status = _as_eve(remove, folder)
    assert status in (0, 3), f"the removal failed as Eve (status {status})"
    return status == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="acting as another user needs a root test")
def test_folders_a_worker_closed_to_its_own_user_are_removed_all_the_same(tmp_path: Path) -> None:
    """On a server that is not root the worker writes its upload's folder on the disk as the
    server's user, and may ``chmod 000`` a folder in it, or take the write bit from one: the
    server's ``shutil.rmtree`` (and ``rm -rf``) cannot list or empty such a folder without root's
    override of permissions, so the upload's folder stayed, and every start of the server tried to
    sweep it again. Now the removal gives back its own user's rights over a folder it cannot
    enter or empty (the folder opened without following a link) and goes on. Here as uid 4242,
    owner of the tree, as such a server is; a folder of another user's in it is tried once and
    left. Planted (rmtree alone): the folder stays."""
    uploads = tmp_path / "uploads"  # the server's own uploads folder
    top = uploads / "job"
    (top / "shut" / "inner").mkdir(parents=True)
    (top / "shut" / "inner" / "f").write_text("x")
    (top / "bare").mkdir()
    (top / "bare" / "g").write_text("y")
    (top / "bot.toml").write_text("")
    for p in (uploads, top, *top.rglob("*")):
        os.lchown(p, EVE, EVE)
    (top / "shut" / "inner").chmod(0)
    (top / "shut").chmod(0)
    (top / "bare").chmod(0o500)
    assert _removed_by_eve(uploads, "job")
    (top / "roots").mkdir(parents=True)  # a folder of root's in it: left, once tried, not looped on
    (top / "roots" / "f").write_text("z")
    os.lchown(top, EVE, EVE)
    assert not _removed_by_eve(uploads, "job") and (top / "roots" / "f").exists()
