"""Start, talk to, limit, sandbox and reliably kill one bot process.

A bot is an untrusted program speaking JSON lines on stdin/stdout.  This module
owns its whole life: a minimal environment, a private uid and temp dir, rlimits,
a per-bot cgroup, optionally a bubblewrap sandbox; bounded reads of its output;
stderr drained in the background; and a teardown that leaves no process, zombie,
cgroup or temp dir behind whatever the bot did.  No game logic lives here.

Typical use from a referee (inside ``trio.run``)::

    async with await start_bot(["python3", "bot.py"], bot_dir, limits=Limits()) as bot:
        await bot.send_line(json.dumps(hello))
        reply = await bot.receive_line(timeout=1.0)   # raises a BotError subclass
        log_turn(reply, bot.take_stderr())

Everything is bound to the trio run that started the bot: call ``aclose`` (or
leave the ``async with``) before that run ends.  docs/SANDBOX.md lists what is
enforced where.

Over 500 lines because one bot's life (start, talk, watch its CPU and pipes, kill and
reap) shares one object's state; the readers and the errors are the seams to split off
when the bot layer becomes a package.
"""

from __future__ import annotations

import errno
import logging
import os
import queue
import resource
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import trio

from . import faults
from . import sandbox as sb
from .limits import MiB, Limits

__all__ = [
    "BotClosedInput", "BotClosedOutput", "BotError", "BotExited", "BotProcess",
    "BotStartError", "BotTimeout", "CpuLimitExceeded", "LineTooLong", "Limits",
    "MemoryLimitExceeded", "NotUtf8", "OutputLimitExceeded", "ResourceUsage",
    "SandboxUnavailable", "capabilities", "cleanup_stale", "describe_containment",
    "namespaces_problem", "sandbox_problem", "start_bot",
]

log = logging.getLogger(__name__)

DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
READ_CHUNK = 64 * 1024
KILL_DEADLINE = 5.0  # seconds aclose() keeps killing before giving up (and logging)
EXIT_GRACE = 1.0  # how long EOF on stdout may precede the exit of the process
STDERR_GRACE = 0.5  # how long to wait for the last stderr bytes of a dead bot
SHUTDOWN_GRACE = 2.0
"""Seconds a bot has to exit by itself after ``shutdown`` (its stdin is closed too) before it
is killed: time to write its statistics or a last log line (protocol/PROTOCOL.md)."""
WATCH_S = 0.25
"""While waiting for a reply, the referee looks this often at the bot's CPU use this game and,
under bubblewrap, at whether any bot process still holds its stdin and stdout."""
CPU_CHECK_S = 0.2  # after a reply, the game's CPU is measured at most this often
ENV_TOKEN = "PALACE_ARENA_BOT"

BWRAP: str | None = None
"""Path of bwrap; None means look it up on PATH (and /usr/bin)."""


# ---------------------------------------------------------------------------
# errors


class BotError(faults.BotFault):
    """The bot misbehaved at the process level. Every subclass is also the
    :mod:`arena.faults` class of its fault, so ``reason`` comes from there and the
    referee needs no mapping."""


class BotTimeout(BotError, faults.Timeout):
    def __init__(self, timeout: float, during: str = "receive"):
        super().__init__(f"no complete line within {timeout:g}s" if during == "receive"
                         else f"bot did not read its input within {timeout:g}s")
        self.timeout = timeout
        self.during = during


class BotExited(BotError, faults.Crash):
    """The bot's main process is gone.  ``returncode`` is its exit status (None
    if killed by a signal), ``signal`` the killing signal (None if it exited).
    In sandbox mode bwrap reports a signal death as status 128+N; then both
    are set (e.g. 139 and 11)."""

    def __init__(self, returncode: int | None, signal_: int | None, detail: str = ""):
        if signal_ is not None:
            try:
                what = f"killed by {signal.Signals(signal_).name}"
            except ValueError:
                what = f"killed by signal {signal_}"
        elif returncode is not None:
            what = f"exited with status {returncode}"
        else:
            what = "exited (status unknown)"
        super().__init__(f"bot {what}{': ' + detail if detail else ''}")
        self.returncode = returncode
        self.signal = signal_


class CpuLimitExceeded(BotExited, faults.CpuLimit):
    @classmethod
    def over_allowance(cls, used: float, allowed: float) -> CpuLimitExceeded:
        """The bot is still running but has used more CPU this game than it may."""
        exc = cls(None, None)
        exc.args = (f"bot used {used:.2f} s of CPU this game, over its allowance of {allowed:.2f} s",)
        return exc


class MemoryLimitExceeded(BotExited, faults.MemoryLimit):
    pass

class LineTooLong(BotError, faults.LineTooLong):
    """A line exceeded Limits.max_line_bytes.  Sticky: the output stream is
    not resynchronised, every later receive raises this again."""

    def __init__(self, limit: int):
        super().__init__(f"line longer than {limit} bytes")
        self.limit = limit


class NotUtf8(BotError, faults.BadEncoding):
    """One line was not valid UTF-8 (the line is consumed; the next one may be fine)."""

    def __init__(self, raw: bytes, error: UnicodeDecodeError):
        super().__init__(f"line is not UTF-8 ({error.reason} at byte {error.start}): {raw[:60]!r}")
        self.raw_prefix = raw[:200]


class OutputLimitExceeded(BotError, faults.OutputLimit):
    """Total stdout exceeded Limits.max_output_bytes (sticky)."""


class BotClosedInput(BotError, faults.ClosedInput):
    """The bot closed its stdin but is still running."""


class BotClosedOutput(BotError, faults.ClosedOutput):
    """The bot closed its stdout but is still running."""


class BotStartError(Exception):
    """The referee could not start the bot (missing command, bad directory,
    permissions, no cgroups when required...).  Not the bot's fault."""


class SandboxUnavailable(BotStartError):
    """bwrap is missing or cannot create namespaces on this machine."""


# ---------------------------------------------------------------------------
# per-process state (lazily created, re-created after fork)

_registry: sb.Registry | None = None
_cgroups: tuple[sb.CgroupRoot | None, str] | None = None
_bwrap_checked: dict[tuple[str, bool], str | None] = {}
_spawner: _SpawnThread | None = None


