"""Uploads unpacked and their folders read in processes of their own, so the serving loop never waits on them.

Unpacking inflates, checks and writes every entry (:func:`.upload.unpack`, with its limits), and
the bot's folder is then read once and hashed by the reader every path uses
(:meth:`~arena.bots.manifest.BotSpec.files_hash`, its rules and caps). Done in a thread of the
server, that Python work held the GIL, and the serving loop woke up 120-320 ms late while uploads
arrived (bench/bench_loop_stalls.py). Here it runs in ``python -m arena.serve.unpacker``, a worker
of its own for each upload: it reads a line of JSON (the folder to fill, the limits, the archive's
size) and the archive from its stdin, and answers one line of JSON on its stdout: the bot's root,
name and label; or why the upload is refused (the uploader's fault, said as :func:`.upload.unpack`
and the manifest's reader say it); or the system's error (a full disk). A worker that dies (killed,
out of memory), answers nothing readable or overruns ``UNPACK_S`` is the arena's failure, not the
uploader's: :class:`UnpackerLost`. The caller removes the folder whatever happened, as it did when
the thread raised; the server bounds how many uploads are unpacked at once (``uploads_at_once``).

The worker reads hostile bytes with C decompressors (zlib, bzip2, lzma), so it holds no more than
its one upload needs (:func:`confined`): under bubblewrap, with no network and namespaces of its
own, it sees the system read-only, Python and the arena package, and its own upload's folder, the
one writable place; the store's folder (its secret key, its database) and the other uploads are
not there at all. It is never used again: a worker that read a hostile archive is not trusted with
the next uploader's (a decompressor's bug would let one upload write another's bot), and its start
(about 0.2 s of CPU, in its own process) is small beside an upload. A root server's worker runs as
a private uid of the bots' pool, bubblewrap itself started as that uid. Where bubblewrap cannot
start (no user namespaces) the worker runs as the server's user, or, on a root server, as a
private uid in a root and pid namespace of its own that hold only what it needs
(:func:`_private_uid_works`), and the log says so once. Either way it can start
no process or thread (its system-call filter), and it writes into a tmpfs of its own of the
upload's bounds, which the server reads back with the folder reader once the worker is gone
(:func:`_read_back`): the disk gets only what the reader lists. Where no such tmpfs can be made
(:func:`_spaces_work`) no upload is taken: on the disk its files would be bounded each, not in all.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..bots.namespaces import PRIVATE_SPACE_DIR, NamespaceRoot, PrivateSpace
from ..bots.notes import absolute_paths, code_files, note_named, passed_here, path_seen, read_note, write_note
from ..bots.procs import (PR_SET_NO_NEW_PRIVS, PR_SET_PDEATHSIG, Attribution, become, drop_capabilities, kill_and_reap,
                          prctl, scan_procs, stand_in)
from ..errors import ArenaError
from .upload import UploadError

log = logging.getLogger("arena.serve")

UNPACK_S = 60.0  # an upload's unpacking and reading: well under a second; beyond this the worker is stuck
ANSWER_BYTES = 1 << 20  # an answer is a line of JSON, a refusal's text at most: a worker past this is lost
# -P: nothing is imported from the working folder; the arena is found by PYTHONPATH (:func:`_env`)
WORKER = [sys.executable, "-P", "-m", "arena.serve.unpacker"]


@dataclass(frozen=True)
class WorkerLimits:
    """What a worker may use, sized for reading one upload; the rest is for code a hostile archive
    might run in it (a decompressor's bug), which must not take the server's machine for its 60 s."""

    memory_bytes: int = 1 << 30  # address space, beside twice the upload's own bound
    tmp_bytes: int = 8 << 20  # each tmpfs of its view (their pages are memory nobody else counts)


WORKER_LIMITS = WorkerLimits()


class UnpackerLost(ArenaError):
    """The unpacking process ended without an answer: the arena failed, not the upload."""


@dataclass(frozen=True)
class Unpacked:
    root: Path
    name: str
    label: str
    human: bool


async def unpack_apart(data: bytes, dest: Path, *, max_files: int, max_bytes: int) -> Unpacked:
    """``data`` unpacked under ``dest`` (which must not exist; it is made here, empty, as the worker's
    one writable folder) and read, in a worker of its own. Raises :class:`UploadError` for what the
    uploader must change, :class:`OSError` for the system's refusal, :class:`UnpackerLost` when the
    worker gave no answer (or cannot be started as bounded as it must be)."""
    import trio
    dest.mkdir(mode=0o700)
    bounds = worker_space(max_files, max_bytes)
    answer, fd, seen = await _run_worker(data, dest, bounds, max_files=max_files, max_bytes=max_bytes)
    try:
        return await trio.to_thread.run_sync(_taken, answer, dest, seen, fd, bounds)
    finally:
        os.close(fd)


async def _run_worker(data: bytes, dest: Path, bounds: "WorkerSpace", *, max_files: int,
                      max_bytes: int) -> tuple[dict, int, Path]:
    """The worker's answer, a descriptor of the tmpfs it wrote into, and the path it was told to
    unpack into (``dest``, or its folder in ``/tmp`` where it ran as a private uid)."""
    import trio

    from ..bots.containment import process_registry
    from ..bots.seccomp import FilterUnavailable, Installer, memfd
    try:
        filter_fd = memfd(worker=True)
    except FilterUnavailable as e:
        raise UnpackerLost(f"the unpacking process cannot start without its system-call filter: {e}") from None
    lease = None
    space = None
    # its error output (a traceback, bubblewrap's words) is said in the log, escaped as every log line
    # is; the server's own stderr, it went raw to the operator's terminal or log file
    err = tempfile.TemporaryFile()
    try:
        try:
            argv = await trio.to_thread.run_sync(confined, WORKER, dest, filter_fd)
            wrapped = argv is not WORKER
            installer = None if wrapped else Installer(worker=True)  # bubblewrap installs it itself
        except FilterUnavailable as e:
            raise UnpackerLost(f"the unpacking process cannot start without its system-call filter: {e}") from None
        space, lease = await trio.to_thread.run_sync(_private_space, dest, bounds, wrapped)
        bound = functools.partial(_bound_worker, WORKER_LIMITS.memory_bytes + 2 * max_bytes, max_bytes, space,
                                  installer)
        try:
            proc = await trio.lowlevel.open_process(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                                    stderr=err.fileno(), env=_env(), cwd=str(dest),
                                                    preexec_fn=bound, pass_fds=(filter_fd,))
        except subprocess.SubprocessError as e:  # the preexec function failed: no worker ran
            raise UnpackerLost(f"the unpacking process could not be bounded: {e}") from None
    except BaseException:
        err.close()
        if lease is not None:
            process_registry().release_uid(lease)
        if space is not None and space.made_here:
            os.rmdir(space.where)
        raise
    finally:
        os.close(filter_fd)
    assert proc.stdin is not None and proc.stdout is not None  # both piped above
    seen = Path(os.fsdecode(space.at)) if space.owner is not None else dest
    answer = None
    fd = None
    try:
        try:
            fd = space.open_root(proc.pid)
        except OSError as e:
            with trio.move_on_after(1):  # one killed before the server looked is lost as killed, not as astray
                await proc.wait()
            if proc.returncode is None:
                raise UnpackerLost(f"the unpacking process's folder is not its own: {e}") from None
            raise _ended(proc.returncode, wrapped, _last_words(err)) from None
        with trio.move_on_after(UNPACK_S) as waited:
            job = {"dest": str(seen), "max_files": max_files, "max_bytes": max_bytes, "size": len(data)}
            try:
                await proc.stdin.send_all(json.dumps(job).encode() + b"\n" + data)
                answer = _answer(await _line(proc.stdout))
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                answer = None
        if waited.cancelled_caught:
            raise UnpackerLost(f"unpacking took longer than {UNPACK_S:g} seconds")
        if answer is None:
            with trio.move_on_after(5):
                await proc.wait()
            raise _ended(proc.returncode, wrapped, _last_words(err))
    except BaseException:
        if fd is not None:
            os.close(fd)
        raise
    finally:
        with trio.CancelScope(shield=True):
            tree = _worker_tree(proc.pid)
            proc.kill()  # its one upload answered (or not): it is never asked again
            await proc.wait()
            await trio.to_thread.run_sync(_end_tree, tree)
            if lease is not None:  # its processes all gone: the uid may serve a bot next
                process_registry().release_uid(lease)
            if space.made_here:
                os.rmdir(space.where)
            err.close()
    return answer, fd, seen


LAST_WORDS_BYTES = 2000  # of a worker's error output, the end (a traceback's last lines) is said in the log


def _last_words(err: Any) -> str:
    """The end of what a worker wrote to its error output, as text."""
    try:
        size = os.fstat(err.fileno()).st_size
        return os.pread(err.fileno(), LAST_WORDS_BYTES, max(0, size - LAST_WORDS_BYTES)).decode(errors="replace")
    except OSError:
        return ""


def _ended(status: int | None, wrapped: bool, said: str = "") -> UnpackerLost:
    """A worker that ended without an answer, said by how it ended (and, in the log, by the end of
    what it wrote to its error output: a text argument, shown escaped, its newlines too)."""
    log.warning("an upload's unpacker ended without an answer (status %s)%s%s", status,
                "; its last words: " if said.strip() else "", said.strip())
    if wrapped and status is not None and 128 < status < 128 + 65:
        status = 128 - status  # bubblewrap's way of saying its child was killed by a signal
    if status is not None and status < 0:
        return UnpackerLost(f"the unpacking process was stopped ({signal.Signals(-status).name})")
    return UnpackerLost(f"the unpacking process failed (exit status {status})")


def _taken(answer: dict, dest: Path, seen: Path, fd: int, space: "WorkerSpace") -> Unpacked:
    """The worker's answer as the upload's bot, its folder read back from its tmpfs through the folder
    reader, within the upload's bounds, into ``dest``, and checked. ``seen`` is the path the worker
    was told to unpack into: its refusals name ``dest`` instead, as they would have."""
    if "refused" in answer:
        raise UploadError(answer["refused"].replace(str(seen), str(dest)))
    if "errno" in answer:
        raise OSError(answer["errno"], answer["strerror"])
    root = _read_back(Path(answer["root"]), seen, dest, fd, space)
    # the worker's own answer, checked all the same, and on the disk: a folder below the upload's
    # reached through a link the worker made would be read, and placed, wherever the link leads
    real, base = os.path.realpath(root), os.path.realpath(dest)
    if (root != dest and dest not in root.parents) or not (real == base or real.startswith(base + os.sep)) \
            or os.path.relpath(real, base) != os.path.relpath(root, dest):
        raise UnpackerLost("the unpacking process named a folder outside the upload's")
    # the bot is what its manifest on the disk says, never what the worker answered: the server claims
    # that name for the uploader's account, and the job then runs the manifest's own bot
    from ..bots.manifest import load_bot
    spec = load_bot(root)
    if (spec.name, spec.label, spec.human) != (answer["name"], answer["label"], answer["human"]):
        raise UnpackerLost("the unpacking process answered another bot than the one it unpacked")
    return Unpacked(root, spec.name, spec.label, spec.human)


def _read_back(root: Path, seen: Path, dest: Path, fd: int, space: "WorkerSpace") -> Path:
    """The answered root (``seen``, the worker's folder, or its one top folder, as
    :func:`.upload.unpack` answers), read from the worker's tmpfs (``fd``, its writer gone) by the
    folder reader, with the upload's bounds as caps, and copied into ``dest`` on the server's disk:
    only what the reader lists (links as links, never followed; a FIFO or device refused) reaches
    the disk."""
    from ..bots.folder import Caps, FolderError, copy_folder, read_folder
    from .upload import MAX_DEPTH, MAX_PATH_BYTES
    rel = os.path.relpath(root, seen) if root == seen or seen in root.parents else ".."
    if rel.startswith("..") or "/" in rel:
        raise UnpackerLost("the unpacking process named a folder outside the upload's")
    # the reader opens the root without following its last name: a real folder of the tmpfs
    src = Path(f"/proc/self/fd/{fd}") / os.fsdecode(PRIVATE_SPACE_DIR)
    if rel != ".":
        src = src / rel
    target = dest / rel if rel != "." else dest
    try:
        folder = read_folder(src, Caps(files=space.inodes, bytes=space.bytes, depth=MAX_DEPTH, path=MAX_PATH_BYTES))
        if rel == ".":
            dest.rmdir()  # made empty for the worker; the copy makes it anew
        copy_folder(folder, target)
    except FolderError as e:
        raise FolderError(str(e).replace(str(src), str(target))) from None
    dest.chmod(0o700)
    return target


def _worker_tree(pid: int) -> Attribution:
    """The worker's processes as they are now: bubblewrap's init inside its namespaces and anything
    they started. Once the worker's outer process is killed they come to the server (a subreaper,
    for its bots' sake) and must be reaped there, or each upload leaves a zombie behind."""
    table = scan_procs()
    info = table.get(pid)
    tree = Attribution(pid=pid, start=info.start if info else 0)
    tree.members(table, os.getpid())  # remembers them by (pid, start time), for after the kill
    return tree


def _end_tree(tree: Attribution) -> None:
    kill_and_reap(lambda table: tree.members(table, os.getpid()), time.monotonic() + 5.0)


def _bound_worker(memory_bytes: int, file_bytes: int, space: PrivateSpace, installer: Any) -> None:
    """In the worker's process, before it runs: its address space, the size of any file it writes
    (no file of an upload is bigger than the whole upload may be), its folder a bounded tmpfs of
    its own (``space``; for a root server's worker without bubblewrap, that of a private uid it
    then becomes), and, where bubblewrap does not run it (``installer``
    given), no capability (bubblewrap drops them: a root server's worker would otherwise keep
    root's, to open, chown or signal what root may) and the system-call filter that refuses new
    processes and threads and any change of these limits. ``RLIMIT_NPROC`` would not do
    for processes: it never binds root, and for any other user it counts every process of that
    user, the server's included."""
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))
    _enter_space(space)  # (mounting its tmpfs takes root's capabilities: dropped only after)
    if installer is not None:
        if not drop_capabilities():
            raise OSError("the unpacking process could not give up its capabilities")
        if prctl(PR_SET_NO_NEW_PRIVS, 1) != 0 or installer.install() != 0:
            raise OSError("the unpacking process's system-call filter did not install")


