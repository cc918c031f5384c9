"""Bot bundles: a bot's files packed on one machine and unpacked, verified and built on another.

A Dask worker may be a machine that never saw the bots' directories. The client
packs each bot (exactly the files and links :func:`arena.bots.folder.read_folder`
lists, checked against the hash the run read the bot under; links stay links) into
a reproducible tar.gz keyed by that hash; a worker unpacks it into its cache, reads
the unpacked folder with the same reader (the same rules and caps), checks it hashes
to the key, and builds it once per machine. A directory in the cache therefore
always holds verified files.

The cache names an entry by the sha256 of its blob, not by the files hash the client sends:
the blob is what was unpacked (modes included), and a key the sender chooses would let one
run's entry stand in for another bot's files on that machine, in later runs too.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import os
import shutil
import stat
import tempfile
import threading
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

from ..errors import ArenaError
from .filesystem import SANDBOX_ROOT_DIRS, SYSTEM_DIRS, tree_usage
from .folder import ARENA_COPIES, CAPS, Entry, FolderError, Kind, Reader, pack_folder, read_folder
from .manifest import MANIFEST, BotSpec, ManifestError, load_bot
from .places import CACHE, arena_place

CACHE_ENV = "PALACE_ARENA_CACHE"


class BundleError(ArenaError, RuntimeError):
    """A bot's files arrived on a worker but do not match the hash they were sent under."""


class BundleRefused(BundleError):
    """A bundle that arrived whole whose own manifest is no bot (an author who rewrote it after
    the run had read it): the bot's fault, never the arena's."""


def manifest_path(ref: str, spec: BotSpec) -> str:
    """The manifest's path relative to the bot's root (``bot.toml`` unless a file was named)."""
    p = Path(ref)
    if p.is_file():
        return str(p.resolve().relative_to(spec.root))
    return MANIFEST


def pack_bot(spec: BotSpec) -> bytes:
    """The bot's files and links (exactly those its files hash covers, which they are checked
    against) as a reproducible tar.gz; a link is packed as a link, never as what it names."""
    import tarfile  # here: every process that seats a Python bot imports this module for its cache

    folder = read_folder(spec.root)
    if folder.digest != spec.files_hash():
        raise FolderError(f"{spec.root}: {spec.label}'s files changed since the run read them; run again")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=6, format=tarfile.PAX_FORMAT) as tar:
        # gzip's header carries a timestamp; tarfile passes mtime=None -> now, so fix it below.
        def add(entry: Entry, src: Reader | None) -> None:
            info = tarfile.TarInfo(entry.path)
            info.mtime = 0
            if entry.kind is Kind.DIR:  # the hash covers folders, empty ones too
                info.type, info.mode = tarfile.DIRTYPE, 0o755
            elif entry.kind is Kind.LINK:
                info.type, info.linkname, info.mode = tarfile.SYMTYPE, entry.target, 0o777
            else:
                info.size, info.mode = entry.size, 0o755 if entry.executable else 0o644
            tar.addfile(info, src)  # type: ignore[arg-type]
        pack_folder(folder, add)
    raw = buf.getvalue()
    # Zero gzip's MTIME field (bytes 4..7) so the same files always give the same blob.
    return raw[:4] + b"\0\0\0\0" + raw[8:]


def unpack_bot(blob: bytes, dest: Path) -> None:
    """Unpack a bundle under ``dest`` (made here): files, folders and links that stay inside it,
    within the caps of a bot folder, counted from the headers before anything is written."""
    import tarfile

    if not hasattr(tarfile, "data_filter"):  # fail closed: without it a link could lead a file out of dest
        raise BundleError("unpacking a bot bundle needs Python 3.11.4 or later (tarfile's data filter)")
    dest.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        members = tar.getmembers()
        total = 0
        for member in members:
            if not (member.isfile() or member.isdir() or member.issym()):
                raise BundleError(f"bot bundle holds {member.name!r}, which is not a plain file, folder or link")
            if member.name.startswith("/") or ".." in Path(member.name).parts:
                raise BundleError(f"bot bundle holds {member.name!r}, outside the bot's directory")
            total += member.size
        if len(members) > CAPS.files or total > CAPS.bytes:
            raise BundleError(f"bot bundle holds more than a bot folder may ({len(members)} entries, {total} bytes)")
        try:
            tar.extractall(dest, filter="data")  # refuses links that lead out of dest
        except (tarfile.TarError, OSError) as e:  # a filter's refusal, or a file written through a link
            raise BundleError(f"bot bundle refused: {e}") from None


