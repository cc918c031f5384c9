"""Where the arena keeps its own folders on a machine, out of every other local user's reach.

A name in the shared temporary folder is any local user's to make first: a folder of hers there is
refused (she could read or change what it holds), which stopped the arena. So each folder lies
where only its user can make it: for root, the machine's ``/run`` and ``/var/cache``; for another
user, her runtime folder (``XDG_RUNTIME_DIR``) or her home. Only where none of these can be had
does a folder fall back to its old name in the temporary folder, which its caller checks as before.
"""

from __future__ import annotations

import os
import socket
import stat
import tempfile
from pathlib import Path

RUN = "run"
"""The run directory (``uids.Registry``): records of running bots, uid leases, notes. Private."""
PACKAGE = "package"
"""The copies of the arena package contained Python bots import (``launch.package_copies``)."""
CACHE = "cache"
"""The bots a worker has unpacked (``bundles.cache_root``). Private."""

MACHINE_RUN = Path("/run/palace-arena")  # root's run directory: the uid pool's leases are machine-wide
MACHINE_CACHE = Path("/var/cache/palace-arena")  # root's package copies and bot cache (on disk, not in memory)
USER_CACHE = (".cache", "palace-arena")  # below a user's home
NAMES = {RUN: "run", PACKAGE: "package", CACHE: "bots"}  # in MACHINE_CACHE or a user's USER_CACHE
TEMP_NAMES = {RUN: "palace-arena-{uid}", PACKAGE: "palace-arena-package-{uid}", CACHE: "palace-arena-cache-{uid}"}


def arena_place(what: str) -> Path:
    """Where this user's arena keeps ``what`` (:data:`RUN`, :data:`PACKAGE` or :data:`CACHE`); its
    caller makes the folder itself, with the mode it needs, in a parent only this user can write.

    Root: ``/run/palace-arena``, ``/var/cache/palace-arena/package`` and ``.../bots``; with ``/run``
    read-only, the run directory is ``/var/cache/palace-arena/run``, still one for the machine
    (every root arena must lease bot uids in one place, whatever its ``TMPDIR``). Another user: the
    run directory in ``$XDG_RUNTIME_DIR/palace-arena`` (the machine's and hers alone), else in
    ``~/.cache/palace-arena/run-<host>`` (a home may be shared by machines, and a run directory names
    one machine's processes); package copies and bot cache in ``~/.cache/palace-arena/{package,bots}``.
    A runtime folder or home another user owns or may write is passed over. Last, the temporary folder."""
    uid = os.geteuid()
    if uid == 0:
        if what == RUN and _writable(MACHINE_RUN.parent):
            return MACHINE_RUN
        if _own_folder(MACHINE_CACHE, 0o755, uid):  # 0755: bots' uids reach the package copies inside
            return MACHINE_CACHE / NAMES[what]
    else:
        runtime = os.environ.get("XDG_RUNTIME_DIR", "")
        if what == RUN and os.path.isabs(runtime) and _own_folder(Path(runtime), None, uid):
            return Path(runtime) / "palace-arena"
        home = os.path.expanduser("~")
        if os.path.isabs(home) and _own_folder(Path(home), None, uid):
            base = Path(home).joinpath(*USER_CACHE)
            if _own_folder(base.parent, 0o700, uid) and _own_folder(base, 0o700, uid):
                return base / (f"{NAMES[RUN]}-{socket.gethostname()}" if what == RUN else NAMES[what])
    return Path(tempfile.gettempdir()) / TEMP_NAMES[what].format(uid=uid)


def _writable(folder: Path) -> bool:
    return folder.is_dir() and os.access(folder, os.W_OK)


def _own_folder(path: Path, mode: int | None, uid: int) -> bool:
    """Whether ``path`` (followed, as a user's own links lead) is a folder of ``uid`` that no other
    user may write; with ``mode``, made with that mode where it is missing and its parent allows."""
    if mode is not None and not os.path.lexists(path):
        try:
            path.mkdir(mode=mode)
            os.chmod(path, mode)  # (not the umask's)
        except FileExistsError:
            pass  # made meanwhile: judged as any other
        except OSError:
            return False
    try:
        st = os.stat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == uid and not st.st_mode & 0o022
