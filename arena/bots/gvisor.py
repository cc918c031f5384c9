"""The containment that shares no kernel with the host: gVisor (``runsc``), started with ``runsc run``
on an OCI bundle the arena writes for each bot.

The bot's system calls are served by gVisor's own kernel, so the counters the host kernel shares
between namespaces (inode numbers, autogroup ids, ``/proc`` files) are not the host's. The host side
is ``runsc`` and the sandbox and gofer processes it forks: they run in the bot's cgroup, so the
arena measures and kills them as one tree, like any bot. Where runsc cannot run, the mode is
refused with runsc's own reason; nothing weaker is put in its place.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
from pathlib import Path
from typing import Sequence

from ..limits import Limits, MiB
from . import pagecache
from .errors import BotCommandError, BotStartError
from .folder import CAPS, Caps, FolderError, read_folder
from .filesystem import SANDBOX_ROOT_DIRS, STRANGER_SYSTEM, MissingSystemPath, SystemViewError, stranger_system
from .namespaces import (CLONE_NEWNS, MS_BIND, MS_NODEV, MS_NOSUID, MS_PRIVATE, MS_RDONLY, MS_REC, MS_REMOUNT,
                         _check, _mount, _unshare)


RUNSC: str | None = None
"""Path of runsc; None means look it up on PATH (and /usr/bin). Tests point it at a fake."""

RUNSC_FLAGS = ("--network=none", "--ignore-cgroups")
"""No network stack at all; the arena's own cgroup (which runsc and its sandbox inherit) does the
accounting and the killing, so runsc is told not to make cgroups of its own."""

HOST_THREADS = 256
"""Threads of runsc, its sandbox and gofer (Go runtimes) counted by the bot's pids cgroup on top
of the bot's own ``max_processes``, besides :data:`THREADS_PER_BIND`; the bot's processes live
inside gVisor and are capped there by RLIMIT_NPROC."""

THREADS_PER_BIND = 8
"""Host threads allowed per bind of the seat's view: the gofer serves each with threads of its own
(about 4 each measured: 158 runsc threads with the base view's 34 binds, 278 with 30 more)."""


def host_threads(system: Sequence[str], ro_binds: Sequence[Path]) -> int:
    """What the seat's pids cgroup allows runsc on top of the bot's own processes: the base, and
    :data:`THREADS_PER_BIND` for each bind of its view (the system view, its folder, ``ro_binds``).
    A view that cannot be made counts as the base view; :func:`write_bundle` then says why."""
    try:
        binds = len(stranger_system((*STRANGER_SYSTEM, *system))[1])
    except (MissingSystemPath, SystemViewError):
        binds = 0
    return HOST_THREADS + THREADS_PER_BIND * (binds + 1 + len(ro_binds))


def find_runsc() -> str | None:
    """The runsc binary: ``RUNSC`` if set, else the one on PATH."""
    if RUNSC is not None:
        return RUNSC if os.path.isfile(RUNSC) and os.access(RUNSC, os.X_OK) else None
    return shutil.which("runsc") or shutil.which("runsc", path="/usr/bin:/bin")


def runsc_argv(runsc: str, state: Path, bundle: Path, container: str) -> list[str]:
    """The host command that runs a bundle in the foreground, its stdio the bot's."""
    return [runsc, *RUNSC_FLAGS, f"--root={state}", "run", "--bundle", str(bundle), container]


def checked_folder(where: Path) -> Path:
    """Where, in runsc's own mount namespace, the bot's checked folder is bound (:func:`bind_checked`):
    below the bot's root-only state directory, so nobody else can put anything in its place."""
    return where / "folder"


_KEPT_FLAGS = ((os.ST_NOEXEC, 8), (os.ST_NOATIME, 1024), (os.ST_NODIRATIME, 2048), (os.ST_RELATIME, 1 << 21))
"""statvfs flags of a mount and the mount flags that keep them on a remount (MS_NOEXEC, MS_NOATIME,
MS_NODIRATIME, MS_RELATIME): a container's user namespace locks them, and a remount that changed
them would be refused."""
MS_STRICTATIME = 1 << 24


def bind_checked(cwd_fd: int, where: Path, shared: Sequence[tuple[bytes, int]] = (), own: bytes | None = None) -> None:
    """In the forked child, before it becomes runsc: a mount namespace of its own (which runsc and
    its gofer inherit, and which ends with them) with the directory ``cwd_fd`` holds, the one the
    referee checked, bound at :func:`checked_folder`. The bundle names that path as the bot folder's
    source, so a folder swapped for a link after its check is not what gVisor serves. Each of the
    ``shared`` paths (:func:`shared_binds`: path and the flags its mount keeps) is bound on itself
    read-only: gVisor reads them through the host's files, and a read that moved a file's access
    time, which every seat can stat, would be a channel (a day-old time under relatime, every
    read under strictatime); the kernel moves no access time through a read-only mount. ``own``:
    the seat's own copy of the checked folder (:func:`own_copy`), bound in its place. Only
    system calls: it runs between fork and exec."""
    target = str(checked_folder(where)).encode()
    os.fchdir(cwd_fd)  # unshare keeps the working directory: "." is then the checked directory
    _check(_unshare(CLONE_NEWNS), "unshare mount")
    _check(_mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
    _check(_mount(own or b".", target, None, MS_BIND | MS_REC, None), "bind the checked folder")
    for path, kept in shared:
        _check(_mount(path, path, None, MS_BIND | MS_REC, None), "bind a shared path")
        _check(_mount(b"none", path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | kept, None),
               "remount a shared path read-only")
    os.chdir(where)


def shared_binds(bundle: Path, own_copy: Path | None = None) -> tuple[tuple[bytes, int], ...]:
    """The host paths of ``bundle``'s read-only binds, each with the flags its mount has that a
    remount must keep (:data:`_KEPT_FLAGS`), for :func:`bind_checked`: the system view and the
    arena package, which other seats see too, and the bot's own folder (its bind at
    :func:`checked_folder`, whose flags are those of the mount it comes from: ``own_copy``'s, or
    the folder's) unless the bundle makes it writable (a build): every process of one bot in a run
    is served from the same copy of its folder, so a read there moved a time its other processes
    could stat."""
    mounts = json.loads((bundle / "config.json").read_text())["mounts"]
    own = str(checked_folder(bundle.parent))
    out = []
    for m in mounts:
        if m["type"] == "bind" and (m["source"] != own or "ro" in m.get("options", ())):
            have = os.statvfs(m["source"] if m["source"] != own else own_copy or m["destination"]).f_flag
            kept = sum(flag for st, flag in _KEPT_FLAGS if have & st)
            if not have & (os.ST_NOATIME | os.ST_RELATIME):
                kept |= MS_STRICTATIME
            out.append((m["source"].encode(), kept))
    return tuple(out)


def write_bundle(where: Path, argv: Sequence[str], cwd: Path, *, uid: int, env: dict[str, str],
                 limits: Limits, ro_binds: Sequence[Path] = (), writable_cwd: bool = False,
                 system: Sequence[str] = ()) -> Path:
    """An OCI bundle in ``where/bundle``: an empty read-only root with the small system view of
    :func:`~.filesystem.stranger_system` and the run's extra ``system`` paths (checked by
    :func:`~.filesystem.system_paths`; every page of it warmed into the host's cache first),
    the bot's directory (from :func:`checked_folder`) and ``ro_binds`` bound read-only at their host
    paths, a private /tmp, no network, ``uid`` as user, the limits as rlimits and no new privileges.
    Returns its path."""
    checked_folder(where).mkdir(mode=0o700)
    bundle = where / "bundle"
    rootfs = bundle / "rootfs"
    rootfs.mkdir(parents=True)
    mounts = [{"destination": "/proc", "type": "proc", "source": "proc"},
              {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs",
               "options": ["nosuid", "nodev", f"size={limits.memory_mb * MiB}"]}]
    try:
        links, view = stranger_system((*STRANGER_SYSTEM, *system))
    except (MissingSystemPath, SystemViewError) as e:
        raise BotStartError(f"gVisor mode cannot start: {e}") from None
    exe = os.path.realpath(argv[0])
    seen = (*view, os.path.realpath(cwd), *(os.path.realpath(p) for p in ro_binds))
    if not any(exe == s or exe.startswith(s + "/") for s in seen):
        raise BotCommandError(f"{argv[0]} is not in a gVisor seat's system view (Python 3 and bash, and "
                              f"the run's system list: {', '.join(system) or 'empty'}); name its language "
                              "in the ladder's or tournament's system list (docs/SANDBOX.md)")
    for d in SANDBOX_ROOT_DIRS:
        if os.path.islink(d):
            links = ((d, os.readlink(d)), *links)
    for link, target in dict(links).items():
        (rootfs / link.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, rootfs / link.lstrip("/"))
    for part in view:
        mounts.append({**_bind(part, True), "source": seat_copy(part, where)})
        if os.path.isfile(part):  # a file's mount point is a file
            (rootfs / part.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
            (rootfs / part.lstrip("/")).touch()
    mounts.append({**_bind(str(cwd), not writable_cwd), "source": str(checked_folder(where))})
    for path in ro_binds:
        mounts.append({**_bind(str(path), True), "source": seat_copy(str(path), where)})
    # no cold page left in what every seat shares, the system and the arena package (docs/SANDBOX.md)
    pagecache.warm([*view, *map(str, ro_binds)])
    for d in ("proc", "tmp", "dev", *(m["destination"].lstrip("/") for m in mounts)):
        if not (rootfs / d).is_file():
            (rootfs / d).mkdir(parents=True, exist_ok=True)
    rlimits = [{"type": f"RLIMIT_{name}", "soft": soft, "hard": hard}
               for name, soft, hard in _rlimits(limits)]
    config = {
        "ociVersion": "1.0.2",
        "process": {"terminal": False, "user": {"uid": uid, "gid": uid}, "args": list(argv),
                    "env": [f"{k}={v}" for k, v in env.items()], "cwd": str(cwd),
                    "rlimits": rlimits, "noNewPrivileges": True,
                    "capabilities": {k: [] for k in ("bounding", "effective", "inheritable", "permitted", "ambient")}},
        "root": {"path": "rootfs", "readonly": True},
        "hostname": "bot",
        "mounts": mounts,
        "linux": {"namespaces": [{"type": t} for t in ("pid", "network", "ipc", "uts", "mount")],
                  "devices": [], "maskedPaths": [], "readonlyPaths": []},
    }
    (bundle / "config.json").write_text(json.dumps(config))
    return bundle


def seat_copy(path: str, where: Path) -> str:
    """What the seat's bind of the shared folder ``path`` serves: a tree of the seat's own below
    ``where`` (the seat's state directory) whose folders are new and whose files are hard links to
    ``path``'s (the same inodes, so the same warmed pages), or ``path`` itself for a file, or where
    no link can be made (another file system). Why: a lookup of a name a folder lacks leaves a
    negative entry in the host's dentry cache, keyed by the folder, which runsc's gofer consults
    for every seat; in a folder two seats share, one seat's lookups made the other's faster, a
    channel of 0.2-0.8 bits/s under gVisor (docs/SANDBOX.md). Folders of its own share none."""
    if os.path.islink(path) or not os.path.isdir(path):
        return path
    copy = where / "view" / path.lstrip("/")
    copy.parent.mkdir(parents=True, exist_ok=True)
    refused: list[OSError] = []

    def link(source: str, target: str) -> None:
        try:
            os.link(source, target, follow_symlinks=False)
        except OSError as e:
            refused.append(e)
            raise

    try:  # folders made anew (copystat keeps their modes), files hard-linked, links kept as links
        shutil.copytree(path, copy, symlinks=True, copy_function=link)
    except shutil.Error:
        if not refused or any(e.errno not in _NO_LINK for e in refused):
            raise
        shutil.rmtree(copy, ignore_errors=True)
        return path
    return str(copy)


def own_copy(cwd_fd: int, where: Path, files_hash: str = "", below: str = ".") -> Path | None:
    """The seat's own copy of the bot's checked folder (the directory ``cwd_fd`` holds) in
    ``where/own``: folders anew with their modes, files copied with theirs, links kept as links;
    walked by descriptors below ``cwd_fd`` without following a link, so an entry swapped for a link
    meanwhile is copied as the link it became (a link leads nowhere outside gVisor's view). Why:
    every process of one bot in a run is served from one copy of its folder, and the host's dentry
    cache keyed by that folder carried 0.2-0.5 bits/s between two of them (``bench_dentry_channel.py
    --gvisor --own``), which duplicate deals turn into the hand a process's twin held, now its
    opponent's. The files are copied, not hard-linked as :func:`seat_copy` links a shared folder's:
    a second name for one of the bot's own files makes the folder's reader refuse the bot, and a
    read of the same folder while the seat lives (another lane's check on arrival, an ``arena
    check``) refused it.

    A launcher's seat is given the arena's own copy of its bot (``launch.runnable``: the checked
    files, or the arena's build of them), which no author can write; any other folder (a direct
    start) may hold what the folder's reader never checked (build outputs, environments: its
    skipped folders) and is copied at every start, long after the check, from a folder its author
    may still be changing; so the copy is bounded by :data:`OWN_COPY` as the reader counts (a sparse file by
    its length, before a byte of it is read), and a file that grows or shrinks while it is copied is
    refused, not followed: a local author's sparse terabyte in ``node_modules`` was written out in
    zeros at every seat's start, and folders nested 1,100 deep ended the start in a RecursionError.
    What the folder holds is the bot's doing (:class:`BotCommandError`, naming the entry), an entry
    that vanished or turned into another kind while it was copied included (its author chooses
    that error: a loop that makes and removes a file), as is a file its owner holds a lease on. Where the system refuses the copy (a full
    disk): :class:`BotStartError` (the arena's failure) when the copy had to be checked
    (``files_hash`` given), for a seat is never served a folder nobody checked; otherwise None,
    with nothing left, and the seat is served from the checked folder itself. The copy is then read
    by the folder reader and must hash to ``files_hash`` (the run's reading of the bot): a folder
    its author changed after the run read it is the bot's refusal, not a new bot served under the
    old one's name. ``below``: where the bot's command runs in a folder below its root, the
    descriptor is of that root (the folder the reading is of), copied and compared whole, and the
    copy's folder at ``below`` is returned: it is served, the rest of the copy is not (a seat sees
    the folder it runs in, in every mode). It was compared with nothing: a change to the folder
    the seat was served, after the run read the bot, reached the seat."""
    dest = where / "own"
    try:
        parent = os.open(where, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            _copy_dir(cwd_fd, ".", parent, dest.name, "", [0, 0])  # (cwd_fd is an O_PATH descriptor)
        finally:
            os.close(parent)
        if files_hash:
            _same_files(dest, files_hash)
        served = dest
        for part in Path(below).parts:  # each a folder of the copy, no link on the way
            served = served / part
            if not stat.S_ISDIR(os.lstat(served).st_mode):
                raise _refused(below, "the folder the bot runs in is a link or a file in the bot's folder")
    except BotCommandError:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    except OSError as e:
        shutil.rmtree(dest, ignore_errors=True)
        if e.errno in _CHANGED:  # the folder itself, at the top
            raise _refused("", f"changed while the seat's copy was made ({e.strerror})") from None
        if files_hash:
            raise BotStartError(f"the seat's copy of the bot's folder could not be made ({e.strerror}), and a seat "
                                "is served only a copy checked against the run's reading of the bot") from None
        return None
    return served


COMPILED_DIR, COMPILED_SUFFIX = "__pycache__", ".pyc"
"""Left out of a seat's copy: compiled Python, which the files hash does not cover (the folder's
reader skips it) and which Python may run in place of a source it never looks at (a ``.pyc`` of
"unchecked-hash" mode, PEP 552, or one without a source beside it). The seat's Python compiles the
checked sources instead (its folder is read-only: in memory, at each start)."""

_CHANGED = (errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.ENXIO, errno.ESTALE)
"""What a walk meets where an entry vanished or turned into another kind after its folder was listed."""
# A file's open may also meet EAGAIN: its owner holds a lease on it (``F_SETLEASE``), which any other
# open must wait out (the lease-break time, 45 s) or, non-blocking as the copy's is, fails. The author
# chooses that too: taken as the system's failure, every game a seat of the bot was to start was
# the arena's failure (not stored, played again at the next run, the run incomplete): an author
# held one to have the games she chose (an opponent she fears) never played, or no run ever end.


OWN_COPY = Caps(files=CAPS.files + 100_000, bytes=CAPS.bytes + 1024 * MiB, depth=64, path=CAPS.path)
"""What a seat's own copy may hold: the checked folder (:data:`.folder.CAPS`) and beside it what a
build may leave (``launch.BUILD_DISK_MB`` and ``BUILD_ENTRIES``); the depth keeps the walk's
recursion and open descriptors small."""

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


def _same_files(copy: Path, files_hash: str) -> None:
    """:class:`BotCommandError` unless the folder reader reads ``copy`` as ``files_hash`` (within
    :data:`OWN_COPY`, what the copy was made under: a built bot's copy holds its build's outputs)."""
    try:
        digest = read_folder(copy, OWN_COPY).digest
    except FolderError as e:
        raise _refused("", f"the bot's files changed since the run read them ({e})") from None
    if digest != files_hash:
        raise _refused("", f"the bot's files changed since the run read them (they hash to {digest}, "
                           f"not {files_hash})")


def _refused(rel: str, why: str) -> BotCommandError:
    return BotCommandError(f"the seat's copy of the bot's folder: {rel or '.'!r}: {why}")  # (repr: names are data)


def _copy_dir(src_parent: int, src_name: str, dst_parent: int, dst_name: str, rel: str, count: list[int]) -> None:
    """:func:`own_copy`'s walk: the folder ``src_name`` below ``src_parent`` made anew as ``dst_name``
    below ``dst_parent``, its entries copied, its mode set once it is filled; ``count`` holds the
    entries and bytes copied so far, against :data:`OWN_COPY`."""
    if rel.count("/") + 1 > OWN_COPY.depth:
        raise _refused(rel, f"folders nested deeper than {OWN_COPY.depth} levels")
    os.mkdir(dst_name, 0o700, dir_fd=dst_parent)
    src = os.open(src_name, _DIR, dir_fd=src_parent)
    try:
        dst = os.open(dst_name, _DIR, dir_fd=dst_parent)
        try:
            for entry in os.scandir(src):
                path = f"{rel}/{entry.name}" if rel else entry.name
                count[0] += 1
                if count[0] > OWN_COPY.files:
                    raise _refused(path, f"more than {OWN_COPY.files} entries")
                if len(os.fsencode(path)) > OWN_COPY.path:
                    raise _refused(path[:160], f"a path longer than {OWN_COPY.path} bytes")
                if entry.name == COMPILED_DIR or entry.name.endswith(COMPILED_SUFFIX):
                    continue  # compiled Python is not served (COMPILED_DIR)
                try:
                    mode = entry.stat(follow_symlinks=False).st_mode
                    if stat.S_ISDIR(mode):
                        _copy_dir(src, entry.name, dst, entry.name, path, count)
                    elif stat.S_ISLNK(mode):
                        os.symlink(os.readlink(entry.name, dir_fd=src), entry.name, dir_fd=dst)
                    elif stat.S_ISREG(mode):
                        _copy_file(entry.name, src, dst, path, count)
                    # nothing else is a bot's (the folder's reader refused it): not copied
                except OSError as e:
                    if e.errno in _CHANGED:
                        raise _refused(path, f"changed while the seat's copy was made ({e.strerror})") from None
                    if e.errno == errno.EAGAIN:  # (a regular file's non-blocking open)
                        raise _refused(path, "held by another process (a lease: the copy's open would wait "
                                             "until it is given up)") from None
                    raise
            os.fchmod(dst, stat.S_IMODE(os.fstat(src).st_mode))
        finally:
            os.close(dst)
    finally:
        os.close(src)


def _copy_file(name: str, src: int, dst: int, rel: str, count: list[int]) -> None:
    """``name``'s bytes and mode from directory ``src`` into a new file in ``dst``: exactly the
    length it had when opened, counted first (the larger of length and blocks); a file that is no
    longer a regular file, or that shrinks or grows meanwhile, is refused."""
    fin = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=src)
    try:
        st = os.fstat(fin)
        if not stat.S_ISREG(st.st_mode):
            raise _refused(rel, "no longer a regular file (changed while the seat's copy was made)")
        count[1] += max(st.st_size, st.st_blocks * 512)
        if count[1] > OWN_COPY.bytes:
            raise _refused(rel, f"the bot's folder holds more than {OWN_COPY.bytes >> 20} MiB (this file "
                                f"is {st.st_size} bytes long; a sparse file counts by its length)")
        fout = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=dst)
        try:
            left = st.st_size
            while left and (sent := os.sendfile(fout, fin, None, min(left, 1 << 24))):
                left -= sent
            if left or os.pread(fin, 1, st.st_size):
                raise _refused(rel, "changed length while the seat's copy was made")
            os.fchmod(fout, stat.S_IMODE(st.st_mode))
        finally:
            os.close(fout)
    finally:
        os.close(fin)


_NO_LINK = (errno.EXDEV, errno.EPERM, errno.EMLINK)
"""Why a hard link cannot be made at all there: another file system, a file system without hard links,
or a file's link count at its maximum."""


def _bind(path: str, read_only: bool) -> dict:
    return {"destination": path, "type": "bind", "source": path,
            "options": ["rbind", "ro" if read_only else "rw", "nosuid", "nodev"]}


def _rlimits(limits: Limits) -> list[tuple[str, int, int]]:
    """The bot's rlimits inside gVisor: files, file size, processes, CPU (memory is the cgroup's)."""
    fsize = limits.file_size_mb * MiB
    return [("NOFILE", limits.open_files, limits.open_files), ("FSIZE", fsize, fsize),
            ("NPROC", limits.max_processes, limits.max_processes),
            ("CPU", limits.process_cpu_seconds, limits.process_cpu_seconds + 1)]