class _SpawnThread:
    """Forks every bot from one long-lived daemon thread.

    PR_SET_PDEATHSIG fires when the *thread* that forked the child exits, so
    the fork must come from a thread that lives as long as the referee:
    trio.lowlevel.open_process forks from trio's worker threads, which retire
    after 10 s idle and take their bots with them (verified on this machine).
    A dedicated thread also keeps the event loop free while Popen waits for the
    child to exec (10-20 ms with a cgroup v1 attach).
    """

    def __init__(self) -> None:
        self.pid = os.getpid()
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._serve, name="arena-bot-spawner", daemon=True).start()

    def _serve(self) -> None:
        while True:
            fn, deliver = self._jobs.get()
            try:
                result = (fn(), None)
            except BaseException as exc:  # delivered to the caller, not lost
                result = (None, exc)
            deliver(result)

    async def run(self, fn):
        token = trio.lowlevel.current_trio_token()
        box: list = []
        done = trio.Event()

        def deliver(result) -> None:
            def finish() -> None:
                box.append(result)
                done.set()
            try:
                token.run_sync_soon(finish)
            except trio.RunFinishedError:  # nobody will ever own this process
                if isinstance(result[0], subprocess.Popen):
                    os.killpg(result[0].pid, signal.SIGKILL)
                    result[0].wait()

        self._jobs.put((fn, deliver))
        with trio.CancelScope(shield=True):  # a started process must not be orphaned
            await done.wait()
        value, exc = box[0]
        if exc is not None:
            raise exc
        return value


def _get_spawner() -> _SpawnThread:
    global _spawner
    if _spawner is None or _spawner.pid != os.getpid():
        _spawner = _SpawnThread()
    return _spawner


def _get_registry() -> sb.Registry:
    global _registry
    if _registry is None or _registry.pid != os.getpid():
        _registry = sb.Registry()
        if _registry.report:
            log.warning("cleaned leftovers of a dead referee with our pid: %s", _registry.report)
    return _registry


def _cgroup_root() -> tuple[sb.CgroupRoot | None, str]:
    global _cgroups
    if _cgroups is None:
        _cgroups = sb.detect_cgroups()
    return _cgroups


def _find_bwrap() -> str | None:
    if BWRAP is not None:
        return BWRAP if os.path.isfile(BWRAP) and os.access(BWRAP, os.X_OK) else None
    return shutil.which("bwrap") or shutil.which("bwrap", path="/usr/bin:/bin")


_namespaces_checked: dict[bool, str | None] = {}


async def namespaces_problem() -> str | None:
    """None if this referee can contain bots without bubblewrap (private uid, new mount,
    network, IPC and UTS namespaces, a root of its own; see sandbox.NamespaceRoot), else why not.
    Needs root; tried once with ``/usr/bin/true``."""
    if os.geteuid() != 0:
        return "needs a root referee (private uids and mount namespaces)"
    if True not in _namespaces_checked:
        problem = None
        try:
            bot = await _start(["/usr/bin/true"], Path("/usr/bin"), limits=Limits(), sandbox=False,
                               namespaces=True, extra_env=None, run_as="auto", cgroup=False,
                               ro_binds=(), bwrap=None)
        except BotStartError as exc:
            problem = str(exc)
        else:
            async with bot:
                try:
                    await bot.receive_line(20)
                    problem = "namespace probe printed output"
                except BotExited as exc:
                    if exc.returncode != 0:
                        problem = f"namespace probe failed: {exc}"
                except BotError as exc:
                    problem = f"namespace probe failed: {exc}"
        _namespaces_checked[True] = problem
    return _namespaces_checked[True]


async def sandbox_problem(run_as: int | str | None = "auto") -> str | None:
    """None if bwrap can build our sandbox here (as the bots' uid), else why not.

    Starts one sandboxed ``/usr/bin/true`` through the normal machinery (so its
    leftovers are reaped like any bot's) and caches the answer per bwrap path
    and uid mode."""
    bwrap = _find_bwrap()
    if bwrap is None:
        return "bwrap not found (Debian/Ubuntu package: bubblewrap)"
    key = (bwrap, _drops_uid(run_as))
    if key not in _bwrap_checked:
        problem = None
        try:
            bot = await _start(["/usr/bin/true"], Path("/usr/bin"), limits=Limits(), sandbox=True,
                               namespaces=False, extra_env=None, run_as=run_as, cgroup=False,
                               ro_binds=(), bwrap=bwrap)
        except BotStartError as exc:
            problem = f"cannot run {bwrap}: {exc}"
        else:
            async with bot:
                try:
                    await bot.receive_line(20)
                    problem = "bwrap probe printed output"
                except BotExited as exc:
                    if exc.returncode != 0:
                        err = " ".join(bot.take_stderr()).strip()[:300]
                        problem = (
                            f"bwrap cannot create its sandbox here (exit {exc.returncode}): {err}"
                            " (are unprivileged user namespaces disabled? see"
                            " user.max_user_namespaces, kernel.unprivileged_userns_clone,"
                            " kernel.apparmor_restrict_unprivileged_userns)")
                except BotError as exc:
                    problem = f"bwrap probe failed: {exc}"
        _bwrap_checked[key] = problem
    return _bwrap_checked[key]


def _drops_uid(run_as: int | str | None) -> bool:
    return isinstance(run_as, int) or (run_as == "auto" and os.geteuid() == 0)


async def capabilities() -> dict[str, Any]:
    """What containment this machine offers, for logs and docs."""
    root, note = _cgroup_root()
    return {
        "root": os.geteuid() == 0,
        "private_uids": os.geteuid() == 0,
        "cgroup": root.describe() if root else None,
        "cgroup_note": note,
        "subreaper": _get_registry().subreaper,
        "bwrap": await sandbox_problem() or "ok",
        "namespaces": await namespaces_problem() or "ok",
        "pidfd": hasattr(os, "pidfd_open"),
    }


# ---------------------------------------------------------------------------
# bounded readers