@dataclass(frozen=True)
class WorkerSpace:
    """The bounds of the tmpfs a worker writes into: an upload's files and the folders its names
    imply (each at most ``max_files``), its two own folders (the tmpfs's root and the one bound as
    the upload's), and its bytes with a page for each file."""

    bytes: int
    inodes: int


def worker_space(max_files: int, max_bytes: int) -> WorkerSpace:
    return WorkerSpace(bytes=max_bytes + max_files * PAGE, inodes=2 * max_files + 2)


PAGE = 4096


NO_SPACE = ("uploads cannot be taken on this server: the unpacking process's files can be bounded only in a tmpfs "
            "of its own, and none can be made here (see the server's log and docs/SANDBOX.md)")


def _private_space(dest: Path, space: WorkerSpace, wrapped: bool) -> tuple[PrivateSpace, Any]:
    """The worker's tmpfs and, for a root server's worker, the lease of the private uid it runs as (the
    tmpfs that uid's, its ``/tmp``): under bubblewrap (:func:`_owned_space`), or else in a root of
    its own (:func:`_rooted_space`, where :func:`_private_uid_works`).
    Otherwise the tmpfs is mounted in an empty folder beside ``dest`` (in the uploads' private
    folder, removed after) and bound over ``dest``. :class:`UnpackerLost` where no process here
    may make one (:func:`_spaces_work`): on the disk its files would be bounded each, not in number
    or in all (any user may write ``/tmp``), so no upload is taken (docs/SANDBOX.md)."""
    if os.geteuid() == 0 and (wrapped or _private_uid_works()):
        from ..bots.containment import process_registry
        lease = process_registry().lease_uid()
        plan = _owned_space if wrapped else _rooted_space
        return plan(lease.uid, space.bytes, space.inodes), lease
    if not _spaces_work(dest.parent):
        raise UnpackerLost(NO_SPACE)
    where = dest.with_name(dest.name + ".space")
    where.mkdir(mode=0o700)
    return PrivateSpace.plan(where, dest, space.bytes, space.inodes, worker_reads()), None