def cache_root() -> Path:
    """Where workers keep unpacked bots: ``$PALACE_ARENA_CACHE``, else this user's place for it
    (:func:`~.places.arena_place`: ``/var/cache/palace-arena/bots`` as root, else ``~/.cache/palace-arena/bots``).
    It must belong to us and is ``0700`` (an older arena's ``0755`` is closed): it holds every
    ladder member a worker has seated, which no other local user may read; seats run from the
    arena's own copies (:data:`~.folder.ARENA_COPIES`, marked in it; ``launch.runnable``). It may
    not lie in the system every contained bot sees (/usr, /etc...)."""
    env = os.environ.get(CACHE_ENV)
    root = Path(env) if env else arena_place(CACHE)
    real = Path(os.path.realpath(root))
    seen = [d for d in (*SYSTEM_DIRS, *SANDBOX_ROOT_DIRS) if real.is_relative_to(os.path.realpath(d))]
    if seen:
        raise BundleError(f"bot cache {root} lies in {seen[0]}, which every contained bot sees; set "
                          f"{CACHE_ENV} to another place")
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = root.lstat()
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise BundleError(f"bot cache {root} must be a directory owned by uid {os.geteuid()} and "
                          f"writable by no one else; set {CACHE_ENV} to another place")
    if st.st_mode & 0o077:
        root.chmod(0o700)
    (root / ARENA_COPIES).touch()
    return root


def _lock_file(path: Path) -> int:
    """A descriptor of the lock file ``path`` (made if missing), which only the cache's uid may open:
    a file another user could open, she could flock, and a worker waiting on it would wait for ever
    (older versions made them 0644: narrowed here)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.fchmod(fd, 0o600)
    except OSError:
        os.close(fd)
        raise
    return fd


@contextmanager
def _flock(path: Path) -> Iterator[None]:
    fd = _lock_file(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


_PREPARED: dict[tuple[Path, str, str], BotSpec] = {}  # (cache, blob's sha256, manifest) -> spec, once unpacked
_PREP_LOCKS: defaultdict[str, threading.Lock] = defaultdict(threading.Lock)
_PREP_GUARD = threading.Lock()


def bundle_key(blob: bytes) -> str:
    """The name of a blob's cache entry (its sha256); a caller that prepares one blob often keeps it."""
    return hashlib.sha256(blob).hexdigest()


MIN_FREE_BYTES = 256 << 20  # what unpacking a bot leaves free on the cache's disk, beside the largest bot
MAX_CACHE_BYTES = 4 << 30
"""What the entries of a worker's cache may take before a new one evicts the least recently used
entries that no process is using (:func:`evict`); ``PALACE_ARENA_CACHE_BYTES`` overrides it."""
CACHE_BYTES_ENV = "PALACE_ARENA_CACHE_BYTES"
_KEY_CHARS = frozenset("0123456789abcdef")


class Holds:
    """The cache entries one user (a run on a worker) has in use: a shared ``flock`` on each entry's
    ``<key>.use`` file, taken while the entry cannot be evicted (under its ``<key>.lock``) and kept
    until :meth:`release`. The kernel drops them with the process, so a killed worker holds nothing;
    :func:`evict` removes an entry only when it can lock ``.use`` exclusively, in any process."""

    def __init__(self) -> None:
        self._fds: dict[tuple[Path, str], int] = {}
        self._guard = threading.Lock()

    def __reduce__(self):  # a run's referee travels to its workers pickled: it arrives holding nothing
        return (Holds, ())

    def holds(self, base: Path, key: str) -> bool:
        return (base, key) in self._fds

    def _take(self, base: Path, key: str) -> None:
        """Called with the entry's ``.lock`` held, so no eviction runs between its check and this."""
        with self._guard:
            if (base, key) in self._fds:
                return
            fd = _mark_used(base / f"{key}.use")
            fcntl.flock(fd, fcntl.LOCK_SH)
            self._fds[(base, key)] = fd

    def release(self) -> None:
        with self._guard:
            fds, self._fds = self._fds, {}
        for fd in fds.values():
            os.close(fd)