class _LineReader:
    """Splits a byte stream into lines without ever holding more than
    max_line + READ_CHUNK bytes, whatever the peer sends."""

    def __init__(self, stream: trio.abc.ReceiveStream, max_line: int, max_total: int):
        self._stream = stream
        self._max_line = max_line
        self._max_total = max_total
        self._buf = bytearray()
        self._pos = 0  # start of the unread part of _buf
        self._scanned = 0  # _buf[:_scanned] holds no unread newline
        self._total = 0
        self._eof = False
        self._failed: BotError | None = None
        self.peak_buffer = 0  # largest _buf seen, for tests and curiosity

    async def _receive_some(self) -> bytes:
        """The next chunk. For a pipe, read first and wait only if nothing is there: a bot's
        reply usually is, and trio's receive_some would first yield a whole scheduler pass."""
        stream = self._stream
        if not isinstance(stream, trio.lowlevel.FdStream):
            return await stream.receive_some(READ_CHUNK)
        while True:
            try:
                return os.read(stream.fileno(), READ_CHUNK)
            except BlockingIOError:
                await trio.lowlevel.wait_readable(stream.fileno())
            except OSError as exc:
                if exc.errno == errno.EBADF:
                    raise trio.ClosedResourceError("file was already closed") from None
                raise trio.BrokenResourceError from exc

    def _fail(self, exc: BotError) -> BotError:
        self._failed = exc
        self._buf, self._pos, self._scanned = bytearray(), 0, 0  # release the memory now
        return exc

    async def read_line(self) -> bytes | None:
        """Next line without its newline; None at EOF.  A final unterminated
        line is returned as a line."""
        while True:
            if self._failed is not None:
                raise self._failed
            i = self._buf.find(b"\n", max(self._pos, self._scanned))
            if i >= 0:
                if i - self._pos > self._max_line:
                    raise self._fail(LineTooLong(self._max_line))
                line = bytes(self._buf[self._pos:i])
                self._pos = self._scanned = i + 1
                return line
            del self._buf[: self._pos]  # compact once per read, not once per line
            self._pos = 0
            self._scanned = len(self._buf)
            if len(self._buf) > self._max_line:
                raise self._fail(LineTooLong(self._max_line))
            if self._eof:
                if not self._buf:
                    return None
                line, self._buf, self._scanned = bytes(self._buf), bytearray(), 0
                return line
            data = await self._receive_some()
            if not data:
                self._eof = True
                continue
            self._total += len(data)
            if self._total > self._max_total:
                raise self._fail(OutputLimitExceeded(
                    f"bot wrote more than {self._max_total} bytes to stdout"))
            self._buf += data
            self.peak_buffer = max(self.peak_buffer, len(self._buf))


class _StderrBuffer:
    """Keeps the first ``cap`` bytes of stderr as lines; counts the rest."""

    def __init__(self, cap: int):
        self.cap = cap
        self.kept = 0
        self.dropped = 0
        self._pending = bytearray()
        self._lines: list[str] = []

    def feed(self, data: bytes) -> None:
        room = self.cap - self.kept
        if room <= 0:
            self.dropped += len(data)
            return
        take = data[:room]
        self.dropped += len(data) - len(take)
        self.kept += len(take)
        self._pending += take
        *complete, rest = self._pending.split(b"\n")
        self._lines.extend(line.decode("utf-8", "replace") for line in complete)
        self._pending = bytearray(rest)
        if self.kept >= self.cap:
            self.finish()  # nothing more will be kept: flush the partial line

    def finish(self) -> None:
        if self._pending:
            self._lines.append(self._pending.decode("utf-8", "replace"))
            self._pending = bytearray()

    def take(self) -> list[str]:
        lines, self._lines = self._lines, []
        return lines


# ---------------------------------------------------------------------------
# the bot process


@dataclass(frozen=True)
class ResourceUsage:
    """Peak memory and CPU of the whole bot where the source allows it.

    ``source`` says where the numbers come from: "cgroup-v1"/"cgroup-v2"
    (whole bot; v1 memory includes page cache it caused), "rusage" (the main
    process and the descendants it reaped, after exit), or "proc" (live
    processes only, peak = largest single VmHWM)."""

    peak_memory_bytes: int | None
    cpu_seconds: float | None
    source: str


