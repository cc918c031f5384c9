"""The one reader of a bot folder: what every path that hashes, copies, packs or unpacks a bot uses.

A bot folder is a stranger's: the referee (often root) must never follow it somewhere else, block
on it, or read it whole into memory. So a folder is read once, without following any link, into
a :class:`Folder` (its entries and their hash), and every copy or pack is made from that listing
and checked against its hash while it is written. The rules (docs/SANDBOX.md, "What a bot folder
may hold"):

* only regular files, folders and symbolic links; a FIFO, socket or device is refused, named,
  and so is a hard link (where the kernel allows linking a file one cannot read, that file would
  be read as root);
* a link stays a link: relative, and it leads only to a file inside the folder (or to nothing
  yet, such as a build's output); a link to an absolute path, out of the folder, to a folder
  (``a -> .`` loops) or through another link to any of those is refused, named;
* a file counts as the larger of its length and the blocks it holds, so a sparse file is refused
  by its length before it is read; files are hashed in chunks;
* at most :data:`CAPS` files, bytes, folder depth and path length (every copy is written by path,
  and a path past the kernel's 4,096 bytes could be read but never copied);
* build outputs and environments (:data:`SKIP_DIRS`, :data:`SKIP_SUFFIXES`) are not part of the
  bot: neither hashed, copied nor packed. The reading notes the build outputs it left out
  (:data:`OUTPUT_DIRS`, :data:`OUTPUT_SUFFIXES`: :attr:`Folder.outputs`), so that a bot which would
  need them and has no ``build`` to make them is refused on every path alike
  (:meth:`~.manifest.BotSpec.files_hash`), never served them from its author's folder on one path
  and played without them on another.

Every refusal is a :class:`FolderError` (a :class:`ManifestError`: a bot that cannot be loaded)
naming the file; nothing here raises a bare ``OSError`` for what a folder holds.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import shutil
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from ..errors import ArenaError

OUTPUT_DIRS = frozenset({"target", "node_modules", ".venv"})
OUTPUT_SUFFIXES = (".class", ".o")
"""What a build makes (compiled classes and objects, Cargo's and Maven's ``target``, installed
packages): not the bot's files, and what a bot that needs them must make in its ``build``."""
SKIP_DIRS = frozenset({".git", "__pycache__"}) | OUTPUT_DIRS
SKIP_SUFFIXES = (".pyc", *OUTPUT_SUFFIXES)
NAMED_OUTPUTS = 3  # how many of the build outputs a reading left out it names
ARENA_COPIES = ".arena-bot-copies"
"""A marker file: the directory holding it keeps the arena's own copies of bots (a ladder's
submissions inside the closed store directory, uploads, a worker's bot cache), which no bot uid
nor other user may enter: its seats run from a copy the arena makes (``launch.runnable``)."""
CHUNK = 1 << 20
V2 = "v2:"  # the prefix of a framed files hash without modes or folders, read only to verify old records
V3 = "v3:"  # the prefix of the files hash every new record uses (:func:`read_folder`)
MANIFEST_BYTES = 1 << 20  # a bot.toml is a few hundred bytes


class ManifestError(ArenaError, ValueError):
    """A bot that cannot be loaded: its manifest is missing, unreadable or incomplete (the message
    says which field), or its folder holds what a bot may not (:class:`FolderError`)."""


class FolderError(ManifestError):
    """A bot folder refused: the message names the file and the rule it breaks."""


@dataclass(frozen=True)
class Caps:
    """How much a bot folder may hold (files and links, bytes counted by length or blocks, depth, and
    the UTF-8 bytes of a path inside it: the copy's own place, up to the kernel's 4,096 in all,
    must fit beside it)."""

    files: int = 10_000
    bytes: int = 256 << 20
    depth: int = 32
    path: int = 1024


CAPS = Caps()


class Kind(Enum):
    FILE = "file"
    DIR = "folder"
    LINK = "link"


@dataclass(frozen=True)
class Entry:
    path: str  # relative to the folder, '/'-separated
    kind: Kind
    size: int = 0  # a file's length
    executable: bool = False
    target: str = ""  # a link's text
    inode: tuple[int, int] = (0, 0)  # a file's (device, inode) when listed

    @property
    def parts(self) -> tuple[str, ...]:
        return tuple(self.path.split("/"))


