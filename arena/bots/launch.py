"""From a bot manifest to a running, contained bot process: build once, then start.

The Launcher decides the containment (bubblewrap, else namespaces, never less unless the
operator says ``--trusted-bots``) and what ``python3`` in a manifest means for it.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import functools
import hashlib
import os
import shutil
import stat
import subprocess
import sys
import threading
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Iterable

import trio

from ..errors import ArenaError
from ..faults import StartFailed
from .containment import Containment, RunAs, cgroup_root, describe_containment, process_registry
from .errors import BotCommandError, BotStartError, StartErrorKind
from ..limits import MiB, Limits
from .bundles import Holds, cache_entry
from .filesystem import SystemView, SystemViewError, remove_tree, system_paths, tree_usage
from .folder import ARENA_COPIES, CAPS, Folder, FolderError, copy_folder, read_folder
from .gvisor import OWN_COPY
from .manifest import BUNDLED_DIR, BotSpec
from .namespaces import bounded_space, release_space, space_full
from .places import PACKAGE, arena_place
from .probes import gvisor_problem_now, namespaces_problem_now, sandbox_problem_now
from .spawn import DEFAULT_PATH, HOST_ENV, resolve_command
from .start import start_bot
from .uids import BOT_UID_BASE, chown_tree, inaccessible_reason, seal

BUILD_TIMEOUT_S = 300
BUILD_LIMITS = Limits(memory_mb=2048, max_processes=256, open_files=1024, file_size_mb=512,
                      process_cpu_seconds=BUILD_TIMEOUT_S, max_output_bytes=16 * MiB)
"""A compiler needs more than a bot's defaults; the wall-clock timeout bounds it all."""
BUILD_DISK_MB = 1024
BUILD_ENTRIES = 100_000
"""What a contained build may leave in its copy of the bot's folder, the only place on the host's
disk it can write: measured every BUILD_DISK_WATCH_S while it runs (each file is also capped by
RLIMIT_FSIZE, ``file_size_mb``) and once at its end; past either, the build is killed, its copy
removed, and the bot refused as its own fault."""
BUILD_DISK_WATCH_S = 0.2
_BUILD_LOCK = threading.Lock()  # one build at a time in this process (a bot is built once per launcher)
CONTAINED_BUILD = ("builds run contained, like the bot: no network, only the system (/usr, /etc) and a "
                   "copy of the bot's directory; install the build's tools system-wide, or pass "
                   "--trusted-bots to build and run bots as the referee's own user")


class BuildError(ArenaError, RuntimeError):
    """A bot's build command failed; the message carries the tail of its output."""


def limits_for(spec: BotSpec, base: Limits) -> Limits:
    """Tournament limits, tightened (never loosened) by the manifest's ``[limits]`` table.

    Where the tournament leaves a limit to be derived (``cpu_seconds`` from the clock), a
    bot's own value is ignored: a fixed number could be looser than what the clock gives.
    A bot's ``address_space_mb`` stays within its ``memory_mb``."""
    known = {f.name for f in fields(Limits)}
    changes: dict[str, Any] = {}
    for key, value in spec.limits.items():
        if key in known and isinstance(value, int) and not isinstance(value, bool) and value > 0:
            current = getattr(base, key)
            if current is not None:
                changes[key] = min(value, current)
            elif key == "address_space_mb":
                changes[key] = value
    if "address_space_mb" in changes:
        memory = changes.get("memory_mb", base.memory_mb)
        changes["address_space_mb"] = min(changes["address_space_mb"], memory)
    return Limits(**{**{f.name: getattr(base, f.name) for f in fields(Limits)}, **changes})


ARENA_SOURCE = Path(__file__).resolve().parents[2]  # holds the ``arena`` package


def _others_can_use(path: Path, need: int = stat.S_IXOTH) -> bool:
    """Whether any other user can reach ``path`` (x on every directory) and has ``need`` on it."""
    p = path.resolve()
    if not p.exists() or not os.stat(p).st_mode & need:
        return False
    return all(os.stat(d).st_mode & stat.S_IXOTH for d in p.parents)


SYSTEM_PYTHONS = ("/usr/bin/python3", "/usr/local/bin/python3")


@functools.cache
def _system_python() -> str | None:
    """A Python 3.11+ that any uid can run, for bots when ours lives somewhere private."""
    for cand in SYSTEM_PYTHONS:
        if _others_can_use(Path(cand)) and _new_enough(cand):
            return cand
    return None


def _new_enough(python: str) -> bool:
    """Whether ``python`` runs as Python 3.11+: asked by running it once per machine and interpreter
    file, not in every process (15 ms of CPU each where ours is not under /usr: CI's, a pyenv's).
    A yes is noted in the run directory (only our uid writes it) under the path and what ``stat``
    says of the file it leads to, so a replaced or relinked interpreter is asked again."""
    try:
        seen = hashlib.sha256(interpreter_seen(python).encode()).hexdigest()
        note = process_registry().run_dir / f"python-{seen[:32]}"
        if note.is_file():
            return True
        out = process_registry().run([python, "-c", "import sys; print(sys.version_info >= (3, 11))"],
                                     text=True, timeout=10, env=HOST_ENV).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return False
    if out != "True":
        return False
    with contextlib.suppress(OSError):  # unnoted: asked again by the next process
        note.touch()
    return True


