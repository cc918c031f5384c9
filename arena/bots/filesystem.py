"""What a contained bot sees of the filesystem, the same under bubblewrap and the namespace root:
the system read-only, its own directory, the extra read-only paths, and nothing else of the host.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import stat
import subprocess
from enum import StrEnum
from pathlib import Path
from typing import Callable, Iterable, NamedTuple

from ..errors import ArenaError
from .errors import SandboxUnavailable
from .pagecache import files_under


SANDBOX_ROOT_DIRS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
SYSTEM_DIRS = ("/usr", "/etc")
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
"""The only device nodes a contained bot gets: no /dev/ptmx (the pty count is kernel-wide), no tty."""
DEVICE_LINKS = (("/proc/self/fd", "/dev/fd"), ("/proc/self/fd/0", "/dev/stdin"),
                ("/proc/self/fd/1", "/dev/stdout"), ("/proc/self/fd/2", "/dev/stderr"))
PROC_KEPT = frozenset({"self", "thread-self", "mounts", "net", "filesystems", "version"})
"""What a bot sees at the top of /proc besides the process directories: its own process, its own
network namespace (``net``; the kernel-wide socket counters of ``net/sockstat`` move only with
sockets other than UNIX ones, which the system-call filter refuses), and two files that never
change. Every other entry is the kernel's view of the whole machine: counters another seat moves
(``locks``, ``loadavg``, ``stat``, ``meminfo``, ``vmstat``, ``pressure/``, ``sys/fs/aio-nr``,
``sys/kernel/pty/nr``...), or the keys, interrupts and devices of everyone."""


@functools.cache
def hidden_proc_entries(proc: str = "/proc") -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The top-level /proc files and directories to cover, as absolute paths: everything this
    kernel shows there but :data:`PROC_KEPT`, the process directories and links. Listed from the
    host's /proc (once per process), so an entry a newer kernel adds is hidden without a change here."""
    files: list[str] = []
    dirs: list[str] = []
    for name in sorted(os.listdir(proc)):
        path = os.path.join(proc, name)
        if name.isdigit() or name in PROC_KEPT or os.path.islink(path):
            continue
        (dirs if os.path.isdir(path) else files).append(f"/proc/{name}")
    return tuple(files), tuple(dirs)


class SystemView(StrEnum):
    """What a contained seat sees of the host's system (docs/SANDBOX.md)."""

    HOST = "host"  # /usr, /etc and the /bin, /lib... directories: one author's bots, the operator's own
    STRANGER = "stranger"  # stranger_system(): Python 3, bash and the run's system list, warmed in the
    # page cache before each start; every gVisor seat, and strangers' seats (one_seat_per_author) outside it


def contained_view(cwd: Path, ro_binds: Iterable[Path] = (), view: SystemView = SystemView.HOST,
                   system: Iterable[str] = ()) -> tuple[list[tuple[str, str]], list[str], list[str]]:
    """What a contained bot sees of the host: symlinks as (target, path), then read-only binds
    of the system, then read-only binds of the bot (mounted after the private /tmp, so a bot
    directory under /tmp stays visible).

    The system (``view``: HOST, /usr, /etc and the /bin, /lib... directories or their links;
    STRANGER, :func:`stranger_system` of :data:`STRANGER_SYSTEM` and ``system``), the bot's own
    directory and ``ro_binds``; nothing else of the host (no checkout, no store, no other bot,
    no /home or /root).  Both containments (bubblewrap and the namespace root) build this view.
    """
    links: list[tuple[str, str]] = []
    binds = list(SYSTEM_DIRS) if view is SystemView.HOST else []
    for d in SANDBOX_ROOT_DIRS:
        if os.path.islink(d):
            links.append((os.readlink(d), d))
        elif os.path.isdir(d) and view is SystemView.HOST:
            binds.append(d)
    if view is SystemView.STRANGER:
        made, shown = stranger_system((*STRANGER_SYSTEM, *system))
        links += [(target, link) for link, target in made if link not in {have for _, have in links}]
        binds += shown
    own = []
    for p in [cwd, *ro_binds]:
        if str(p) not in binds and str(p) not in own:
            own.append(str(p))
    return links, binds, own


