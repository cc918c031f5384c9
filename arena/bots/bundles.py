"""Bot bundles: a bot's files packed on one machine and unpacked, verified and built on another.

A Dask worker may be a machine that never saw the bots' directories. The client
packs each bot (exactly the files :meth:`arena.bots.manifest.BotSpec.files_hash`
covers) into a reproducible tar.gz keyed by that hash; a worker unpacks it into
its cache, checks the unpacked files hash to the key, and builds it once per
machine. A directory in the cache therefore always holds verified files.
"""

from __future__ import annotations

import fcntl
import io
import os
import shutil
import stat
import tarfile
import tempfile
import threading
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import ArenaError
from .manifest import MANIFEST, BotSpec, ManifestError, _walk, load_bot

CACHE_ENV = "PALACE_ARENA_CACHE"


class BundleError(ArenaError, RuntimeError):
    """A bot's files arrived on a worker but do not match the hash they were sent under."""


def manifest_path(ref: str, spec: BotSpec) -> str:
    """The manifest's path relative to the bot's root (``bot.toml`` unless a file was named)."""
    p = Path(ref)
    if p.is_file():
        return str(p.resolve().relative_to(spec.root))
    return MANIFEST


def pack_bot(spec: BotSpec) -> bytes:
    """The bot's files (exactly those :meth:`BotSpec.files_hash` covers) as a reproducible tar.gz."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=6, format=tarfile.PAX_FORMAT) as tar:
        # gzip's header carries a timestamp; tarfile passes mtime=None -> now, so fix it below.
        for path in sorted(_walk(spec.root)):
            data = path.read_bytes()
            info = tarfile.TarInfo(str(path.relative_to(spec.root)))
            info.size = len(data)
            info.mode = 0o755 if os.stat(path).st_mode & stat.S_IXUSR else 0o644
            info.mtime = 0
            tar.addfile(info, io.BytesIO(data))
    raw = buf.getvalue()
    # Zero gzip's MTIME field (bytes 4..7) so the same files always give the same blob.
    return raw[:4] + b"\0\0\0\0" + raw[8:]


def unpack_bot(blob: bytes, dest: Path) -> None:
    dest.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        for member in tar.getmembers():
            if not (member.isfile() or member.isdir()):
                raise BundleError(f"bot bundle holds {member.name!r}, which is not a plain file")
            if member.name.startswith("/") or ".." in Path(member.name).parts:
                raise BundleError(f"bot bundle holds {member.name!r}, outside the bot's directory")
        if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4
            tar.extractall(dest, filter="data")
        else:
            tar.extractall(dest)


def cache_root() -> Path:
    """Where workers keep unpacked bots: ``$PALACE_ARENA_CACHE`` or a per-user dir under the temp dir.
    It must be readable by the bots' uid when the sandbox runs them as another user, so it is 0755
    and must belong to us and be writable by no one else."""
    env = os.environ.get(CACHE_ENV)
    root = Path(env) if env else Path(tempfile.gettempdir()) / f"palace-arena-cache-{os.geteuid()}"
    root.mkdir(mode=0o755, parents=True, exist_ok=True)
    st = root.lstat()
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise BundleError(f"bot cache {root} must be a directory owned by uid {os.geteuid()} and "
                          f"writable by no one else; set {CACHE_ENV} to another place")
    return root


@contextmanager
def _flock(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


_PREPARED: dict[tuple[Path, str], BotSpec] = {}  # (cache, hash) -> spec, once unpacked
_PREP_LOCKS: defaultdict[str, threading.Lock] = defaultdict(threading.Lock)
_PREP_GUARD = threading.Lock()


def prepare_bot(digest: str, manifest: str, blob: bytes, root: Path | None = None) -> BotSpec:
    """Unpack (once per machine) and verify a bot; its spec.

    The unpacked tree is renamed into ``<cache>/<hash>/bot`` only after its hash checked out, so
    a directory that exists was verified. Its ``build`` is not run here: the worker's Launcher
    builds it contained, in a copy, as a local run does (a build is a stranger's code too).
    """
    base = root or cache_root()
    with _PREP_GUARD:
        lock = _PREP_LOCKS[digest]
    with lock:
        known = _PREPARED.get((base, digest))
        if known is not None and known.root.is_dir():  # a temp-dir cleaner may have removed it
            return known
        home = base / digest
        with _flock(base / f"{digest}.lock"):
            if not home.is_dir():
                tmp = Path(tempfile.mkdtemp(prefix=f".{digest[:12]}-", dir=base))
                try:
                    unpack_bot(blob, tmp / "bot")
                    got = load_bot(tmp / "bot" / manifest).files_hash()
                    if got != digest:
                        raise BundleError(f"bot bundle {digest[:12]} unpacked to files hashing to {got[:12]}")
                    tmp.chmod(0o755)
                    tmp.rename(home)
                except BaseException:
                    shutil.rmtree(tmp, ignore_errors=True)
                    raise
            try:
                spec = load_bot(home / "bot" / manifest)
            except ManifestError as e:
                raise BundleError(str(e)) from None
        _PREPARED[(base, digest)] = spec
        return spec