def cache_bound() -> int:
    raw = os.environ.get(CACHE_BYTES_ENV)
    if raw is None:
        return MAX_CACHE_BYTES
    try:
        return max(0, int(raw))
    except ValueError:
        raise BundleError(f"{CACHE_BYTES_ENV}={raw!r}: expected a number of bytes") from None


def evict(base: Path, bound: int) -> list[str]:
    """Remove the least recently used entries of the cache at ``base`` that no process is using
    until the entries take at most ``bound`` bytes; the keys removed. An entry is skipped while any
    process prepares it (its ``.lock``) or holds it (:class:`Holds`, its ``.use``): both are taken
    without waiting, so two processes evicting at once each remove only what they locked. The
    entry is renamed away first, so no reader ever finds it half removed. Lock files stay (a few
    bytes each): removing one another process has open would split its lock from the next one's.
    :func:`prepare_bot` calls it with the cache's :data:`UNPACK_LOCK` held."""
    entries = []
    for path in base.iterdir():
        if path.name.startswith(".") or set(path.name) - _KEY_CHARS or not path.is_dir() or path.is_symlink():
            continue
        try:
            used = os.stat(base / f"{path.name}.use").st_mtime
        except OSError:
            used = path.stat().st_mtime
        entries.append((used, path.name, tree_usage(path, CAPS.files + 2)[0]))
    total = sum(size for _, _, size in entries)
    removed = []
    for _, key, size in sorted(entries):
        if total <= bound:
            break
        lock = _lock_file(base / f"{key}.lock")
        use = _lock_file(base / f"{key}.use")
        try:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.flock(use, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # being prepared or in use: never removed
            gone = Path(tempfile.mkdtemp(prefix=f".evicted-{key[:12]}-", dir=base))
            try:
                (base / key).rename(gone / key)
            except FileNotFoundError:
                gone.rmdir()
                continue
            shutil.rmtree(gone, ignore_errors=True)
            total -= size
            removed.append(key)
        finally:
            os.close(use)
            os.close(lock)
    for known in [t for t in _PREPARED if t[0] == base and t[1] in removed]:
        _PREPARED.pop(known, None)
    return removed


def prepare_bot(digest: str, manifest: str, blob: bytes, root: Path | None = None, key: str | None = None,
                hold: Holds | None = None) -> BotSpec:
    """Unpack (once per machine) and verify a bot; its spec.

    The unpacked tree is renamed into ``<cache>/<blob's sha256>/bot`` only after its files hash
    checked out, so a directory that exists was verified and holds exactly that blob's files.
    Its ``build`` is not run here: the worker's Launcher builds it contained, in a copy, as a
    local run does (a build is a stranger's code too). Every new version of a ladder's bots lands
    in every worker's cache, so before a new entry is unpacked the least recently used entries no
    process holds are evicted down to :func:`cache_bound` (:func:`evict`); with ``hold`` the entry
    is held in use until ``hold.release()``, so no eviction removes it under a running bot. A new
    entry is still refused while the cache's disk could not hold the largest bot and keep
    ``MIN_FREE_BYTES`` free.
    """
    base = root or cache_root()
    key = key or bundle_key(blob)
    where = PurePosixPath(manifest)
    if not manifest or where.is_absolute() or ".." in where.parts:
        raise BundleError(f"bot bundle {digest[:12]}: manifest path {manifest!r} leaves the bot's folder")
    with _PREP_GUARD:
        lock = _PREP_LOCKS[key]
    with lock:
        known = _PREPARED.get((base, key, manifest))
        if known is not None and known.root.is_dir() and (hold is None or hold.holds(base, key)):
            return known  # (a temp-dir cleaner may have removed it)
        with cache_entry(base, key, lambda tmp: _unpack_entry(base, tmp, digest, blob),
                         lambda entry: _still_verified(entry / "bot", digest), hold) as entry:
            try:
                spec = load_bot(entry / "bot" / manifest)
            except ManifestError as e:  # named within the bot's folder, not by the worker's cache
                raise BundleRefused(str(e).replace(f"{entry / 'bot'}/", "")) from None
        _PREPARED[(base, key, manifest)] = spec
        return spec


UNPACK_LOCK = "unpack.lock"


def _still_verified(tree: Path, digest: str) -> bool:
    """Whether an entry verified when it was unpacked still hashes to ``digest``: read again once
    per run that seats it (its hold's first take), as anything with the worker's uid, or a temp-dir
    cleaner, may have changed it since."""
    try:
        return read_folder(tree).digest == digest
    except FolderError:
        return False


def _set_aside(base: Path, key: str) -> None:
    """Move an entry out of the way (a reader never finds it half removed) and remove it."""
    gone = Path(tempfile.mkdtemp(prefix=f".edited-{key[:12]}-", dir=base))
    (base / key).rename(gone / key)
    shutil.rmtree(gone, ignore_errors=True)


@contextmanager
def cache_entry(base: Path, key: str, make: Callable[[Path], None], still_good: Callable[[Path], bool],
                hold: Holds | None = None, bound: int | None = None) -> Iterator[Path]:
    """The entry ``base/key`` of a cache of the machine (a bot unpacked, the arena's own package),
    locked against eviction while the caller reads it. Made once per machine: ``make`` fills a new
    temporary folder of the cache (and checks what it wrote), renamed into place whole, so an entry
    that exists is complete, whoever was killed meanwhile. Found made, it is used only where
    ``still_good`` holds (anything with the cache's uid, or a temp-dir cleaner, may have changed it
    since); otherwise it is set aside and made afresh. With ``hold`` it stays held in use (never
    evicted) until ``hold.release()``; without, it is stamped used. Before an entry is made, the
    least recently used entries no process holds go, down to ``bound`` bytes (:func:`cache_bound`
    unless given)."""
    with _flock(base / f"{key}.lock"):
        if not (base / key).is_dir() or not still_good(base / key):
            # One entry made at a time per cache, whatever the process; and every temporary folder
            # of the cache is made with this lock held, as _make_entry takes any it finds for a
            # killed process's (an entry set aside without it lost its folder to another's make).
            with _flock(base / UNPACK_LOCK):
                if (base / key).is_dir():
                    _set_aside(base, key)  # changed since it was made: never used, made afresh
                _make_entry(base, key, make, cache_bound() if bound is None else bound)
        if hold is not None:
            hold._take(base, key)
        else:
            _touch(base / f"{key}.use")
        yield base / key


def _make_entry(base: Path, key: str, make: Callable[[Path], None], bound: int) -> None:
    """Make ``base/key`` with ``make``; called with the cache's :data:`UNPACK_LOCK` held, so any
    temporary folder found (``.<key>-*``, ``.evicted-*``) is what a killed process left: removed.
    The least recently used entries no process holds go first, down to ``bound`` bytes."""
    for left in base.iterdir():
        if left.name.startswith(".") and left.is_dir() and not left.is_symlink():
            shutil.rmtree(left, ignore_errors=True)
    evict(base, bound)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key[:12]}-", dir=base))
    try:
        make(tmp)
        tmp.chmod(0o755)
        tmp.rename(base / key)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _unpack_entry(base: Path, tmp: Path, digest: str, blob: bytes) -> None:
    """Unpack and verify ``blob`` into ``tmp/bot`` (:func:`cache_entry`'s ``make``), once the disk
    of the cache at ``base`` was found to hold a bot's largest unpacking (checked with the cache's
    lock held, so the free space is not spent by another process's unpack meanwhile)."""
    free = shutil.disk_usage(base).free
    if free < CAPS.bytes + MIN_FREE_BYTES:
        raise BundleError(f"bot bundle {digest[:12]} refused: the bot cache {base} is short of disk "
                          f"({free / 2**20:,.0f} MiB free; a bot may unpack to {CAPS.bytes >> 20} MiB "
                          f"and {MIN_FREE_BYTES >> 20} MiB stay free): set {CACHE_BYTES_ENV} lower "
                          "(entries in use are never evicted), or point PALACE_ARENA_CACHE at a larger disk")
    unpack_bot(blob, tmp / "bot")
    try:
        got = read_folder(tmp / "bot").digest  # the same rules as where it was packed
    except FolderError as e:
        raise BundleError(f"bot bundle {digest[:12]} refused: {e}") from None
    if got != digest:
        raise BundleError(f"bot bundle {digest[:12]} unpacked to files hashing to {got[:12]}")


def _mark_used(path: Path) -> int:
    """Stamp an entry's ``.use`` file now (eviction takes the least recently used first); its
    descriptor, for a holder to lock."""
    fd = _lock_file(path)
    try:
        os.utime(fd)
    except OSError:
        os.close(fd)
        raise
    return fd


def _touch(path: Path) -> None:
    os.close(_mark_used(path))
