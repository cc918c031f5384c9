"""Keeping the files every gVisor seat sees resident in the host's page cache.

The first read of a cold page waits for the disk and every later one, in any sandbox, does not:
a sender that warms cold system pages and a receiver that times its first reads pass bits between
two seats (docs/SANDBOX.md). The referee closes it by leaving no cold page in the view the seats
share: before each seat starts it asks the kernel (``mincore``) which pages of the view are out of
the cache and reads those back itself. Pages the referee reads are charged to the referee's memory
cgroup, not a bot's, so a bot filling its own cgroup cannot evict them.
"""

from __future__ import annotations

import ctypes
import functools
import mmap
import os
from pathlib import Path
from typing import Iterable, Iterator

_libc = ctypes.CDLL(None, use_errno=True)  # the C library this process runs on (find_library runs ldconfig)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
_libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p)
_libc.mlock.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_MAP_FAILED = ctypes.c_void_p(-1).value
PAGE = mmap.PAGESIZE
_CHUNK = 1 << 20


def files_under(paths: Iterable[str]) -> Iterator[str]:
    """Every regular file at or below ``paths``, links not followed (their targets are in the view
    on their own)."""
    for top in paths:
        if os.path.isfile(top) and not os.path.islink(top):
            yield top
            continue
        for root, _dirs, names in os.walk(top):
            for name in names:
                path = os.path.join(root, name)
                if not os.path.islink(path) and os.path.isfile(path):
                    yield path


def cold_pages(fd: int, size: int) -> list[int]:
    """Indexes of the pages of the open file ``fd`` (``size`` bytes) not in the page cache."""
    if size == 0:
        return []
    addr = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
    if addr in (None, _MAP_FAILED):
        raise OSError(ctypes.get_errno(), "mmap for mincore failed")
    try:
        count = (size + PAGE - 1) // PAGE
        vec = ctypes.create_string_buffer(count)
        if _libc.mincore(addr, size, vec) != 0:
            raise OSError(ctypes.get_errno(), "mincore failed")
        raw = vec.raw
        if raw.count(1) == count:  # all resident: the usual answer, without a Python loop
            return []
        return [i for i, b in enumerate(raw) if not b & 1]
    finally:
        _libc.munmap(addr, size)


@functools.cache
def _mapped(paths: tuple[str, ...]) -> tuple[tuple[str, int, int], ...]:
    """Each regular file under ``paths`` as (path, address, size): mapped read-only and locked
    (``mlock``) once per referee process and kept, so its pages are read in now and no reclaim, of
    the machine or of any cgroup that was first charged for them, can drop them while the referee
    runs; a start's check is then one ``mincore`` per file. Where locking is refused (no
    CAP_IPC_LOCK), the pages are only warmed at each start. A file that a package upgrade adds or
    replaces later is seen by the next referee."""
    out = []
    for path in files_under(paths):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            continue  # unreadable to the referee: the gofer cannot serve it either
        try:
            size = os.fstat(fd).st_size
            if size == 0:
                continue
            addr = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
            if addr in (None, _MAP_FAILED):
                raise OSError(ctypes.get_errno(), f"mmap of {path} failed")
            _libc.mlock(addr, size)  # best effort: warm() still reads back what is out
            out.append((path, addr, size))
        finally:
            os.close(fd)
    return tuple(out)


def warm(paths: Iterable[str]) -> tuple[int, int]:
    """Read back into the page cache every page of the files under ``paths`` that is out of it.
    Returns (files seen, pages read). Cheap when all is warm: one mincore per file, no reads."""
    files = pages = 0
    mapped = _mapped(tuple(paths))
    vec = ctypes.create_string_buffer(max((size + PAGE - 1) // PAGE for _, _, size in mapped) if mapped else 1)
    for path, addr, size in mapped:
        files += 1
        count = (size + PAGE - 1) // PAGE
        if _libc.mincore(addr, size, vec) != 0:
            raise OSError(ctypes.get_errno(), f"mincore of {path} failed")
        raw = ctypes.string_at(vec, count)
        if raw.count(1) == count:
            continue
        cold = [i for i, b in enumerate(raw) if not b & 1]
        pages += len(cold)
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        try:
            done = -1
            for i in cold:  # read from each cold page to the end of its chunk
                if i * PAGE < done:
                    continue
                os.pread(fd, _CHUNK, i * PAGE)
                done = i * PAGE + _CHUNK
        finally:
            os.close(fd)
    return files, pages


def cold_files(paths: Iterable[str]) -> list[str]:
    """The files under ``paths`` with a page out of the page cache (none when the view is warm)."""
    out = []
    for path in files_under(paths):
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        try:
            if cold_pages(fd, os.fstat(fd).st_size):
                out.append(path)
        finally:
            os.close(fd)
    return out


def evict(path: str | Path) -> None:
    """Drop one clean file's pages from the cache (``POSIX_FADV_DONTNEED``): how tests make a cold file."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
