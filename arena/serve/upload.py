"""Unpacking an uploaded bot (zip or tar.gz) without trusting it.

Refused, before anything is written: absolute names, ``..`` anywhere in a name,
backslashes or NUL in a name, a name over 255 bytes or a path over 1,024, symbolic and hard links, devices and FIFOs, more
than ``max_files`` entries, a path deeper than a bot folder may be or more than ``max_files`` folders (those the names
imply included), more than ``max_bytes`` unpacked (declared sizes are
checked first, and actual bytes are counted while writing, so a lying header
cannot write more; a gzipped tar is inflated within ``max_bytes`` and a small allowance per
entry before tarfile reads a header, so a few KB of zeros cannot make the server hold gigabytes).
Files are written with fresh permissions (0644, or 0755 if
the archive marked them executable) under a folder only the arena's user can
enter (0700); nothing of the archive's ownership is kept. An archive that turns
out damaged while it is written (a header that lies about a size, a bad CRC, an
unknown compression) is refused like the rest, and nothing it wrote is left.
"""

from __future__ import annotations

import io
import stat
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

from ..bots.filesystem import remove_tree
from ..bots.folder import CAPS
from ..bots.manifest import MANIFEST
from ..errors import ArenaError

CHUNK = 1 << 16
MAX_NAME_BYTES = 255  # one name, as Linux file systems take it
MAX_DEPTH = CAPS.depth  # folders in a path: no deeper than a bot folder may be
MAX_PATH_BYTES = 1024  # a whole path in the archive: far beyond a bot folder's 32 levels of sensible names
# what reading a damaged or unreadable entry raises (zipfile: a bad CRC or a lying size is
# BadZipFile, a truncated stream EOFError or zlib.error, AES or another method NotImplementedError,
# encryption RuntimeError)
DAMAGED = (zipfile.BadZipFile, zlib.error, EOFError, tarfile.TarError, NotImplementedError, RuntimeError,
           ValueError)


class UploadError(ArenaError, ValueError):
    """The upload is refused; the message says why, in one line."""


@dataclass
class Entry:
    name: str
    is_dir: bool
    size: int
    executable: bool
    open: Callable[[], IO[bytes]]


def safe_parts(name: str) -> tuple[str, ...]:
    """The path's parts, or :class:`UploadError` if it could land outside the target folder."""
    if not name or "\\" in name or "\0" in name:
        raise UploadError(f"refused: the archive has an unsafe file name {name[:80]!r}")
    try:  # a tar's name in bytes that are not UTF-8 reads as surrogates: no file name of a bot folder
        encoded = name.encode()
    except UnicodeEncodeError:
        raise UploadError(f"refused: the archive has a file name that is not UTF-8 ({name[:80]!r})") from None
    p = PurePosixPath(name)
    if p.is_absolute() or name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        raise UploadError(f"refused: the archive has an absolute path {name[:80]!r}")
    parts = tuple(x for x in p.parts if x not in ("", "."))
    if ".." in parts:
        raise UploadError(f"refused: the archive has a path that leaves its folder ({name[:80]!r})")
    if len(encoded) > MAX_PATH_BYTES:
        raise UploadError(f"refused: the archive has a path longer than {MAX_PATH_BYTES:,} bytes ({name[:80]!r}…)")
    if any(len(x.encode()) > MAX_NAME_BYTES for x in parts):  # the file system's own limit (ENAMETOOLONG)
        raise UploadError(f"refused: the archive has a file name longer than {MAX_NAME_BYTES} bytes ({name[:80]!r}…)")
    return parts


def _zip_entries(data: bytes) -> Iterator[Entry]:
    """Each entry of a zip archive. zipfile raises more than ``BadZipFile`` on a directory it cannot
    read (a name flagged UTF-8 that is not, a version it does not know, an empty name): whatever it
    raises on the uploader's bytes is a refusal of them, never a worker that dies with a traceback."""
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        infos = zf.infolist()
        if any(not info.filename for info in infos):  # (ZipInfo.is_dir raises IndexError on one)
            raise zipfile.BadZipFile("a file with no name")
    except (*DAMAGED, OSError, EOFError) as e:
        raise UploadError(f"not a readable zip archive: {type(e).__name__}: {e}") from None
    for info in infos:
        mode = info.external_attr >> 16
        if stat.S_ISLNK(mode):
            raise UploadError(f"refused: the archive has a symbolic link ({info.filename[:80]!r})")
        if stat.S_IFMT(mode) and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):  # 0: no type recorded
            raise UploadError(f"refused: the archive has a special file ({info.filename[:80]!r})")
        yield Entry(info.filename, info.is_dir(), info.file_size, bool(mode & 0o111),
                    lambda info=info: zf.open(info))


TAR_ENTRY_BYTES = 4096
"""What a tar spends on one entry besides its bytes (a header, padding to 512, a pax header for a
long name), counted against an upload's ``max_bytes`` before a gzipped tar is decompressed."""