def interpreter_seen(python: str) -> str:
    """An interpreter as a machine's notes about it name it: its path and what ``stat`` says of the
    file it leads to, so a replaced or relinked interpreter is a new one. OSError where it is gone."""
    st = os.stat(python)
    return repr((python, os.path.realpath(python), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))


def python_for(contained: bool) -> tuple[str, dict[str, str]] | None:
    """The interpreter for ``python3`` in a manifest, and the environment it needs.

    A contained bot (private uid, and bubblewrap or namespaces) sees only the system, its own
    directory and a read-only copy of the ``arena`` package: our own interpreter when it lives
    under /usr (same packages as the arena), otherwise the system's; PYTHONPATH names the
    copy so reference bots still import ``arena``. Never the checkout (it holds arena-data/).
    None when no interpreter is usable by a contained bot; a ContainmentError when the copy of
    the package cannot be had.
    """
    if not contained:
        return sys.executable, {}
    ours = Path(sys.executable).resolve()  # a venv's python is a link: a seat's view holds what it leads to
    python = str(ours) if _others_can_use(ours) and str(ours).startswith("/usr/") else _system_python()
    if python is None:
        return None
    return python, {"PYTHONPATH": str(_package_copy())}


PACKAGE_LIBS = "arena_engine__mypyc*"  # beside the package: the compiled engine's shared library
PACKAGE_COPIES_BYTES = 64 << 20
"""What the package copies no process holds may take before a new copy evicts the least recently
used (a copy is about 5 MB: a dozen versions, each checkout's and each edit's)."""
_PACKAGE_HOLD = Holds()  # the package copy this process's bots import: held in use (never evicted) until it exits
_PACKAGE_LOCK = threading.Lock()  # bots are planned from several threads
_package: Path | None = None


def _package_copy() -> Path:
    """The folder (on contained Python bots' PYTHONPATH) that holds a world-readable copy of the
    ``arena`` package and the compiled engine beside it: one per machine and package content, in
    :func:`package_copies` (:func:`~.bundles.cache_entry`: made whole or not at all, by the
    referee's uid, read-only to everyone else) named by the hash of what it holds. Each process
    reads the package once and uses the copy only if it still holds exactly those files, so an
    edited checkout is never served a stale copy, nor a copy anything changed since it was made.
    A ContainmentError says why no copy can be had (a Python bot without it could not import the
    arena: fail closed)."""
    global _package
    with _PACKAGE_LOCK:
        if _package is None or not (_package / "arena").is_dir():  # (a temp-dir cleaner may have removed it)
            _package = _shared_package_copy()
        return _package


def package_copies() -> Path:
    """The referee's uid's folder of package copies (:func:`~.places.arena_place`, resolved: a bot
    start never follows a link), ``0755``, writable by no one else. Not the bot cache, which is
    private: a root referee's bots, each of its own uid, read the package. Another user's folder (or
    a link) there (its name in the temporary folder, where no place of the user's own could be
    had) is refused, saying what to do."""
    root = Path(os.path.realpath(arena_place(PACKAGE)))
    root.mkdir(mode=0o755, exist_ok=True)
    st = root.lstat()
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        raise ContainmentError(f"{root} is not a folder of uid {os.geteuid()} (another user made it?): remove "
                               "it, or set TMPDIR to another folder; contained Python bots import the arena "
                               "package from a copy there")
    if stat.S_IMODE(st.st_mode) != 0o755:  # (ours: only our uid changed it)
        root.chmod(0o755)
    if not _bots_can_use(root):
        raise ContainmentError(_unreachable(root))
    return root


def _unreachable(root: Path) -> str:
    """Why bots cannot reach the package copies in ``root``, naming the folder that shuts them out
    (root's ``/var/cache/palace-arena`` made 0700, say) and how to open it."""
    closed = next((d for d in (*reversed(root.parents), root)
                   if d.is_dir() and not d.stat().st_mode & stat.S_IXOTH), None)
    why = f"other users cannot reach {root}, where contained Python bots import the arena package from"
    if closed is None or os.geteuid() != 0:
        return f"{why}: set TMPDIR to a folder every user can enter"
    mode = stat.S_IMODE(closed.stat().st_mode)
    return (f"{why}: {closed} is mode {mode:04o}, which shuts out the bots' own uids; "
            f"chmod 0755 {closed} (it must stay root's, writable by root alone)")


def _bots_can_use(path: Path, need: int = stat.S_IXOTH) -> bool:
    """Whether a bot of this referee can reach ``path`` with ``need`` (an ``S_I*OTH`` bit): every
    user where the referee is root (each bot runs as a uid of its own), else the referee's own uid."""
    if os.geteuid() == 0:
        return _others_can_use(path, need)
    return os.access(path, (os.R_OK if need & stat.S_IROTH else 0) | (os.X_OK if need & stat.S_IXOTH else 0))


def package_read() -> tuple[Folder, tuple[tuple[str, str], ...], str]:
    """The ``arena`` package as it is now, the compiled engine's libraries beside it (name, sha256),
    and the key that names that content (about 10 ms of CPU). OSError or FolderError where it
    cannot be read."""
    package = read_folder(ARENA_SOURCE / "arena", arenas_own=True)
    libs = tuple((lib.name, _sha256(lib)) for lib in sorted(ARENA_SOURCE.glob(PACKAGE_LIBS)))
    return package, libs, hashlib.sha256(repr(("arena package", package.digest, libs)).encode()).hexdigest()


