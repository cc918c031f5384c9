"""A machine's notes: what one arena process found out at some cost (a probe's bot started, a
Python run to see what it imports), kept in the run directory for the next process to read
instead of finding it out again.

A note is named by everything its answer depends on (:func:`note_named`) and lists the paths it
was found from as ``stat`` saw them then (``seen``). It is read back only from a plain file of
the referee's uid that no other can write (the run directory is that uid's alone), and only while
each of those paths is as it was; anything else is no note, and the caller finds the answer
again. The upload worker's imports (what its view binds) are one answer noted so; a
containment's trial (:func:`passed_here`) is noted only where it passed, so that no note, even
a wrong one, can choose a weaker containment.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any, Callable

NOTE_BYTES = 1 << 20  # a note is a few kB of paths: a bigger one is no note of ours


def note_named(kind: str, asked: Any) -> Path:
    """Where this machine notes the answer to ``asked`` (its ``repr`` names it: put in all the
    answer depends on), a note of ``kind``. OSError where the run directory cannot be had."""
    from .containment import process_registry
    digest = hashlib.sha256(repr((kind, asked)).encode()).hexdigest()[:32]
    return process_registry().run_dir / f"{kind}-{digest}.json"


def path_seen(path: str) -> list | None:
    """What a note records of a path it was found from: where it leads and what ``stat`` says of
    that (a folder's times change as entries come and go: a package installed, removed, moved; a
    binary replaced is another inode or size or time). None where it is gone."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [os.path.realpath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def read_note(note: Path) -> dict | None:
    """What ``note`` holds, where it is one: a plain file of the referee's uid that no other can
    write, a JSON object whose ``seen`` maps absolute paths (at least one) to :func:`path_seen`'s
    record of each, every one of them as it is now. None otherwise (never noted, forged or stale:
    found again)."""
    try:
        fd = os.open(note, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022 or st.st_size > NOTE_BYTES:
            return None
        with os.fdopen(os.dup(fd), "rb") as f:
            noted = json.loads(f.read(NOTE_BYTES))
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
    seen = noted.get("seen") if isinstance(noted, dict) else None
    if not (isinstance(seen, dict) and absolute_paths(list(seen))):
        return None
    return noted if all(path_seen(p) == s for p, s in seen.items()) else None


def absolute_paths(paths: Any) -> bool:
    """Whether ``paths`` is a non-empty list of absolute paths."""
    return isinstance(paths, list) and bool(paths) and all(isinstance(p, str) and p.startswith("/") for p in paths)


def write_note(note: Path, noted: dict) -> None:
    """``noted`` in ``note``, whole or not at all (a file of this uid's, renamed into place).
    Unnoted where it cannot be written (a full disk): the next process finds the answer again."""
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=".note-", dir=note.parent)
        with os.fdopen(fd, "w") as f:
            json.dump(noted, f)
        os.replace(tmp, note)
    except OSError:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


MACHINE_STATE = ("/proc/sys/kernel/random/boot_id", "/proc/sys/user/max_user_namespaces",
                 "/proc/sys/kernel/unprivileged_userns_clone", "/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
"""What a containment's trial depends on of the kernel, read into its note's name: this boot (a
kernel upgraded, a machine rebooted) and the settings that allow or refuse user namespaces."""


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read(200)
    except OSError:
        return None


def code_files(folder: Path) -> list[str]:
    """A folder of the arena's code and its modules, as a trial's ``ran_through``: a module
    edited, added or removed is another trial."""
    return [str(folder), *sorted(str(p) for p in folder.glob("*.py"))]


def passed_here(question: Any, ran_through: list[str], trial: Callable[[], str | None]) -> str | None:
    """``trial()``'s answer (None: it passed; else why not: a containment tried by starting
    something in it), unless this machine noted that the same trial passed: the note's name holds
    ``question`` and the kernel's :data:`MACHINE_STATE`, and it lists the paths of ``ran_through``
    (the binaries and the code the trial ran through) as ``stat`` saw them, so a binary replaced or
    the code edited is tried again. A pass alone is noted, after the trial, where nothing it ran
    through changed in between; a failure is found again by each process. So a note, even a wrong
    one, can only make a process use a containment without trying it first, never choose another."""
    try:
        note = note_named("passed", (question, [_read(p) for p in MACHINE_STATE]))
    except OSError:  # no run directory: tried, not noted
        return trial()
    noted = read_note(note)
    if noted is not None and set(ran_through) <= noted["seen"].keys():
        return None
    seen = {p: path_seen(p) for p in ran_through}
    problem = trial()
    if problem is None and all(s is not None and path_seen(p) == s for p, s in seen.items()):
        write_note(note, {"seen": seen})
    return problem
