"""#35, attack20: an outside attacker (the docs and the code, not the tests) against what the last
stop changed: the rule of every open of the store (``games.check_store_place``: who else may write
the store's folder) and a gVisor seat's own copy of its folder (``gvisor.own_copy``: its refusals).

Each test plays Eve, another local user, between the arena's check of the store's place and
SQLite's open (the check is wrapped, as the tests of tests/test_stranger_attacks12.py wrap the
open), in a child of its own mount namespace where the attack needs a mount or a users' file of
its own: nothing outlives the child.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.test_stranger_attacks10 import EVE, _as_eve

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="another user's files and a mount need a root test")


def _stores(tmp_path: Path) -> tuple[Path, bytes, dict[str, bytes]]:
    """The arena's store (in a folder of its own, one tournament, ``the-arenas-own``), and Eve's:
    her whole store file (``eves``) and, caught while her writer was open, its ``-wal`` and ``-shm``."""
    from arena.tournament.store import Store
    ours = Store(tmp_path / "ours" / "arena.sqlite")
    ours.begin_tournament("the-arenas-own", {}, 1)
    ours.close()
    hers = Store(tmp_path / "hers" / "arena.sqlite")
    hers.db.execute("PRAGMA wal_autocheckpoint=0")  # her pages stay in her -wal
    hers.begin_tournament("eves", {}, 1)
    side = {s: Path(f"{hers.path}{s}").read_bytes() for s in ("-wal", "-shm")}
    hers.close()
    return ours.path, hers.path.read_bytes(), side


READERS = ("Store(readonly=True)", "ReadStore")  # the commands' reader, the server's


def _reader_sees(store: Path, reader: str, meanwhile: Callable[[], None],
                 setup: Callable[[], None] = lambda: None) -> list[str] | str:
    """The tournaments one of the arena's :data:`READERS` lists, or the :class:`StoreError`'s words,
    in a child of a mount namespace of its own (``setup()`` run there first), where ``meanwhile()``
    runs after the check of the store's place, before SQLite opens it."""
    from arena.bots.namespaces import CLONE_NEWNS, MS_PRIVATE, MS_REC, _mount, _unshare
    from arena.serve import data
    from arena.store import games
    from arena.tournament.store import Store, StoreError
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(r)
            assert _unshare(CLONE_NEWNS) == 0 and _mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) == 0
            setup()
            check = games.check_store_place

            def then_eve(path: Path, **how: bool) -> None:
                check(path, **how)
                meanwhile()
            for module in (games, data):  # wherever a reader calls it from
                if hasattr(module, "check_store_place"):
                    module.check_store_place = then_eve
            seen: list[str] | str
            try:
                db = Store(store, readonly=True) if reader == "Store(readonly=True)" else data.ReadStore(store)
                seen = sorted(row[0] for row in db.db.execute("SELECT id FROM tournaments"))
                db.close()
            except (StoreError, sqlite3.Error) as e:
                seen = f"{type(e).__name__}: {e}"
            os.write(w, json.dumps(seen).encode())
            code = 0
        except BaseException as e:  # noqa: BLE001  said, and the child ends whatever happened
            os.write(2, f"{e!r}\n".encode())
        os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        said = f.read()
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    return json.loads(said)


def _as_eve_once(work: Callable[[], int], folder: Path, gid: int = EVE) -> Callable[[], None]:
    """``work()`` run once, at the first call, in a child as Eve (uid :data:`EVE`, group ``gid``,
    no other) in ``folder``."""
    done: list[int] = []

    def meanwhile() -> None:
        if not done:
            done.append(_as_eve(work, folder, gid))
        assert done == [0], "Eve could not do it"
    return meanwhile