def _shared_package_copy() -> Path:
    base = package_copies()
    try:
        package, libs, key = package_read()

        def make(tmp: Path) -> None:
            copy_folder(package, tmp / "arena")  # checked against the reading while written
            for name, _ in libs:
                shutil.copy(ARENA_SOURCE / name, tmp / name)
            chown_tree(tmp, os.geteuid(), mode_for=_read_only_mode)
            if not _holds_package(tmp, package.digest, libs):
                raise FolderError(f"{ARENA_SOURCE}: the arena's files changed while they were copied")

        with cache_entry(base, key, make, lambda entry: _holds_package(entry, package.digest, libs),
                         _PACKAGE_HOLD, PACKAGE_COPIES_BYTES) as entry:
            return entry
    except (OSError, ArenaError) as e:
        raise ContainmentError(f"no copy of the arena package for contained Python bots in {base}: {e}") from None


def _holds_package(entry: Path, digest: str, libs: tuple[tuple[str, str], ...]) -> bool:
    """Whether ``entry`` holds exactly the package whose files hash to ``digest`` and the ``libs``
    (name, sha256) beside it, each readable by everyone; nothing else (a module beside them would
    come before the standard library on a bot's PYTHONPATH)."""
    try:
        return (sorted(os.listdir(entry)) == sorted(["arena", *(name for name, _ in libs)])
                and read_folder(entry / "arena", arenas_own=True).digest == digest
                and all(_sha256(entry / name) == sha for name, sha in libs)
                and _bots_can_use(entry / "arena" / "__init__.py", stat.S_IROTH))
    except (OSError, FolderError):
        return False


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()



_runnable_copies: dict[tuple[Path, str], Path] = {}  # (folder, files hash) -> its checked copy


SHIPPED = (BUNDLED_DIR.resolve(), ARENA_SOURCE / "examples")
"""The arena's own bots (the reference bots and the starters): a checkout in a private directory
(a root user's clone under /root) must still run them contained."""


def runnable(spec: BotSpec, made: dict[tuple[Path, str], Path] | None = None) -> BotSpec:
    """The bot a contained seat is served: the same bot from a copy of its folder that the arena
    made once per process and reading (folder and files hash), written from that reading and
    checked against it, so a seat never runs a file of its author's folder, neither one edited after
    the run read it nor one the reader leaves out (build outputs, environments: in no files hash).
    The copy's entries are readable by a root referee's private uids, but its folder is sealed
    (:func:`~.uids.seal`): no other local user reads it; the seat's view binds it by descriptor.
    A root referee's bot its private uid could not reach in its own folder (a user's private
    directory), unless the arena ships it or keeps it in its closed store, stays as it is and is
    refused at its start (fail closed): the arena never exposes a user's private directory on its own.
    ``made``: the copies already made, by (folder, files hash): a :class:`Launcher`'s own, removed
    with its builds' (:meth:`Launcher.release_builds`); this process's, kept to its exit, by default."""
    if spec.human:
        return spec
    root = spec.root.resolve()
    users = os.geteuid() == 0 and not _arenas_own(root)  # a user's bot, for a private uid
    if users and not _others_can_use(spec.workdir):
        return spec
    key = (root, spec.files_hash())
    made = _runnable_copies if made is None else made
    copy = made.get(key)
    if copy is None:
        copy = made[key] = bot_copy(spec, "palace-arena-bot-", others_from=root if users else None)
    return _relocated(spec, copy, same_files=True)


def _arenas_own(root: Path) -> bool:
    """Whether the bot folder ``root`` is one the arena ships or keeps in its closed store."""
    return (any((d / ARENA_COPIES).is_file() for d in root.parents)
            or any(d == root or d in root.parents for d in SHIPPED))


def _relocated(spec: BotSpec, copy: Path, same_files: bool = False) -> BotSpec:
    """``spec`` run from ``copy``, a copy of its directory (its ``venv`` too, where it lies inside).
    ``same_files``: a copy checked against ``spec``'s reading, which keeps its files hash (not read
    again: a gVisor seat's plan compares with it)."""
    root = spec.root.resolve()
    python = spec.python
    if python is not None and Path(python).is_relative_to(root):
        python = str(copy / Path(python).relative_to(root))
    moved = dataclasses.replace(spec, root=copy, workdir=copy / spec.workdir.resolve().relative_to(root),
                                python=python)
    if same_files:
        object.__setattr__(moved, "_files_hashes", spec._folder_hashes())
    return moved


