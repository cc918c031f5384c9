"""One running bot: talking to it over its pipes, watching its clock and CPU, and killing it.

:class:`BotBase` is a bot's whole life after the fork, minus the waiting: its line channel
(:mod:`.channel`, bytes in, lines and faults out), its stderr kept, its CPU this game, its
exit status and a teardown that leaves no process, zombie, cgroup or temp dir behind
whatever the bot did. The one shell, :class:`arena.bots.blocking.BlockingBot`, adds the waiting
(``poll``) on top; every caller, a referee worker, an in-process lane, ``arena play``, web play
(in a thread of its own) or an environment's program opponent, talks to a bot through it. No
game logic lives here. docs/SANDBOX.md lists what is enforced where.
"""

from __future__ import annotations

import logging
import os
import resource
import shutil
import signal
import subprocess
import time
import warnings
from dataclasses import dataclass
from collections.abc import Callable
from pathlib import Path

from .cgroups import BotCgroup
from .errors import (BotClosedInput, BotClosedOutput, BotError, BotExited, CpuLimitExceeded,
                     MemoryLimitExceeded)
from ..limits import Limits
from .procs import (CLK_TCK, Attribution, ProcInfo, exiting, kill_pids, proc_peak_rss, read_proc, reap_if_child,
                    reap_runsc_orphans,
                    scan_procs, still_present)
from .channel import READ_CHUNK, WATCH_S, Conversation, StderrBuffer
from .uids import Registry, UidLease, pids_of_uid


log = logging.getLogger(__name__)


KILL_DEADLINE = 5.0  # seconds aclose() keeps killing before giving up (and logging)
STDERR_GRACE = 0.5  # how long to wait for the last stderr bytes of a dead bot
SHUTDOWN_GRACE = 2.0
"""Seconds a bot has to exit by itself after ``shutdown`` (its stdin is closed too) before it
is killed: time to write its statistics or a last log line (protocol/PROTOCOL.md)."""
CPU_CHECK_S = 0.2  # after a reply, the game's CPU is measured at most this often
ENV_TOKEN = "PALACE_ARENA_BOT"


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