@dataclass(frozen=True)
class Folder:
    """A bot folder as read once: its entries in hash order and the hashes of their contents
    (``digest``, the framed ``v3:`` hash every new record uses; ``digest_v2`` and ``digest_v1``,
    the ones older stores hold, read only to verify them: :meth:`BotSpec.has_files`)."""

    root: Path
    inode: tuple[int, int]
    entries: tuple[Entry, ...]
    digest: str
    digest_v1: str = ""
    digest_v2: str = ""
    outputs: tuple[str, ...] = ()  # the first build outputs left out (:data:`NAMED_OUTPUTS`, paths in the folder)


def read_folder(root: Path, caps: Caps = CAPS, *, arenas_own: bool = False) -> Folder:
    """List and hash the folder at ``root`` without following any link in it; refuse what it
    may not hold (:class:`FolderError`, naming the file).

    The digest (:func:`_frame`) is ``v3:`` and sha256 over one frame per file, link or folder, in
    path order: its kind (an executable file is a kind of its own), its path's length and path,
    its size and the sha256 of its bytes (a link's text), so no two folders that split the same
    bytes differently, differ in an executable bit or in an empty folder hash alike. ``digest_v2``
    (files and links only, no mode) and ``digest_v1`` (each path, NUL and bytes joined without
    lengths) are kept only to verify hashes older stores hold.

    ``arenas_own``: a tree of the arena's own (its package and the copy of it bots import), not a
    bot's: no v1 or v2 hash ("": no store record names it, and v1 reads every byte twice), and a
    file may have other names (each gVisor seat hard-links the package copy's files)."""
    root = Path(root)
    fd = _open_root(root)
    try:
        st = os.fstat(fd)
        outputs: list[str] = []
        entries = sorted(_walk(root, fd, "", 1, caps, [0, 0, 0], outputs, arenas_own), key=lambda e: e.parts)
        _check_links(root, entries)
        digest, v1, v2 = _replay(root, fd, entries, None, legacy=not arenas_own)
    finally:
        os.close(fd)
    return Folder(root, (st.st_dev, st.st_ino), tuple(entries), digest, v1, v2, tuple(sorted(outputs)))


def copy_folder(folder: Folder, dest: Path) -> None:
    """Write ``folder``'s entries under ``dest`` (which must not exist): files 0644 or 0755, links
    as links. What is written must hash to ``folder.digest`` (the folder is read again, not
    trusted to be unchanged); otherwise the copy is removed and :class:`FolderError` raised."""
    dest = Path(dest)
    dest.mkdir(mode=0o755)

    def add(entry: Entry, src: Reader | None) -> None:
        target = dest / entry.path
        if entry.kind is Kind.DIR:
            target.mkdir(mode=0o755)
        elif entry.kind is Kind.LINK:
            os.symlink(entry.target, target)
        else:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                         0o755 if entry.executable else 0o644)
            assert src is not None  # a file comes with its reader
            with os.fdopen(fd, "wb") as out:
                shutil.copyfileobj(src, out, CHUNK)

    try:
        pack_folder(folder, add)
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise


def pack_folder(folder: Folder, add: Callable[[Entry, Reader | None], None]) -> None:
    """Hand each entry of ``folder`` to ``add`` in hash order, a file with a :class:`Reader` of its
    bytes (exactly its listed length, streamed), and check what was read against ``folder.digest``
    (a folder changed since it was read is refused)."""
    fd = _open_root(folder.root, folder.inode)
    try:
        digest, _, _ = _replay(folder.root, fd, folder.entries, add, legacy=False)
    finally:
        os.close(fd)
    if digest != folder.digest:
        raise FolderError(f"{folder.root}: the bot's files changed since they were read; run again")