def gunzip(data: bytes, limit: int) -> bytes:
    """The bytes of a gzip stream, refused as soon as they pass ``limit``.

    A 2 MB upload of zeros inflates to 2 GB, and tarfile reads a pax or long-name header whole
    into memory before any entry can be counted: the stream is inflated here, within the limit,
    and tarfile only ever sees what came out."""
    out: list[bytes] = []
    size = 0
    rest = data
    try:
        while rest.strip(b"\0"):  # a gzip file may be several members one after another (or padding)
            d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
            chunk = d.decompress(rest, limit + 1 - size)
            size += len(chunk)
            out.append(chunk)
            if size > limit or d.unconsumed_tail:
                raise UploadError(f"refused: more than {limit // 2**20} MB once unpacked")
            if not d.eof:
                raise UploadError("refused: the archive is damaged (the gzip stream ends early)")
            rest = d.unused_data
    except zlib.error as e:
        raise UploadError(f"refused: the archive is damaged (gzip: {e})") from None
    return b"".join(out)


def _tar_entries(data: bytes) -> Iterator[Entry]:
    try:
        tf = tarfile.open(fileobj=io.BytesIO(data), mode="r:")
    except (tarfile.TarError, OSError, EOFError) as e:
        raise UploadError(f"not a readable tar archive: {e}") from None
    try:
        for m in tf:
            if m.issym() or m.islnk():
                raise UploadError(f"refused: the archive has a link ({m.name[:80]!r})")
            if not (m.isfile() or m.isdir()):
                raise UploadError(f"refused: the archive has a special file ({m.name[:80]!r})")
            yield Entry(m.name, m.isdir(), m.size, bool(m.mode & 0o111),
                        lambda m=m: tf.extractfile(m) or io.BytesIO())  # type: ignore[return-value]
    except (tarfile.TarError, OSError, EOFError) as e:
        raise UploadError(f"the tar archive is damaged: {e}") from None


def entries(data: bytes, max_bytes: int, max_files: int) -> Iterator[Entry]:
    if data[:4] == b"PK\x03\x04":
        return _zip_entries(data)
    if data[:2] == b"\x1f\x8b":
        return _tar_entries(gunzip(data, max_bytes + TAR_ENTRY_BYTES * (max_files + 3)))
    if data[257:262] == b"ustar":
        return _tar_entries(data)
    raise UploadError("not a zip or tar.gz archive")


def unpack(data: bytes, dest: Path, *, max_files: int, max_bytes: int) -> Path:
    """Check every entry, then write them under ``dest`` (which must not exist, or be an empty
    folder: the one an upload's worker is given); the bot's root.

    The root is ``dest`` if ``bot.toml`` is at the top, or the archive's single top-level folder."""
    plan: list[tuple[tuple[str, ...], Entry]] = []
    folders: set[tuple[str, ...]] = set()
    total = 0
    for entry in entries(data, max_bytes, max_files):
        parts = safe_parts(entry.name)
        if not parts:
            continue
        plan.append((parts, entry))
        total += max(0, entry.size)
        if len(plan) > max_files:
            raise UploadError(f"refused: more than {max_files} files in the archive")
        # the folders a name implies are written too: 199 empty files 508 folders deep were 101,291
        # folders and 396 MB from a 3.9 KB upload; counted here, before anything is written
        depth = len(parts) - (0 if entry.is_dir else 1)
        if depth > MAX_DEPTH:
            raise UploadError(f"refused: {'/'.join(parts)[:80]!r} lies deeper than {MAX_DEPTH} folders")
        folders.update(parts[:i] for i in range(1, depth + 1))
        if len(folders) > max_files:
            raise UploadError(f"refused: more than {max_files} folders in the archive")
        if total > max_bytes:
            raise UploadError(f"refused: more than {max_bytes // 2**20} MB once unpacked")
    try:
        dest.mkdir(mode=0o700)
    except FileExistsError:
        if dest.is_symlink() or not dest.is_dir() or any(dest.iterdir()):
            raise
    dest.chmod(0o700)
    try:
        return _write(plan, dest, max_bytes)
    except BaseException as e:
        remove_tree(dest)
        if isinstance(e, DAMAGED) and not isinstance(e, UploadError):
            raise UploadError(f"refused: the archive is damaged ({type(e).__name__}: {e})") from None
        raise


def _write(plan: list[tuple[tuple[str, ...], Entry]], dest: Path, max_bytes: int) -> Path:
    written = 0
    for parts, entry in plan:
        target = dest.joinpath(*parts)
        for parent in reversed(target.parents):
            if parent == dest or dest not in parent.parents:
                continue
            if parent.is_file():
                raise UploadError(f"refused: {'/'.join(parts)[:80]!r} is inside a file")
            if not parent.exists():
                parent.mkdir(mode=0o755)
        if entry.is_dir:
            if target.is_file():
                raise UploadError(f"refused: {'/'.join(parts)[:80]!r} is both a file and a folder")
            target.mkdir(mode=0o755, exist_ok=True)
            continue
        if target.exists():
            raise UploadError(f"refused: {'/'.join(parts)[:80]!r} appears twice in the archive")
        with entry.open() as src, open(target, "xb") as out:
            while chunk := src.read(CHUNK):
                written += len(chunk)
                if written > max_bytes:
                    raise UploadError(f"refused: more than {max_bytes // 2**20} MB once unpacked")
                out.write(chunk)
        target.chmod(0o755 if entry.executable else 0o644)
    if (dest / MANIFEST).is_file():
        return dest
    tops = list(dest.iterdir())
    if len(tops) == 1 and tops[0].is_dir() and (tops[0] / MANIFEST).is_file():
        return tops[0]
    raise UploadError(f"no {MANIFEST} at the top of the archive or in its one top-level folder")
