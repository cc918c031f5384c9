"""Per-bot cgroups (v1 or v2): memory and process caps for the whole bot, its CPU and peak
memory as the kernel counts them, and one kill for everything in it.

Where the ``cpu`` controller is there, every bot's group has the same weight, so a bot that forks
(or ``setsid()``s, which in the root group makes a scheduler autogroup per session) shares one
bot's part of the CPU among its processes instead of taking the other seats'. Where the freezer
is there (``cgroup.freeze`` in v2, the ``freezer`` hierarchy in v1), a seat is frozen whole
between its requests (:meth:`BotCgroup.hold`), so it gets no CPU at all while another seat thinks.

:func:`detect_cgroups` finds where this referee may create them; docs/SANDBOX.md says which
hosts give which.
"""

from __future__ import annotations

import errno
import os
import select
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from . import native
from .procs import ARENA_CGROUP, cgroup_mounts, died, kill_and_reap, kill_pids


class FileKnob:
    """A control file kept open and written one of two values: ``knob(True)`` writes ``on``,
    ``knob(False)`` ``off``; True if the write took it whole, False if not or once closed. It
    owns ``fd``. The freezer's: the referee thaws a seat before each request and freezes it after
    each answer. Where the shell's C helper is built (``_pipe.c``) its ``Knob`` does the same in one
    call (a few hundred instructions against some 1.5k through ``os.write``)."""

    def __init__(self, fd: int, on: bytes, off: bytes):
        self._fd: int | None = fd
        self._on, self._off = on, off

    def __call__(self, on: bool) -> bool:
        if self._fd is None:
            return False
        value = self._on if on else self._off
        try:
            return os.write(self._fd, value) == len(value)
        except OSError:
            return False

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    @property
    def closed(self) -> bool:
        return self._fd is None


# the C helper's knob where it is built from these sources; else the same knob in Python
Knob = native.pipe.Knob if native.pipe is not None else FileKnob


_V1_CONTROLLERS = ("memory", "pids", "cpuacct", "cpu", "freezer")
_CPU_WEIGHT = {"v2": ("cpu.weight", "100"), "v1": ("cpu.shares", "1024")}  # the default, written to say so
_FREEZE = {"v2": ("cgroup.freeze", b"1", b"0"), "v1": ("freezer.state", b"FROZEN", b"THAWED")}
_FROZEN = {"v2": ("cgroup.events", b"frozen 1"), "v1": ("freezer.state", b"FROZEN")}  # where it says so

OFF_TURN_CPU_S = 0.02
"""The CPU a frozen seat may still use from its freeze (after its answer) until the referee sees it
stopped, or, where the referee's wait ended without the kernel saying it is frozen, until its next
request (or another seat's timeout, which it is then blamed for: ``play_game``). A freezer stops a process only on its way back to user space: one
inside a long system call (a populated mapping of tens of GiB, the exit of a big process) runs on,
frozen or not, through the other seats' turns (measured: 0.35-1.7 s of CPU per decision of the
other seat, within its game allowance). A CPU quota holds it no better from Linux 6.18, which
throttles a task on its way back to user space too (``bench/bench_throttle.py``). An honest bot
stops within a millisecond of CPU."""

STILL_S = 0.2
"""How long a group not yet reported frozen must use no CPU to count as stopped: a process asleep
in the kernel is not reported frozen, and takes no CPU. Longer than a runnable process waits for a
CPU on a loaded machine (CFS's period is 3 ms per runnable task: 60 ms at a load of 20)."""


def own_cgroups() -> dict[str, str]:
    """controller -> our path in it ("" key for the cgroup2 hierarchy)."""
    out = {}
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, ctrls, path = line.rstrip("\n").split(":", 2)
            for c in ctrls.split(",") if ctrls else [""]:
                out[c] = path
    return out