def read_manifest(path: Path) -> str:
    """The text of a manifest: a regular file of at most :data:`MANIFEST_BYTES`, opened without
    blocking (a FIFO is refused, not waited on). A link is followed only to a file inside the
    manifest's own folder, through no other link, and never into what the reader leaves out
    (``.git``, ``__pycache__``, build outputs): a manifest there was in no files hash, edited
    under the run's reading unseen, and absent from every copy (a ladder's snapshot kept no bot)."""
    path = Path(path)
    root = path.parent.resolve()
    parts: tuple[str, ...] = (path.name,)
    try:
        st = os.lstat(root / path.name)
        if stat.S_ISLNK(st.st_mode):
            target = os.readlink(root / path.name)
            where = _link_target(path.name, target)
            if where is None:
                raise FolderError(f"{path}: the manifest is a link ({target!r}) that leads out of the bot's folder")
            parts = tuple(where.split("/"))
            if set(parts) & SKIP_DIRS or where.endswith(SKIP_SUFFIXES):  # its text would be in no files hash
                raise FolderError(f"{path}: the manifest is a link ({target!r}) to a file the arena leaves out of "
                                  f"the bot ({', '.join(sorted(SKIP_DIRS))} and *{', *'.join(SKIP_SUFFIXES)} are "
                                  "not part of it); make bot.toml a file of the bot")
        root_fd = _open_root(root)
        try:
            fd = _open_below(root_fd, parts)
        finally:
            os.close(root_fd)
    except OSError as e:
        raise FolderError(f"{path}: cannot read the manifest: {e.strerror}") from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FolderError(f"{path}: the manifest is a {_kind_name(st.st_mode)}, not a file")
        data = fh.read(MANIFEST_BYTES + 1)
    if len(data) > MANIFEST_BYTES:
        raise FolderError(f"{path}: the manifest is larger than {MANIFEST_BYTES >> 10} KiB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FolderError(f"{path}: the manifest is not UTF-8 ({e.reason} at byte {e.start})") from None


# --------------------------------------------------------------------------- the walk


def _open_root(root: Path, inode: tuple[int, int] | None = None) -> int:
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        raise FolderError(f"{root}: cannot read the bot's folder: {e.strerror}") from None
    st = os.fstat(fd)
    if inode is not None and (st.st_dev, st.st_ino) != inode:
        os.close(fd)
        raise FolderError(f"{root}: the bot's folder was replaced since it was read; run again")
    return fd


def _kind_name(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "character device"),
                       (stat.S_ISBLK, "block device"), (stat.S_ISDIR, "folder"), (stat.S_ISLNK, "link")):
        if test(mode):
            return name
    return "special file"


def _walk(root: Path, dfd: int, rel: str, depth: int, caps: Caps, count: list[int],
          outputs: list[str], arenas_own: bool) -> Iterator[Entry]:
    """The entries below the open folder ``dfd`` (at ``rel``), never following a link; the first
    build outputs it leaves out go to ``outputs``; ``arenas_own``: see :func:`read_folder`."""
    for name in _names(root, rel, dfd):
        path = f"{rel}/{name}" if rel else name
        where = root / path
        count[2] += 1  # every name, what is left out too: a folder of millions is refused as it is listed
        if count[2] > caps.files:
            raise FolderError(f"{where}: the bot's folder holds more than {caps.files} entries (build outputs "
                              "and compiled files counted)")
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            raise FolderError(f"{root / rel!s}: a file name that is not UTF-8 ({name!r})") from None
        if len(path.encode()) > caps.path:
            shown = path if len(path) <= 160 else f"{path[:80]}…{path[-60:]}"
            raise FolderError(f"{root / shown}: a path longer than {caps.path} bytes inside the bot's folder")
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except OSError as e:
            raise FolderError(f"{where}: cannot read it: {e.strerror}") from None
        mode = st.st_mode
        if stat.S_ISDIR(mode):
            if name in SKIP_DIRS:
                if name in OUTPUT_DIRS and len(outputs) < NAMED_OUTPUTS:
                    outputs.append(path + "/")
                continue
            if depth >= caps.depth:
                raise FolderError(f"{where}: folders nested deeper than {caps.depth} levels")
            kind = Kind.DIR
        elif stat.S_ISREG(mode):
            if name.endswith(SKIP_SUFFIXES):
                if name.endswith(OUTPUT_SUFFIXES) and len(outputs) < NAMED_OUTPUTS:
                    outputs.append(path)
                continue
            if st.st_nlink > 1 and not arenas_own:  # another name of it may be a file the author could never read
                raise FolderError(f"{where}: a file with {st.st_nlink - 1} other name(s) (a hard link); "
                                  "a bot folder holds its own files: copy it instead")
            kind = Kind.FILE
            count[1] += max(st.st_size, st.st_blocks * 512)  # a sparse file by its length
            if count[1] > caps.bytes:
                raise FolderError(f"{where}: the bot's files exceed {caps.bytes >> 20} MiB "
                                  f"(this one is {st.st_size} bytes long)")
        elif stat.S_ISLNK(mode):
            kind = Kind.LINK
        else:
            raise FolderError(f"{where}: a {_kind_name(mode)}; a bot folder holds only files, folders and links")
        count[0] += 1
        if count[0] > caps.files:
            raise FolderError(f"{where}: the bot's folder holds more than {caps.files} entries")
        if kind is Kind.LINK:
            try:
                target = os.readlink(name, dir_fd=dfd)
            except OSError as e:
                raise FolderError(f"{where}: cannot read the link: {e.strerror}") from None
            try:  # its text is hashed and packed as UTF-8, as names are
                target.encode("utf-8")
            except UnicodeEncodeError:
                raise FolderError(f"{where}: a link whose text is not UTF-8 ({target!r})") from None
            yield Entry(path, kind, target=target)
        elif kind is Kind.FILE:
            yield Entry(path, kind, st.st_size, bool(mode & stat.S_IXUSR), inode=(st.st_dev, st.st_ino))
        else:
            yield Entry(path, kind)
            try:
                sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
            except OSError as e:
                raise FolderError(f"{where}: cannot open the folder: {e.strerror}") from None
            try:
                yield from _walk(root, sub, path, depth + 1, caps, count, outputs, arenas_own)
            finally:
                os.close(sub)