@as_root
def test_a_store_on_a_read_only_bind_of_a_folder_others_write_is_read_without_their_side_files(tmp_path: Path) -> None:
    """A reader takes a store's folder others may write where its mount is read-only (a store read
    from read-only media). But read-only is a mount's flag, not the folder's: the same folder may
    be written through another mount of it (``mount --bind -o ro /srv/share /mnt/share``, an NFS
    export), and there Eve places a ``-wal`` and ``-shm`` of hers between the check and SQLite's
    open, which SQLite (``mode=ro``) read as the store's own: both readers listed her tournament in
    place of the arena's. On the old code: ``["eves"]`` twice. Now a reader opens such a store
    ``immutable``, and SQLite opens no side file. Planted (``mode=ro`` first, as before): her
    tournament listed."""
    from arena.bots.namespaces import MS_BIND, MS_RDONLY, MS_REMOUNT, _mount
    store, _, side = _stores(tmp_path)
    shared, media = tmp_path / "shared", tmp_path / "media"
    shared.mkdir()
    media.mkdir()
    shutil.copy(store, shared / "arena.sqlite")
    os.chmod(shared, 0o1777)  # sticky: she cannot move the arena's file, only add her own beside it

    def read_only_bind() -> None:
        assert _mount(bytes(shared), bytes(media), None, MS_BIND, None) == 0
        assert _mount(None, bytes(media), None, MS_BIND | MS_REMOUNT | MS_RDONLY, None) == 0

    def plant() -> int:
        for suffix, data in side.items():
            fd = os.open(f"arena.sqlite{suffix}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.write(fd, data)
            os.close(fd)
        return 0
    for reader in READERS:
        seen = _reader_sees(media / "arena.sqlite", reader, _as_eve_once(plant, shared), read_only_bind)
        for suffix in side:  # she did place them (removed for the next reader)
            assert os.stat(shared / f"arena.sqlite{suffix}").st_uid == EVE
            os.unlink(shared / f"arena.sqlite{suffix}")
        assert seen == ["the-arenas-own"], (reader, seen)


def _swap_in(eves: bytes) -> Callable[[], int]:
    """Eve's move: the arena's store renamed away, hers in its place."""
    def swap() -> int:
        os.rename("arena.sqlite", "arena.sqlite.was")
        fd = os.open("arena.sqlite", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, eves)
        os.close(fd)
        return 0
    return swap


def _swapped_back(club: Path) -> None:
    """The arena's store put back where Eve swapped it away (for the next reader)."""
    if (club / "arena.sqlite.was").exists():
        os.replace(club / "arena.sqlite.was", club / "arena.sqlite")


def _eve_can_swap(eves: bytes, club: Path, gid: int = EVE) -> None:
    """That Eve, of group ``gid``, can swap the store in ``club`` (put back after): the attack a test
    shows refused. A reader now refuses such a folder at its check, before she moves, so without
    this a test would pass as well where she could not move at all (her group not what it says)."""
    try:
        assert _as_eve(_swap_in(eves), club, gid) == 0, f"Eve (group {gid}) could not swap the store in {club}"
    finally:
        _swapped_back(club)


def _roots_group_looks_private() -> None:
    import grp
    if grp.getgrgid(0).gr_name != "root" or grp.getgrgid(0).gr_mem:
        pytest.skip("root's group here is not root's alone: its folders' group bits are counted as others' already")


ACL_USER_OBJ, ACL_USER, ACL_GROUP_OBJ, ACL_MASK, ACL_OTHER = 0x01, 0x02, 0x04, 0x10, 0x20


def _acl(*entries: tuple[int, int, int]) -> bytes:
    """A POSIX access ACL as the kernel reads ``system.posix_acl_access`` (version 2; tag, perm, id)."""
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", tag, perm, uid) for tag, perm, uid in entries)


@as_root
def test_a_store_folder_whose_acl_lets_another_user_write_is_refused(tmp_path: Path) -> None:
    """A store's folder may be group-writable where the group is its owner's own (Debian's private
    groups): the check then counts only the others' bits. But a folder with an access ACL shows the
    ACL's mask in the group's bits: ``setfacl -m u:eve:rwx club`` (root's folder, group root, 0770)
    read as private, and Eve, named in the ACL, renamed the arena's store away between the check
    and the open and put hers in its place: both readers listed her tournament. On the old code:
    ``["eves"]`` twice. Now a folder with an access ACL has its group bits counted as others'.
    Planted (the ACL not looked at): her tournament listed."""
    _roots_group_looks_private()
    store, eves, _ = _stores(tmp_path)
    club = tmp_path / "club"
    club.mkdir(mode=0o750)
    shutil.copy(store, club / "arena.sqlite")
    try:
        os.setxattr(club, "system.posix_acl_access", _acl(
            (ACL_USER_OBJ, 7, 0xFFFFFFFF), (ACL_USER, 7, EVE), (ACL_GROUP_OBJ, 5, 0xFFFFFFFF),
            (ACL_MASK, 7, 0xFFFFFFFF), (ACL_OTHER, 0, 0xFFFFFFFF)))
    except OSError as e:
        pytest.skip(f"no ACLs on this file system ({e.strerror})")
    assert os.stat(club).st_mode & 0o777 == 0o770  # the mask, shown as the group's bits
    for reader in READERS:
        seen = _reader_sees(club / "arena.sqlite", reader, _as_eve_once(_swap_in(eves), club))
        _swapped_back(club)
        assert seen != ["eves"] and f"{club}" in seen and "writable by others" in seen, (reader, seen)
    _eve_can_swap(eves, club)  # (the refusal comes before her move: that she can make it is held here)


@as_root
def test_a_store_folder_of_a_group_that_is_another_users_primary_group_is_refused(tmp_path: Path) -> None:
    """The same with no ACL: a group named as the folder's owner with no member listed was taken as
    the owner's own, but a user whose passwd entry names the group as her primary group is in it
    unlisted (``useradd -g root eve``, a group's usual way of taking in a user). Root's folder,
    group root, 0770: Eve, of primary group root, swapped the store between the check and the
    open (here her passwd line bound over ``/etc/passwd`` in the reader's own mount namespace). On
    the old code: ``["eves"]`` twice. Now a group that is another user's primary group is not the
    owner's own. Planted (primary groups not looked at): her tournament listed. The refusal comes
    before her move, so that she can make it (her group root) is held apart (:func:`_eve_can_swap`;
    planted, ``_as_eve`` ignoring the group: fails)."""
    from arena.bots.namespaces import MS_BIND, _mount
    _roots_group_looks_private()
    store, eves, _ = _stores(tmp_path)
    club = tmp_path / "club"
    club.mkdir(mode=0o770)
    os.chmod(club, 0o770)
    shutil.copy(store, club / "arena.sqlite")
    passwd = tmp_path / "passwd"
    passwd.write_text(Path("/etc/passwd").read_text() + f"eve:x:{EVE}:0:Eve:/nonexistent:/bin/sh\n")

    def eves_line() -> None:
        assert _mount(bytes(passwd), b"/etc/passwd", None, MS_BIND, None) == 0

    for reader in READERS:  # (her primary group, as a login gives it her)
        seen = _reader_sees(club / "arena.sqlite", reader, _as_eve_once(_swap_in(eves), club, gid=0), eves_line)
        _swapped_back(club)
        assert seen != ["eves"] and f"{club}" in seen and "writable by others" in seen, (reader, seen)
    _eve_can_swap(eves, club, gid=0)  # (the refusal comes before her move: that she can make it is held here)


def test_a_lease_on_a_file_of_the_bot_is_its_refusal_not_the_arenas_failure(tmp_path: Path) -> None:
    """A gVisor seat's start copies the bot's folder (``gvisor.own_copy``), opening each file
    non-blocking; a file whose owner holds a lease on it (``fcntl(F_SETLEASE, F_WRLCK)``, which any
    user may take on a file of her own and keep from a process left running) fails that open with
    EAGAIN, and the copy took it as the system's refusal: ``BotStartError``, the arena's failure, so
    the game was not stored, played again at the next run, and the run ended incomplete, as long
    as and when the author chose (one held while the opponent she fears is seated). Here on a
    checked file, taken after the run read the bot. (Since attack20b a seat's copy is made from the
    arena's own copy of the bot, whose files no author may lease; this drives ``own_copy`` over a
    folder the lessee owns, the layer below.) On the old code: ``BotStartError`` (not the bot's). Now the bot's refusal, naming the file, as for an
    entry that vanished. Planted (EAGAIN not taken): the old ``BotStartError``."""
    import fcntl
    import signal
    import time

    from arena.bots import gvisor
    from arena.bots.errors import BotCommandError, BotStartError
    from arena.bots.filesystem import open_bot_dir
    from arena.bots.manifest import load_bot
    bot = tmp_path / "bot"
    (bot / "lib").mkdir(parents=True)
    (bot / "bot.toml").write_text('name = "leased"\nversion = "1.0"\ncommand = ["python3", "bot.py"]\n')
    (bot / "bot.py").write_text("print('hello')\n")
    (bot / "lib" / "held.py").write_text("x = 1\n")
    checked = load_bot(bot).files_hash()  # the run reads it
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the author's process, holding a lease on her file for as long as it lives
        try:
            signal.signal(signal.SIGIO, signal.SIG_IGN)  # (a lease's holder is told of each open)
            fd = os.open(bot / "lib" / "held.py", os.O_RDONLY)
            fcntl.fcntl(fd, getattr(fcntl, "F_SETLEASE", 1024), fcntl.F_WRLCK)
            os.write(ready_w, b"!")
            time.sleep(60)
        finally:
            os._exit(0)
    os.close(ready_w)
    fd = open_bot_dir(bot)
    try:
        assert os.read(ready_r, 1) == b"!", "no lease could be taken here"
        (tmp_path / "seat").mkdir()
        with pytest.raises(BotStartError) as start:
            gvisor.own_copy(fd, tmp_path / "seat", checked)
    finally:
        os.close(fd)
        os.close(ready_r)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    assert isinstance(start.value, BotCommandError), start.value  # the bot's doing: it forfeits
    assert "lib/held.py" in str(start.value) and "lease" in str(start.value), start.value
    assert not (tmp_path / "seat" / "own").exists()


@pytest.mark.parametrize("carried", ["127.0.0.1", "169.254.169.254", "10.0.0.1"])
def test_a_webhook_may_not_reach_a_private_address_carried_in_an_ipv6_one(carried: str) -> None:
    """A member's webhook may not reach this machine or a private network: the address connected
    to must be ``is_global``. But an IPv6 address may carry an IPv4 one for a translator or a
    tunnel, and Python takes most of them as global: NAT64's ``64:ff9b::a9fe:a9fe`` (on an
    IPv6-only host with a NAT64 gateway, an IPv6-only cloud's, the metadata service at
    169.254.169.254), 6to4's ``2002:a9fe:a9fe::1``, the IPv4-compatible ``::169.254.169.254``. On
    the old code each passed the check and was connected to (here no gateway: no route, or the
    1 s timeout). Now the IPv4 address such an address carries must be global too. Planted
    (``is_global`` alone): not refused."""
    import ipaddress

    from arena.serve.notify import Refused, post
    from arena.store.notes import Delivery
    v4 = int(ipaddress.IPv4Address(carried))
    for address in (ipaddress.IPv6Address(int(ipaddress.IPv6Address("64:ff9b::")) | v4),
                    ipaddress.IPv6Address((0x2002 << 112) | (v4 << 80) | 1), ipaddress.IPv6Address(v4)):
        with pytest.raises(Refused, match="this machine or a private network"):
            post(Delivery(1, f"http://[{address}]:9/hook", "{}", "k", 0), allow_local=False, now=1.0, timeout_s=1.0)


def test_a_webhook_receiver_that_answers_a_byte_at_a_time_holds_the_deliverer_no_longer_than_its_timeout() -> None:
    """Deliveries are posted one after another by the server's one deliverer, ``--webhook-timeout``
    each (docs/CLUB.md). But the timeout was the socket's, for each read: a member's receiver that
    answers a byte every half second never lets one read wait that long, and kept the deliverer
    (every other person's deliveries with it) for as long as it liked. Here a receiver that never
    stops, and ``post`` with a 1 s timeout in a thread given 30 s. On the old code: still posting
    at 30 s. Now the whole exchange has the timeout: ``TimeoutError`` saying so. Planted (the
    deadline not set): still posting."""
    import socket
    import threading

    from arena.serve.notify import post
    from arena.store.notes import Delivery
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def trickle() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\n")
            while not stop.wait(0.2):
                try:
                    conn.sendall(b"X")  # one endless header line, a byte at a time
                except OSError:
                    return
    receiver = threading.Thread(target=trickle, daemon=True)
    receiver.start()
    ended: list[BaseException | int] = []

    def deliver() -> None:
        try:
            ended.append(post(Delivery(1, f"http://127.0.0.1:{listener.getsockname()[1]}/hook", "{}", "k", 0),
                              allow_local=True, now=1.0, timeout_s=1.0))
        except BaseException as e:  # noqa: BLE001  what it ended with is the answer
            ended.append(e)
    deliverer = threading.Thread(target=deliver, daemon=True)
    deliverer.start()
    try:
        deliverer.join(30)
        assert ended, "the delivery was still being posted after 30 s"
        assert isinstance(ended[0], TimeoutError) and "within 1 s" in str(ended[0]), ended
    finally:
        stop.set()
        listener.close()
        receiver.join(5)