def world_writable_dirs() -> list[str]:
    """Host directories any uid may write (sticky temp dirs): what a bot could use to leave a
    file for its next process if it could see them.  Contained bots get private ones."""
    out = []
    for d in ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/var/lock", "/dev/mqueue"):
        try:
            real = os.path.realpath(d)
            if os.stat(real).st_mode & 0o002 and real not in out:
                out.append(real)
        except OSError:
            pass
    return out


def unsuitable_sandbox_dir(cwd: Path) -> str | None:
    """Why ``cwd`` cannot be a sandboxed bot's directory, or None.  It is bound
    into the sandbox as is, so it must be a directory of its own: "/" would
    expose the whole host, and a system directory would hide the sandbox's
    own /tmp, /proc or /dev."""
    cwd = Path(os.path.realpath(cwd))
    special = {Path(p) for p in ("/", "/tmp", "/proc", "/dev", "/usr", "/etc", "/run", "/sys",
                                 *SANDBOX_ROOT_DIRS)}
    if cwd in special:
        return "is a system directory; give the bot a directory of its own"
    return None


def open_bot_dir(path: Path) -> int:
    """An ``O_PATH`` descriptor of the bot's directory at ``path`` (absolute, resolved), reached one
    component at a time from ``/`` without following any link: what both containments then bind
    into the sandbox, so the directory the referee checked is the one mounted, even if the path is
    swapped for a link (renameat2 RENAME_EXCHANGE in a loop) after the check. Raises OSError
    (ELOOP, ENOTDIR) when a component is a link now."""
    flags = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open("/", flags)
    try:
        for part in Path(path).parts[1:]:
            sub = os.open(part, flags, dir_fd=fd)
            os.close(fd)
            fd = sub
    except BaseException:
        os.close(fd)
        raise
    return fd


def sandbox_visible(path: Path, cwd: Path, ro_binds: Iterable[Path], view: SystemView = SystemView.HOST,
                    system: Iterable[str] = ()) -> bool:
    """Whether ``path`` lies inside what :func:`contained_view` shows a bot."""
    real = Path(os.path.realpath(path))
    _, system, own = contained_view(Path(os.path.realpath(cwd)), [Path(os.path.realpath(p)) for p in ro_binds],
                                    view, system)
    roots = [Path(b) for b in system + own]
    return any(real == r or r in real.parents for r in roots)


def remove_tree(path: Path | str) -> None:
    """``shutil.rmtree(path, ignore_errors=True)`` for a tree a stranger may have made (a build's copy,
    an upload's folder): Python 3.11's rmtree recurses once a folder, and folders nested about 1,000
    deep end it in a RecursionError, which ``ignore_errors`` lets through, the tree left in place
    (a build nested so deep stopped a tournament that way; an upload's folder so deep would stop the
    server at each start, where it removes leftovers). Such a tree is removed by ``rm -rf``
    (coreutils walks without recursion and follows no link). A folder the tree's own user closed
    to itself (``chmod 000``, or no write bit: an upload's worker on a server that is not root runs
    as that user) is opened to its owner again and removed (:func:`_closed_folder`); what still
    cannot be removed stays, unsaid, as with rmtree. Called once the tree's writers are gone."""
    try:
        shutil.rmtree(path, onerror=_closed_folder)
    except RecursionError:
        subprocess.run(["rm", "-rf", "--one-file-system", "--", str(path)], stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)


def _closed_folder(func: object, path: str, exc_info: tuple) -> None:
    """rmtree's answer to an error: where a permission was missing, the entry's folder and the
    entry (a folder) get back their owner's read, write and search bits (opened without following
    a link), and the entry is removed again; every other error is let be, as ``ignore_errors``
    would. Root never gets here (its override of permissions)."""
    if not isinstance(exc_info[1], PermissionError):
        return
    opened = [_open_to_owner(os.path.dirname(path) or "."), _open_to_owner(path)]
    if not any(opened):
        return  # nothing this user could give back (another user's folder): tried once, no more
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, onerror=_closed_folder)
        else:
            os.unlink(path)
    except OSError:
        pass