def _names(root: Path, rel: str, dfd: int) -> Iterator[str]:
    """The names in the open folder ``dfd``, streamed (a listing of millions of names whole took
    memory in proportion before any cap was looked at)."""
    try:
        with os.scandir(dfd) as listing:
            for found in listing:
                yield found.name
    except OSError as e:
        raise FolderError(f"{root / rel}: cannot list this folder: {e.strerror}") from None


def _link_target(link: str, target: str) -> str | None:
    """Where the link at ``link`` (a path in the folder) leads, lexically, as a path in the
    folder; None if it leads out of it or to the folder itself."""
    if target.startswith("/") or not target:
        return None
    norm = posixpath.normpath(posixpath.join(posixpath.dirname(link), target))
    if norm in (".", "..") or norm.startswith("../"):
        return None
    return norm


def _check_links(root: Path, entries: list[Entry]) -> None:
    """Every link leads, through links of the folder only, to a file of the folder or to nothing."""
    index = {e.path: e for e in entries}
    for entry in entries:
        if entry.kind is not Kind.LINK:
            continue
        seen = {entry.path}
        cur = entry
        while True:
            norm = _link_target(cur.path, cur.target)
            if norm is None:
                raise FolderError(f"{root / entry.path}: a link to {entry.target!r}, which is outside the bot's "
                                  "folder; a link may lead only to a file inside it")
            parts = norm.split("/")
            for i in range(1, len(parts)):
                above = index.get("/".join(parts[:i]))
                if above is not None and above.kind is Kind.LINK:
                    raise FolderError(f"{root / entry.path}: a link to {entry.target!r}, through the link "
                                      f"{above.path!r}; a link may lead only to a file inside the folder")
            found = index.get(norm)
            if found is None or found.kind is Kind.FILE:
                break
            if found.kind is Kind.DIR:
                raise FolderError(f"{root / entry.path}: a link to the folder {entry.target!r}; a link may lead "
                                  "only to a file (a link to a folder can loop)")
            if found.path in seen:
                raise FolderError(f"{root / entry.path}: links that lead in a circle ({entry.target!r})")
            seen.add(found.path)
            cur = found


# --------------------------------------------------------------------------- reading the files


def _hash_entry(entry: Entry, h: "hashlib._Hash") -> None:
    """The unframed (v1) prefix of an entry: path, NUL (and a link's marker and text)."""
    h.update(entry.path.encode() + b"\0")
    if entry.kind is Kind.LINK:
        h.update(b"\0symlink\0" + entry.target.encode())


