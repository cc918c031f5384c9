"""#35, a third round on the upload worker: whose uid it runs as where bubblewrap does not run it,
what bounds its files where no tmpfs of its own can be made, and what the last stop's changes
(the read-back of its tmpfs, the store's place, a gVisor seat's checked copy) still let through.

As in tests/test_stranger_attacks10.py, an attacker's program takes the upload worker's place and
answers with what it managed, as a refusal the server passes on.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.test_stranger_attacks10 import READ_JOB, _refusal, arenas_row_refused

OWNER_RIGHTS = READ_JOB + """
managed = []  # (store: the folder of the arena's store, which the attacker knows: it is set first)
for name, flags in (("secret.key", os.O_RDONLY), ("arena.sqlite", os.O_WRONLY | os.O_APPEND)):
    try:
        os.close(os.open(os.path.join(store, name), flags))
        managed.append(name)
    except OSError:
        pass
with open("/proc/self/status") as f:
    uid = [int(line.split()[1]) for line in f if line.startswith("Uid:")][0]
try:
    with open("mine", "wb") as f:  # its own folder stays its to write
        f.write(b"x")
    wrote = True
except OSError:
    wrote = False
answer({"managed": managed, "uid": uid, "wrote": wrote})
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="a root server's worker needs a root test")
def test_a_root_servers_worker_without_bubblewrap_has_no_owner_rights_over_roots_files(
        monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """Without bubblewrap around it, a root server's worker gave up every capability but stayed uid
    0: the owner of every file root owns, so the owner's bits let it read the store's secret key
    (0600) and open the store's database for writing (its folders 0700, root's: an owner walks
    them), with no capability at all. On the old code: both. Now such a worker runs as a private
    uid of the arena's pool, leased for it alone, its tmpfs that uid's: the two are refused, and
    its own folder stays writable. Planted (the uid not changed): both managed, uid 0."""
    from arena.bots.uids import uid_in_pool
    from tests.test_serve import LIMITS
    from tests.test_stranger_attacks10 import _view
    _view("where bubblewrap cannot start", monkeypatch)
    if not os.access("/run", os.W_OK):
        pytest.skip("a store outside /tmp (which the worker no longer sees) is made in /run")
    store = Path(tempfile.mkdtemp(prefix="a19-arena-data-", dir="/run"))  # 0700, root's, as a store's folder is
    request.addfinalizer(lambda: shutil.rmtree(store, ignore_errors=True))
    (store / "uploads").mkdir(mode=0o700)
    for name in ("secret.key", "arena.sqlite"):
        (store / name).write_bytes(b"the arena's own")
        (store / name).chmod(0o600 if name == "secret.key" else 0o644)
    found = _refusal(monkeypatch, f"store = {str(store)!r}\n" + OWNER_RIGHTS, store / "uploads" / "job", LIMITS)
    assert found["managed"] == [] and uid_in_pool(found["uid"]) and found["wrote"], found
    assert (store / "arena.sqlite").read_bytes() == b"the arena's own"


BESIDE = READ_JOB + """
wrote = []
for d in FOLDERS:  # (set first: the folders any user may write on the server's machine)
    try:
        with open(os.path.join(d, NAME), "xb") as f:
            f.write(b"x" * 4096)
        wrote.append(d)
    except OSError:
        pass
answer({"wrote": wrote})
"""


@pytest.mark.parametrize("view", ["under bubblewrap", "where bubblewrap cannot start"])
def test_an_upload_worker_writes_nothing_on_the_host_beside_its_tmpfs(view: str, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker's folder is a bounded tmpfs, but without bubblewrap it saw the host's ``/tmp``,
    ``/var/tmp`` and ``/dev/shm``, which any user may write: there its files were bounded each
    (``RLIMIT_FSIZE``), not in number or in all, for its 60 s, and outlived it. On the old code,
    root without bubblewrap: a file in each. Now its own tmpfs is its ``/tmp`` and the others are
    covered by empty read-only ones (a root server's worker, as a private uid; a server that is not
    root covers them in its user namespace, but for a folder that holds the upload's own); under
    bubblewrap they were never there. (A private uid's files there are swept when its lease ends:
    looked for before, as they stood for the worker's 60 s.) Planted (no cover): the files land
    on the host, in all but ``/tmp``."""
    import uuid

    from arena.bots import uids
    from arena.bots.filesystem import world_writable_dirs
    from tests.test_serve import LIMITS
    from tests.test_stranger_attacks10 import _view
    _view(view, monkeypatch)
    if os.geteuid() != 0 and view != "under bubblewrap":
        pytest.skip("a root server's worker; a server that is not root: tests/test_stranger_attacks10.py")
    folders = [d for d in world_writable_dirs() if os.access(d, os.W_OK)]
    name = f"a19-{uuid.uuid4().hex}"
    (tmp_path / "uploads").mkdir()
    landed: list[str] = []

    def look(folders_then: list[str] = folders) -> None:
        landed.extend(d for d in folders_then if os.path.lexists(os.path.join(d, name)) and d not in landed)
    real_sweep = uids.sweep_uid_files

    def swept(uid: int) -> None:  # a private uid's files there are swept when its lease ends: looked at first
        look()
        real_sweep(uid)
    monkeypatch.setattr(uids, "sweep_uid_files", swept)
    try:
        found = _refusal(monkeypatch, f"FOLDERS, NAME = {folders!r}, {name!r}\n" + BESIDE,
                         tmp_path / "uploads" / "job", LIMITS)
        look()
    finally:
        for d in folders:
            if os.path.lexists(os.path.join(d, name)):
                os.unlink(os.path.join(d, name))
    assert landed == [], (landed, found)


@pytest.mark.skipif(os.geteuid() != 0, reason="acting as another user needs a root test")
def test_the_worker_of_a_server_that_is_not_root_writes_nothing_beside_its_tmpfs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same, on a server of uid 4242 without bubblewrap: its worker writes as that uid, and the
    host's folders any user may write were open to it. Now covered in its user namespace. On the
    code before: a file in each. Planted (no cover): the same."""
    import uuid

    from arena.bots.filesystem import world_writable_dirs
    from tests.test_stranger_attacks10 import _upload_as_eve
    folders = [d for d in world_writable_dirs() if os.access(d, os.W_OK)]
    name = f"a19-{uuid.uuid4().hex}"
    try:  # her server's folder is made in /tmp, which is then left to her worker
        found, home = _upload_as_eve(monkeypatch, f"FOLDERS, NAME = {folders!r}, {name!r}\n" + BESIDE, "a19-eve-")
        landed = [d for d in folders if os.path.lexists(os.path.join(d, name))]
    finally:
        for d in folders:
            if os.path.lexists(os.path.join(d, name)):
                os.unlink(os.path.join(d, name))
    assert landed == [d for d in folders if str(home).startswith(d + "/")] and found["wrote"] == landed, (landed, found)


def test_a_worker_killed_before_the_server_holds_its_tmpfs_is_lost_as_killed(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker killed (out of memory, or by an operator) between its start and the server's open of
    its tmpfs: ``/proc/<pid>/root`` of a dead process cannot be opened, and the upload was lost as
    "the unpacking process's folder is not its own", an attack's words, where the worker was
    killed. (``test_uploads.py``'s killed-worker test failed once here at load 10 with a 500 whose
    words its message did not show; this window, the server stopped just before that open, is one
    that gives that failure; its message now shows the page's error.) Now it is lost as killed,
    naming the signal. Planted (the old words): fails."""
    import signal

    import trio

    from arena.bots.namespaces import PrivateSpace
    from arena.serve import unpacker
    from tests.test_serve import LIMITS, MANIFEST, zip_bytes
    real = PrivateSpace.open_root

    def killed_first(self: PrivateSpace, pid: int) -> int:
        os.kill(pid, signal.SIGKILL)
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # a zombie now, as after the kill
        return real(self, pid)
    monkeypatch.setattr(PrivateSpace, "open_root", killed_first)
    (tmp_path / "uploads").mkdir()
    with pytest.raises(unpacker.UnpackerLost, match=r"stopped \(SIGKILL\)"):
        trio.run(lambda: unpacker.unpack_apart(zip_bytes({"bot.toml": MANIFEST}), tmp_path / "uploads" / "job", **LIMITS))


CALLER = READ_JOB + """
import socket
reached = []
for name in NAMES:  # (set first: abstract UNIX sockets that processes of the host listen on)
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(name)
        s.sendall(b"a hand")
        reached.append(name.decode(errors="replace").lstrip("\\0"))
    except OSError:
        pass
answer({"reached": reached})
"""


@pytest.mark.parametrize("view", ["under bubblewrap", "where bubblewrap cannot start"])
def test_an_upload_worker_reaches_no_socket_of_the_host(view: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker's filter refuses every socket but a UNIX one, and without bubblewrap it shared the
    server's network namespace: it could connect to any abstract UNIX socket on the host (a
    confederate's, a desktop's bus), and pass it what it read or a descriptor of its own tmpfs,
    which a live process outside could then change while the server reads it back. On the old
    code, without bubblewrap: the test's listener reached, and its bytes received. Now its
    namespace (:class:`PrivateSpace`) has a network and IPC namespace of its own, as bubblewrap's
    has. Planted (no network namespace): reached."""
    import socket
    import uuid

    from tests.test_serve import LIMITS
    from tests.test_stranger_attacks10 import _view
    _view(view, monkeypatch)
    name = f"\0a19-{uuid.uuid4().hex}".encode()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(name)
        listener.listen(4)
        listener.setblocking(False)
        (tmp_path / "uploads").mkdir()
        found = _refusal(monkeypatch, f"NAMES = [{name!r}]\n" + CALLER, tmp_path / "uploads" / "job", LIMITS)
        try:
            conn, _ = listener.accept()
            got = conn.recv(64)
            conn.close()
        except BlockingIOError:
            got = b""
    finally:
        listener.close()
    assert found["reached"] == [] and got == b"", (found, got)


@pytest.mark.skipif(os.geteuid() != 0, reason="a gVisor seat needs a root referee and a private uid")
def test_a_gvisor_seat_whose_copy_fails_midway_is_not_served_the_live_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """A gVisor seat's own copy is checked against the run's files hash, but a copy that met an
    OSError was dropped and the seat served from the author's folder itself, unchecked ("the
    system refused the copy"). The author chooses that error: a file removed between the copy's
    listing of its folder and its open (a loop that makes and removes one, say in ``node_modules``)
    is ENOENT. With ``bot.py`` edited after the run read the bot, on the old code: ``cheat``
    served. Now an entry that vanishes or turns into something else during the copy is the bot's
    refusal, named, and where the system refuses a checked copy (a full disk) the seat does not
    start (the arena's failure, not the bot's): no seat is served a folder nobody checked. (A seat
    a launcher plans copies the arena's own copy of the bot since attack20, which its author cannot
    write: the copy is made from the author's folder here, as a direct start would.) Planted (the
    old fall-back): ``cheat`` served."""
    import errno

    from arena.bots import gvisor
    from arena.bots.errors import BotCommandError
    from tests.test_stranger_attacks11 import gvisor_plan_on_fake_runsc
    home = Path(tempfile.mkdtemp(prefix="a19-author-"))  # a folder the seat's private uid can reach
    request.addfinalizer(lambda: shutil.rmtree(home, ignore_errors=True))
    from arena.bots.filesystem import open_bot_dir
    bot = home / "bot"
    bot.mkdir(parents=True)
    (bot / "bot.toml").write_text('name = "racer"\nversion = "1.0"\ncommand = ["python3", "bot.py"]\n')
    (bot / "bot.py").write_text("honest\n")
    checked = gvisor_plan_on_fake_runsc(bot, tmp_path, monkeypatch)[2]
    (bot / "node_modules").mkdir()  # the author, after the check
    vanish = bot / "node_modules" / "vanish"
    vanish.write_text("")
    (bot / "bot.py").write_text("cheat\n")
    real_scandir = os.scandir

    class Listed(list):  # what os.scandir gives, read whole (with it, as shutil uses it)
        def __enter__(self) -> "Listed":
            return self

        def __exit__(self, *exc: object) -> None:
            pass

    def listed_then_removed(path: object = ".") -> object:  # the author's loop, winning once
        if not isinstance(path, int):
            return real_scandir(path)  # type: ignore[arg-type]
        with real_scandir(path) as it:
            entries = Listed(it)
        if any(e.name == "vanish" for e in entries) and vanish.exists():
            vanish.unlink()
        return entries
    monkeypatch.setattr(os, "scandir", listed_then_removed)
    served, refused = None, ""
    fd = open_bot_dir(bot)
    try:
        (tmp_path / "raced").mkdir()
        served = gvisor.own_copy(fd, tmp_path / "raced", checked)
    except BotCommandError as e:
        refused = str(e)
    finally:
        os.close(fd)
    assert served is None and "'node_modules/vanish'" in refused and "changed" in refused, (served, refused)
    monkeypatch.setattr(os, "scandir", real_scandir)
    from arena.bots.errors import BotStartError

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(os, "sendfile", full)
    fd = open_bot_dir(bot)
    try:
        (tmp_path / "seat").mkdir()
        with pytest.raises(BotStartError) as voided:  # a full disk: the arena's failure, never the live folder
            gvisor.own_copy(fd, tmp_path / "seat", checked)
        assert not isinstance(voided.value, BotCommandError) and list((tmp_path / "seat").iterdir()) == []
    finally:
        os.close(fd)


# -- the store's place: a link on the way ----------------------------------------------------------

@pytest.mark.skipif(os.geteuid() != 0, reason="another user's links and moves need a root test")
def test_a_store_reached_through_another_users_link_is_refused_before_she_repoints_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``games.check_store_place`` checks every folder above the store as spelled and as resolved,
    by ``stat``, which follows a link: a link on the way was judged by its target alone. In a
    sticky folder every user may write (``/tmp``, ``/srv`` made sticky), Eve may not move what is
    others', but a link she made stays hers to replace: ``srv/data`` -> a folder of the arena's
    passed the check, and between the check and the next open she pointed it at a folder of hers
    with a store of hers, where the server's row went. On the old code: the row in her file. Now
    every link the path passes through, as the kernel resolves it (``..`` after a link included),
    must be root's or this user's, as every folder on the way must be. Planted (links judged by
    their targets): her file holds the row."""
    import sqlite3

    from arena.serve import auth
    from arena.tournament.store import Store
    from tests.test_stranger_attacks10 import EVE, _as_eve
    srv = tmp_path / "srv"
    srv.mkdir()
    os.chmod(srv, 0o1777)
    real = tmp_path / "real"
    Store(real / "arena.sqlite").close()  # the arena's own folder and store, where the link leads first
    hers = srv / "eve-data"
    Store(tmp_path / "made" / "arena.sqlite").close()  # a store of her own
    (tmp_path / "made").rename(hers)
    for p in (hers, *hers.iterdir()):
        os.chown(p, EVE, EVE)

    def link() -> int:
        os.symlink(str(real), "data")
        return 0
    assert _as_eve(link, srv) == 0
    store = srv / "data" / "arena.sqlite"
    connect = auth.connect

    def repointed_meanwhile(path: Path):  # Eve, between the server's check and its open
        def repoint() -> int:
            os.symlink("eve-data", "data.new")
            os.rename("data.new", "data")
            return 0
        if os.readlink(srv / "data") != "eve-data":
            assert _as_eve(repoint, srv) == 0, "Eve could not replace her own link"
        return connect(path)
    monkeypatch.setattr(auth, "connect", repointed_meanwhile)
    refused = arenas_row_refused(store)
    her_db = sqlite3.connect(hers / "arena.sqlite")
    try:
        rows = her_db.execute("SELECT id FROM tournaments").fetchall()
    finally:
        her_db.close()
    assert rows == [], "the arena wrote into her store"
    assert f"{srv / 'data'}" in refused and f"uid {EVE}" in refused, refused


def test_a_gvisor_seats_copy_serves_no_compiled_python_the_run_never_read(tmp_path: Path) -> None:
    """A gVisor seat's copy is checked against the run's files hash, but the hash leaves out what
    the folder's reader skips (``__pycache__``, ``*.pyc``, build outputs), and the copy holds it.
    Python runs a ``.pyc`` written in "unchecked-hash" mode (PEP 552) without looking at its
    source: an author who put one in ``__pycache__`` after the run read the bot had its code run
    in place of the checked ``helper.py``, under the same hash (here Python run in the copy, as
    the seat's would be). On the old code: ``cheat``. Now the copy leaves out what Python would
    load instead of a source (``__pycache__`` folders, ``*.pyc`` files); the seat's Python
    compiles the checked sources. Planted (copied): ``cheat``."""
    import py_compile
    import subprocess
    import sys

    from arena.bots import gvisor
    from arena.bots.filesystem import open_bot_dir
    from arena.bots.manifest import load_bot
    bot = tmp_path / "bot"
    bot.mkdir()
    (bot / "bot.toml").write_text('name = "compiled"\nversion = "1.0"\ncommand = ["python3", "bot.py"]\n')
    (bot / "bot.py").write_text("import helper\n")
    (bot / "helper.py").write_text("print('honest')\n")
    checked = load_bot(bot).files_hash()  # the run reads it
    cheat = tmp_path / "cheat.py"
    cheat.write_text("print('cheat')\n")
    tag = sys.implementation.cache_tag
    py_compile.compile(str(cheat), cfile=str(bot / "__pycache__" / f"helper.{tag}.pyc"),
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    assert load_bot(bot).files_hash() == checked  # the hash does not see it
    fd = open_bot_dir(bot)
    try:
        (tmp_path / "seat").mkdir()
        own = gvisor.own_copy(fd, tmp_path / "seat", checked)
    finally:
        os.close(fd)
    assert own is not None
    ran = subprocess.run([sys.executable, "-B", "bot.py"], cwd=own, capture_output=True, text=True, timeout=30)
    assert ran.stdout == "honest\n" and not (own / "__pycache__").exists(), (ran.stdout, ran.stderr)


@pytest.mark.skipif(os.geteuid() != 0, reason="another user's files need a root test")
def test_a_store_in_a_folder_others_may_write_is_refused_even_when_sticky(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """``--store /tmp/club.sqlite`` was taken: the store's files are checked to be this user's at
    each open. But SQLite makes its ``-wal`` (and ``-shm``) by name at each open and removes them at
    the last close, so in a folder every user may write Eve places a ``-wal`` of hers between the
    check and SQLite's open, keeping a descriptor: SQLite uses the file it finds (as root, it then
    gives it to root, 0600, too late), and every write goes through her descriptor (here the
    server's row read back from it; with it open for writing she could as well forge frames). On
    the old code: the row in her file. Now a store's own folder may be written by nobody else,
    sticky or not (the folders above may be sticky: nothing is made by name in them). Planted
    (sticky taken, as before): the row in her file."""
    from arena.serve import auth
    from arena.tournament.store import StoreError
    from tests.test_stranger_attacks10 import EVE, _as_eve
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)  # as /tmp
    store = shared / "club.sqlite"
    held: list[int] = []
    connect = auth.connect

    def planted_meanwhile(path: Path):  # Eve, between the server's check and SQLite's open
        def plant() -> int:
            os.close(os.open("club.sqlite-wal", os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666))
            return 0
        if not held:
            assert _as_eve(plant, shared) == 0
            held.append(os.open(shared / "club.sqlite-wal", os.O_RDONLY))  # her descriptor, opened first
        return connect(path)
    monkeypatch.setattr(auth, "connect", planted_meanwhile)
    refused = ""
    try:
        db = auth.open_write(store)
        try:
            db.execute("INSERT INTO tournaments VALUES ('the-arenas-own', '{}', 1, 'running', 0, 0)")
            read = os.pread(held[0], 1 << 20, 0) if held else b""
        finally:
            db.close()
    except StoreError as e:
        refused, read = str(e), b""
    finally:
        for fd in held:
            os.close(fd)
    assert b"the-arenas-own" not in read, "her descriptor read the arena's writes"
    assert f"{shared}" in refused and "writable by others" in refused, refused
