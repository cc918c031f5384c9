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
from tests.checks import bwrap_or_skip


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
    with pytest.raises(BotCommandError, match=rf"'node_modules/zeros'.*{gvisor.OWN_COPY.bytes >> 20} MiB"):
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


# -- trees nested past Python's recursion: what removes a stranger's folder ------------------------

DEEP = """\
import os
fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
for _ in range(1_100):
    os.mkdir("d", dir_fd=fd)
    sub = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
    os.close(fd)
    fd = sub
"""


def _rm_rf(*paths: Path) -> None:
    """What a failing test left of a deep tree, removed here: pytest's own cleanup of old temporary
    folders is rmtree, and it would end in a RecursionError in a later run."""
    import subprocess
    subprocess.run(["rm", "-rf", "--", *map(str, paths)], check=False)


def test_a_build_that_nests_past_pythons_recursion_is_refused_and_removed(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A build (under bubblewrap, as a referee that is not root runs it: on the disk, no tmpfs of
    its own) that nests 1,100 folders deep: the watcher refuses it (folders past the path cap), and
    the removal of its copy, ``shutil.rmtree(..., ignore_errors=True)``, ended in a RecursionError
    (which ignore_errors lets through): the tournament stopped with a traceback, not the bot's
    refusal, and the tree stayed. Now refused as the bot's, and nothing of it stays. Planted
    (rmtree as it was): RecursionError."""
    from arena.bots import launch
    from arena.bots.containment import Containment
    from arena.bots.launch import BuildError, Launcher
    from arena.bots.manifest import load_bot
    from tests.checks import reachable
    from tests.checks import recorded_build_copies
    bwrap_or_skip()
    monkeypatch.setattr(launch, "bounded_space", lambda *a: None)  # the referee that is not root's path
    copies = recorded_build_copies(monkeypatch)
    bot = tmp_path / "bot"
    bot.mkdir()
    (bot / "build.py").write_text(DEEP)
    (bot / "bot.toml").write_text('name = "deep"\ncommand = ["python3", "bot.py"]\nbuild = ["python3", "build.py"]\n')
    try:
        with pytest.raises(BuildError, match="nested past"):
            Launcher(containment=Containment.BUBBLEWRAP).build_now(load_bot(reachable(bot)))
        assert len(copies) == 1 and not copies[0].parent.exists()
    finally:
        _rm_rf(*(c.parent for c in copies))


def test_an_upload_worker_that_leaves_a_deep_tree_cannot_stop_the_server(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Code run by a hostile archive in its confined worker (a decompressor's bug) nests 1,100
    folders in the one folder it may write, dates it back past the lease and answers nothing. The
    server removes an upload's folder whatever the worker did, and at each start removes the
    leftovers no job holds: both were ``shutil.rmtree``, which such a tree ends in a RecursionError,
    so the upload was a 500 with its folder kept and every later start of the server failed. Now the
    folder goes. (Since #35's third round a worker writes only into a tmpfs of its own, read back
    with a bound on depth, and no server unpacks onto the disk: its tree never reaches the disk.
    Such a folder, as an earlier arena's worker left it, is made here for the start's sweep.)
    Planted (rmtree as it was): RecursionError at the start's sweep."""
    import sqlite3
    import subprocess
    import sys

    import trio

    from arena.serve import submit, unpacker
    from arena.serve.unpacker import UnpackerLost
    from arena.store import jobs as q
    from arena.tournament.store import Store
    from tests.test_serve import LIMITS, MANIFEST, zip_bytes
    bwrap_or_skip()
    store = tmp_path / "data" / "arena.sqlite"
    Store(store).close()
    uploads = submit.private_copy_dir(store)
    hostile = DEEP + "os.utime('.', (0, 0))\n"
    monkeypatch.setattr(unpacker, "WORKER", [sys.executable, "-c", hostile])
    try:
        with pytest.raises(UnpackerLost):
            trio.run(lambda: unpacker.unpack_apart(zip_bytes({"bot.toml": MANIFEST}), uploads / "job", **LIMITS))
        assert not (uploads / "job" / "d").exists()  # its tree stayed in its tmpfs
        subprocess.run([sys.executable, "-c", hostile], cwd=uploads / "job", check=True)
        assert (uploads / "job" / "d" / "d").is_dir()  # as an earlier arena's worker left it
        db = sqlite3.connect(store, isolation_level=None, timeout=30)
        try:
            submit._recover(db, uploads, q.server_id())  # a server's start
        finally:
            db.close()
        assert not (uploads / "job").exists()
    finally:
        _rm_rf(uploads / "job")


def test_an_upload_worker_that_answers_without_end_is_lost_at_a_bound(monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    """The worker's code writes to its answer pipe without a newline, for ever: the server gathered
    it all in memory until ``UNPACK_S`` (60 s: gigabytes at a pipe's speed). Now an answer past
    ``ANSWER_BYTES`` loses the worker at once. Planted (no bound; UNPACK_S made 10 s here): the
    timeout's message, after 10 s of gathering."""
    import sys

    import trio

    from arena.serve import unpacker
    from arena.serve.unpacker import UnpackerLost
    from tests.test_serve import LIMITS, MANIFEST, zip_bytes
    monkeypatch.setattr(unpacker, "UNPACK_S", 10.0)
    flood = "import sys\nwhile True:\n    sys.stdout.buffer.write(b'x' * 65536)\n"
    monkeypatch.setattr(unpacker, "WORKER", [sys.executable, "-c", flood])
    with pytest.raises(UnpackerLost, match="answered more than"):
        trio.run(lambda: unpacker.unpack_apart(zip_bytes({"bot.toml": MANIFEST}), tmp_path / "job", **LIMITS))


# -- the store's files, where another local user can write beside them ------------------------------

EVE = 4242  # another local user (the test runs as root, who can make files of hers)


@pytest.mark.skipif(os.geteuid() != 0, reason="files of another user need a root test")
@pytest.mark.parametrize("plant", ["a link at the store", "her own -wal", "her own data folder"])
def test_a_store_where_another_user_planted_files_is_refused(tmp_path: Path, plant: str) -> None:
    """``--store /tmp/club.sqlite`` (the store's docstring allows a shared, sticky folder: "the
    files themselves are private") and a store whose folder's parent another user may write. Eve
    plants, before the arena's first run: the store's name as a link to an empty file of hers
    (SQLite follows it: the whole store, games and accounts, was written into her file); or a
    ``-wal`` of her own beside it (SQLite uses the one it finds: every write went through her
    file; as root, SQLite then gave it to root, but a descriptor she opened first keeps reading);
    or, where she can write the parent, ``arena-data`` as a folder of her own (the arena left a
    folder not its own as it was and made the store in it, where she may swap it later). Each is
    now refused with a :class:`StoreError` saying why, and nothing of the arena's is in her files or
    folder. On the old code her file held the whole store (229,376 bytes) in the two link cases.
    Planted (the file check out): the first two fail; (the folder check out): the third. Since
    attack19 a store's own folder that others may write is refused whatever it holds (sticky
    ``/tmp`` included: tests/test_stranger_attacks12.py), so the first two are refused by that rule
    first, the file check a second layer."""
    from arena.tournament.store import Store, StoreError
    eve = tmp_path / "eve"
    eve.mkdir()
    hers = eve / "db"
    hers.touch()
    os.chown(hers, EVE, EVE)
    os.chmod(hers, 0o666)
    if plant == "her own data folder":
        srv = tmp_path / "srv"
        srv.mkdir()
        os.chmod(srv, 0o777)  # she may write the data folder's parent
        data = srv / "arena-data"
        data.mkdir()
        os.chown(data, EVE, EVE)
        store = data / "arena.sqlite"  # none yet: the arena makes it in her folder, which she may swap
    else:
        shared = tmp_path / "shared"
        shared.mkdir()
        os.chmod(shared, 0o1777)  # as /tmp
        store = shared / "club.sqlite"
        if plant == "a link at the store":
            os.symlink(hers, store)
            os.lchown(store, EVE, EVE)
        else:
            os.link(hers, shared / "club.sqlite-wal")
    with pytest.raises(StoreError, match="refused"):
        Store(store).close()
    left = {"a link at the store": ["club.sqlite"], "her own -wal": ["club.sqlite-wal"], "her own data folder": []}
    assert hers.stat().st_size == 0 and sorted(p.name for p in store.parent.iterdir()) == left[plant]


@pytest.mark.parametrize("answer", ["through a link", "up and out"])
def test_an_upload_workers_answer_that_leads_out_through_a_link_is_lost(tmp_path: Path, answer: str,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker answers the bot's root, and the server checked it only by its spelling (below the
    upload's folder). Code run by a hostile archive makes ``x`` in its folder a link to another
    folder of the host (here another member's bot, waiting beside it) and answers ``x/bot``, or
    spells its way out with ``..``: the server took a folder elsewhere as the upload's bot, to be
    checked and placed. Now the answer must be the folder it names on the disk. Planted (the
    spelling alone): both pass as the upload's bot."""
    import sys

    import trio

    from arena.serve import unpacker
    from arena.serve.unpacker import UnpackerLost
    from tests.test_serve import LIMITS, MANIFEST, zip_bytes
    victim = tmp_path / "uploads" / "other-job" / "bot"
    victim.mkdir(parents=True)
    (victim / "bot.toml").write_text('name = "victim"\ncommand = ["python3", "bot.py"]\n')
    dest = tmp_path / "uploads" / "job"
    named = {"through a link": f"{dest}/x/bot", "up and out": f"{dest}/y/../../other-job/bot"}[answer]
    hostile = ("import json, os, sys\nheader = json.loads(sys.stdin.buffer.readline())\n"
               "sys.stdin.buffer.read(header['size'])\n"
               f"os.symlink({str(victim.parent)!r}, 'x'); os.mkdir('y')\n"
               f"print(json.dumps({{'root': {named!r}, 'name': 'victim', 'label': 'victim', 'human': False}}))\n")
    monkeypatch.setattr(unpacker, "confined", lambda argv, *_: argv)  # the answer is the server's to check
    monkeypatch.setattr(unpacker, "WORKER", [sys.executable, "-c", hostile])
    with pytest.raises(UnpackerLost, match="outside the upload's"):
        trio.run(lambda: unpacker.unpack_apart(zip_bytes({"bot.toml": MANIFEST}), dest, **LIMITS))


@pytest.mark.parametrize("said", ['{"root": 5}', '{"errno": "x", "strerror": 1}',
                                  '{"root": "DEST", "name": 1, "label": [], "human": "no"}'])
def test_an_upload_workers_answer_of_the_wrong_types_is_no_answer(tmp_path: Path, said: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker's answer is JSON the server read by its keys alone: ``{"root": 5}`` raised a
    TypeError inside the upload's request and ``{"errno": "x"}`` a ValueError, tracebacks where the
    worker's loss is meant (the arena failed, said so, nothing kept). Now an answer whose fields are
    not of their types is no answer. Planted (keys alone): TypeError, ValueError, and a bot named
    ``1``, labelled ``[]``, taken as it came."""
    import sys

    import trio

    from arena.serve import unpacker
    from arena.serve.unpacker import UnpackerLost
    from tests.test_serve import LIMITS, MANIFEST, zip_bytes
    hostile = ("import json, sys\nheader = json.loads(sys.stdin.buffer.readline())\n"
               f"sys.stdin.buffer.read(header['size'])\nprint({said.replace('DEST', str(tmp_path / 'job'))!r})\n")
    monkeypatch.setattr(unpacker, "confined", lambda argv, *_: argv)  # the answer is the server's to check
    monkeypatch.setattr(unpacker, "WORKER", [sys.executable, "-c", hostile])
    with pytest.raises(UnpackerLost):
        trio.run(lambda: unpacker.unpack_apart(zip_bytes({"bot.toml": MANIFEST}), tmp_path / "job", **LIMITS))


# -- what a confined upload worker may use: processes, memory, bytes -------------------------------

GREEDY = """\
import json, os, sys
header = json.loads(sys.stdin.buffer.readline())
sys.stdin.buffer.read(header["size"])
found = {}
try:
    hog = bytearray(3 << 30)
    found["memory"] = len(hog)
    del hog
except MemoryError:
    found["memory"] = 0
def fill(path, cap):
    done = 0
    try:
        with open(path, "wb") as f:
            while done < cap:
                f.write(b"x" * (1 << 20))
                done += 1 << 20
    except OSError:
        pass
    try:
        os.unlink(path)
    except OSError:
        pass
    return done
found["big_file"] = fill("big", 64 << 20)
def fill_many(folder, cap):
    done = 0
    try:
        while done < cap:
            with open(os.path.join(folder, "f%d" % done), "wb") as f:
                f.write(b"x" * (1 << 20))
            done += 1 << 20
    except OSError:
        pass
    return done
found["tmp"] = fill_many("/tmp", 256 << 20)
found["hidden"] = fill_many(os.path.dirname(os.getcwd()), 256 << 20)
print(json.dumps({"refused": json.dumps(found)}), flush=True)
"""


def test_a_confined_upload_worker_is_bounded_in_memory_and_bytes(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Code run by a hostile archive in its worker (a decompressor's bug) allocates and writes as much
    as it may before its 60 s are up. It ran with the server's own limits: 3 GiB of memory, a 64 MiB
    file where an upload's whole bot may be 1 MiB, and 256 MiB in a tmpfs of its view (memory that
    nobody counts). Now each is bounded: the memory a reading needs, files no bigger than an upload
    may hold, and small tmpfs. (Its processes and its files' number and total:
    tests/test_stranger_attacks10.py.)"""
    import json
    import sys

    import trio

    from arena.serve import unpacker
    from arena.serve.upload import UploadError
    from tests.test_serve import LIMITS, MANIFEST, zip_bytes
    bwrap_or_skip()
    monkeypatch.setattr(unpacker, "WORKER", [sys.executable, "-c", GREEDY])
    dest = tmp_path / "uploads" / "job"
    dest.parent.mkdir()
    with pytest.raises(UploadError) as answered:  # the figures, answered as a refusal
        trio.run(lambda: unpacker.unpack_apart(zip_bytes({"bot.toml": MANIFEST}), dest, **LIMITS))
    found = json.loads(str(answered.value))
    assert found["memory"] == 0, found
    assert found["big_file"] <= LIMITS["max_bytes"], found
    assert found["tmp"] <= unpacker.WORKER_LIMITS.tmp_bytes and found["hidden"] <= unpacker.WORKER_LIMITS.tmp_bytes, found


def test_an_upload_worker_leaves_no_process_of_its_own_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Seen on a class night: the server gathered a zombie ``bwrap`` for every upload (42 during
    twenty uploads). The server is a subreaper (its referee's registry makes it one, so a bot that
    double-forks comes back to it); bubblewrap's own init, inside the worker's pid namespace, is
    a child of the worker's outer ``bwrap``, and when that one is killed after the answer, the
    inner one comes to the server and dies there, and nobody waited for it. Over a season that is
    a process table filled with zombies. Now each worker's whole tree is ended and reaped before
    the upload's answer returns, and the server's one try of bubblewrap (run here afresh) leaves
    none either: no child of this process is left of any worker."""
    import trio

    from arena.bots.procs import scan_procs, set_child_subreaper
    from arena.serve import unpacker
    from tests.test_serve import LIMITS, MANIFEST, zip_bytes
    bwrap_or_skip()
    monkeypatch.setattr(unpacker, "_bwrap_runs", {})  # the first upload tries bubblewrap here,
    monkeypatch.setattr(unpacker, "passed_here", lambda question, ran_through, trial: trial())  # not from a note
    assert set_child_subreaper()
    me = os.getpid()
    ours_before = {p for p, i in scan_procs().items() if i.ppid == me}
    uploads = tmp_path / "uploads"
    uploads.mkdir()
    for n in range(2):
        got = trio.run(lambda: unpacker.unpack_apart(zip_bytes({"bot.toml": MANIFEST, "bot.py": b""}),
                                                     uploads / f"job{n}", **LIMITS))
        assert got.name == "upl"
        left = {p: i.state for p, i in scan_procs().items() if i.ppid == me and p not in ours_before}
        assert left == {}, f"upload {n}: children left of its worker {left}"
