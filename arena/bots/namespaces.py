"""Containment without bubblewrap, for a root referee: the namespaces and the root directory
a bot's forked child enters before it drops to its private uid (:class:`NamespaceRoot`).
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from .filesystem import DEVICE_LINKS, DEVICES, SystemView, contained_view, hidden_proc_entries
from .procs import prctl


_libc = ctypes.CDLL(None, use_errno=True)


CLONE_NEWNS = 0x00020000
CLONE_NEWPID = 0x20000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18

_mount = _libc.mount
_mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_mount.restype = ctypes.c_int
_umount2 = _libc.umount2
_umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_umount2.restype = ctypes.c_int
MNT_DETACH = 2
UMOUNT_NOFOLLOW = 8
PR_SET_DUMPABLE = 4
_unshare = _libc.unshare
_unshare.argtypes = [ctypes.c_int]
_unshare.restype = ctypes.c_int


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


BUILD_SPACE = ".space"
"""The folder, inside a build's temporary directory, where :func:`bounded_space` mounts its tmpfs."""


def bounded_space(top: Path, max_bytes: int, max_entries: int) -> Path | None:
    """A tmpfs of at most ``max_bytes`` and ``max_entries`` inodes mounted at ``top/.space`` (made
    here): a writable place whose bound the kernel keeps, whoever writes (a build under any
    containment, gVisor's gofer included), answering ENOSPC at the bound. A watcher polling the
    disk let a build ``fallocate`` 3 GiB past a 1 GiB bound in the milliseconds between two looks.
    Its pages are memory, charged to the writer's memory cgroup. None where this process may not
    mount (a referee that is not root): the caller keeps watching instead. Unmounted by
    :func:`release_space` (and, after a kill -9, by the stale cleanup, which detaches it first)."""
    if os.geteuid() != 0:
        return None
    space = top / BUILD_SPACE
    space.mkdir(mode=0o755)
    opts = f"size={max_bytes},nr_inodes={max_entries},mode=0755".encode()
    try:
        _check(_mount(b"tmpfs", str(space).encode(), b"tmpfs", MS_NOSUID | MS_NODEV, opts), "mount a build's tmpfs")
    except OSError:
        space.rmdir()
        return None
    return space


def space_full(space: Path) -> bool:
    """Whether a :func:`bounded_space` has no byte or inode left (a build that ran into its bound)."""
    st = os.statvfs(space)
    return st.f_bavail * st.f_frsize < (1 << 20) or st.f_favail == 0