def _frame(entry: Entry, size: int, content: bytes, modes: bool = True) -> bytes:
    """An entry's frame: kind, path length and path, size, sha256 of its content; every field
    has a fixed length or is preceded by its length, so the frames of two folders are equal only
    if their entries are. ``modes``: the v3 kinds (an executable file ``X``, a folder ``D``);
    without, the v2 frame (``F`` for every file)."""
    path = entry.path.encode()
    kind = (b"L" if entry.kind is Kind.LINK else b"D" if entry.kind is Kind.DIR
            else b"X" if modes and entry.executable else b"F")
    return kind + len(path).to_bytes(8, "big") + path + size.to_bytes(8, "big") + content


class Reader:
    """A listed file's bytes, read in chunks and hashed as they pass: exactly its listed length."""

    def __init__(self, root: Path, entry: Entry, fd: int, *hashes: "hashlib._Hash"):
        self.root, self.entry, self.fd, self.hashes, self.left = root, entry, fd, hashes, entry.size

    def read(self, n: int | None = -1) -> bytes:
        n = self.left if n is None or n < 0 else min(n, self.left)
        if n == 0:
            return b""
        chunk = os.read(self.fd, min(n, CHUNK))
        if not chunk:
            raise FolderError(f"{self.root / self.entry.path}: shrank while the bot was read; run again")
        self.left -= len(chunk)
        for h in self.hashes:
            h.update(chunk)
        return chunk

    def finish(self) -> None:
        while self.read(CHUNK):
            pass
        if os.read(self.fd, 1):
            raise FolderError(f"{self.root / self.entry.path}: grew while the bot was read; run again")


def _open_below(root_fd: int, parts: tuple[str, ...]) -> int:
    """The file at ``parts`` below the open folder ``root_fd``, opened read-only without blocking
    and with no link followed on the way (OSError otherwise)."""
    fds: list[int] = []
    cur = root_fd
    try:
        for part in parts[:-1]:
            cur = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=cur)
            fds.append(cur)
        return os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=cur)
    finally:
        for d in fds:
            os.close(d)


def _open_file(root: Path, root_fd: int, entry: Entry) -> int:
    """The listed file ``entry``, opened below ``root_fd`` (:func:`_open_below`) and checked to be
    the very file listed (a swap in between is refused)."""
    try:
        fd = _open_below(root_fd, entry.parts)
    except OSError as e:
        raise FolderError(f"{root / entry.path}: changed while the bot was read ({e.strerror}); run again") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != entry.inode or st.st_size != entry.size:
        os.close(fd)
        raise FolderError(f"{root / entry.path}: changed while the bot was read; run again")
    return fd


def _replay(root: Path, root_fd: int, entries: tuple[Entry, ...] | list[Entry],
            add: Callable[[Entry, Reader | None], None] | None, legacy: bool) -> tuple[str, str, str]:
    """The v3, v1 and v2 hashes of ``entries`` (in order), each entry handed to ``add`` (a file
    with its reader); with ``legacy`` False, v3 alone ("" for the others)."""
    h3, h2, h1 = hashlib.sha256(), hashlib.sha256(), hashlib.sha256()
    old = (h1,) if legacy else ()
    for entry in entries:
        if entry.kind is Kind.FILE:
            fd = _open_file(root, root_fd, entry)
            try:
                _hash_entry(entry, h1)
                content = hashlib.sha256()
                reader = Reader(root, entry, fd, *old, content)
                if add is not None:
                    add(entry, reader)
                reader.finish()
            finally:
                os.close(fd)
            h3.update(_frame(entry, entry.size, content.digest()))
            h2.update(_frame(entry, entry.size, content.digest(), modes=False))
            continue
        if entry.kind is Kind.LINK:
            _hash_entry(entry, h1)
            target = entry.target.encode()
            h3.update(_frame(entry, len(target), hashlib.sha256(target).digest()))
            h2.update(_frame(entry, len(target), hashlib.sha256(target).digest(), modes=False))
        else:
            h3.update(_frame(entry, 0, _EMPTY))
        if add is not None:
            add(entry, None)
    if not legacy:
        return V3 + h3.hexdigest(), "", ""
    return V3 + h3.hexdigest(), h1.hexdigest(), V2 + h2.hexdigest()


_EMPTY = hashlib.sha256(b"").digest()