def _open_to_owner(folder: str) -> bool:
    """Whether ``folder`` lacked one of its owner's bits and was given them back."""
    try:
        fd = os.open(folder, os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return False  # not a folder (a file, a link), or out of reach
    try:
        mode = stat.S_IMODE(os.fstat(fd).st_mode)
        if mode & 0o700 == 0o700:
            return False
        os.chmod(f"/proc/self/fd/{fd}", mode | 0o700)  # the folder opened, not a link swapped in since
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


class Usage(NamedTuple):
    """What :func:`tree_usage` saw: bytes (the larger of length and blocks), entries, and whether
    some folder lay out of its sight (deeper than its path cap, or not to be opened)."""

    bytes: int
    entries: int
    unseen: bool = False


def tree_usage(root: Path, stop_at: int, max_path: int | None = None) -> Usage:
    """Bytes on disk (the larger of length and blocks, as the folder reader counts) and entries
    under ``root``, never following a link; the walk ends once ``stop_at`` entries were seen, so a
    build that makes a million empty files costs the watcher no more than that. A folder more than
    ``max_path`` bytes below ``root``, or one that cannot be opened, is not walked and the result
    says so (``unseen``): a build hid 256 MiB below folders nested past the kernel's 4,096-byte
    path, where a walk by path cannot look."""
    used = entries = 0
    unseen = False
    stack = [str(root)]
    skip = len(str(root)) + 1
    while stack and entries < stop_at:
        try:
            with os.scandir(stack.pop()) as it:
                for entry in it:
                    entries += 1
                    if entries >= stop_at:
                        break
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        unseen = True
                        continue
                    used += max(st.st_size, st.st_blocks * 512)
                    if entry.is_dir(follow_symlinks=False):
                        if max_path is not None and len(os.fsencode(entry.path)) - skip > max_path:
                            unseen = True
                        else:
                            stack.append(entry.path)
        except OSError:
            unseen = True
    return Usage(used, entries, unseen)


STRANGER_SYSTEM = ("/usr/bin/python3", "/usr/lib/python3.11", "/usr/bin/bash", "/usr/bin/sh", "/usr/bin/grep",
                   "/etc/ld.so.cache")
"""What a gVisor seat sees of the host's system, for the starter languages (Python 3, bash and the
``grep`` the bash starter tokenises with), besides
the shared libraries these programs and the Python extension modules link (:func:`stranger_system`).
Kept small so the referee can keep every page of it in the cache (:mod:`.pagecache`): a cold page
in a view two seats share is a channel between them."""


BOT_PATH = "/usr/local/bin:/usr/bin:/bin"
"""Where a bot's command is looked up (``spawn.DEFAULT_PATH``), and so where a preset finds its language."""


def java_preset(path: str = BOT_PATH, java_home: str | None = None) -> tuple[str, ...]:
    """The ``java`` preset: the JDK a bot's ``java`` runs, found as ``java`` on ``path`` with its
    links resolved (Debian's /usr/bin/java -> /etc/alternatives/java -> the JDK's bin/java), else
    as ``bin/java`` under ``java_home`` ($JAVA_HOME). Its ``java`` and ``javac`` as found (their
    links join the view), the JDK's bin, conf, lib and release (not jmods, docs: unused), and the
    folders holding the targets of the absolute links in its conf and lib (Debian keeps the JDK's
    settings in /etc/java-NN-openjdk, its certificates in /etc/ssl/certs/java). Raises :class:`SystemViewError` when neither has a ``java``."""
    found = shutil.which("java", path=path)
    if found is None and java_home and os.path.isfile(os.path.join(java_home, "bin", "java")):
        found = os.path.join(java_home, "bin", "java")
    if found is None:
        raise SystemViewError(f"system preset 'java': no java on {path} and no $JAVA_HOME/bin/java "
                              f"({java_home or 'JAVA_HOME unset'}): install a JDK (Debian: openjdk-17-jdk-headless)")
    home = Path(os.path.realpath(found)).parent.parent
    javac = shutil.which("javac", path=str(Path(found).parent))
    out = [found, *([javac] if javac else [])]
    out += [str(home / p) for p in ("bin", "conf", "lib", "release") if os.path.lexists(home / p)]
    held: set[str] = set()  # the folders of the links' targets (one bind each: gVisor failed to start with 25 file binds)
    for top in ("conf", "lib"):
        for root, _dirs, names in os.walk(home / top):
            for name in names:
                target = os.readlink(os.path.join(root, name)) if os.path.islink(os.path.join(root, name)) else ""
                if target.startswith("/") and os.path.exists(target):
                    held.add(os.path.dirname(target))
    out += sorted(d for d in held if not any(Path(o) in Path(d).parents for o in held))
    return tuple(out)


SYSTEM_PRESETS: dict[str, Callable[[], tuple[str, ...]]] = {
    "python": lambda: (),  # in STRANGER_SYSTEM already
    "bash": lambda: (),
    "javascript": lambda: ("/usr/bin/node",),
    "java": lambda: java_preset(java_home=os.environ.get("JAVA_HOME")),
}
"""What a ladder's or a run's ``system`` list may name instead of paths: the system paths each
starter language of examples/bots needs under gVisor beyond :data:`STRANGER_SYSTEM`, found on this
host when named (the libraries they link are added by :func:`stranger_system`)."""

SYSTEM_VIEW_ROOTS = (*SYSTEM_DIRS, "/opt", *SANDBOX_ROOT_DIRS)
"""Where an extra system path of a gVisor view may lie, strictly below one of them: the installed
system and hand-installed runtimes (/opt). An allow-list: /var, /srv, /mnt, homes, the arena's data
and a worker's bot cache are refused wherever they are, without anyone naming them."""

SYSTEM_OWNER = 0
"""The only owner an extra system path, the folders above it and everything below it may have."""


class SystemViewError(ArenaError, ValueError):
    """An extra system path of a gVisor view that is refused (the message says why)."""


def system_paths(entries: Iterable[str], refused: Iterable[str | Path] = ()) -> tuple[str, ...]:
    """The extra system paths that ``entries`` (preset names of :data:`SYSTEM_PRESETS` or absolute
    paths) name, checked: each must exist, lie (its links resolved) strictly below one of
    :data:`SYSTEM_VIEW_ROOTS`, outside ``refused`` (the store, the arena's data) and any folder at
    or below them, and be changeable by no one but :data:`SYSTEM_OWNER` (:func:`_changeable`).
    Raises :class:`SystemViewError` naming the entry and the reason."""
    banned = [Path(os.path.realpath(p)) for p in refused]
    out: list[str] = []
    for entry in entries:
        if not isinstance(entry, str) or not entry:
            raise SystemViewError(f"system entry {entry!r}: a preset name ({', '.join(SYSTEM_PRESETS)}) or an absolute path")
        if not entry.startswith("/"):
            if entry not in SYSTEM_PRESETS:
                raise SystemViewError(f"system entry {entry!r}: no such preset (known: {', '.join(SYSTEM_PRESETS)}); "
                                      "or give an absolute path")
            paths = SYSTEM_PRESETS[entry]()
        else:
            paths = (entry,)
        for p in paths:
            real = Path(os.path.realpath(p))
            if not _system_root(real):
                raise SystemViewError(f"system path {p} ({entry}) is refused: {OUTSIDE}")
            if not os.path.lexists(p):
                raise SystemViewError(f"system path {p} ({entry}) is not on this host")
            for b in banned:
                if real == b or b in real.parents or real in b.parents:
                    raise SystemViewError(f"system path {p} ({entry}) is refused: it is or holds {b}, "
                                          "which no bot may see")
            why = _changeable(real)
            if why:
                raise SystemViewError(f"system path {p} ({entry}) is refused: {why}")
            if p not in out and p not in STRANGER_SYSTEM:
                out.append(p)
    return tuple(out)


OUTSIDE = f"only what lies below {', '.join(SYSTEM_VIEW_ROOTS[:3])}... (the installed system) may be seen"


def _system_root(real: Path) -> Path | None:
    """The root of :data:`SYSTEM_VIEW_ROOTS` that ``real`` (resolved) lies strictly below, if any."""
    return next((r for r in map(Path, map(os.path.realpath, SYSTEM_VIEW_ROOTS)) if r in real.parents), None)


def run_system(entries: Iterable[str], *, stranger_view: bool, refused: Iterable[str | Path] = ()) -> tuple[str, ...]:
    """A run's ``system`` list as its launcher takes it (a ladder's or tournament's file, ``--system``
    on any command that starts bots), checked where it is read: it needs the stranger view (gVisor,
    or strangers' seats in any mode: :class:`SystemView`), and each entry must pass
    :func:`system_paths` (``refused``: the store's folder). Raises :class:`SystemViewError`."""
    entries = tuple(entries)
    if entries and not stranger_view:
        raise SystemViewError("system names what a stranger's seat sees: it needs gVisor (gvisor = true, --gvisor) "
                              "or one_seat_per_author")
    system_paths(entries, refused)
    return entries


def _changeable(real: Path) -> str | None:
    """Why someone but :data:`SYSTEM_OWNER` could change what ``real`` (below a system root) shows
    every seat (a file's size or time as a channel, a folder swapped for a link after the check),
    or None: its root, each folder down to it and everything below it must be the owner's and
    writable by no one else."""
    root = _system_root(real)
    assert root is not None
    chain = [root, *(p for p in reversed(real.parents) if root in p.parents), real]
    below = (os.path.join(top, name) for top, dirs, files in os.walk(real) for name in (*dirs, *files))
    for path in (*map(str, chain), *below):
        st = os.lstat(path)
        if st.st_uid != SYSTEM_OWNER:
            return f"{path} is owned by uid {st.st_uid}, not {SYSTEM_OWNER}"
        if not stat.S_ISLNK(st.st_mode) and st.st_mode & 0o022:
            return f"{path} is writable by others than its owner (mode {stat.S_IMODE(st.st_mode):o})"
    return None


class MissingSystemPath(SandboxUnavailable):
    """A path of the gVisor seat's system view is absent on this host: the mode cannot run here."""


@functools.cache
def stranger_system(paths: tuple[str, ...] = STRANGER_SYSTEM) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    """The gVisor seat's system view: links as (target, path) and the real files and directories to
    bind, for ``paths`` (:data:`STRANGER_SYSTEM` and a run's checked :func:`system_paths`) and every
    shared library their ELF files link (the loader's own answer, ``ldd``, run once per process on
    system files only). Raises :class:`MissingSystemPath` naming a listed path this host lacks, and
    :class:`SystemViewError` naming a library that :func:`system_paths` would refuse."""
    for p in paths:
        if not os.path.lexists(p):
            raise MissingSystemPath(f"{p} (a system path a gVisor seat needs) is not on this host")
    elfs = [f for f in files_under(os.path.realpath(p) for p in paths) if _is_elf(f)]
    libs: set[str] = set()
    for i in range(0, len(elfs), 200):
        out = subprocess.run(["ldd", *elfs[i:i + 200]], capture_output=True, text=True, check=False,
                             env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"}).stdout
        libs.update(m for m in re.findall(r"(/\S+) \(0x", out))
    for lib in sorted(libs):  # a RUNPATH or ld.so.conf may name any folder: held to the listed paths' rules
        real = Path(os.path.realpath(lib))
        why = OUTSIDE if not _system_root(real) else _changeable(real) if os.path.lexists(real) else None
        if why:
            raise SystemViewError(f"{lib} (a library the gVisor view's programs link) is refused: {why}")
    links: dict[str, str] = {}
    binds: set[str] = set()
    for p in (*paths, *sorted(libs)):
        binds.add(_walk_links(p, links))
    binds = {b for b in binds if not any(Path(o) in Path(b).parents for o in binds)}
    return tuple(sorted(links.items(), key=lambda kv: kv[0].count("/"))), tuple(sorted(binds))


def _walk_links(path: str, links: dict[str, str]) -> str:
    """The real path of ``path``, recording in ``links`` each symbolic link met on the way."""
    cur = Path("/")
    parts = list(Path(path).parts[1:])
    hops = 0
    while parts:
        nxt = cur / parts.pop(0)
        if nxt.is_symlink():
            hops += 1
            if hops > 40:
                raise MissingSystemPath(f"{path}: too many links")
            target = os.readlink(nxt)
            links[str(nxt)] = target
            parts = list(Path(target).parts[1:] if target.startswith("/") else Path(target).parts) + parts
            cur = Path("/") if target.startswith("/") else cur
            continue
        cur = Path(os.path.normpath(nxt))
    return str(cur)


def _is_elf(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False