class BotBase:
    """A running bot, whatever waits for it: the state and the decisions that need no waiting.
    The shell (:class:`~arena.bots.blocking.BlockingBot`) moves the bytes and sleeps; everything
    it decides, it decides here."""

    def __init__(self, *, popen: subprocess.Popen, fds: tuple[int, int, int], name: str,
                 command: list[str], limits: Limits, cgroup: BotCgroup | None,
                 uid: int | None, uid_lease: UidLease | None, home: Path | None,
                 sandboxed: bool, token: str, start: int, registry: Registry,
                 containment: str = ""):
        self.pid = popen.pid
        self.name = name
        self.command = command
        self.limits = limits
        self.cgroup = cgroup
        self.uid = uid
        self.home = home
        self.sandboxed = sandboxed
        self.status_carries_signal = sandboxed  # exit status 128+N for a bot killed by signal N (bwrap, runsc)
        self.scan_all = False  # its processes are found in the whole process table, not by uid (gVisor)
        self.containment = containment  # what contains it, in words (see Launcher.describe)
        self._popen = popen
        self._fds = fds  # stdin, stdout, stderr: our ends, non-blocking
        self._sandbox_init: int | None = None  # host pid of bwrap's init inside the sandbox
        # Per-game CPU accounting (begin_game); without a game the whole life counts as one.
        self._game_clock: tuple[float, float] | None = None  # (move_s, bank_s)
        self._game_cpu0 = 0.0
        self._game_decisions = 0
        self._cpu_checked_at = -1e9
        self._stdin_checked_at = -1e9
        self._replies = 0  # lines received over the process's life
        self.last_line: str | None = None  # the last of them (``arena check`` quotes a bad one)
        self._uid_lease = uid_lease
        self._registry = registry
        self._conv = Conversation(limits.max_line_bytes, limits.max_output_bytes, WATCH_S)
        self._channel = self._conv.channel
        self._stderr_buf = StderrBuffer(limits.stderr_cap_bytes)
        self.stderr_lines = self._stderr_buf.lines  # what take_stderr would hand out now (read-only)
        self._stdin_error: BotError | None = None
        # (exit code, signal) once the main process has exited.  It is *not*
        # reaped until aclose(): while it is an unreaped zombie its pid, and so
        # the session and group ids of everything it forked, cannot be recycled.
        self._exit: tuple[int | None, int | None] | None = None
        self._reaped = False
        self._rusage: resource.struct_rusage | None = None
        self._closed = False
        self._final_usage: ResourceUsage | None = None
        try:
            self._pidfd: int | None = os.pidfd_open(self.pid)
        except (AttributeError, OSError):
            self._pidfd = None
        self._attribution = Attribution(
            pid=self.pid, start=start,
            uid=uid if uid_lease is not None else None,
            token=f"{ENV_TOKEN}={token}".encode(),
            cgroup_pids=cgroup.pids if cgroup is not None else None,
        )

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("exited" if self._exit is not None else "running")
        return f"<{type(self).__name__} {self.name} pid={self.pid} uid={self.uid} {state}>"

    # -- the decisions of talking, no waiting ---------------------------------

    def _write_now(self, data: bytes) -> int:
        """Write what the non-blocking pipe takes at once (almost always a whole line); the shell
        waits for the rest. 0 when it takes nothing (full, or broken: the shell finds out which)."""
        if self._stdin_error is not None:
            raise self._stdin_error
        if self.sandboxed and time.monotonic() - self._stdin_checked_at >= WATCH_S:  # (its throttle)
            self._check_stdin()
        try:
            return os.write(self._fds[0], data)
        except OSError:
            return 0

    def _got_reply(self, now: float) -> None:
        """A reply line came; ``now`` is a ``time.monotonic`` time the shell read during its
        decision (no clock is read here for the throttle: a check is at most one reply late)."""
        self._replies += 1
        if self._replies == 1:  # the handshake: a bot that closed stdin meanwhile is told at once
            self._stdin_checked_at = -1e9
        self._game_decisions += 1
        if now - self._cpu_checked_at >= CPU_CHECK_S:  # (the throttle of _check_cpu)
            self._check_cpu()

    def _watch(self) -> None:
        """Every WATCH_S of a wait: the game's CPU, and under bubblewrap (whose helpers hold copies
        of both pipes, so no EOF or EPIPE ever comes) whether the bot abandoned a pipe."""
        self._check_cpu(force=True)
        if self.sandboxed:
            if self._pipe_abandoned(self._fds[1]):
                raise BotClosedOutput("bot closed its stdout")
            self._check_stdin(force=True)

    def _feed_stdout(self) -> bool:
        """Read what the bot wrote into the channel; False if there was nothing to read yet."""
        try:
            data = os.read(self._fds[1], READ_CHUNK)
        except BlockingIOError:
            return False
        except OSError:
            data = b""  # a torn pipe is the end of the stream
        self._channel.receive_data(data)
        return True

    def _feed_stderr(self) -> bool:
        """Keep what the bot wrote to stderr; False once it is closed (or nothing came)."""
        try:
            data = os.read(self._fds[2], READ_CHUNK)
        except BlockingIOError:
            return True
        except OSError:
            data = b""
        if not data:
            self._stderr_buf.finish()
            return False
        self._stderr_buf.feed(data)
        return True

    # -- per-game CPU and stdout watch -------------------------------------

    def begin_game(self, move_s: float, bank_s: float) -> None:
        """A new game starts for this process: its CPU is counted from now, against
        ``Limits.game_cpu_allowance`` under this clock (called by the referee before ``start``)."""
        self._game_clock = (move_s, bank_s)
        self._game_decisions = 0
        self._game_cpu0 = self._cpu_now() or 0.0
        self._cpu_checked_at = time.monotonic()

    def hold(self, frozen: bool) -> bool:
        """Freeze every process of the bot (it gets no CPU, whatever it forked) or thaw it; False
        where its cgroup has no freezer (or it has no cgroup), so it runs on."""
        if self.cgroup is None or self._closed:
            return False
        return self.cgroup.hold(frozen)

    def freezer(self) -> Callable[[bool], bool] | None:
        """:meth:`hold` as its cgroup's own call, for a referee that freezes and thaws the bot on
        every decision (one call instead of three); None where nothing can freeze it. Safe after
        the bot is closed: a removed group's hold does nothing. (A bot closed with a grace
        period keeps its group until it exits: only :meth:`hold` knows not to freeze it then.)"""
        cgroup = self.cgroup
        if cgroup is None or self._closed or not cgroup.freezes:
            return None
        return cgroup.freezer

    def game_cpu_seconds(self) -> float | None:
        """CPU the whole bot used since :meth:`begin_game` (since its start without one)."""
        now = self._cpu_now()
        return None if now is None else now - self._game_cpu0

    def _check_cpu(self, force: bool = False) -> None:
        """CpuLimitExceeded if the bot has used more CPU this game than it may.  Measured at
        most every CPU_CHECK_S unless ``force``d (a cgroup read is cheap, a /proc scan is not)."""
        if self._game_clock is None and self.limits.cpu_seconds is None:
            return
        now = time.monotonic()  # a throttle, no deadline
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
            return set(pids_of_uid(self.uid))
        table = scan_procs()
        return {p for p in self._attribution.members(table, os.getpid()) if table[p].state != "Z"}

    def _cpu_now(self) -> float | None:
        if self.cgroup is not None:
            cpu = self.cgroup.cpu_seconds()
            if cpu is not None:
                return cpu
        ticks = 0
        for pid in self._live_pids():
            info = read_proc(pid)
            if info is not None:
                ticks += info.cpu_ticks
        return ticks / CLK_TCK

    def _check_stdin(self, force: bool = False, now: float | None = None) -> None:
        """BotClosedInput if no bot process holds its stdin any more (under bubblewrap, where
        writes never fail); looked at most every WATCH_S unless ``force``d."""
        if now is None:  # (a caller that read the clock passes its time)
            now = time.monotonic()  # a throttle, as in _check_cpu
        if self._stdin_error is None and (force or now - self._stdin_checked_at >= WATCH_S):
            self._stdin_checked_at = now
            if self._pipe_abandoned(self._fds[0]):
                self._stdin_error = BotClosedInput("bot closed its stdin")
        if self._stdin_error is not None:
            raise self._stdin_error

    def _pipe_abandoned(self, fd: int) -> bool:
        """Under bubblewrap the outer bwrap and its init keep copies of the bot's stdin and
        stdout, so the referee never sees EOF (or EPIPE) when the bot closes one: True when
        some bot process runs but none of them, helpers aside, holds that pipe any more."""
        try:
            pipe = f"pipe:[{os.fstat(fd).st_ino}]"
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
            for fd_name in fds:
                try:
                    if os.readlink(f"/proc/{pid}/fd/{fd_name}") == pipe:
                        return False
                except OSError:
                    continue
        # None holds it. One killed (past its memory limit, say) closes its files in its exit, and its
        # exit is the verdict: asked after the scan, as a process is marked exiting before it closes them.
        return any(not exiting(pid) for pid in others)

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
        """Collect the zombie main process and its rusage (last step of a close)."""
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
            self._release_pidfd(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None

    def _release_pidfd(self, fd: int) -> None:
        """The shell stops watching ``fd`` before it is closed."""

    def _exited_error(self) -> BotExited:
        """The right BotExited for the exited main process (the shell first waits briefly for the
        end of stderr, so a dying bot's traceback is in take_stderr())."""
        if self._exit is None or self._exit == (None, None):
            return BotExited(None, None, "exit status lost")
        code, sig = self._exit
        if self.status_carries_signal and code is not None and 128 < code <= 128 + 64:
            sig = code - 128  # bwrap's and runsc's convention for a child killed by a signal
        usage = self._measure()
        if sig == signal.SIGXCPU or (
            sig == signal.SIGKILL and usage.cpu_seconds is not None
            and usage.cpu_seconds >= self.limits.process_cpu_seconds
        ):
            return CpuLimitExceeded(code, sig, f"CPU limit of {self.limits.process_cpu_seconds}s per process")
        if sig == signal.SIGKILL and self.cgroup is not None and self.cgroup.oom_kills():
            return MemoryLimitExceeded(code, sig, f"memory limit of {self.limits.memory_mb} MB")
        return BotExited(code, sig)

    # -- usage -------------------------------------------------------------

    def resource_usage(self) -> ResourceUsage:
        """Peak memory and CPU seconds used so far (final after the close)."""
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
        table = scan_procs()
        members = self._attribution.members(table, os.getpid())
        if peak is None:
            peaks = [p for p in map(proc_peak_rss, members) if p is not None]
            peak = max(peaks) if peaks else None
        if cpu is None:
            cpu = sum(table[p].cpu_ticks for p in members if p in table) / CLK_TCK
        return ResourceUsage(peak, cpu, source or "proc")

    # -- teardown ----------------------------------------------------------

    def _kill_round(self) -> None:
        """SIGKILL every process of the bot once. The shell repeats it, waiting a little between
        rounds, until :meth:`_kill_settled` (which reaps the orphans and rescans) says none is
        left, or KILL_DEADLINE."""
        me = os.getpid()
        if self.cgroup is not None:
            self.cgroup.kill()
        try:  # safe: the leader is not reaped yet, so its pgid is still ours
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        table = self._process_table()
        members = self._attribution.members(table, me)
        kill_pids(members)
        self._members_killed = (members, table)

    def _kill_settled(self) -> bool:
        """After a round and a short wait for SIGKILL to take effect: reap the orphans and judge by
        a fresh scan (a member may have forked after the first one)."""
        me = os.getpid()
        members, table = self._members_killed
        for pid in members:
            if pid != self.pid and pid in table and table[pid].ppid == me:
                reap_if_child(pid)  # orphans the subreaper inherited
        table = self._process_table()
        left = still_present(self._attribution.members(table, me), table, me)
        left.discard(self.pid)  # the leader's zombie is reaped last
        return self._poll_exit() and not left

    def _process_table(self) -> dict[int, ProcInfo]:
        """The processes that may be the bot's.  With a uid of its own, every one of them runs
        under it (no bot process can change uid), so a stat per /proc entry and a read per
        bot process replace reading every process's stat file (9 ms on a busy machine). Not under
        gVisor: there runsc and the sandbox and gofer it forks run as root, and, killed, they are
        reparented to this process (the subreaper); only the whole table finds them as members, to
        be killed and reaped (else each gVisor seat left two zombies here)."""
        if self._uid_lease is None or self.scan_all:
            return scan_procs()
        table = {}
        for pid in pids_of_uid(self.uid):
            info = read_proc(pid)
            if info is not None:
                table[pid] = info
        return table

    def _release(self, clean: bool) -> None:
        """The end of a close, once every process is dead and stderr read: reap, measure, free the
        cgroup, home and uid."""
        self._reap()
        if self.scan_all:
            reap_runsc_orphans()  # this seat's, and any an earlier gVisor seat's close came too early for
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
