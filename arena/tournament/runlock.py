"""One run of a tournament per store at a time.

Two ``arena tournament`` runs of the same tournament in the same store would
both see the same games missing and both play them (the store keeps the first
copy, so the second run's work is wasted and the two compete for the cores).
The first run takes an exclusive ``flock`` on a small file beside the store;
the second is refused with the holder's pid, command and start time. The
kernel drops the lock when its holder exits, however it exits (``kill -9``
included), so a killed run never blocks the resume. The same fact tells a reader (the web
overview) whether a tournament marked running still has a runner: :func:`held`.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import ArenaError


class LockHeld(ArenaError, RuntimeError):
    """Another process is playing this tournament on this store; the message names it."""


def lock_path(store: Path, name: str) -> Path:
    """Beside the store, one file per tournament (its name hashed: names may hold any character)."""
    digest = hashlib.sha256(name.encode()).hexdigest()[:16]
    return store.with_name(f".{store.name}.{digest}.lock")


@contextmanager
def tournament_lock(store: str | Path, name: str) -> Iterator[None]:
    path = lock_path(Path(store), name)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise LockHeld(f"tournament {name!r} is already being played in {store} by "
                           f"{_holder(fd)}; wait for it to finish (or stop it), then run this again "
                           "to play what is left") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "argv": sys.argv, "started": time.time()}).encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock; the file stays (removing it would race a new holder)


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
        fields = line.split()  # "1: FLOCK  ADVISORY  WRITE 473 fe:00:5375142 0 EOF" (" -> " lines are waiters)
        if len(fields) >= 6 and fields[1] == "FLOCK":
            ino = fields[5].rpartition(":")[2]
            if ino.isdigit():
                out.update(inodes.get(int(ino), ()))
    return out


def _holder(fd: int) -> str:
    try:
        info = json.loads(os.pread(fd, 65536, 0) or b"{}")
        when = time.strftime("%H:%M:%S", time.localtime(info["started"]))
        command = " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(info["argv"]))
        return f"process {info['pid']} ({command[:120]}, since {when})"
    except (ValueError, KeyError, TypeError, OSError):
        return "another process"