def _said(enter: Any, fd: int) -> None:
    """``enter()`` in a forked child, its error written to ``fd`` before it is raised."""
    try:
        enter()
    except OSError as e:
        os.write(fd, (e.strerror or str(e)).encode())
        raise


_space_tried: list[bool] = []  # whether a worker's tmpfs could be made and read here (tried once a process)


def _spaces_work(uploads: Path) -> bool:
    """Whether a worker's :class:`PrivateSpace` can be made here and read back by this process: tried
    once a process, in ``uploads``, with a child that mounts one and waits (a root server in a
    container without ``CAP_SYS_ADMIN``, or a machine without user namespaces for a server that is
    not root, cannot; every upload would otherwise be the arena's failure there)."""
    if not _space_tried:
        import tempfile
        problem = ""
        with tempfile.TemporaryDirectory(dir=uploads, prefix=".space-try-") as tried:
            plan = PrivateSpace.plan(Path(tried, "space"), Path(tried, "folder"), 1 << 20, 8, worker_reads())
            os.mkdir(plan.where)
            os.mkdir(plan.at)
            why_r, why_w = os.pipe2(os.O_CLOEXEC)  # the child's own words, where Popen would say only that it failed
            try:
                child = subprocess.Popen([WORKER[0], "-P", "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE,
                                         env=_env(), preexec_fn=functools.partial(_said, plan.enter, why_w))
            except (OSError, subprocess.SubprocessError) as e:
                os.close(why_w)
                problem = os.read(why_r, 4096).decode(errors="replace") or str(e) or type(e).__name__
            else:
                os.close(why_w)
                try:
                    os.close(plan.open_root(child.pid))
                except OSError as e:
                    problem = str(e)
                finally:
                    assert child.stdin is not None
                    child.stdin.close()
                    child.wait()
            finally:
                os.close(why_r)
        _space_tried[:] = [not problem]  # two uploads' threads may both have tried: one answer
        if problem:
            log.warning("uploads are refused: no bounded tmpfs of the unpacking process's own can be made here "
                        "(%s), and on the disk its files would be bounded each, not in number or in all", problem)
    return _space_tried[0]


_uid_tried: list[bool] = []  # whether a root server's worker can run as a private uid here (tried once a process)


def _enter_space(space: PrivateSpace) -> None:
    """In a worker's process (or a try's): its tmpfs entered, then its owner become, where it has one
    (a root server's worker runs as that private uid, under bubblewrap or not). In a root of its
    own (:func:`_rooted_space`) the worker is pid 1 of a pid namespace of its own too, with its
    ``/proc``, as under bubblewrap: it sees no other process (no command line, and no
    ``kill(pid, 0)`` telling it which pids live), while the process the server started stays outside as its stand-in
    (:func:`~arena.bots.procs.stand_in`: the worker's end is the stand-in's, and its death the
    worker's)."""
    space.enter()
    if space.owner is None:
        return
    if space.view_binds:
        server = os.getppid()
        NamespaceRoot.new_pid_namespace()
        child = os.fork()
        if child:
            stand_in(child, space.owner, server)  # never returns
        space.mount_proc()
    become(space.owner)
    if space.view_binds:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # (cleared by the change of uid)


def _owned_space(uid: int, max_bytes: int = 1 << 20, max_inodes: int = 8) -> PrivateSpace:
    """A root server's worker's tmpfs under bubblewrap: ``uid``'s, over ``/tmp``, with what bubblewrap
    (started as ``uid``) binds in its view made walkable for it (:func:`~.namespaces.walkable`)."""
    return PrivateSpace.owned(uid, max_bytes, max_inodes, worker_view()[1])


def _rooted_space(uid: int, max_bytes: int = 1 << 20, max_inodes: int = 8) -> PrivateSpace:
    """A root server's worker's tmpfs where bubblewrap does not run it: ``uid``'s, the ``/tmp`` of a
    root of its own that holds :func:`worker_view` alone, and a ``/proc`` of its own pid namespace
    (:func:`_enter_space`)."""
    return PrivateSpace.rooted(uid, max_bytes, max_inodes, *worker_view())


def _tried(argv: list[str], plan: Any, pass_fds: tuple[int, ...] = ()) -> str:
    """Why ``argv`` failed (its stderr, or the start's own words), "" where it ran well: as a private
    uid leased for the try in the tmpfs ``plan(uid)`` gives, or as this process's where ``plan`` is
    None. Raises :class:`subprocess.TimeoutExpired` (a loaded machine, not an answer)."""
    from ..bots.containment import process_registry
    registry = process_registry()
    lease = registry.lease_uid() if plan is not None else None
    why_r, why_w = os.pipe2(os.O_CLOEXEC)  # the child's own words, where Popen would say only that it failed
    try:
        enter = None if lease is None else functools.partial(_said, functools.partial(_enter_space, plan(lease.uid)),
                                                             why_w)
        try:
            tried = subprocess.run(argv, capture_output=True, timeout=30, env=_env(), preexec_fn=enter,
                                   pass_fds=pass_fds)
        except (OSError, subprocess.SubprocessError) as e:
            if isinstance(e, subprocess.TimeoutExpired):
                raise
            os.close(why_w)
            why_w = -1
            return os.read(why_r, 4096).decode(errors="replace") or str(e) or type(e).__name__
        return (tried.stderr.decode(errors="replace").strip()[-500:] or f"exit status {tried.returncode}") \
            if tried.returncode else ""
    finally:
        if why_w >= 0:
            os.close(why_w)
        os.close(why_r)
        if lease is not None:
            registry.release_uid(lease)


def _private_uid_works() -> bool:
    """Whether a root server's worker can run as a private uid here where bubblewrap does not run it,
    in a root of its own (:func:`_rooted_space`): tried once a process with the worker's imports.
    Where it cannot, the worker runs as uid 0 without a capability, and the log says what it keeps:
    the owner's rights over root's files it can reach."""
    if not _uid_tried:
        try:
            problem = _tried([WORKER[0], "-P", "-c", WORKER_IMPORTS], _rooted_space)
        except subprocess.TimeoutExpired:  # a loaded machine, not an answer: uid 0 this once, tried again next time
            return False
        _uid_tried[:] = [not problem]
        if problem:
            log.warning("a root server's upload worker without bubblewrap runs as uid 0, not a private uid (%s): "
                        "without a capability, but the owner of root's files, which it may read and write where "
                        "their owner may", problem)
    return _uid_tried[0]


async def _line(stream: Any) -> bytes:
    """One line from a worker's stdout (b"" if it ended first); :class:`UnpackerLost` past
    :data:`ANSWER_BYTES`: a worker that writes without end (code run by a hostile archive) would
    otherwise grow the server's memory for all of ``UNPACK_S``."""
    got = bytearray()
    while not got.endswith(b"\n"):
        chunk = await stream.receive_some(65536)
        if not chunk:
            break
        got += chunk
        if len(got) > ANSWER_BYTES:
            raise UnpackerLost(f"the unpacking process answered more than {ANSWER_BYTES} bytes")
    return bytes(got)


ANSWERS = ({"refused": str}, {"errno": int, "strerror": str}, {"root": str, "name": str, "label": str, "human": bool})
"""The worker's three answers, each with its fields' types: anything else is no answer (a worker that
answers ``{"root": 5}`` would otherwise raise a TypeError in the server's request)."""


def _answer(stdout: bytes) -> dict | None:
    try:
        answer = json.loads(stdout.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None
    if isinstance(answer, dict):
        for fields in ANSWERS:
            if answer.keys() >= fields.keys() and all(type(answer[k]) is t for k, t in fields.items()):
                return {k: answer[k] for k in fields}
    return None


WORKER_IMPORTS = "import arena.serve.unpacker, arena.bots.manifest, arena.config"
"""What a worker imports to read an upload: tried in its view once, so a view that lacks one is found
before an upload is (the engine's compiled runtime lies outside the package in an editable install)."""

_unconfined_said = False
# (a bubblewrap binary, whether started as a private uid): whether the worker's view started under it
_bwrap_runs: dict[tuple[str, bool], bool] = {}


def confined(argv: list[str], dest: Path, filter_fd: int) -> list[str]:
    """``argv`` under bubblewrap: new user, pid, network, IPC, UTS and cgroup namespaces (no network
    at all), no capabilities, a session of its own, killed with the server, the system-call filter
    in ``filter_fd`` (one that refuses new processes and threads); of the host only the view of
    :func:`worker_view`, read-only; its tmpfs (:func:`_private_space`) the one writable place. On a
    root server bubblewrap is started as the private uid the worker runs as (its tmpfs, that uid's,
    is its ``/tmp``, and it unpacks into ``/tmp/folder``): it maps that uid to itself, so the
    worker is no owner of root's files in its view. Elsewhere the tmpfs is bound over ``dest``,
    the upload's own folder, with the uploads folder around it and the store's above that empty
    ones. ``argv`` itself where bubblewrap is missing or cannot start here (said once in the
    log)."""
    global _unconfined_said
    from ..bots.containment import find_bwrap
    bwrap = find_bwrap()
    owned = os.geteuid() == 0
    tmp = os.path.realpath("/tmp")
    small = ("--size", str(WORKER_LIMITS.tmp_bytes), "--tmpfs")
    args = ["--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            # first: the binds below may lie in /tmp (a virtual environment there)
            *(("--bind", tmp, tmp) if owned else (*small, tmp))]
    links, binds = worker_view()
    for target, link in links:
        args += ["--symlink", target, link]
    for p in binds:
        args += ["--ro-bind", p, p]
    uploads = dest.parent
    # the store's and the other uploads' folders, where a bound path holds them (a private uid's
    # /tmp, its own tmpfs, holds nothing of the host's)
    hidden = [str(p) for p in (uploads.parent, uploads) if p != Path(p.anchor)
              and not (owned and os.path.realpath(p).startswith(tmp + "/"))]
    args += ["--proc", "/proc", "--dev", "/dev", *(a for h in hidden for a in (*small, h))]
    if owned:
        args += ["--chdir", os.path.join(tmp, os.fsdecode(PRIVATE_SPACE_DIR))]
    else:
        args += ["--bind", str(dest), str(dest), "--chdir", str(dest)]
    problem = "bubblewrap (bwrap) is not installed"
    if bwrap is not None and (bwrap, owned) not in _bwrap_runs:
        from ..bots.seccomp import bpf
        # what the try runs through beside bubblewrap: the interpreter and the modules the worker
        # imports (the arena's top level, its bots' and its server's)
        arena = Path(__file__).resolve().parents[1]
        code = [sys.executable, *(p for d in ("", "bots", "serve") for p in code_files(arena / d))]
        try:  # tried once a machine (a pass noted): a worker that cannot start would be every upload's 500
            asked = ("the upload worker starts under bubblewrap", bwrap, owned, links, binds, WORKER_IMPORTS,
                     hashlib.sha256(bpf(worker=True)).hexdigest(), sorted(_env().items()))
            problem = passed_here(asked, [bwrap, *code], lambda: _bwrap_tried(bwrap, args, owned) or None) or ""
            _bwrap_runs[(bwrap, owned)] = not problem
        except OSError as e:
            problem = str(e)
            _bwrap_runs[(bwrap, owned)] = False
        except subprocess.TimeoutExpired as e:  # a loaded machine, not an answer: tried again next time
            problem = str(e)
    if bwrap is not None and _bwrap_runs.get((bwrap, owned)):
        return [bwrap, *args, "--seccomp", str(filter_fd), "--", *argv]
    if not _unconfined_said:
        _unconfined_said = True
        log.warning("uploads are unpacked without bubblewrap around the worker (%s): it runs as %s", problem,
                    "a private uid in a view of its own where it can, else as uid 0 without a capability" if owned
                    else "the server's user, with its network and files")
    return argv


def _bwrap_tried(bwrap: str, args: list[str], owned: bool) -> str:
    """Why the worker's imports do not run in its view under bubblewrap and its filter; "" where
    they do."""
    # --as-pid-1 in the try alone: bubblewrap's own init outlives the outer process for a moment
    # even when all goes well, and the server (a subreaper) would inherit it dead; a worker's whole
    # tree is reaped after it (_end_tree), and keeps that init, so that a signal it sends itself is
    # not refused as one sent to its namespace's pid 1
    from ..bots.seccomp import memfd
    own_filter = memfd(worker=True)  # bubblewrap reads its filter to the end: one of its own
    try:
        tried = [bwrap, "--as-pid-1", *args, "--seccomp", str(own_filter), "--", sys.executable, "-P", "-c",
                 WORKER_IMPORTS]
        return _tried(tried, _owned_space if owned else None, (own_filter,))
    finally:
        os.close(own_filter)


def worker_view() -> tuple[list[tuple[str, str]], list[str]]:
    """All a worker sees of the host, read-only, under bubblewrap or in its own root: the root links
    (``/bin`` -> ``usr/bin``...) as (target, link), and the paths bound, each at its own path:
    ``/usr``, the root folders that are not links, the Python running the server and what the
    worker's imports load (:func:`worker_reads`), and ``/etc/ld.so.cache`` alone of ``/etc``.
    Nothing else: no ``/home``, no other ``/etc`` file, no store, no ``/proc`` of the host's, no
    folder the server was started from."""
    from ..bots.filesystem import SANDBOX_ROOT_DIRS
    links: list[tuple[str, str]] = []
    binds = ["/usr"]
    for d in SANDBOX_ROOT_DIRS:
        if os.path.islink(d):
            links.append((os.readlink(d), d))
        elif os.path.isdir(d):
            binds.append(d)
    tmp = os.path.realpath("/tmp")
    seen = ["/usr", *SANDBOX_ROOT_DIRS]
    for p in worker_reads():
        # never /tmp or a folder above it (a script run from there puts /tmp on the import path):
        # its /tmp is its own tmpfs
        if not any(p == s or p.startswith(s + "/") for s in seen) and not (tmp + "/").startswith(p.rstrip("/") + "/"):
            binds.append(p)
            seen.append(p)
    if os.path.isfile("/etc/ld.so.cache"):
        binds.append("/etc/ld.so.cache")
    return links, binds


def worker_reads() -> list[str]:
    """What a worker reads beside the system: the Python running the server (its installation; of a
    virtual environment, what makes it one: its ``pyvenv.cfg`` and its ``bin``) and what the
    worker's imports load (:func:`worker_imports`). Never a whole entry of the import path beside
    those: ``python -m arena serve`` puts the folder it runs in there, which may hold a store, its
    key, or anything of the operator's."""
    python = [sys.base_prefix, sys.base_exec_prefix, os.path.dirname(os.path.realpath(sys.executable))]
    if sys.prefix != sys.base_prefix:
        python += [os.path.join(sys.prefix, "pyvenv.cfg"), os.path.dirname(os.path.abspath(sys.executable))]
    return [p for p in dict.fromkeys([*python, *worker_imports()]) if p and os.path.exists(p)]


IMPORTS_SEEN = WORKER_IMPORTS + """
import json, os, site, sys
sites = {os.path.abspath(p) for p in [*site.getsitepackages(), site.getusersitepackages()]}
found = set()
for name, module in list(sys.modules.items()):
    if "." not in name:
        for p in list(getattr(module, "__path__", None) or []) or [getattr(module, "__file__", None)]:
            if p and os.path.exists(p):
                p = os.path.abspath(p)
                found.add(os.path.dirname(p) if os.path.dirname(p) in sites else p)
print(json.dumps({"found": sorted(found), "path": [os.path.abspath(p) for p in sys.path if p]}))
"""
"""Where the worker's imports come from, as the worker's own Python finds them: each top-level
package's folders (or a module's file), or the site-packages it lies in, whole (its ``.pth`` files
too); and the import path it searched."""

_imports_seen: list[str] = []  # worker_imports's answer, found once a process


def worker_imports() -> list[str]:
    """The folders and files the worker's imports (:data:`WORKER_IMPORTS`) load: the arena package,
    its engine's compiled runtime and its dependencies, wherever they lie, and nothing else of the
    import path. Found by running them with the worker's environment (:data:`IMPORTS_SEEN`, about
    0.2 s of CPU) once a machine, not once a server process: the answer is noted
    (:func:`imports_note`) and read back while all it was found from is as it was. Empty where it
    could not be found (said in the log): the worker's view then lacks them and its start is tried
    as ever (:func:`confined`)."""
    if not _imports_seen:
        try:
            note = imports_note()
        except (OSError, ArenaError) as e:  # (no run directory, an unreadable package): asked, not noted
            log.warning("the upload worker's imports are not noted: %s", e)
            note = None
        found = _noted(note) if note is not None else None
        if found is None:
            found = _imports_found(note)
            if found is None:
                return []
        _imports_seen[:] = found
    return list(_imports_seen)


def imports_note() -> Path:
    """Where this machine notes the worker's imports (:mod:`~arena.bots.notes`), named by all the
    answer depends on: the question, the interpreter, the worker's environment and the arena
    package's content."""
    from ..bots.launch import interpreter_seen, package_read
    return note_named("imports", (IMPORTS_SEEN, interpreter_seen(sys.executable), sorted(_env().items()),
                                  package_read()[2]))


def _noted(note: Path) -> list[str] | None:
    """The answer noted in ``note`` (:func:`~arena.bots.notes.read_note`: the referee's own, and
    each path it was found from as it was then), where it names absolute paths, each of them among
    those seen. None otherwise (never noted, or stale: asked again)."""
    noted = read_note(note)
    if noted is None:
        return None
    found = noted.get("found")
    return found if absolute_paths(found) and set(found) <= noted["seen"].keys() else None


def _imports_found(note: Path | None) -> list[str] | None:
    """The worker's imports, found by running them (:data:`IMPORTS_SEEN`); None where they could not
    be. Noted in ``note`` where asking again found the same, with nothing they were found from
    changed in between (a package installed while they ran would otherwise be noted as absent)."""
    asked = _ask_imports()
    if asked is None:
        return None
    found, path = asked
    if note is not None:
        seen = {p: path_seen(p) for p in dict.fromkeys([*path, *found])}
        if _ask_imports() == asked and all(path_seen(p) == s for p, s in seen.items()):
            write_note(note, {"found": found, "seen": seen})
    return found


def _ask_imports() -> tuple[list[str], list[str]] | None:
    """(the worker's imports' paths, its import path), as its own Python finds them."""
    try:
        ran = subprocess.run([sys.executable, "-P", "-c", IMPORTS_SEEN], capture_output=True, timeout=30,
                             env=_env(), cwd="/")
        answer = json.loads(ran.stdout) if ran.returncode == 0 else None
    except (OSError, ValueError, subprocess.TimeoutExpired) as e:
        answer, ran = None, e
    found, path = (answer.get("found"), answer.get("path")) if isinstance(answer, dict) else (None, None)
    if absolute_paths(found) and absolute_paths(path):
        return found, path
    why = ran.stderr.decode(errors="replace").strip()[-500:] if isinstance(ran, subprocess.CompletedProcess) else ran
    log.warning("the upload worker's imports could not be found (%s)", why)
    return None


KEPT_ENV = ("PYTHONPATH", "PYTHONHASHSEED", "LANG", "LC_ALL", "LC_CTYPE")
"""What the worker keeps of the server's environment: what Python reads. Nothing else the
operator set for the server (a token, a webhook's secret) is the worker's business."""


def _env() -> dict[str, str]:
    """The environment the worker needs, with this arena's folder first on the path: the worker runs
    the same code as the server (a checkout beside an installed arena included)."""
    here = str(Path(__file__).resolve().parents[2])
    kept = {k: os.environ[k] for k in KEPT_ENV if k in os.environ}
    # the operator's entries made absolute: the worker's own folder (a relative entry's base) holds the upload
    theirs = [os.path.abspath(p) for p in kept.get("PYTHONPATH", "").split(os.pathsep) if p]
    return dict(kept, PATH=os.defpath, PYTHONPATH=os.pathsep.join([here, *theirs]))


def work(dest: Path, max_files: int, max_bytes: int, data: bytes) -> dict:
    """The worker's answer for one upload (see the module's docstring)."""
    from ..bots.manifest import ManifestError, load_bot
    from .upload import unpack
    try:
        root = unpack(data, dest, max_files=max_files, max_bytes=max_bytes)
        spec = load_bot(root)
        spec.files_hash()  # the folder read once, by the reader every path uses (its rules and caps)
    except (UploadError, ManifestError) as e:
        return {"refused": str(e)}
    except OSError as e:
        return {"errno": e.errno or 0, "strerror": e.strerror or str(e)}
    return {"root": str(root), "name": spec.name, "label": spec.label, "human": spec.human}


def main() -> int:
    """The worker: one upload after another, until its stdin closes."""
    stdin, stdout = sys.stdin.buffer, sys.stdout
    while header := stdin.readline():
        job = json.loads(header)
        data = stdin.read(job["size"])
        if len(data) != job["size"]:
            return 1
        stdout.write(json.dumps(work(Path(job["dest"]), job["max_files"], job["max_bytes"], data)) + "\n")
        stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