def world_readable_copy(directory: Path, prefix: str, *, bot: BotSpec | None = None,
                        others_from: Path | None = None) -> Path:
    """A copy of ``directory`` whose entries every user could read, in a new temporary directory
    removed when this process exits. Returns the copied directory.
    A bot's folder (``bot``) is copied by the one reader of bot folders, checked against the
    hash the run read it under; anything else (a test's folder) by copytree. A bot's copy
    lies in a folder that only this process's user may enter (:func:`~.uids.seal`): its seats are
    served it through their views, and no other local user reads it (a ladder member's source, an
    upload's, a user's ``0600`` file).
    ``others_from``: a user's folder whose entries keep, in the copy, no more of the permissions
    of other users than they have there (:func:`_others_no_wider`): the copy exposes nothing the
    bot's private uid could not read or run in the folder itself."""
    root = process_registry().temp_dir(prefix)  # a kill -9 runs no exit handler: cleanup_stale removes it
    atexit.register(remove_tree, root)
    copy = root / directory.name
    if bot is not None:
        try:
            folder = read_folder(directory)
            if folder.digest != bot.files_hash():
                raise FolderError(f"{directory}: {bot.label}'s files changed since the run read them")
            copy_folder(folder, copy)
        except FolderError as e:  # what the bot's folder holds is the bot's doing: it forfeits
            remove_tree(root)
            raise BotCommandError(str(e)) from None
    else:
        shutil.copytree(directory, copy, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    chown_tree(root, os.geteuid(), mode_for=_read_only_mode)
    if others_from is not None:
        _others_no_wider(copy, others_from)
    if bot is not None:  # a bot's copy: its seats reach it through their views alone (uids.seal)
        seal(root)
    return copy


def _others_no_wider(copy: Path, original: Path) -> None:
    """Each entry of ``copy`` with no more of the other users' permission bits than its namesake in
    ``original`` has (none where it is gone): a 0700 command stays one its private uid cannot run.
    The original is its author's live folder: it is walked by descriptors from its top, never
    through a link, so a folder she swaps for a link meanwhile counts as gone (a lookup by path
    followed it, and the copy's modes showed the bot whether a name existed below a folder of root's)."""
    try:
        top = os.open(original, _DIR_NOFOLLOW)
    except OSError:
        top = -1
    try:
        _no_wider(copy, top)
    finally:
        if top >= 0:
            os.close(top)


_DIR_NOFOLLOW = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _no_wider(here: Path, there: int) -> None:
    """:func:`_others_no_wider` for the folder ``here`` of the copy, its original open as ``there``
    (-1: gone, or not a folder)."""
    def narrow(path: Path | str, theirs: int) -> None:
        os.chmod(path, stat.S_IMODE(os.lstat(path).st_mode) & (0o770 | theirs))

    narrow(here, os.fstat(there).st_mode & 0o007 if there >= 0 else 0)
    with os.scandir(here) as entries:
        for entry in entries:
            if entry.is_symlink():
                continue
            if entry.is_dir(follow_symlinks=False):
                try:
                    sub = os.open(entry.name, _DIR_NOFOLLOW, dir_fd=there) if there >= 0 else -1
                except OSError:
                    sub = -1
                try:
                    _no_wider(Path(entry.path), sub)
                finally:
                    if sub >= 0:
                        os.close(sub)
                continue
            try:
                theirs = os.stat(entry.name, dir_fd=there, follow_symlinks=False).st_mode & 0o007 if there >= 0 else 0
            except OSError:
                theirs = 0
            narrow(entry.path, theirs)


def copy_out(src: Path, dst: Path) -> None:
    """Copy a finished build's tree ``src`` (on its bounded tmpfs, so at most the build's bound) to
    ``dst`` (made here), never following a link: folders, links as links, regular files opened
    without blocking; anything else (a FIFO the build left would hang the read), or a path longer
    than a bot folder's (:data:`~.folder.CAPS`: a build can nest folders past what the kernel takes
    in one path, which no copy by path could write), is refused with :class:`FolderError` naming
    it. The build's processes are gone, so nothing changes meanwhile."""
    dst.mkdir(mode=0o755)
    stack = [(src, dst)]
    while stack:
        here, there = stack.pop()
        with os.scandir(here) as entries:
            for entry in entries:
                st = entry.stat(follow_symlinks=False)
                target = there / entry.name
                rel = str(target.relative_to(dst))
                if len(os.fsencode(rel)) > CAPS.path:
                    raise FolderError(f"{rel[:80]}…: a path longer than {CAPS.path} bytes")
                if stat.S_ISDIR(st.st_mode):
                    target.mkdir(mode=0o755)
                    stack.append((Path(entry.path), target))
                elif stat.S_ISLNK(st.st_mode):
                    os.symlink(os.readlink(entry.path), target)
                elif stat.S_ISREG(st.st_mode):
                    fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
                    with os.fdopen(fd, "rb") as f, open(target, "xb") as out:
                        shutil.copyfileobj(f, out, 1 << 20)
                    target.chmod(0o755 if st.st_mode & 0o111 else 0o644)
                else:
                    raise FolderError(f"{Path(entry.path).relative_to(src)}: not a file, folder or link")


def bot_copy(spec: BotSpec, prefix: str, others_from: Path | None = None) -> Path:
    """A world-readable copy of ``spec``'s folder (see :func:`world_readable_copy`)."""
    return world_readable_copy(spec.root.resolve(), prefix, bot=spec, others_from=others_from)


def _read_only_mode(st: os.stat_result) -> int:
    """Everyone reads (and runs what was executable); only the owner writes; no set-id bits."""
    return 0o755 if stat.S_ISDIR(st.st_mode) or st.st_mode & 0o111 else 0o644


def argv(spec: BotSpec, python: str = sys.executable) -> list[str]:
    cmd = list(spec.command)
    if cmd and cmd[0] in ("python3", "python"):
        cmd[0] = python
    return cmd


class ContainmentError(BuildError):
    """No containment is available for bots here, or a bot cannot run inside it; the message
    says how to fix it (never a silent fallback to fewer restrictions)."""


class BotUnreadable(ContainmentError, StartFailed):
    """A bot's own files are not readable by its private uid (a file of its directory, or a
    directory above it, that others may not use): the bot forfeits, as for a missing command, so
    nothing in a bot's directory can turn its games into the arena's failures."""


def containment_for(sandbox: bool | None = None, trusted: bool = False, gvisor: bool = False) -> Containment:
    """The one place the user's options (``--sandbox/--no-sandbox``, ``--trusted-bots``, ``--gvisor``
    and a file's ``sandbox``/``gvisor`` keys) become a :class:`Containment`; gVisor with
    ``--trusted-bots`` is refused here, before anything starts. Otherwise gVisor (the strongest)
    wins over ``--sandbox/--no-sandbox``, and ``--trusted-bots`` (the operator's, on purpose) over
    a file's ``sandbox = true``."""
    if trusted and gvisor:
        raise ContainmentError("gVisor and --trusted-bots contradict each other: choose one")
    if gvisor:
        return Containment.GVISOR
    if trusted:
        return Containment.TRUSTED
    return {None: Containment.AUTO, True: Containment.BUBBLEWRAP, False: Containment.NAMESPACES}[sandbox]


@dataclass(frozen=True)
class LaunchPlan:
    """How one bot starts in this run, worked out once (built, probed, its interpreter found) and
    then used for every start: plain data, started by :meth:`start`.
    A contained bot runs as a private uid, leased per start; a trusted one as the referee."""

    label: str
    argv: tuple[str, ...]
    workdir: Path
    limits: Limits
    containment: Containment
    env: tuple[tuple[str, str], ...] = ()  # added to the bot's minimal environment
    binds: tuple[Path, ...] = ()  # read-only paths it sees besides the system and its folder
    writable_cwd: bool = False  # a contained build's own copy of the folder, never a bot that plays
    system: tuple[str, ...] = ()  # extra system paths a stranger view holds (filesystem.system_paths)
    view: SystemView = SystemView.HOST  # what a bubblewrap or namespaces seat sees of the system
    files_hash: str = ""  # what a gVisor seat's own copy of its bot's folder must hash to (the run's reading)
    files_root: Path | None = None  # the folder ``files_hash`` is of, where ``workdir`` lies below it

    def _kw(self) -> dict[str, Any]:
        c = self.containment
        return dict(limits=self.limits, containment=c, files_hash=self.files_hash, files_root=self.files_root,
                    run_as=RunAs.REFEREE if c is Containment.TRUSTED else RunAs.PRIVATE,
                    extra_env=dict(self.env) or None, ro_binds=list(self.binds), view=self.view, system=self.system)

    def _error(self, error: BotStartError) -> Exception:
        """A start error as the user reads it: a bot its private uid cannot run says how to fix it."""
        if error.kind is StartErrorKind.UID_DENIED:
            return BotUnreadable(f"{self.label}: {error}; {FIX_ACCESS}")
        return error

    def start(self):
        """The bot, started on the blocking shell (:class:`~arena.bots.blocking.BlockingBot`)."""
        try:
            return start_bot(self.argv, self.workdir, writable_cwd=self.writable_cwd, **self._kw())
        except BotStartError as e:
            raise self._error(e) from None

def _read_built(built: BotSpec) -> None:
    """Read a finished build's copy once, within what a bot folder and a build may hold together
    (:data:`.gvisor.OWN_COPY`), and keep the reading as ``built``'s files hash. Read later with a
    bot folder's caps, at each gVisor seat's plan, a build within its bounds that wrote more than
    256 MiB or 10,000 names, or a name that is not UTF-8, failed as the arena's (every game voided,
    the run never finished); now a refusal here is the build's fault, and a large build plays."""
    folder = read_folder(built.root, OWN_COPY)
    object.__setattr__(built, "_files_hashes", (folder.digest, folder.digest_v1, folder.digest_v2))


def _seat_reading(spec: BotSpec, mode: Containment) -> tuple[str, Path | None]:
    """What a gVisor seat's own copy of its bot's folder must hash to, and that folder: the run's
    reading of the bot (:meth:`~.manifest.BotSpec.files_hash`, of the folder the seat runs from: the
    bot's, or the arena's checked copy of it), and its root where the command runs in a folder
    below it (the copy is then of the root, compared whole, and serves the folder below). The copy
    is made at every seat's start, long after that reading, and compared with it whatever else
    already checked the folder. ("", None) for other modes, which bind the folder itself. A built
    copy was read at its build (:func:`_read_built`)."""
    if mode is not Containment.GVISOR:
        return "", None
    root = spec.root.resolve()
    return spec.files_hash(), (root if spec.workdir.resolve() != root else None)


def _binds(env: dict[str, str]) -> tuple[Path, ...]:
    """The arena's own package, where a contained Python bot is given it (its PYTHONPATH)."""
    return (Path(env["PYTHONPATH"]),) if env.get("PYTHONPATH") else ()


FIX_ACCESS = ("make it readable by other users (chmod o+rx on the bot's directory and every "
              "directory above it, o+x on its command), or pass --trusted-bots to run bots as the "
              "referee's own user on purpose")


@dataclass
class Launcher:
    """Starts bots for a tournament; builds each bot at most once per run.

    ``containment`` (made by :func:`containment_for`): AUTO (the default) contains every bot with
    bubblewrap where it works, else (root referee) with a private uid and namespaces; NAMESPACES
    skips bubblewrap (said on stderr); BUBBLEWRAP requires it; GVISOR requires gVisor; TRUSTED runs
    bots as the referee's own user with rlimits only, on purpose (``--trusted-bots``). Nothing
    falls back silently: a mode that
    cannot be had, or a bot that its private uid cannot run, is a ContainmentError that says
    how to fix it. docs/SANDBOX.md says what a bot can reach in each mode.
    """

    limits: Limits = field(default_factory=Limits)
    containment: Containment = Containment.AUTO
    system: tuple[str, ...] = ()  # extra system paths a stranger view holds, checked (filesystem.system_paths)
    view: SystemView = SystemView.HOST  # STRANGER: strangers' seats see the gVisor seat's view in every mode
    build_in_copy: bool = False  # trusted builds too, in a private copy (a worker's shared bot cache)
    warnings: list[str] = field(default_factory=list)
    built: dict[str, BotSpec | BuildError] = field(default_factory=dict)  # label -> the bot to run, or why not
    _mode: Containment | None = None
    _system_view: tuple[str, ...] = ()  # ``system`` checked and its presets resolved, once, with the mode
    _copies: list[Path] = field(default_factory=list, init=False, repr=False)  # its builds' and seats' copies' folders
    _served: dict[tuple[Path, str], Path] = field(default_factory=dict, init=False, repr=False)  # runnable()'s copies

    def release_builds(self) -> None:
        """Remove the copies this launcher's builds ran in (each up to ``BUILD_DISK_MB``), once no
        bot of it runs: its owner's work is over (a check, a run's pool). A long-lived process
        (``arena serve`` checks every upload, a Dask worker plays run after run) kept each one
        until it exited, a disk filled a build at a time. A later start builds again. The checked
        copies its seats ran from (:func:`runnable`) go too, for the same reason (a copy a reading)."""
        with _BUILD_LOCK:
            copies, self._copies = self._copies, []
            self.built.clear()
            self._served.clear()
        for where in copies:
            release_space(where)
            remove_tree(where)

    async def build(self, spec: BotSpec) -> BotSpec:
        """:meth:`build_now` in a worker thread, for a caller inside an event loop."""
        if spec.build is None:
            return spec
        return await trio.to_thread.run_sync(self.build_now, spec)

    def build_now(self, spec: BotSpec) -> BotSpec:
        """The bot to run for ``spec``: itself when it has no ``build``, else its built copy.

        A build is a stranger's code like the bot itself, so it runs under the same containment:
        in a copy of the bot's directory made for it (the only place it may write), as the bot's
        private uid, with no network and only the system visible. The copy is then handed back to
        the referee's user, read-only for everyone else, and every start of the bot uses it.
        Only ``--trusted-bots`` builds in place as the referee's user, except with
        ``build_in_copy`` (a cluster worker, whose bot folders are the machine's shared cache
        entries: a build there would change the files other runs take as verified). Each bot is built at most
        once per launcher; a failed build is remembered and raised again, not retried per game.
        It runs on the blocking shell, in the calling thread (one build at a time in a process).
        """
        if spec.build is None:
            return spec
        with _BUILD_LOCK:
            done = self.built.get(spec.label)
            if done is None:
                try:
                    done = (self._build_in_place(spec) if self.mode_now() is Containment.TRUSTED
                            else self._build_contained(spec))
                except BuildError as e:
                    done = e
                self.built[spec.label] = done
        if isinstance(done, BuildError):
            raise done
        return done

    def _build_in_place(self, spec: BotSpec) -> BotSpec:
        cmd = list(spec.build or ())
        if self.build_in_copy:
            try:
                spec = _relocated(spec, bot_copy(spec, "palace-arena-build-"))
            except BotCommandError as e:
                raise BuildError(f"{spec.label}: {e}") from None
            self._copies.append(spec.root.parent)
        try:
            done = process_registry().run(cmd, cwd=spec.workdir, text=True, timeout=BUILD_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise BuildError(f"{spec.label}: build {' '.join(cmd)!r} failed: {e}") from None
        if done.returncode != 0:
            tail = (done.stdout + done.stderr)[-2000:]
            raise BuildError(f"{spec.label}: build exited {done.returncode}:\n{tail}")
        return spec

    def _build_contained(self, spec: BotSpec) -> BotSpec:
        mode = self.mode_now()
        try:
            source = bot_copy(spec, "palace-arena-build-")  # start_bot gives it to the build's uid
        except BotCommandError as e:  # the bot's folder: its build fails, as its own doing
            raise BuildError(f"{spec.label}: {e}") from None
        self._copies.append(source.parent)  # (a failed build's is removed at once, below)
        space = bounded_space(source.parent, BUILD_DISK_MB * MiB, BUILD_ENTRIES)
        if space is None:  # not root: the watcher below is the only bound
            copy = source
        else:  # the build runs, and the bot then plays, from a copy on that tmpfs
            atexit.register(release_space, source.parent)  # runs before bot_copy's removal (LIFO)
            copy = space / source.name
            shutil.copytree(source, copy, symlinks=True)  # a tree of ours: files, folders, inner links
            shutil.rmtree(source)
        built = _relocated(spec, copy)
        build = dataclasses.replace(spec, command=spec.build or ())
        python, env = self._python(build, contained=True)
        plan = LaunchPlan(spec.label, tuple(argv(build, python)), built.workdir, BUILD_LIMITS, mode,
                          tuple({**spec.env, **env}.items()), _binds(env), writable_cwd=True,
                          system=self._system(mode), view=self._view(mode))
        try:
            proc = plan.start()
        except BotCommandError as e:  # the build's own program; the arena's troubles propagate as they are
            raise BuildError(f"{spec.label}: build {' '.join(spec.build or ())!r} cannot start: {e}. "
                             f"{CONTAINED_BUILD}") from None
        over: list[tuple[int, int]] = []

        def too_much() -> bool:
            seen = tree_usage(copy, BUILD_ENTRIES + 1, max_path=CAPS.path)
            if seen.bytes > BUILD_DISK_MB * MiB or seen.entries > BUILD_ENTRIES or seen.unseen:
                over.append(seen)
            return bool(over)

        with proc:  # leaving it kills all the build left running
            status, output = proc.run_to_end(BUILD_TIMEOUT_S, stop=too_much, look_every=BUILD_DISK_WATCH_S)
        if not over and space is not None and space_full(space):  # it ran into the tmpfs's bound
            over.append(tree_usage(copy, BUILD_ENTRIES + 1, max_path=CAPS.path))
        if over or too_much():
            release_space(source.parent)
            remove_tree(source.parent)  # the copy's own temporary directory
            used, entries, unseen = over[0]
            hidden = f", and folders nested past {CAPS.path} bytes of path" if unseen else ""
            raise BuildError(f"{spec.label}: the build wrote more than its folder may hold ({used >> 20} MiB in "
                             f"{entries} entries seen{hidden}; at most {BUILD_DISK_MB} MiB and {BUILD_ENTRIES} "
                             "entries): it was stopped and its files removed")
        if status != 0:  # nothing plays from it (the failure is kept): its space is given back now
            release_space(source.parent)
            remove_tree(source.parent)
            what = f"exited {status}" if status is not None else f"did not finish within {BUILD_TIMEOUT_S} s"
            tail = "\n".join(output)[-2000:]
            raise BuildError(f"{spec.label}: build {what} ({CONTAINED_BUILD}):\n{tail}")
        if space is not None:  # the bot plays from the disk: a tmpfs kept for the run held its bytes in memory
            try:
                copy_out(copy, source)
            except FolderError as e:
                release_space(source.parent)
                remove_tree(source.parent)
                raise BuildError(f"{spec.label}: the build left {e}") from None
            release_space(source.parent)
            space.rmdir()
            copy, built = source, _relocated(spec, source)
        chown_tree(copy, os.geteuid(), mode_for=_read_only_mode)
        if mode is Containment.GVISOR:  # each seat's own copy is compared with this reading (_seat_reading)
            try:
                _read_built(built)
            except FolderError as e:
                release_space(source.parent)
                remove_tree(source.parent)
                raise BuildError(f"{spec.label}: the build left {e}") from None
        return built

    async def mode(self) -> Containment:
        """The containment every bot of this launcher gets (decided once, probed on first use)."""
        return self.mode_now()

    def mode_now(self) -> Containment:
        """:meth:`mode` without an event loop (the probes block either way)."""
        if self._mode is None:
            self._mode = self._choose_mode()
        return self._mode

    def _choose_mode(self) -> Containment:
        asked = self.containment
        if not isinstance(asked, Containment):  # fail closed: no other value may mean a weaker mode
            raise ContainmentError(f"containment must be a Containment, not {asked!r}")
        if not isinstance(self.view, SystemView):
            raise ContainmentError(f"view must be a SystemView, not {self.view!r}")
        if asked is Containment.GVISOR or self.view is SystemView.STRANGER:
            try:  # again here, where the seats start: a worker gets the list over the wire
                self._system_view = system_paths(self.system)
            except SystemViewError as e:
                raise ContainmentError(f"{'gVisor' if asked is Containment.GVISOR else 'strangers'} seats' "
                                       f"system view: {e}") from None
        if asked is Containment.GVISOR:
            problem = gvisor_problem_now()
            if problem:
                raise ContainmentError(f"gVisor was asked for but cannot run here: {problem}")
            return Containment.GVISOR
        if asked is Containment.TRUSTED:
            if self.view is SystemView.STRANGER:
                raise ContainmentError("strangers' seats run contained: --trusted-bots has no stranger view")
            self._warn("--trusted-bots: bots run as the referee's own user "
                       f"(uid {os.geteuid()}) with rlimits only; they can read what it can read")
            return Containment.TRUSTED
        no_bwrap = "--no-sandbox was given" if asked is Containment.NAMESPACES else sandbox_problem_now()
        if no_bwrap is None:
            return Containment.BUBBLEWRAP
        if asked is Containment.BUBBLEWRAP:
            raise ContainmentError(f"the sandbox was asked for but bubblewrap cannot run here: {no_bwrap}")
        no_ns = namespaces_problem_now()
        if no_ns is None:
            if asked is Containment.NAMESPACES:
                self._warn("--no-sandbox: bots run without bubblewrap, contained by a private uid and "
                           "namespaces (no network, private /tmp, only the system and their own directory visible)")
            return Containment.NAMESPACES
        raise ContainmentError(
            f"no containment for bots on this machine: bubblewrap: {no_bwrap}; namespaces: {no_ns}. "
            "Install bubblewrap (Debian/Ubuntu: apt install bubblewrap), run the referee as root, "
            "or pass --trusted-bots to run bots as your own user on purpose")

    async def preflight(self, specs: Iterable[BotSpec]) -> None:
        """Fail before any game, with one ContainmentError, when bots cannot be contained here or
        a bot's private uid could not run it (rather than forfeiting each of its games)."""
        mode = await self.mode()
        if mode is Containment.TRUSTED or os.geteuid() != 0:
            return
        for spec in map(runnable, specs):
            if spec.human or not spec.command:
                continue
            found = python_for(True)
            cmd = argv(spec, found[0] if found else sys.executable)
            exe = resolve_command(cmd[0], spec.workdir, DEFAULT_PATH)
            for path, need in ((spec.workdir, os.R_OK | os.X_OK), (exe, os.X_OK)):
                if path is None:
                    continue  # a missing command is reported when the bot starts
                why = inaccessible_reason(path, BOT_UID_BASE, BOT_UID_BASE, need)
                if why:
                    raise ContainmentError(f"{spec.label}: a bot's private uid cannot use {path}: {why}; {FIX_ACCESS}")

    async def describe(self) -> str:
        """One line for ``arena check`` and logs: the containment bots get here."""
        return self.describe_now()

    def describe_now(self) -> str:
        """:meth:`describe` without an event loop (the probes block either way)."""
        try:
            mode = self.mode_now()
        except ContainmentError as e:
            return f"none: {e}"
        who = (f"the referee's uid {os.geteuid()}" if mode is Containment.TRUSTED
               else "a private uid per bot" if os.geteuid() == 0 else f"uid {os.geteuid()} mapped")
        cgroups = cgroup_root()[0]
        return describe_containment(mode, who=who, cgroup=cgroups.kind if cgroups else None,
                                    view=SystemView.STRANGER if mode is Containment.GVISOR else self.view)

    async def plan(self, spec: BotSpec) -> LaunchPlan:
        """:meth:`plan_now` for a caller inside an event loop (a build runs in a worker thread)."""
        if spec.refused:
            raise BotCommandError(spec.refused)
        if spec.build is not None:
            return self._plan(await self.build(spec))
        return self.plan_now(spec)

    def plan_now(self, spec: BotSpec) -> LaunchPlan:
        """How to start ``spec`` here (built, probed), once per bot per run: see :class:`LaunchPlan`.
        A :func:`~.manifest.refused_bot` is refused as the bot's own fault."""
        if spec.refused:
            raise BotCommandError(spec.refused)
        if spec.build is not None:
            return self._plan(self.build_now(spec))  # contained: a readable copy, like runnable()'s
        if self.mode_now() is Containment.TRUSTED:
            return self._plan(spec)
        with _BUILD_LOCK:  # (lanes plan on threads of their own)
            made = len(self._served)
            served = runnable(spec, self._served)
            if len(self._served) > made:
                self._copies.append(served.root.parent)
        return self._plan(served)

    def _plan(self, spec: BotSpec) -> LaunchPlan:
        mode = self.mode_now()
        python, env = self._python(spec, mode is not Containment.TRUSTED)
        files_hash, files_root = _seat_reading(spec, mode)
        return LaunchPlan(spec.label, tuple(argv(spec, python)), spec.workdir, limits_for(spec, self.limits), mode,
                          tuple({**spec.env, **env}.items()), _binds(env), system=self._system(mode),
                          view=self._view(mode), files_hash=files_hash, files_root=files_root)

    def _system(self, mode: Containment) -> tuple[str, ...]:
        """The extra system paths a stranger view (a gVisor seat's, or strangers' in any mode; a build's
        too) holds: the run's list as checked when the mode was chosen (the check walks every file
        below each path: not again per bot)."""
        return self._system_view if mode is Containment.GVISOR or self.view is SystemView.STRANGER else ()

    def _view(self, mode: Containment) -> SystemView:
        """What a bubblewrap or namespaces seat sees of the system (a gVisor bundle always holds the
        stranger view)."""
        return self.view if mode in (Containment.BUBBLEWRAP, Containment.NAMESPACES) else SystemView.HOST

    @staticmethod
    def _python(spec: BotSpec, contained: bool) -> tuple[str, dict[str, str]]:
        """What ``python3`` at the head of ``spec.command`` runs, and the environment it needs;
        nothing for any other program."""
        if not spec.command or spec.command[0] not in ("python3", "python"):
            return sys.executable, {}
        if spec.python:
            return spec.python, {}  # bot.toml's interpreter or venv: the author's choice
        found = python_for(contained)
        if found is None:
            raise ContainmentError("no Python 3.11+ that a contained bot may run: install python3 "
                                   "under /usr, or pass --trusted-bots")
        return found

    def _warn(self, text: str) -> None:
        if text not in self.warnings:
            self.warnings.append(text)
            print(f"warning: {text}", file=sys.stderr)