def write(path: Path, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def read_small(path: str | Path) -> str:
    """A small kernel file's text, with plain system calls: the counters are read every game and
    during waits, where ``Path.read_text`` cost more than the rest of a decision's I/O."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        data = b""
        while chunk := os.read(fd, 4096):
            data += chunk
    finally:
        os.close(fd)
    return data.decode()


def _read_int(path: str | Path) -> int | None:
    try:
        return int(read_small(path).split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _keyed(text: str, key: str) -> int | None:
    """The number after ``key`` in a flat keyed file's text (``cpu.stat``, ``memory.events``)."""
    for line in text.splitlines():
        k, _, v = line.partition(" ")
        if k == key:
            try:
                return int(v)
            except ValueError:
                return None
    return None


def _read_keyed(path: str | Path, key: str) -> int | None:
    try:
        return _keyed(read_small(path), key)
    except OSError:
        return None


@dataclass(frozen=True)
class CgroupRoot:
    """Where per-bot cgroups go: ``kind`` is "v2" or "v1"; ``parents`` maps a
    controller ("unified" for v2) to our ``palace-arena`` directory in it.

    The parents sit *below the referee's own cgroup*, so bots stay inside
    whatever limits the host put on the referee.
    """

    kind: str
    parents: dict[str, Path]
    v2_controllers: str = "+memory +pids"  # what a v2 parent hands down ("+cpu" too where there)

    def make_group(self, ctrl: str, name: str) -> Path:
        """Make the group ``name`` in our parent of ``ctrl``, the parent first where it is missing."""
        return _make_group(self.parents[ctrl], name, self.v2_controllers if self.kind == "v2" else None)

    @property
    def shares_cpu(self) -> bool:
        """Whether each bot gets an equal CPU weight (the cpu controller)."""
        return "cpu" in self.parents if self.kind == "v1" else "+cpu" in self.v2_controllers.split()

    @property
    def freezes(self) -> bool:
        """Whether a bot can be frozen between its requests (every v2 group can)."""
        return self.kind == "v2" or "freezer" in self.parents

    def describe(self) -> str:
        return f"cgroup {self.kind} ({', '.join(f'{c}={p}' for c, p in self.parents.items())})"


def detect_cgroups() -> tuple[CgroupRoot | None, str]:
    """Find a writable cgroup hierarchy with memory and pids control.

    Returns (root or None, human-readable explanation).  cgroup v2 is used when
    the memory and pids controllers can be enabled below our own cgroup (this
    fails with EBUSY when our cgroup holds processes and is not the root, the
    "no internal processes" rule); otherwise the v1 memory/pids/cpuacct/cpu/freezer
    hierarchies are used if we may create directories in them. The cpu controller (equal
    shares) and the v1 freezer are used where they are; the explanation names them when not.
    """
    try:
        mounts, own = cgroup_mounts(), own_cgroups()
    except OSError as exc:
        return None, f"cannot read cgroup mounts: {exc}"
    notes = []
    for fstype, mnt, root, _ in mounts:
        if fstype != "cgroup2" or "" not in own:
            continue
        base = Path(mnt + own[""][len(root.rstrip("/")):] if own[""].startswith(root) else mnt)
        try:
            available = set((base / "cgroup.controllers").read_text().split())
        except OSError as exc:
            notes.append(f"v2 at {mnt}: {exc}")
            continue
        if not {"memory", "pids"} <= available:
            notes.append(f"v2 at {mnt}: memory/pids controllers not available ({' '.join(sorted(available)) or 'none'})")
            continue
        wanted = {"memory", "pids"} | ({"cpu"} & available)
        if "cpu" not in available:
            notes.append(f"v2 at {mnt}: no cpu controller: bots do not get equal CPU shares")
        found = CgroupRoot("v2", {"unified": base / ARENA_CGROUP}, " ".join(f"+{c}" for c in sorted(wanted)))
        try:
            enabled = set((base / "cgroup.subtree_control").read_text().split())
            if not wanted <= enabled:
                write(base / "cgroup.subtree_control", found.v2_controllers)
            found.make_group("unified", f".probe-{os.getpid()}").rmdir()
        except OSError as exc:
            notes.append(f"v2 at {base}: cannot delegate memory+pids: {exc}")
            continue
        finally:
            _rmdir_quietly(found.parents["unified"])
        return found, "; ".join(notes)
    parents = {}
    for fstype, mnt, root, opts in mounts:
        if fstype != "cgroup":
            continue
        for ctrl in _V1_CONTROLLERS:
            if ctrl in opts and ctrl in own and ctrl not in parents:
                path = own[ctrl]
                rel = path[len(root.rstrip("/")):] if path.startswith(root) else ""
                parent = Path(mnt + rel) / ARENA_CGROUP
                try:  # the parent may exist already (another referee): try a child
                    _make_group(parent, f".probe-{os.getpid()}", None).rmdir()
                except OSError as exc:
                    notes.append(f"v1 {ctrl}: cannot create groups in {parent}: {exc.strerror}")
                    continue
                finally:
                    _rmdir_quietly(parent)
                parents[ctrl] = parent
    if "memory" in parents or "pids" in parents:
        for ctrl, missing in (("cpu", "bots do not get equal CPU shares"),
                              ("freezer", "a seat cannot be frozen off its turn")):
            if ctrl not in parents:
                notes.append(f"v1: no {ctrl} hierarchy: {missing}")
        return CgroupRoot("v1", parents), "; ".join(notes)
    return None, "; ".join(notes) or "no cgroup hierarchy with memory/pids found"


def _rmdir_quietly(d: Path) -> None:
    try:
        d.rmdir()
    except OSError:
        pass  # not empty: other bots (maybe another referee's) live there


def _make_group(parent: Path, name: str, v2_controllers: str | None) -> Path:
    """Make ``parent/name``, and the parent on demand. The parent is removed again whenever it
    empties (:func:`remove_cgroup_dir`), by whichever referee or worker empties it, so an idle
    arena leaves no trace in the host's cgroup tree; that rmdir can fall between our making (or
    finding) the parent and making the group, or writing the parent's controllers (v2). Then the
    parent is made again, as often as that happens: each time, another process got on (it made
    and removed a group), so this ends. A missing grandparent (our own group), or a parent that is
    no folder, is an error at once."""
    while True:
        try:
            os.mkdir(parent)
        except FileExistsError:
            pass
        try:
            if v2_controllers is not None:
                write(parent / "cgroup.subtree_control", v2_controllers)
            os.mkdir(parent / name)
            return parent / name
        except FileNotFoundError:
            if not _gone_or_folder(parent):
                raise  # not a folder (a dangling link, say): no other process's doing, and no loop
            # the parent was removed meanwhile, empty: made again


def _events_poll(fd: int | None) -> select.poll | None:
    """A poll on a v2 group's ``cgroup.events``: the kernel signals a change of it as POLLPRI."""
    if fd is None:
        return None
    events = select.poll()
    events.register(fd, select.POLLPRI)
    return events


def _gone_or_folder(path: Path) -> bool:
    """Whether ``path`` is missing or a folder, in one look (two would race its removal)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except FileNotFoundError:
        return True


class BotCgroup:
    """One bot's cgroup (one directory per v1 hierarchy, one for v2)."""

    _events: select.poll | None = None  # v2: woken as the group becomes frozen (``run_on``)

    def __init__(self, root: CgroupRoot, name: str, *, memory_bytes: int, max_pids: int):
        self.root = root
        self.name = name
        self.dirs: dict[str, Path] = {}
        try:
            for ctrl in root.parents:
                self.dirs[ctrl] = root.make_group(ctrl, name)
            if root.kind == "v2":
                d = self.dirs["unified"]
                write(d / "memory.max", str(memory_bytes))
                write(d / "pids.max", str(max_pids))
                for knob, value in (("memory.swap.max", "0"), ("memory.oom.group", "1"), _CPU_WEIGHT["v2"]):
                    if (d / knob).exists():
                        write(d / knob, value)
            else:
                if "memory" in self.dirs:
                    d = self.dirs["memory"]
                    write(d / "memory.limit_in_bytes", str(memory_bytes))
                    for knob in ("memory.memsw.limit_in_bytes", "memory.swappiness"):
                        try:  # absent without swap accounting; harmless to skip
                            write(d / knob, str(memory_bytes) if "memsw" in knob else "0")
                        except OSError:
                            pass
                if "pids" in self.dirs:
                    write(self.dirs["pids"] / "pids.max", str(max_pids))
                if "cpu" in self.dirs:
                    knob, value = _CPU_WEIGHT["v1"]
                    write(self.dirs["cpu"] / knob, value)
            # The freezer's file stays open: a seat is frozen and thawed on every decision.
            # ``freezer(True)`` freezes the group and ``freezer(False)`` thaws it: :meth:`hold` in
            # one call, the referee's, twice a decision (None without a freezer; once the group
            # is removed, a freezer a referee still holds writes nothing and says False).
            freeze_dir = self.dirs.get("unified" if root.kind == "v2" else "freezer")
            knob, frozen, thawed = _FREEZE[root.kind]
            self.freezer: Knob | None = None if freeze_dir is None else \
                Knob(os.open(freeze_dir / knob, os.O_WRONLY | os.O_CLOEXEC), frozen, thawed)
            state, self._frozen_says = _FROZEN[root.kind]
            self._state_fd = None if freeze_dir is None else \
                os.open(freeze_dir / state, os.O_RDONLY | os.O_CLOEXEC)
            self._events = _events_poll(self._state_fd) if root.kind == "v2" else None
        except BaseException:
            self.remove()
            raise
        # The counters' files as strings, once (they are read every game).
        v2 = self.dirs.get("unified")
        self._cpu_file = str(v2 / "cpu.stat" if v2 else self.dirs["cpuacct"] / "cpuacct.usage") \
            if v2 or "cpuacct" in self.dirs else None
        self._peak_file = str(v2 / "memory.peak" if v2 else self.dirs["memory"] / "memory.max_usage_in_bytes") \
            if v2 or "memory" in self.dirs else None
        try:  # kept open, as the freezer's: read in every wait for a seat to stop (``run_on``)
            self._cpu_fd = None if self._cpu_file is None else os.open(self._cpu_file, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            self._cpu_fd = None

    @property
    def has_memory(self) -> bool:
        return "memory" in self.dirs or "unified" in self.dirs

    @property
    def has_pids(self) -> bool:
        return "pids" in self.dirs or "unified" in self.dirs

    def open_join_fds(self) -> list[int]:
        """cgroup.procs of every hierarchy, opened for the forked child to
        write "0" (itself) into before exec, so no bot code ever runs outside
        its cgroup."""
        return [os.open(d / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC) for d in self.dirs.values()]

    def pids(self) -> set[int]:
        out: set[int] = set()
        for d in self.dirs.values():
            try:
                out |= {int(x) for x in (d / "cgroup.procs").read_text().split()}
            except OSError:
                pass
        return out

    @property
    def freezes(self) -> bool:
        """Whether this group has a freezer (:meth:`hold` does something)."""
        return self.freezer is not None

    def hold(self, frozen: bool) -> bool:
        """Freeze (or thaw) every process of the bot; False where there is no freezer, once the
        group is removed, or where the group is going (the bot is being torn down). Freezing
        does not wait for the last process to stop: it is stopped before it next runs. The
        referee calls :attr:`freezer` itself, twice a decision (``arena.referee.blocking.freezer``)."""
        return self.freezer is not None and self.freezer(frozen)

    def is_frozen(self) -> bool:
        """Whether the kernel says every process of the group is frozen (a group gone: nothing runs)."""
        try:
            return self._frozen_says in os.pread(self._state_fd, 256, 0) if self._state_fd is not None else True
        except OSError:
            return True

    def run_on(self, until: float, since: bytes | None = None,
               budget: float = OFF_TURN_CPU_S) -> tuple[float | None, bool]:
        """Called once the group was frozen, before another seat's clock starts: wait until it is
        stopped. Returns (the CPU seconds it used since ``since`` (a :meth:`cpu_mark` taken at the
        freeze; else since this call) where that passed ``budget``, its fault (see
        :data:`OFF_TURN_CPU_S`), else None; whether the kernel said it is frozen). Frozen is final
        until the next thaw, so a seat seen frozen within its budget uses nothing more; one only
        still for :data:`STILL_S`, or one the wait left at ``until`` (a ``time.perf_counter`` time),
        has its CPU from ``since`` counted again later (``play_game``). An honest seat, frozen by
        the look, costs two reads: its state, and its counter, compared with ``since`` unparsed."""
        if self.is_frozen():  # frozen, but how much did it run first? (a late look: a loaded referee)
            ran = self.cpu_since(since)
            return (ran if ran > budget else None), True
        cpu0 = self._cpu_of(since) if since is not None else None
        if cpu0 is None:
            cpu0 = self.cpu_seconds() or 0.0
        last = cpu0
        still_since = time.perf_counter()
        pause = 0.00002  # a seat that only sleeps is frozen within tens of us; each look costs ~15 us of CPU: growing
        while True:
            self._pause(pause)
            pause = min(pause * 2, 0.002)
            frozen = self.is_frozen()
            cpu = self.cpu_seconds() or 0.0  # (every look: a gVisor seat that runs on commits memory, and
            # its budget must be seen spent before its memory limit ends it by another name)
            if cpu - cpu0 > budget:
                return cpu - cpu0, frozen
            if frozen:
                return None, True
            now = time.perf_counter()
            if cpu != last:
                last, still_since = cpu, now
            if now - still_since >= STILL_S or now >= until:
                return None, False

    def _pause(self, seconds: float) -> None:
        """Between two looks at a group not yet frozen: on v2 a ``poll`` on ``cgroup.events``, which
        the kernel wakes as the group becomes frozen (the last read armed it); on v1 a sleep."""
        if self._events is None:
            time.sleep(seconds)
        else:
            self._events.poll(seconds * 1000)

    def kill(self) -> None:
        """SIGKILL everything in the group, then thaw it: a frozen v1 process dies only once
        thawed (and by then its SIGKILL is pending, so it runs no code of its own)."""
        d = self.dirs.get("unified")
        if d is not None and (d / "cgroup.kill").exists():
            try:
                write(d / "cgroup.kill", "1")
                self._thaw_quietly()
                return
            except OSError:
                pass
        kill_pids(self.pids())
        self._thaw_quietly()

    def _thaw_quietly(self) -> None:
        self.hold(False)

    def peak_memory(self) -> int | None:
        return None if self._peak_file is None else _read_int(self._peak_file)

    def cpu_mark(self) -> bytes | None:
        """The CPU counter as the kernel writes it, unparsed: one read, for a referee that marks it
        at every freeze and parses it only where the seat does not stop (:meth:`run_on`)."""
        try:
            return os.pread(self._cpu_fd, 4096, 0) if self._cpu_fd is not None else None
        except OSError:
            return None

    def cpu_since(self, mark: bytes | None) -> float:
        """The CPU seconds used since ``mark`` (a :meth:`cpu_mark`): parsed only where it moved."""
        now = self.cpu_mark()
        if mark is None or now is None or now == mark:
            return 0.0
        return (self._cpu_of(now) or 0.0) - (self._cpu_of(mark) or 0.0)

    def cpu_seconds(self) -> float | None:
        if self._cpu_file is None:
            return None
        try:
            text = os.pread(self._cpu_fd, 4096, 0) if self._cpu_fd is not None else read_small(self._cpu_file).encode()
        except OSError:
            return None
        return self._cpu_of(text)

    def _cpu_of(self, text: bytes) -> float | None:
        if "unified" in self.dirs:
            usec = _keyed(text.decode(), "usage_usec")
            return None if usec is None else usec / 1e6
        try:
            return int(text.split()[0]) / 1e9
        except (ValueError, IndexError):
            return None

    def oom_kills(self) -> int:
        if "unified" in self.dirs:
            return _read_keyed(self.dirs["unified"] / "memory.events", "oom_kill") or 0
        if "memory" in self.dirs:
            return _read_keyed(self.dirs["memory"] / "memory.oom_control", "oom_kill") or 0
        return 0

    def remove(self) -> bool:
        """rmdir every directory (only possible once empty); True if all gone."""
        freezer, self.freezer = getattr(self, "freezer", None), None
        if freezer is not None:  # closed: a referee that still holds it writes nothing through it
            freezer.close()
        for attr in ("_state_fd", "_cpu_fd"):
            fd = getattr(self, attr, None)
            setattr(self, attr, None)
            if fd is not None:
                os.close(fd)
        ok = True
        for d in self.dirs.values():
            ok &= remove_cgroup_dir(d)
        return ok


def remove_cgroup_dir(d: Path) -> bool:
    for _ in range(50):
        try:
            d.rmdir()
            break
        except FileNotFoundError:
            break
        except OSError as exc:
            if exc.errno != errno.EBUSY:
                return False
            time.sleep(0.002)  # last tasks are still leaving the group
    else:
        return False
    if d.parent.name == ARENA_CGROUP:
        _rmdir_quietly(d.parent)  # leave nothing behind in the host's cgroup once idle
    return True


def cgroup_dir_pids(dirs: list[Path]) -> set[int]:
    out: set[int] = set()
    for d in dirs:
        try:
            out |= {int(x) for x in (d / "cgroup.procs").read_text().split()}
        except OSError:
            pass
    return out


def kill_cgroup_dir(d: Path, deadline: float) -> int:
    return died(kill_and_reap(lambda table: cgroup_dir_pids([d]), deadline))