def release_space(top: Path) -> None:
    """Detach the tmpfs of :func:`bounded_space` below ``top``, if one is mounted (its memory is
    freed once nothing uses it); nothing else. ``top`` is opened without following a link, and the
    tmpfs found through that descriptor: a dead referee's temporary directory is named in the
    temporary folder, where another local user may make one by its name once it is gone and swap
    it for a link to a live build's folder after the cleanup looked at it; followed, root detached
    that build's tmpfs."""
    try:
        fd = os.open(top, os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:  # gone, a link, or no folder: nothing of ours to release
        return
    try:
        space = f"/proc/self/fd/{fd}/{BUILD_SPACE}"
        if os.path.ismount(space):
            _umount2(space.encode(), MNT_DETACH | UMOUNT_NOFOLLOW)
    finally:
        os.close(fd)


def walkable(paths: Iterable[str]) -> tuple[list[str], list[str]]:
    """What a uid of no group (a private one) needs to reach ``paths`` (resolved): the topmost folders
    above them that others may not walk, to be covered, and the paths below those, to be bound
    again inside the covers (a path inside one already bound is not bound twice)."""
    covers: list[str] = []
    binds: list[str] = []
    for path in sorted({os.path.realpath(p) for p in paths if p and os.path.exists(p)}):
        if any(path == b or path.startswith(b + "/") for b in binds):
            continue
        parts = path.split("/")
        for i in range(2, len(parts)):
            above = "/".join(parts[:i])
            if not os.stat(above).st_mode & 0o001:
                if above not in covers:
                    covers.append(above)
                binds.append(path)
                break
    return covers, binds


def _made_below(tmp: str, paths: Iterable[str]) -> int:
    """How many folders (and files) making ``paths`` reachable adds in a tmpfs mounted at ``tmp``
    (a server's Python in ``/tmp``, as CI's is): its inodes on top of a writer's, whose bound they
    must not eat."""
    made = set()
    for path in paths:
        while path.startswith(tmp + "/"):
            made.add(path)
            path = os.path.dirname(path)
    return len(made)


PRIVATE_SPACE_DIR = b"folder"
"""The folder, inside a :class:`PrivateSpace`'s tmpfs, that is bound where the writer is told to write."""


@dataclass(frozen=True)
class PrivateSpace:
    """A tmpfs of at most ``max_bytes`` and ``max_inodes``, mounted at ``where`` in a mount namespace
    of the forked child's own, whose folder :data:`PRIVATE_SPACE_DIR` is bound over ``at``: what the
    child and its descendants write at ``at`` lands in it, bounded by the kernel, and nothing
    reaches the host's disk. Nothing is mounted on the host, so nothing outlives the child's
    namespace (a server killed meanwhile leaves no mount behind). Its owner reads it back, before
    the child is gone, through ``/proc/<child>/root`` + ``where`` (:meth:`open_root`), a descriptor
    that keeps the tmpfs alive after the namespace ends. A process that is not root mounts it in a
    user namespace of the child's own (tmpfs may be mounted there), its uid and gid mapped to
    themselves, so the child stays the same user. Computed in the parent, :meth:`enter` runs in the
    child between fork and exec and only makes system calls; the child then works in ``at``.

    :meth:`owned` plans it for a root parent whose child is to run as ``owner`` (a private uid): the
    tmpfs is then mounted over ``/tmp`` and is that uid's, the child works in its folder
    (``/tmp/folder``: a path any uid may walk, where the host's ``at`` lies below root's 0700
    folders), and the other folders every user may write (``/var/tmp``, ``/dev/shm``...) are
    covered by empty read-only ones, so that the tmpfs is the one place that uid may write. What
    it must read (its Python, say, installed below ``/root``) but lies below a folder other users
    may not walk is bound again, read-only, in an empty folder over the topmost such folder
    (:func:`walkable`): the rest of that folder stays hidden."""

    where: bytes
    at: bytes
    options: bytes
    user: tuple[bytes, bytes] | None = None  # the uid_map and gid_map lines of a process that is not root
    owner: int | None = None  # the private uid the child becomes (:meth:`owned`): the tmpfs's owner
    covered: tuple[bytes, ...] = ()  # folders any user may write, hidden by read-only empty ones (in both plans)
    reach_covers: tuple[bytes, ...] = ()  # folders others may not walk, hidden by empty walkable ones
    reach_binds: tuple[bytes, ...] = ()  # what the child reads below them, bound again in them read-only
    view_links: tuple[tuple[bytes, bytes], ...] = ()  # (target, link): the root links of a view of its own
    view_binds: tuple[bytes, ...] = ()  # all it sees of the host, read-only, in a root of its own (:meth:`rooted`)

    @classmethod
    def plan(cls, where: Path, at: Path, max_bytes: int, max_inodes: int, reads: Iterable[str] = ()) -> "PrivateSpace":
        from .filesystem import world_writable_dirs
        uid, gid = os.geteuid(), os.getegid()
        user = None if uid == 0 else (b"%d %d 1\n" % (uid, uid), b"%d %d 1\n" % (gid, gid))
        where, at = os.path.realpath(where), os.path.realpath(at)
        # a folder any user may write that holds ``where`` (a store kept in /tmp) or what the child reads
        # (a virtual environment there) stays: covering it would hide them
        kept = [where, at, *map(os.path.realpath, reads)]
        covered = [d for d in world_writable_dirs() if not any(p.startswith(d + "/") for p in kept)]
        return cls(os.fsencode(where), os.fsencode(at), f"size={max_bytes},nr_inodes={max_inodes},mode=0700".encode(),
                   user, covered=tuple(map(os.fsencode, covered)))

    @classmethod
    def owned(cls, owner: int, max_bytes: int, max_inodes: int, reach: Iterable[str] = ()) -> "PrivateSpace":
        from .filesystem import world_writable_dirs
        tmp, reach = os.path.realpath("/tmp"), list(reach)
        covers, binds = walkable(reach)
        inodes = max_inodes + _made_below(tmp, covers)
        return cls(os.fsencode(tmp), os.fsencode(tmp) + b"/" + PRIVATE_SPACE_DIR,
                   f"size={max_bytes},nr_inodes={inodes},mode=0700,uid={owner},gid={owner}".encode(),
                   owner=owner, covered=tuple(os.fsencode(d) for d in world_writable_dirs() if d != tmp and not any(
                       os.path.realpath(p).startswith(d + "/") for p in reach)),
                   reach_covers=tuple(map(os.fsencode, covers)), reach_binds=tuple(map(os.fsencode, binds)))

    @classmethod
    def rooted(cls, owner: int, max_bytes: int, max_inodes: int, links: Iterable[tuple[str, str]],
               binds: Iterable[str]) -> "PrivateSpace":
        """As :meth:`owned`, but the child sees no more of the host than ``binds`` (read-only, each at
        its own path) and the root ``links``, in a root of its own (a small tmpfs, read-only) whose
        ``/tmp`` is the tmpfs: what it needs is allowed, rather than what it must not see denied
        (the host's world-readable files, ``/home``, the host's ``/proc`` with every process's
        command line; its own is mounted by :meth:`mount_proc`).
        The root is built over the host's ``/tmp`` in the child's mount namespace (the binds are
        opened before) and entered with ``chroot``; a process sees it at ``/proc/<pid>/root``."""
        tmp = b"/tmp"
        binds = [os.path.realpath(b) for b in binds if os.path.exists(b)]
        inodes = max_inodes + _made_below("/tmp", binds)
        return cls(tmp, tmp + b"/" + PRIVATE_SPACE_DIR,
                   f"size={max_bytes},nr_inodes={inodes},mode=0700,uid={owner},gid={owner}".encode(),
                   owner=owner, view_links=tuple((os.fsencode(t), os.fsencode(k)) for t, k in links),
                   view_binds=tuple(map(os.fsencode, binds)))

    @property
    def made_here(self) -> bool:
        """Whether ``where`` is a folder its planner made for it (and removes after), not ``/tmp``."""
        return self.owner is None

    def enter(self) -> None:
        if self.view_binds:
            self._enter_root()
            return
        # a network and IPC namespace of its own too: it reaches no socket of the host (abstract
        # UNIX ones have no permission to check) and no System V object
        others = CLONE_NEWNET | CLONE_NEWIPC
        if self.user is None:
            _check(_unshare(CLONE_NEWNS | others), "unshare mount, network and IPC")
        else:
            # its own /proc files are root's in a process whose uid changed since its exec (a server
            # that dropped root itself) until it says it is dumpable: the maps could not be written
            _check(prctl(PR_SET_DUMPABLE, 1), "say it is dumpable")
            _check(_unshare(CLONE_NEWUSER | CLONE_NEWNS | others), "unshare user, mount, network and IPC")
            for name, line in ((b"setgroups", b"deny"), (b"uid_map", self.user[0]), (b"gid_map", self.user[1])):
                fd = os.open(b"/proc/self/" + name, os.O_WRONLY)
                try:
                    os.write(fd, line)
                finally:
                    os.close(fd)
        _check(_mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
        # opened in this mount namespace, before anything covers them: each bound again from its descriptor
        kept = [os.open(p, os.O_PATH | os.O_CLOEXEC) for p in self.reach_binds]
        _check(_mount(b"tmpfs", self.where, b"tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, self.options), "mount a tmpfs")
        for d in self.reach_covers:
            os.makedirs(d, exist_ok=True)
            _check(_mount(b"tmpfs", d, b"tmpfs", MS_NOSUID | MS_NODEV, b"size=64k,mode=0755"), f"cover {os.fsdecode(d)}")
        for path, fd in zip(self.reach_binds, kept):
            if os.path.isdir(b"/proc/self/fd/%d" % fd):
                os.makedirs(path, 0o755, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(path), 0o755, exist_ok=True)
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
            _check(_mount(b"/proc/self/fd/%d" % fd, path, None, MS_BIND | MS_REC, None), f"bind {os.fsdecode(path)}")
            _check(_mount(None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, None),
                   f"read-only {os.fsdecode(path)}")
            os.close(fd)
        folder = self.where + b"/" + PRIVATE_SPACE_DIR
        os.mkdir(folder, 0o700)
        if self.owner is not None:
            os.chown(folder, self.owner, self.owner)
        if folder != self.at:
            _check(_mount(folder, self.at, None, MS_BIND, None), "bind the tmpfs's folder")
        for d in self.covered:
            _check(_mount(b"tmpfs", d, b"tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, b"size=4k,mode=0755"),
                   f"cover {os.fsdecode(d)}")
        os.chdir(self.at)  # a working folder of ``at`` chosen before (Popen's cwd) is the host's, below the bind

    def _enter_root(self) -> None:
        """:meth:`enter` for a :meth:`rooted` plan (a root process: no user namespace)."""
        _check(_unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC), "unshare mount, network and IPC")
        _check(_mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
        kept = [os.open(p, os.O_PATH | os.O_CLOEXEC) for p in self.view_binds]  # before /tmp is covered
        root = b"/tmp"
        _check(_mount(b"tmpfs", root, b"tmpfs", MS_NOSUID | MS_NODEV, b"size=1m,mode=0755"), "mount its root")
        os.mkdir(root + self.where, 0o755)
        _check(_mount(b"tmpfs", root + self.where, b"tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, self.options),
               "mount a tmpfs")
        for target, link in self.view_links:
            os.makedirs(os.path.dirname(root + link), 0o755, exist_ok=True)
            os.symlink(target, root + link)
        for path, fd in zip(self.view_binds, kept):
            if os.path.isdir(b"/proc/self/fd/%d" % fd):
                os.makedirs(root + path, 0o755, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(root + path), 0o755, exist_ok=True)
                os.close(os.open(root + path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
            _check(_mount(b"/proc/self/fd/%d" % fd, root + path, None, MS_BIND | MS_REC, None),
                   f"bind {os.fsdecode(path)}")
            _check(_mount(None, root + path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, None),
                   f"read-only {os.fsdecode(path)}")
            os.close(fd)
        folder, owner = root + self.at, self.owner
        assert owner is not None  # a rooted plan always has one
        os.mkdir(folder, 0o700)
        os.chown(folder, owner, owner)
        os.mkdir(root + b"/proc", 0o555)  # for :meth:`mount_proc`
        _check(_mount(None, root, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, None), "read-only root")
        os.chdir(root)
        os.chroot(b".")
        os.chdir(self.at)

    @staticmethod
    def mount_proc() -> None:
        """A ``/proc`` of this process's pid namespace (its own, entered after :meth:`enter` of a
        :meth:`rooted` plan), ``hidepid=2``: it shows this process and its children alone."""
        _check(_mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, b"hidepid=2"), "mount /proc")

    def open_root(self, pid: int) -> int:
        """The tmpfs's root, as the child ``pid`` (alive) sees it at ``where``: a descriptor
        (OSError if it is not the tmpfs, the host's folder showing instead)."""
        fd = os.open(b"/proc/%d/root%s" % (pid, self.where), os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        if os.fstat(fd).st_dev == os.stat(self.where).st_dev:
            os.close(fd)
            raise OSError(f"process {pid} shows no tmpfs of its own at {os.fsdecode(self.where)}")
        return fd


@dataclass(frozen=True)
class NamespaceRoot:
    """The containment used where bubblewrap is not: new mount, network, IPC and UTS
    namespaces entered while still root by the forked child's child, pid 1 of a pid namespace
    of its own (procs.stand_in), with a root directory
    built from tmpfs and read-only binds (the :func:`contained_view`), a private /tmp (also
    HOME and TMPDIR), /var/tmp and /dev/shm, five device nodes (no /dev/ptmx), and a /proc of
    its pid namespace (``hidepid=2`` besides) with its kernel-wide files covered, as under
    bubblewrap (:func:`hidden_proc_entries`).  The child then drops to the bot's private uid, which
    cannot undo any of it.  Every writable place is a tmpfs of this mount namespace, so it
    vanishes with the bot's last process.

    Everything is computed in the parent; :meth:`enter` runs in the child between fork and
    exec and only makes system calls.
    """

    mountpoint: str  # an empty host directory to build the new root on (only this child sees it)
    cwd: str
    links: tuple[tuple[str, str], ...]
    system: tuple[str, ...]
    own: tuple[str, ...]
    uid: int
    tmp_bytes: int
    writable_cwd: bool = False  # a contained build writes its products into (a copy of) its directory
    hidden_files: tuple[str, ...] = ()
    hidden_dirs: tuple[str, ...] = ()
    cwd_fd: int = -1  # the bot's directory as checked (filesystem.open_bot_dir): what is mounted at cwd

    @classmethod
    def plan(cls, mountpoint: Path, cwd: Path, ro_binds: Iterable[Path], uid: int, tmp_bytes: int,
             writable_cwd: bool = False, cwd_fd: int = -1, view: SystemView = SystemView.HOST,
             extra_system: Iterable[str] = ()) -> NamespaceRoot:
        links, system, own = contained_view(cwd, ro_binds, view, extra_system)
        files, dirs = hidden_proc_entries()
        return cls(str(mountpoint), str(cwd), tuple(links), tuple(system), tuple(own), uid, tmp_bytes,
                   writable_cwd, files, dirs, cwd_fd)

    @staticmethod
    def new_pid_namespace() -> None:
        """The next child of the caller is pid 1 of a new pid namespace (see procs.stand_in)."""
        _check(_unshare(CLONE_NEWPID), "unshare pid")

    def enter(self) -> None:
        if self.cwd_fd >= 0:
            # Stand in the checked directory: unshare carries the working directory over to the new
            # mount namespace (a descriptor from the old one cannot be a bind's source), and "." is
            # then bound at cwd. Whatever the path names by now, the checked directory is mounted.
            os.fchdir(self.cwd_fd)
        _check(_unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS), "unshare")
        # Nothing mounted from here on propagates back to the host.
        _check(_mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
        root = self.mountpoint
        _check(_mount(b"tmpfs", root.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, b"size=1m,mode=0755"), "root tmpfs")
        for target, link in self.links:  # a stranger view's links lie deeper (/usr/bin/python3)
            os.makedirs(os.path.dirname(root + link), exist_ok=True)
            os.symlink(target, root + link)
        for path in self.system:
            self._bind(path, root + path, MS_NOSUID | MS_NODEV)
        os.makedirs(root + "/dev", exist_ok=True)
        for dev in DEVICES:
            if os.path.exists(dev):
                self._bind(dev, root + dev, MS_NOSUID)
        for target, link in DEVICE_LINKS:
            os.symlink(target, root + link)
        private = f"mode=0700,uid={self.uid},gid={self.uid},size={self.tmp_bytes}".encode()
        for d in ("/tmp", "/dev/shm"):
            os.makedirs(root + d, exist_ok=True)
            _check(_mount(b"tmpfs", (root + d).encode(), b"tmpfs", MS_NOSUID | MS_NODEV, private), f"tmpfs {d}")
        os.makedirs(root + "/var", exist_ok=True)
        os.symlink("/tmp", root + "/var/tmp")
        for path in self.own:
            source = "." if path == self.cwd and self.cwd_fd >= 0 else path
            self._bind(source, root + path, MS_NOSUID | MS_NODEV,
                       read_only=not (self.writable_cwd and path == self.cwd))
        os.mkdir(root + "/proc")
        _check(_mount(b"proc", (root + "/proc").encode(), b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                      b"hidepid=2"), "proc")
        for path in self.hidden_files:
            _check(_mount(b"/dev/null", (root + path).encode(), None, MS_BIND, None), f"cover {path}")
            _check(_mount(None, (root + path).encode(), None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID
                          | MS_NODEV | MS_NOEXEC, None), f"cover {path}")
        for path in self.hidden_dirs:
            _check(_mount(b"tmpfs", (root + path).encode(), b"tmpfs",
                          MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, b"size=4k,mode=0555"), f"cover {path}")
        _check(_mount(None, root.encode(), None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, None),
               "read-only root")
        os.chdir(root)
        os.chroot(".")
        os.chdir(self.cwd)

    @staticmethod
    def _bind(src: str, dst: str, flags: int, read_only: bool = True) -> None:
        if os.path.isdir(src):
            os.makedirs(dst, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            os.close(os.open(dst, os.O_WRONLY | os.O_CREAT, 0o600))
        _check(_mount(src.encode(), dst.encode(), None, MS_BIND | MS_REC, None), f"bind {src}")
        _check(_mount(None, dst.encode(), None, MS_BIND | MS_REMOUNT | (MS_RDONLY if read_only else 0) | flags,
                      None), f"{'read-only' if read_only else 'remount'} {src}")