class BotProcess:
    """A running bot.  Create with :func:`start_bot`; always ``aclose()``."""

    def __init__(self, *, popen: subprocess.Popen, fds: tuple[int, int, int], name: str,
                 command: list[str], limits: Limits, cgroup: sb.BotCgroup | None,
                 uid: int | None, uid_lease: sb.UidLease | None, home: Path | None,
                 sandboxed: bool, token: str, start: int, registry: sb.Registry,
                 containment: str = ""):
        self.pid = popen.pid
        self.name = name
        self.command = command
        self.limits = limits
        self.cgroup = cgroup
        self.uid = uid
        self.home = home
        self.sandboxed = sandboxed
        self.containment = containment  # what contains it, in words (see Launcher.describe)
        self._popen = popen
        self._sandbox_init: int | None = None  # host pid of bwrap's init inside the sandbox
        # Per-game CPU accounting (begin_game); without a game the whole life counts as one.
        self._game_clock: tuple[float, float] | None = None  # (move_s, bank_s)
        self._game_cpu0 = 0.0
        self._game_decisions = 0
        self._cpu_checked_at = -1e9
        self._stdin_checked_at = -1e9
        self._replies = 0  # lines received over the process's life
        self._uid_lease = uid_lease
        self._registry = registry
        self._stdin = trio.lowlevel.FdStream(fds[0])
        self._stdout = trio.lowlevel.FdStream(fds[1])
        self._stderr = trio.lowlevel.FdStream(fds[2])
        self._reader = _LineReader(self._stdout, limits.max_line_bytes, limits.max_output_bytes)
        self._stderr_buf = _StderrBuffer(limits.stderr_cap_bytes)
        self._stderr_done = trio.Event()
        self._stderr_scope = trio.CancelScope()
        self._stdin_error: BotError | None = None
        self._sending = False  # a slow (waiting) write is under way: later lines queue behind it
        # (exit code, signal) once the main process has exited.  It is *not*
        # reaped until aclose(): while it is an unreaped zombie its pid, and so
        # the session and group ids of everything it forked, cannot be recycled.
        self._exit: tuple[int | None, int | None] | None = None
        self._reaped = False
        self._rusage: resource.struct_rusage | None = None
        self._wait_lock = trio.Lock()
        self._closed = False
        self._final_usage: ResourceUsage | None = None
        try:
            self._pidfd: int | None = os.pidfd_open(self.pid)
        except (AttributeError, OSError):
            self._pidfd = None
        self._attribution = sb.Attribution(
            pid=self.pid, start=start,
            uid=uid if uid_lease is not None else None,
            token=f"{ENV_TOKEN}={token}".encode(),
            cgroup_pids=cgroup.pids if cgroup is not None else None,
        )
        trio.lowlevel.spawn_system_task(self._drain_stderr, name=f"stderr of {name}")

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("exited" if self._exit is not None else "running")
        return f"<BotProcess {self.name} pid={self.pid} uid={self.uid} {state}>"

    # -- talking ---------------------------------------------------------

    async def send_line(self, text: str, *, timeout: float = 10.0) -> None:
        """Write one line (a newline is appended).

        Raises BotExited if the bot is gone, BotClosedInput if it closed its
        stdin but lives on, BotTimeout if it does not read for ``timeout``
        seconds (its pipe stays full).  After any of these, stdin is unusable.
        """
        if "\n" in text or "\r" in text:
            raise ValueError("a protocol line must not contain newlines")
        if self._stdin_error is not None:
            raise self._stdin_error
        if self.sandboxed:
            self._check_stdin()
        data = text.encode("utf-8") + b"\n"
        written = 0
        if not self._sending:  # fast path: the non-blocking pipe almost always takes a line whole
            try:
                written = os.write(self._stdin.fileno(), data)
            except OSError:  # full, broken or closed: the slow path below waits or names it
                pass
            if written == len(data):
                return
            data = data[written:]
        self._sending = True
        with trio.move_on_after(timeout) as scope:
            try:
                await self._stdin.send_all(data)
            except trio.BrokenResourceError:
                if await self._wait_exit(0.2):
                    self._stdin_error = await self._exited_error()
                else:
                    self._stdin_error = BotClosedInput("bot closed its stdin")
                raise self._stdin_error from None
            finally:
                self._sending = False
        if scope.cancelled_caught:
            self._stdin_error = BotTimeout(timeout, during="send")
            raise self._stdin_error

    async def receive_line(self, timeout: float) -> str:
        """The next line from the bot's stdout, without its newline.

        Raises BotTimeout (no full line in time; a late line is still returned
        by the next call), BotExited (or CpuLimitExceeded/MemoryLimitExceeded),
        BotClosedOutput, LineTooLong, OutputLimitExceeded or NotUtf8.
        """
        deadline = trio.current_time() + timeout
        while True:  # in slices of WATCH_S: a fast reply never sees more than the first
            with trio.move_on_at(min(deadline, trio.current_time() + WATCH_S)) as scope:
                raw = await self._reader.read_line()
            if not scope.cancelled_caught:
                break
            if trio.current_time() >= deadline:
                if await self._wait_exit(0):  # dead, but a descendant holds stdout open
                    raise await self._exited_error()
                raise BotTimeout(timeout)
            self._check_cpu(force=True)
            if self.sandboxed:  # bwrap holds copies of both pipes: no EOF, no EPIPE ever comes
                if self._pipe_abandoned(self._stdout):
                    raise BotClosedOutput("bot closed its stdout")
                self._check_stdin(force=True)
        if raw is None:
            left = deadline - trio.current_time()
            if await self._wait_exit(min(EXIT_GRACE, max(left, 0.05))):
                raise await self._exited_error()
            raise BotClosedOutput("bot closed its stdout")
        self._replies += 1
        if self._replies == 1:  # the handshake: a bot that closed stdin meanwhile is told at once
            self._stdin_checked_at = -1e9
        self._game_decisions += 1
        self._check_cpu()
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise NotUtf8(raw, exc) from None

    async def run_to_end(self, timeout: float) -> tuple[int | None, list[str]]:
        """For a command that is no bot (a contained build): close its stdin, collect its stdout
        and stderr lines until it exits, at most ``timeout`` seconds. Returns its exit status
        (None if it did not exit in time or its status was lost) and its output; the caller
        still ``aclose()``s it, which kills whatever it left running."""
        await self._stdin.aclose()
        lines: list[str] = []
        deadline = trio.current_time() + timeout
        while trio.current_time() < deadline:
            try:
                lines.append(await self.receive_line(deadline - trio.current_time()))
            except (NotUtf8, LineTooLong):
                continue
            except BotExited:
                break
            except BotError:  # stdout closed or over its limit, or out of time: wait for the exit
                await self._wait_exit(max(deadline - trio.current_time(), 0))
                break
        with trio.move_on_after(STDERR_GRACE):
            await self._stderr_done.wait()
        return self.returncode, lines + self.take_stderr()

    # -- per-game CPU and stdout watch -------------------------------------

    def begin_game(self, move_s: float, bank_s: float) -> None:
        """A new game starts for this process: its CPU is counted from now, against
        ``Limits.game_cpu_allowance`` under this clock (called by the referee before ``start``)."""
        self._game_clock = (move_s, bank_s)
        self._game_decisions = 0
        self._game_cpu0 = self._cpu_now() or 0.0
        self._cpu_checked_at = trio.current_time()

    def game_cpu_seconds(self) -> float | None:
        """CPU the whole bot used since :meth:`begin_game` (since its start without one)."""
        now = self._cpu_now()
        return None if now is None else now - self._game_cpu0

    def _check_cpu(self, force: bool = False) -> None:
        """CpuLimitExceeded if the bot has used more CPU this game than it may.  Measured at
        most every CPU_CHECK_S unless ``force``d (a cgroup read is cheap, a /proc scan is not)."""
        if self._game_clock is None and self.limits.cpu_seconds is None:
            return
        now = trio.current_time()
        if not force and now - self._cpu_checked_at < CPU_CHECK_S:
            return
        self._cpu_checked_at = now
        used = self.game_cpu_seconds()
        if used is None:
            return
        move_s, bank_s = self._game_clock or (0.0, 0.0)
        allowed = self.limits.game_cpu_allowance(move_s, bank_s, self._game_decisions)
        if used > allowed:
            raise CpuLimitExceeded.over_allowance(used, allowed)

    def _live_pids(self) -> set[int]:
        """Every live process of the bot, as cheaply as the bot's containment allows."""
        if self.cgroup is not None:
            pids = self.cgroup.pids()
            if pids or self.cgroup.has_pids:
                return pids
        if self._uid_lease is not None:
            return set(sb.pids_of_uid(self.uid))
        table = sb.scan_procs()
        return {p for p in self._attribution.members(table, os.getpid()) if table[p].state != "Z"}

    def _cpu_now(self) -> float | None:
        if self.cgroup is not None:
            cpu = self.cgroup.cpu_seconds()
            if cpu is not None:
                return cpu
        ticks = 0
        for pid in self._live_pids():
            info = sb.read_proc(pid)
            if info is not None:
                ticks += info.cpu_ticks
        return ticks / sb.CLK_TCK

    def _check_stdin(self, force: bool = False) -> None:
        """BotClosedInput if no bot process holds its stdin any more (under bubblewrap, where
        writes never fail); looked at most every WATCH_S unless ``force``d."""
        now = trio.current_time()
        if self._stdin_error is None and (force or now - self._stdin_checked_at >= WATCH_S):
            self._stdin_checked_at = now
            if self._pipe_abandoned(self._stdin):
                self._stdin_error = BotClosedInput("bot closed its stdin")
        if self._stdin_error is not None:
            raise self._stdin_error

    def _pipe_abandoned(self, stream: trio.lowlevel.FdStream) -> bool:
        """Under bubblewrap the outer bwrap and its init keep copies of the bot's stdin and
        stdout, so the referee never sees EOF (or EPIPE) when the bot closes one: True when
        some bot process runs but none of them, helpers aside, holds that pipe any more."""
        try:
            pipe = f"pipe:[{os.fstat(stream.fileno()).st_ino}]"
        except OSError:
            return False
        helpers = {self.pid, self._sandbox_init}
        others = self._live_pids() - helpers
        if not others:
            return False  # not started yet, or gone (then the exit is reported instead)
        for pid in others:
            try:
                fds = os.listdir(f"/proc/{pid}/fd")
            except OSError:
                return False  # cannot tell: do not guess
            for fd in fds:
                try:
                    if os.readlink(f"/proc/{pid}/fd/{fd}") == pipe:
                        return False
                except OSError:
                    continue
        return True

    def take_stderr(self) -> list[str]:
        """stderr lines received since the last call (kept ones only; see
        ``stderr_dropped_bytes``)."""
        return self._stderr_buf.take()

    @property
    def stderr_dropped_bytes(self) -> int:
        """stderr bytes read past Limits.stderr_cap_bytes and thrown away."""
        return self._stderr_buf.dropped

    @property
    def returncode(self) -> int | None:
        """subprocess-style status of the main process (negative = signal), or
        None while it runs."""
        if self._exit is None or self._exit == (None, None):
            return None
        code, sig = self._exit
        return -sig if sig is not None else code

    # -- exit handling ---------------------------------------------------

    def _poll_exit(self) -> bool:
        """Record the exit status if the main process has exited (WNOWAIT: it
        stays a zombie until _reap)."""
        if self._exit is not None:
            return True
        try:
            info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:  # somebody else reaped it: status lost
            self._exit, self._reaped = (None, None), True
            return True
        if info is None or info.si_pid == 0:
            return False
        if info.si_code == os.CLD_EXITED:
            self._exit = (info.si_status, None)
        else:
            self._exit = (None, info.si_status)
        return True

    def _reap(self) -> None:
        """Collect the zombie main process and its rusage (last step of aclose)."""
        if self._reaped:
            return
        try:
            pid, status, rusage = os.wait4(self.pid, os.WNOHANG)
        except ChildProcessError:
            pid, status, rusage = self.pid, -1, None
        if pid == 0:
            return
        self._reaped, self._rusage = True, rusage
        if self._exit is None and status >= 0:
            code = os.waitstatus_to_exitcode(status)
            self._exit = (None, -code) if code < 0 else (code, None)
        # Tell Popen so it neither waits again nor warns that it is "still running".
        self._popen.returncode = self.returncode if self.returncode is not None else -1
        if self._pidfd is not None:
            trio.lowlevel.notify_closing(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None

    async def _wait_exit(self, timeout: float) -> bool:
        """True once the main process has exited, waiting up to ``timeout``."""
        if self._poll_exit():
            return True
        async with self._wait_lock:
            with trio.move_on_after(timeout):
                while not self._poll_exit():
                    if self._pidfd is not None:
                        try:
                            await trio.lowlevel.wait_readable(self._pidfd)
                        except trio.ClosedResourceError:  # aclose() reaped it meanwhile
                            break
                    else:
                        await trio.sleep(0.005)
        return self._exit is not None

    async def _exited_error(self) -> BotExited:
        """The right BotExited for the exited main process.  Waits briefly for
        the end of stderr so a dying bot's traceback is in take_stderr()."""
        with trio.move_on_after(STDERR_GRACE):
            await self._stderr_done.wait()
        if self._exit is None or self._exit == (None, None):
            return BotExited(None, None, "exit status lost")
        code, sig = self._exit
        if self.sandboxed and code is not None and 128 < code <= 128 + 64:
            sig = code - 128  # bwrap's convention for a child killed by a signal
        usage = self._measure()
        if sig == signal.SIGXCPU or (
            sig == signal.SIGKILL and usage.cpu_seconds is not None
            and usage.cpu_seconds >= self.limits.process_cpu_seconds
        ):
            return CpuLimitExceeded(code, sig, f"CPU limit of {self.limits.process_cpu_seconds}s per process")
        if sig == signal.SIGKILL and self.cgroup is not None and self.cgroup.oom_kills():
            return MemoryLimitExceeded(code, sig, f"memory limit of {self.limits.memory_mb} MB")
        return BotExited(code, sig)

    async def _drain_stderr(self) -> None:
        with self._stderr_scope:
            try:
                while True:
                    data = await self._stderr.receive_some(READ_CHUNK)
                    if not data:
                        break
                    self._stderr_buf.feed(data)
            except (trio.ClosedResourceError, trio.BrokenResourceError, OSError):
                pass
            finally:
                self._stderr_buf.finish()
                self._stderr_done.set()

    # -- usage -------------------------------------------------------------

    def resource_usage(self) -> ResourceUsage:
        """Peak memory and CPU seconds used so far (final after aclose)."""
        return self._final_usage or self._measure()

    def _measure(self) -> ResourceUsage:
        peak = cpu = None
        source = ""
        if self.cgroup is not None:
            peak, cpu = self.cgroup.peak_memory(), self.cgroup.cpu_seconds()
            source = f"cgroup-{self.cgroup.root.kind}"
        if peak is not None and cpu is not None:
            return ResourceUsage(peak, cpu, source)
        if self._rusage is not None:
            peak = peak if peak is not None else self._rusage.ru_maxrss * 1024
            cpu = cpu if cpu is not None else self._rusage.ru_utime + self._rusage.ru_stime
            return ResourceUsage(peak, cpu, source or "rusage")
        table = sb.scan_procs()
        members = self._attribution.members(table, os.getpid())
        if peak is None:
            peaks = [p for p in map(sb.proc_peak_rss, members) if p is not None]
            peak = max(peaks) if peaks else None
        if cpu is None:
            cpu = sum(table[p].cpu_ticks for p in members if p in table) / sb.CLK_TCK
        return ResourceUsage(peak, cpu, source or "proc")

    # -- teardown ----------------------------------------------------------

    async def __aenter__(self) -> BotProcess:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def close_gracefully(self) -> None:
        """After ``shutdown``: close stdin, give the bot SHUTDOWN_GRACE seconds to exit by
        itself, then kill whatever is left (see :meth:`aclose`)."""
        await self.aclose(grace=SHUTDOWN_GRACE)

    async def aclose(self, grace: float = 0.0) -> None:
        """Kill the bot and everything it started, reap it all, free its cgroup,
        uid and temp dir.  Idempotent and shielded from cancellation.

        With ``grace`` > 0 the bot first gets its stdin closed and that long
        to exit by itself (for a clean "game over"); then SIGKILL regardless.
        """
        if self._closed:
            return
        self._closed = True
        with trio.CancelScope(shield=True):
            if grace > 0 and self._exit is None:
                await self._stdin.aclose()
                await self._wait_exit(grace)
            clean = await self._kill_everything()
            with trio.move_on_after(STDERR_GRACE):
                await self._stderr_done.wait()
            self._stderr_scope.cancel()
            await self._stderr_done.wait()
            for stream in (self._stdin, self._stdout, self._stderr):
                await stream.aclose()
            self._reap()
            self._final_usage = self._measure()
            cgroup_gone = self.cgroup.remove() if self.cgroup is not None else True
            if self.home is not None:
                shutil.rmtree(self.home, ignore_errors=True)
            if self._uid_lease is not None:
                self._registry.release_uid(self._uid_lease)
            if clean and cgroup_gone:
                self._registry.drop_record(self.name)
            else:
                log.warning("%r: processes survived %.0fs of SIGKILL; left for cleanup_stale()",
                            self, KILL_DEADLINE)

    async def _kill_everything(self) -> bool:
        """SIGKILL and reap every process of the bot until none is left."""
        me = os.getpid()
        deadline = trio.current_time() + KILL_DEADLINE
        while True:
            if self.cgroup is not None:
                self.cgroup.kill()
            try:  # safe: the leader is not reaped yet, so its pgid is still ours
                os.killpg(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            table = self._process_table()
            members = self._attribution.members(table, me)
            sb.kill_pids(members)
            await self._wait_exit(0.05)  # SIGKILL takes effect asynchronously
            for pid in members:
                if pid != self.pid and pid in table and table[pid].ppid == me:
                    sb.reap_if_child(pid)  # orphans the subreaper inherited
            # Judge by a fresh scan: a member may have forked after the first one.
            table = self._process_table()
            left = sb.still_present(self._attribution.members(table, me), table, me)
            left.discard(self.pid)  # the leader's zombie is reaped last, by aclose
            if self._exit is not None and not left:
                return True
            if trio.current_time() > deadline:
                return False
            await trio.sleep(0.002)

    def _process_table(self) -> dict[int, sb.ProcInfo]:
        """The processes that may be the bot's.  With a uid of its own, every one of them runs
        under it (no bot process can change uid), so a stat per /proc entry and a read per
        bot process replace reading every process's stat file (9 ms on a busy machine)."""
        if self._uid_lease is None:
            return sb.scan_procs()
        table = {}
        for pid in sb.pids_of_uid(self.uid):
            info = sb.read_proc(pid)
            if info is not None:
                table[pid] = info
        return table

    def __del__(self) -> None:
        if getattr(self, "_closed", True):
            return
        warnings.warn(f"{self!r} was never closed; killing it without reaping",
                      ResourceWarning, stacklevel=1)
        try:
            if self.cgroup is not None:
                self.cgroup.kill()
            if not self._reaped:
                os.killpg(self.pid, signal.SIGKILL)
        except Exception:
            pass


# ---------------------------------------------------------------------------
# starting


def _child_setup(uid: int | None, join_fds: list[int], rlimits: list[tuple[int, int, int]],
                 nsroot: sb.NamespaceRoot | None = None):
    """preexec_fn: runs in the forked child, before exec, in this order:
    join the cgroup (needs root), enter the namespaces and root of ``nsroot``
    (needs root), drop to the bot uid, forbid privilege gain,
    ask for SIGKILL when the referee thread dies (after the uid change, which
    would reset it), bail out if the referee already died, set rlimits
    (RLIMIT_AS last: the child is still a copy of the big referee).
    Only async-signal-safe-ish calls: no imports, no locks, no logging."""
    referee = os.getpid()

    def setup() -> None:
        for fd in join_fds:
            os.write(fd, b"0")
        if nsroot is not None:
            nsroot.enter()
        if uid is not None:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
        sb.prctl(sb.PR_SET_NO_NEW_PRIVS, 1)
        sb.prctl(sb.PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != referee:
            os._exit(111)
        for res, soft, hard in rlimits:
            resource.setrlimit(res, (soft, hard))

    return setup


def _clamp_to_hard(res: int, soft: int, hard: int) -> tuple[int, int, int]:
    """An unprivileged process cannot raise a hard limit: stay within ours."""
    ours = resource.getrlimit(res)[1]
    if ours == resource.RLIM_INFINITY:
        return res, soft, hard
    return res, min(soft, ours), min(hard, ours)


def _resolve(exe: str, cwd: Path, path: str) -> Path | None:
    if "/" in exe:
        p = cwd / exe
        return p if p.is_file() else None
    found = shutil.which(exe, path=path)
    return Path(found) if found else None


async def start_bot(
    command: Sequence[str],
    cwd: Path | str,
    *,
    limits: Limits = Limits(),
    sandbox: bool = False,
    namespaces: bool = False,
    extra_env: dict[str, str] | None = None,
    run_as: int | str | None = "auto",
    cgroup: bool | None = None,
    ro_binds: Sequence[Path | str] = (),
    writable_cwd: bool = False,
) -> BotProcess:
    """Start a bot and return its BotProcess (use ``async with await start_bot(...)``).

    command: argv; command[0] is looked up on the bot's PATH
        (/usr/local/bin:/usr/bin:/bin unless extra_env sets PATH) or relative
        to ``cwd`` if it contains a slash.
    cwd: the bot's directory; must be readable by the bot's uid.
    sandbox: run inside bubblewrap (no network, read-only system, only ``cwd``
        and ``ro_binds`` visible, private /tmp).  SandboxUnavailable if bwrap
        is missing or cannot create namespaces here.
    namespaces: the containment for a root referee without bubblewrap: new
        mount, network, IPC and UTS namespaces and a root of its own with the
        same view as the sandbox (sandbox.NamespaceRoot); needs a private uid.
        HOME and TMPDIR are then a private tmpfs /tmp, like in the sandbox.
    extra_env: added to the minimal environment (PATH, HOME, TMPDIR, LANG).
    run_as: "auto" = when the referee is root, a private uid from
        sandbox.BOT_UID_BASE.. leased for this bot alone (so it cannot read
        root-only files nor touch other bots, and RLIMIT_NPROC is its own);
        an int = that uid (shared, e.g. 65534; RLIMIT_NPROC is then not set);
        None = keep the referee's uid.
    cgroup: None = use a per-bot cgroup when one can be created; True =
        require it (BotStartError otherwise); False = rlimits only.
    ro_binds: extra read-only paths visible in the sandbox (e.g. a JDK in /opt).
    writable_cwd: ``cwd`` is writable and, under a private uid, handed to that uid
        first: for a contained build, in a copy of the bot made for it (see
        launch.Launcher.build), never for a bot that plays.

    The fork happens on a dedicated thread (see _SpawnThread for why not
    trio.lowlevel.open_process); the pipes are trio FdStreams and exit is
    watched through a pidfd, so everything else is ordinary trio I/O.
    """
    bwrap = None
    if sandbox:
        problem = await sandbox_problem(run_as)
        if problem:
            raise SandboxUnavailable(problem)
        bwrap = _find_bwrap()
    if sandbox and namespaces:
        raise BotStartError("choose bubblewrap or namespaces, not both")
    return await _start(list(command), cwd, limits=limits, sandbox=sandbox, namespaces=namespaces,
                        extra_env=extra_env, run_as=run_as, cgroup=cgroup, ro_binds=ro_binds,
                        bwrap=bwrap, writable_cwd=writable_cwd)


async def _start(command: list[str], cwd: Path | str, *, limits: Limits, sandbox: bool,
                 namespaces: bool, extra_env: dict[str, str] | None, run_as: int | str | None,
                 cgroup: bool | None, ro_binds: Sequence[Path | str],
                 bwrap: str | None, writable_cwd: bool = False) -> BotProcess:
    await trio.lowlevel.checkpoint()  # the only cancellation point: nothing allocated yet
    command = [str(c) for c in command]
    if not command:
        raise BotStartError("empty command")
    cwd = Path(cwd).resolve()
    if not cwd.is_dir():
        raise BotStartError(f"bot directory {cwd} does not exist")
    registry = _get_registry()
    root = os.geteuid() == 0

    cg_root = None
    if cgroup is not False:
        cg_root, note = _cgroup_root()
        if cg_root is None and cgroup:
            raise BotStartError(f"cgroups required but unavailable: {note}")

    if run_as not in ("auto", None) and not isinstance(run_as, int):
        raise BotStartError(f"run_as must be 'auto', an int or None, not {run_as!r}")
    if isinstance(run_as, int) and not root:
        raise BotStartError("run_as needs a root referee")
    if namespaces and not _drops_uid(run_as):
        raise BotStartError("namespace containment needs a root referee and a bot uid (run_as='auto' or an int)")

    token = secrets.token_hex(8)
    name = registry.next_name()
    env = {"PATH": DEFAULT_PATH, "LANG": "C.UTF-8", ENV_TOKEN: token}
    env.update(extra_env or {})
    exe = _resolve(command[0], cwd, env["PATH"])
    if exe is None:
        raise BotStartError(f"command not found: {command[0]!r} (PATH={env['PATH']}, cwd={cwd})")
    if sandbox or namespaces:
        why = sb.unsuitable_sandbox_dir(cwd)
        if why:
            raise BotStartError(f"bot directory {cwd} {why}")
        if not sb.sandbox_visible(exe, cwd, map(Path, ro_binds)):
            raise BotStartError(f"{exe} is not visible inside the sandbox; add it to ro_binds")

    lease: sb.UidLease | None = None
    home: Path | None = None
    cg: sb.BotCgroup | None = None
    popen: subprocess.Popen | None = None
    fds: list[int] = []  # our ends of the pipes, owned by the BotProcess once it exists
    parent_fds: list[int] = []  # the child's ends (and cgroup fds): closed once it has them
    try:
        uid: int | None = None
        if run_as == "auto" and root:
            lease = registry.lease_uid()
            uid = lease.uid
        elif isinstance(run_as, int):
            uid = run_as
        if uid is not None and writable_cwd:
            sb.chown_tree(cwd, uid)
        if uid is not None:
            for path, need in ((exe, os.X_OK), (cwd, os.R_OK | os.X_OK)):
                why = sb.inaccessible_reason(path, uid, uid, need)
                if why:
                    raise BotStartError(f"bot uid {uid} cannot use {path}: {why}")
        if sandbox or namespaces:  # a private tmpfs, new at every start
            env["HOME"] = env["TMPDIR"] = "/tmp"
        else:
            home = Path(tempfile.mkdtemp(prefix=f"{name}-"))
            if uid is not None:
                os.chown(home, uid, uid)
            env.setdefault("HOME", str(home))
            env.setdefault("TMPDIR", str(home))

        extra_procs = 2 if sandbox else 0  # bwrap and its pid-1 monitor
        if cg_root is not None:
            try:
                cg = sb.BotCgroup(cg_root, name, memory_bytes=limits.memory_mb * MiB,
                                  max_pids=limits.max_processes + extra_procs)
            except OSError as exc:
                raise BotStartError(f"cannot create the bot's cgroup: {exc}") from exc
        if lease is not None:
            nproc = limits.max_processes + extra_procs
        elif (cg is not None and cg.has_pids) or root:
            nproc = None  # shared uid: the count would include unrelated processes
        else:  # unprivileged, no cgroup: cap the uid's total a bit above today's
            mine = sum(1 for i in sb.scan_procs().values() if i.uid == os.geteuid())
            nproc = mine + limits.max_processes + extra_procs
        rlimits = limits.rlimits(nproc=nproc, memory_cgroup=cg is not None and cg.has_memory)
        if not root:
            rlimits = [_clamp_to_hard(*rl) for rl in rlimits]

        argv = [str(exe), *command[1:]]
        info_r = info_w = -1
        if sandbox:
            info_r, info_w = os.pipe2(os.O_CLOEXEC)
            parent_fds += [info_r, info_w]
            argv = sb.bwrap_argv(bwrap, argv, cwd, ro_binds=[Path(p) for p in ro_binds],
                                 tmp_bytes=limits.memory_mb * MiB, info_fd=info_w, writable_cwd=writable_cwd)
        nsroot = None
        if namespaces:
            mountpoint = registry.dir / "nsroot"
            mountpoint.mkdir(mode=0o700, exist_ok=True)
            nsroot = sb.NamespaceRoot.plan(mountpoint, cwd, [Path(p) for p in ro_binds], uid,
                                           limits.memory_mb * MiB, writable_cwd=writable_cwd)
        join_fds = cg.open_join_fds() if cg is not None else []
        parent_fds += join_fds
        in_r, in_w = os.pipe2(os.O_CLOEXEC)
        fds.append(in_w)
        parent_fds.append(in_r)
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        fds.append(out_r)
        parent_fds.append(out_w)
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        fds.append(err_r)
        parent_fds.append(err_w)

        def spawn() -> tuple[subprocess.Popen, dict]:
            child = subprocess.Popen(
                argv, stdin=in_r, stdout=out_w, stderr=err_w, cwd=cwd, env=env,
                close_fds=True, start_new_session=True, restore_signals=True,
                pass_fds=(info_w,) if sandbox else (),
                preexec_fn=_child_setup(uid, join_fds, rlimits, nsroot),
            )
            if not sandbox:
                return child, {}
            os.close(info_w)  # our copy: EOF on info_r once bwrap closes its own
            parent_fds.remove(info_w)
            return child, sb.read_bwrap_info(info_r)

        try:
            popen, bwrap_info = await _get_spawner().run(spawn)
        except (OSError, subprocess.SubprocessError) as exc:
            raise BotStartError(f"cannot start {command!r}: {exc}") from exc
        finally:
            while parent_fds:
                os.close(parent_fds.pop())
        info = sb.read_proc(popen.pid)
        start = info.start if info else 0
        sandbox_init = sb.read_proc(bwrap_info.get("child-pid", 0) or 0)
        registry.write_record(name, {
            "pid": popen.pid, "start": start, "uid": uid, "uid_exclusive": lease is not None,
            "token": f"{ENV_TOKEN}={token}", "home": str(home) if home else None,
            "cgroups": [str(d) for d in cg.dirs.values()] if cg else [],
            "command": command,
        })
        bot = BotProcess(
            popen=popen, fds=(in_w, out_r, err_r), name=name, command=command, limits=limits,
            cgroup=cg, uid=uid, uid_lease=lease, home=home, sandboxed=sandbox, token=token,
            start=start, registry=registry,
            containment=describe_containment(sandbox=sandbox, namespaces=namespaces,
                                             who=_who(uid, lease is not None),
                                             cgroup=cg.root.kind if cg else None),
        )
        if sandbox_init is not None and sandbox_init.ppid == popen.pid:
            bot._attribution.extra[sandbox_init.pid] = sandbox_init.start
            bot._sandbox_init = sandbox_init.pid
    except BaseException:
        for fd in fds + parent_fds:
            os.close(fd)
        if popen is not None:
            try:
                os.killpg(popen.pid, signal.SIGKILL)
            except OSError:
                pass
            popen.wait()
        if cg is not None:
            cg.kill()
            cg.remove()
        if home is not None:
            shutil.rmtree(home, ignore_errors=True)
        if lease is not None:
            registry.release_uid(lease)
        raise
    return bot


def describe_containment(*, sandbox: bool, namespaces: bool, who: str, cgroup: str | None = None) -> str:
    """One line saying what contains a bot, e.g. "bubblewrap: uid 1900000003, no network,
    private /tmp, pid namespace, ..., cgroup v1"; ``who`` names the uid it runs as."""
    if sandbox:
        parts = ["bubblewrap: " + who, "no network", "private /tmp", "pid namespace",
                 "only the system, its own directory and the arena package visible"]
    elif namespaces:
        parts = ["namespaces: " + who, "no network", "private /tmp /var/tmp /dev/shm",
                 "/proc shows only its own processes",
                 "only the system, its own directory and the arena package visible"]
    else:
        parts = ["no containment: " + who, "sees what that uid may read, network open"]
    if cgroup:
        parts.append(f"cgroup {cgroup}")
    return ", ".join(parts)


def _who(uid: int | None, exclusive: bool) -> str:
    if uid is None:
        return f"the referee's uid {os.geteuid()}"
    return f"uid {uid}" if exclusive else f"shared uid {uid}"


def cleanup_stale() -> sb.StaleReport:
    """Kill what a previous referee left behind when it died without aclose()
    (kill -9, OOM, power cut of the VM but not of /run...): its bots and their
    descendants, cgroups, temp dirs and bot uids.  Referees that are still
    running (their lock is held) are left alone.  Call when a tournament
    starts or resumes; returns what was cleaned, for the log."""
    registry = _get_registry()
    report = registry.cleanup_stale(_cgroup_root()[0])
    if report:
        log.warning("cleaned up after a dead referee: %s", report)
    return report
