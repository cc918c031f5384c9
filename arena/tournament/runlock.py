"""One run of a tournament per store at a time.

Two ``arena tournament`` runs of the same tournament in the same store would
both see the same games missing and both play them (the store keeps the first
copy, so the second run's work is wasted and the two compete for the cores).
The first run takes an exclusive POSIX record lock (``lockf``) on a small file
beside the store; the second is refused with the holder's pid, command and start
time. The kernel drops the lock when its holder exits, however it exits (``kill -9``
included), so a killed run never blocks the resume. The same fact tells a reader (the web
overview) whether a tournament marked running still has a runner: :func:`held`.

Why a record lock and not ``flock``: a ``flock`` belongs to the open file, which every
``fork`` shares, so a bot's start caught between its fork and its exec when the run is
killed held a dead run's lock (the overview said "playing" for a moment after ``kill -9``).
A record lock belongs to the process alone; no child ever holds it. Its one trap, that
closing *any* descriptor of the file drops the process's lock, is why a second run in the
same process is refused from :data:`_HELD_HERE` before the file is opened.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import ArenaError


class LockHeld(ArenaError, RuntimeError):
    """Another process is playing this tournament on this store; the message names it."""


_HELD_HERE: dict[Path, dict] = {}  # this process's held locks: path -> what _holder would read
_HERE_GUARD = threading.Lock()


def lock_path(store: Path, name: str) -> Path:
    """Beside the store, one file per tournament (its name hashed: names may hold any character)."""
    digest = hashlib.sha256(name.encode()).hexdigest()[:16]
    return store.with_name(f".{store.name}.{digest}.lock")


@contextmanager
def tournament_lock(store: str | Path, name: str) -> Iterator[None]:
    path = lock_path(Path(store), name)
    me = {"pid": os.getpid(), "argv": sys.argv, "started": time.time()}
    with _HERE_GUARD:
        if path in _HELD_HERE:  # opening the file here would drop the holder's lock on close
            raise _busy(name, store, _describe(_HELD_HERE[path]))
        _HELD_HERE[path] = me
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                raise _busy(name, store, _holder(fd)) from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(me).encode(), 0)
            yield
        finally:
            os.close(fd)  # releases the lock; the file stays (removing it would race a new holder)
    finally:
        with _HERE_GUARD:
            del _HELD_HERE[path]


def _busy(name: str, store: str | Path, holder: str) -> LockHeld:
    return LockHeld(f"tournament {name!r} is already being played in {store} by {holder}; wait for "
                    "it to finish (or stop it), then run this again to play what is left")


def held(store: str | Path, names: list[str]) -> set[str]:
    """Which of these tournaments some live process is playing in this store: those whose lock
    file is locked now. Read from ``/proc/locks`` (never by taking the lock, which for an instant
    would refuse a runner starting then). Where that table cannot be read, every name counts as
    held: a runner is assumed alive unless the kernel says it is gone."""
    inodes: dict[int, list[str]] = {}
    for name in names:
        try:
            inodes.setdefault(os.stat(lock_path(Path(store), name)).st_ino, []).append(name)
        except OSError:
            continue  # no lock file beside this store: nobody played it from here
    if not inodes:
        return set()
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            table = f.read()
    except OSError:
        return set(names)
    out: set[str] = set()  # matched by inode alone (overlay file systems report another device)
    for line in table.splitlines():
        fields = line.split()  # "1: POSIX  ADVISORY  WRITE 473 fe:00:5375142 0 EOF" (" -> " lines are waiters)
        if len(fields) >= 6 and fields[1] in ("POSIX", "FLOCK"):  # FLOCK: a run of an older arena
            ino = fields[5].rpartition(":")[2]
            if ino.isdigit():
                out.update(inodes.get(int(ino), ()))
    return out


def _holder(fd: int) -> str:
    try:
        return _describe(json.loads(os.pread(fd, 65536, 0) or b"{}"))
    except (ValueError, OSError):
        return "another process"


def _describe(info: dict) -> str:
    try:
        when = time.strftime("%H:%M:%S", time.localtime(info["started"]))
        command = " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(info["argv"]))
        return f"process {info['pid']} ({command[:120]}, since {when})"
    except (KeyError, TypeError, ValueError, OverflowError):
        return "another process"
