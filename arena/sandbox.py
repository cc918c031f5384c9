"""Containment mechanisms for bot processes: /proc scanning, cgroups, private
uids, the run-directory registry and the bubblewrap command line.

This module is mechanism only: it reports what is possible and does what it is
told.  Policy (which mechanisms a bot gets, which errors are raised) lives in
``arena.botproc``.  Everything here is synchronous and cheap (a few syscalls or
a /proc scan); nothing blocks for long.  docs/SANDBOX.md says what each
mechanism enforces.

Over 500 lines because its five sections (/proc, cgroups, run directory, permissions,
the contained view with bubblewrap and the namespace root) share the process table and
the uid pool; they are the natural seams when the bot layer becomes a package.
"""

from __future__ import annotations

import atexit
import ctypes
import errno
import fcntl
import json
import os
import select
import shutil
import signal
import stat
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

# ---------------------------------------------------------------------------
# prctl

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38

_libc = ctypes.CDLL(None, use_errno=True)
_prctl = _libc.prctl
_prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
_prctl.restype = ctypes.c_int


def prctl(option: int, arg: int = 0) -> int:
    """Raw prctl(2); returns 0 or -1 (errno is not raised: this also runs in
    the forked child, where raising is pointless)."""
    return _prctl(option, arg, 0, 0, 0)


def set_child_subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants.

    A bot that double-forks (setsid + fork, the classic daemon dance) would
    otherwise hand its grandchild to init, out of our sight.  As a subreaper we
    become its parent, can find it through /proc and must reap it ourselves.
    """
    return prctl(PR_SET_CHILD_SUBREAPER, 1) == 0


# ---------------------------------------------------------------------------
# /proc

CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True, slots=True)
class ProcInfo:
    pid: int
    ppid: int
    pgid: int
    sid: int
    uid: int
    state: str
    start: int  # clock ticks since boot; (pid, start) identifies a process
    cpu_ticks: int  # utime + stime, plus those of its reaped children


def read_proc(pid: int) -> ProcInfo | None:
    """One /proc/<pid>/stat, or None if the process is gone."""
    try:
        uid = os.stat(f"/proc/{pid}").st_uid
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
        try:
            raw = os.read(fd, 4096)
        finally:
            os.close(fd)
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    if not raw:
        return None
    # comm may contain spaces and parentheses: split at the *last* ')'.
    rest = raw[raw.rindex(b")") + 2:].split()
    return ProcInfo(
        pid=pid, ppid=int(rest[1]), pgid=int(rest[2]), sid=int(rest[3]), uid=uid,
        state=rest[0].decode(), start=int(rest[19]), cpu_ticks=sum(map(int, rest[11:15])),
    )


def scan_procs() -> dict[int, ProcInfo]:
    """Snapshot of every process visible in /proc (threads excluded)."""
    table: dict[int, ProcInfo] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            info = read_proc(int(name))
            if info is not None:
                table[info.pid] = info
    return table


def proc_environ_has(pid: int, needle: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return needle in f.read().split(b"\0")
    except OSError:
        return False


def proc_peak_rss(pid: int) -> int | None:
    """VmHWM (peak resident set) of a live process, in bytes."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


@dataclass
class Attribution:
    """What identifies the processes of one bot.

    Each clue covers a different escape: the cgroup and the private uid cover
    everything (a process cannot leave either without privileges); session and
    process group cover plain forks; the env token and the process tree cover
    the double-fork-and-setsid case when neither cgroup nor uid is available
    (the orphan is reparented to us, the subreaper, and still carries the env).
    Every clue is checked against recycled pids, so a stranger is never a member.
    Without cgroup or private uid, a descendant that both leaves the session
    and scrubs its environment after its parent died cannot be found.
    """

    pid: int
    start: int
    uid: int | None = None  # only when the uid is exclusive to this bot
    token: bytes | None = None  # b"NAME=value" entry of the bot's environment
    cgroup_pids: Callable[[], set[int]] | None = None
    extra: dict[int, int] = field(default_factory=dict)  # pid -> start, seen earlier

    def members(self, table: dict[int, ProcInfo], referee_pid: int) -> set[int]:
        found: set[int] = set()
        if self.cgroup_pids is not None:
            found |= {p for p in self.cgroup_pids() if p in table}
        # Session and group ids are the leader's pid: trust them only while that
        # pid is still the leader (same start time).  Once it is reaped the pid
        # can be recycled by a stranger whose session would then match.
        leader = table.get(self.pid)
        leader_ok = leader is not None and leader.start == self.start
        if leader_ok:
            found.add(self.pid)
        for info in table.values():
            if info.pid in found:
                continue
            if self.uid is not None and info.uid == self.uid:
                found.add(info.pid)
            elif leader_ok and (info.sid == self.pid or info.pgid == self.pid):
                found.add(info.pid)
        # Seen in an earlier scan (same start time, so not a recycled pid).
        found |= {p for p, t in self.extra.items() if p in table and table[p].start == t}
        if self.token is not None and self.uid is None and self.cgroup_pids is None:
            for info in table.values():
                if (
                    info.pid not in found and info.start >= self.start and info.state != "Z"
                    and proc_environ_has(info.pid, self.token)
                ):
                    found.add(info.pid)
        # Close over descendants: anything forked by a member is a member.
        children: dict[int, list[int]] = {}
        for info in table.values():
            children.setdefault(info.ppid, []).append(info.pid)
        stack = list(found)
        while stack:
            for child in children.get(stack.pop(), ()):
                if child not in found:
                    found.add(child)
                    stack.append(child)
        found.discard(referee_pid)
        found.discard(1)
        self.extra = {p: table[p].start for p in found if p in table}
        return found


def kill_pids(pids: Iterable[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def reap_if_child(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def kill_and_reap(collect: Callable[[dict[int, ProcInfo]], set[int]], deadline: float) -> int:
    """Synchronous kill loop for cleanup paths: SIGKILL whatever ``collect``
    names until nothing is left (reaping those that were reparented to us),
    or until ``deadline`` (time.monotonic()).  Returns how many pids it hit."""
    me = os.getpid()
    seen: set[int] = set()
    while time.monotonic() < deadline:
        table = scan_procs()
        pids = still_present(collect(table), table, me)
        if not pids:
            break
        seen |= pids
        kill_pids(pids)
        for pid in pids:
            if table[pid].ppid == me:
                reap_if_child(pid)
        time.sleep(0.002)
    return len(seen)


def still_present(pids: set[int], table: dict[int, ProcInfo], referee_pid: int) -> set[int]:
    """Members that still need work: alive, or zombies we must reap ourselves.

    A zombie whose parent is someone else is that parent's business (and the
    parent, if it is ours, is being killed too; its zombies then come to us).
    """
    return {
        p for p in pids
        if p in table and (table[p].state != "Z" or table[p].ppid == referee_pid)
    }


# ---------------------------------------------------------------------------
# cgroups

ARENA_CGROUP = "palace-arena"
_V1_CONTROLLERS = ("memory", "pids", "cpuacct")


def _mounts() -> list[tuple[str, str, str, set[str]]]:
    """(fstype, mountpoint, root, superoptions) for cgroup mounts."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            lf, rf = left.split(), right.split()
            if rf and rf[0] in ("cgroup", "cgroup2"):
                mnt = lf[4].replace("\\040", " ")
                out.append((rf[0], mnt, lf[3], set(rf[2].split(",")) if len(rf) > 2 else set()))
    return out


def _own_cgroups() -> dict[str, str]:
    """controller -> our path in it ("" key for the cgroup2 hierarchy)."""
    out = {}
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, ctrls, path = line.rstrip("\n").split(":", 2)
            for c in ctrls.split(",") if ctrls else [""]:
                out[c] = path
    return out


def _write(path: Path, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _read_keyed(path: Path, key: str) -> int | None:
    try:
        for line in path.read_text().splitlines():
            k, _, v = line.partition(" ")
            if k == key:
                return int(v)
    except (OSError, ValueError):
        pass
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

    def ensure_parent(self, ctrl: str) -> Path:
        """Create our parent group on demand.  It is removed again whenever it
        empties (see remove_cgroup_dir), so an idle referee leaves no trace in
        the host's cgroup tree and never blocks the host from removing its own."""
        parent = self.parents[ctrl]
        parent.mkdir(exist_ok=True)
        if self.kind == "v2":
            _write(parent / "cgroup.subtree_control", "+memory +pids")
        return parent

    def describe(self) -> str:
        return f"cgroup {self.kind} ({', '.join(f'{c}={p}' for c, p in self.parents.items())})"


def detect_cgroups() -> tuple[CgroupRoot | None, str]:
    """Find a writable cgroup hierarchy with memory and pids control.

    Returns (root or None, human-readable explanation).  cgroup v2 is used when
    the memory and pids controllers can be enabled below our own cgroup (this
    fails with EBUSY when our cgroup holds processes and is not the root, the
    "no internal processes" rule); otherwise the v1 memory/pids/cpuacct
    hierarchies are used if we may create directories in them.
    """
    try:
        mounts, own = _mounts(), _own_cgroups()
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
        found = CgroupRoot("v2", {"unified": base / ARENA_CGROUP})
        probe = found.parents["unified"] / f".probe-{os.getpid()}"
        try:
            enabled = set((base / "cgroup.subtree_control").read_text().split())
            if not {"memory", "pids"} <= enabled:
                _write(base / "cgroup.subtree_control", "+memory +pids")
            found.ensure_parent("unified")
            probe.mkdir()
            probe.rmdir()
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
                probe = parent / f".probe-{os.getpid()}"
                try:  # the parent may exist already (another referee): try a child
                    parent.mkdir(exist_ok=True)
                    probe.mkdir()
                    probe.rmdir()
                except OSError as exc:
                    notes.append(f"v1 {ctrl}: cannot create groups in {parent}: {exc.strerror}")
                    continue
                finally:
                    _rmdir_quietly(parent)
                parents[ctrl] = parent
    if "memory" in parents or "pids" in parents:
        return CgroupRoot("v1", parents), "; ".join(notes)
    return None, "; ".join(notes) or "no cgroup hierarchy with memory/pids found"


def _rmdir_quietly(d: Path) -> None:
    try:
        d.rmdir()
    except OSError:
        pass  # not empty: other bots (maybe another referee's) live there


class BotCgroup:
    """One bot's cgroup (one directory per v1 hierarchy, one for v2)."""

    def __init__(self, root: CgroupRoot, name: str, *, memory_bytes: int, max_pids: int):
        self.root = root
        self.name = name
        self.dirs: dict[str, Path] = {}
        try:
            for ctrl, parent in root.parents.items():
                d = parent / name
                for attempt in range(3):  # another referee may rmdir an empty parent
                    try:
                        root.ensure_parent(ctrl)
                        d.mkdir()
                        break
                    except FileNotFoundError:
                        if attempt == 2:
                            raise
                self.dirs[ctrl] = d
            if root.kind == "v2":
                d = self.dirs["unified"]
                _write(d / "memory.max", str(memory_bytes))
                _write(d / "pids.max", str(max_pids))
                for knob, value in (("memory.swap.max", "0"), ("memory.oom.group", "1")):
                    if (d / knob).exists():
                        _write(d / knob, value)
            else:
                if "memory" in self.dirs:
                    d = self.dirs["memory"]
                    _write(d / "memory.limit_in_bytes", str(memory_bytes))
                    for knob in ("memory.memsw.limit_in_bytes", "memory.swappiness"):
                        try:  # absent without swap accounting; harmless to skip
                            _write(d / knob, str(memory_bytes) if "memsw" in knob else "0")
                        except OSError:
                            pass
                if "pids" in self.dirs:
                    _write(self.dirs["pids"] / "pids.max", str(max_pids))
        except BaseException:
            self.remove()
            raise

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

    def kill(self) -> None:
        d = self.dirs.get("unified")
        if d is not None and (d / "cgroup.kill").exists():
            try:
                _write(d / "cgroup.kill", "1")
                return
            except OSError:
                pass
        kill_pids(self.pids())

    def peak_memory(self) -> int | None:
        if "unified" in self.dirs:
            return _read_int(self.dirs["unified"] / "memory.peak")
        if "memory" in self.dirs:
            return _read_int(self.dirs["memory"] / "memory.max_usage_in_bytes")
        return None

    def cpu_seconds(self) -> float | None:
        if "unified" in self.dirs:
            usec = _read_keyed(self.dirs["unified"] / "cpu.stat", "usage_usec")
            return None if usec is None else usec / 1e6
        if "cpuacct" in self.dirs:
            ns = _read_int(self.dirs["cpuacct"] / "cpuacct.usage")
            return None if ns is None else ns / 1e9
        return None

    def oom_kills(self) -> int:
        if "unified" in self.dirs:
            return _read_keyed(self.dirs["unified"] / "memory.events", "oom_kill") or 0
        if "memory" in self.dirs:
            return _read_keyed(self.dirs["memory"] / "memory.oom_control", "oom_kill") or 0
        return 0

    def remove(self) -> bool:
        """rmdir every directory (only possible once empty); True if all gone."""
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


# ---------------------------------------------------------------------------
# run directory: referee liveness, bot records, uid leases

BOT_UID_BASE = 1_900_000_000
"""Private uids for bots are BOT_UID_BASE .. BOT_UID_BASE+BOT_UID_COUNT-1.

Chosen outside the ranges used by distributions, systemd (dynamic users,
nspawn containers) and the usual /etc/subuid allocations, so that a uid in
this range belongs to a bot and nothing else."""
BOT_UID_COUNT = 1000


def default_run_dir() -> Path:
    if os.geteuid() == 0 and os.path.isdir("/run") and os.access("/run", os.W_OK):
        return Path("/run/palace-arena")
    return Path(tempfile.gettempdir()) / f"palace-arena-{os.geteuid()}"


def _private_dir(path: Path) -> Path:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        raise PermissionError(f"{path} is not a directory owned by uid {os.geteuid()}")
    if st.st_mode & 0o077:
        os.chmod(path, 0o700)
    return path


def _try_lock(path: Path) -> int | None:
    """Open and flock(LOCK_EX|LOCK_NB) ``path``; the fd, or None if held.

    flock locks die with their process, including on kill -9, so a lock we
    can take means its previous holder is gone."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def uid_in_pool(uid: int) -> bool:
    return BOT_UID_BASE <= uid < BOT_UID_BASE + BOT_UID_COUNT


def sweep_uid_files(uid: int) -> None:
    """Remove top-level entries a bot uid left in world-writable temp dirs, so
    the next bot given this uid does not inherit them (best effort)."""
    for top in world_writable_dirs():
        try:
            entries = list(os.scandir(top))
        except OSError:
            continue
        for e in entries:
            try:
                if e.stat(follow_symlinks=False).st_uid != uid:
                    continue
                if e.is_dir(follow_symlinks=False):
                    shutil.rmtree(e.path, ignore_errors=True)
                else:
                    os.unlink(e.path)
            except OSError:
                pass


def pids_of_uid(uid: int) -> list[int]:
    """Cheaper than scan_procs(): one stat per process, no file reads."""
    out = []
    for e in os.scandir("/proc"):
        if e.name.isdigit():
            try:
                if e.stat().st_uid == uid:
                    out.append(int(e.name))
            except OSError:
                pass
    return out


def kill_uid(uid: int, deadline: float) -> int:
    """SIGKILL every process of ``uid`` until none is left; returns how many
    distinct pids were killed.  Only for uids exclusive to bots."""
    if not pids_of_uid(uid):
        return 0
    return kill_and_reap(lambda table: {i.pid for i in table.values() if i.uid == uid}, deadline)


@dataclass
class UidLease:
    uid: int
    fd: int

    def release(self) -> None:
        if self.fd >= 0:
            sweep_uid_files(self.uid)
            os.close(self.fd)
            self.fd = -1


@dataclass
class StaleReport:
    """What cleanup_stale() found and removed."""

    referees: list[int] = field(default_factory=list)
    killed: int = 0
    cgroups: list[str] = field(default_factory=list)
    homes: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.referees or self.killed or self.cgroups or self.homes)

    def __str__(self) -> str:
        return (f"{len(self.referees)} dead referee(s): {self.killed} bot process(es) killed, "
                f"{len(self.cgroups)} cgroup(s) and {len(self.homes)} temporary home(s) removed")


class Registry:
    """This referee's footprint in the run directory.

    ``<run>/ref-<pid>/lock`` is flocked for the referee's lifetime and
    ``<run>/ref-<pid>/<bot>.json`` records each live bot (pid, uid, cgroups,
    home).  ``<run>/uids/<uid>`` is flocked while a bot holds that uid.  A
    referee killed -9 loses its locks, which is how cleanup_stale() tells its
    leftovers from those of a referee that is still running.
    """

    def __init__(self, run_dir: Path | None = None):
        self.pid = os.getpid()
        self.run_dir = _private_dir(run_dir or default_run_dir())
        _private_dir(self.run_dir / "uids")
        self.dir = self.run_dir / f"ref-{self.pid}"
        self.subreaper = set_child_subreaper()
        self._seq = 0
        self._uid_next = 0
        self._leased: set[int] = set()
        self.report = StaleReport()
        if self.dir.exists():  # a dead referee had our pid: its leftovers go first
            self._clean_referee_dir(self.dir, None, self.report)
        # Lock first, publish second: a cleaner never sees an unlocked ref dir.
        tmp = self.run_dir / f".ref-{self.pid}"
        shutil.rmtree(tmp, ignore_errors=True)
        _private_dir(tmp)
        self._lock_fd = _try_lock(tmp / "lock")
        tmp.rename(self.dir)
        atexit.register(self._at_exit)

    def _at_exit(self) -> None:
        """Remove our directory on a normal exit if no bot record is left."""
        if os.getpid() == self.pid and not any(self.dir.glob("*.json")):
            shutil.rmtree(self.dir, ignore_errors=True)

    def next_name(self) -> str:
        self._seq += 1
        return f"r{self.pid}-b{self._seq}"

    def lease_uid(self) -> UidLease:
        """An exclusive bot uid; any process still running under it (left by a
        dead referee) is killed first."""
        for i in range(BOT_UID_COUNT):
            uid = BOT_UID_BASE + (self._uid_next + i) % BOT_UID_COUNT
            if uid in self._leased:
                continue
            fd = _try_lock(self.run_dir / "uids" / str(uid))
            if fd is None:
                continue
            self._uid_next = (self._uid_next + i + 1) % BOT_UID_COUNT
            kill_uid(uid, time.monotonic() + 2.0)
            sweep_uid_files(uid)
            self._leased.add(uid)
            return UidLease(uid, fd)
        raise RuntimeError(f"all {BOT_UID_COUNT} bot uids are in use")

    def release_uid(self, lease: UidLease) -> None:
        lease.release()
        self._leased.discard(lease.uid)

    def write_record(self, name: str, record: dict) -> None:
        tmp = self.dir / f".{name}.tmp"
        tmp.write_text(json.dumps(record))
        tmp.replace(self.dir / f"{name}.json")

    def drop_record(self, name: str) -> None:
        try:
            (self.dir / f"{name}.json").unlink()
        except FileNotFoundError:
            pass

    # -- stale cleanup -----------------------------------------------------

    def cleanup_stale(self, cgroups: CgroupRoot | None) -> StaleReport:
        report = StaleReport()
        for d in sorted(self.run_dir.glob("ref-*")):
            if d != self.dir:
                self._clean_referee_dir(d, cgroups, report)
        live = {self.pid} | {
            int(d.name[4:]) for d in self.run_dir.glob("ref-*") if d.name[4:].isdigit()
        }
        deadline = time.monotonic() + 5.0
        if cgroups is not None:  # groups whose record was never written or was lost
            for parent in cgroups.parents.values():
                for g in sorted(parent.glob("r*-b*")) if parent.is_dir() else ():
                    owner = g.name[1:].split("-", 1)[0]
                    if owner.isdigit() and int(owner) not in live:
                        report.killed += _kill_cgroup_dir(g, deadline)
                        remove_cgroup_dir(g)
                        report.cgroups.append(str(g))
        stray = {i.uid for i in scan_procs().values() if uid_in_pool(i.uid)}
        for uid in sorted(stray - self._leased):  # bot uids with no live owner
            fd = _try_lock(self.run_dir / "uids" / str(uid))
            if fd is not None:
                try:
                    report.killed += kill_uid(uid, deadline)
                    sweep_uid_files(uid)
                finally:
                    os.close(fd)
        return report

    def _clean_referee_dir(self, d: Path, cgroups: CgroupRoot | None, report: StaleReport) -> None:
        fd = _try_lock(d / "lock") if d.is_dir() else None
        if fd is None:
            return  # that referee is alive (or the dir is not ours to touch)
        try:
            report.referees.append(int(d.name[4:]))
            deadline = time.monotonic() + 5.0
            for rec_path in d.glob("*.json"):
                try:
                    rec = json.loads(rec_path.read_text())
                except (OSError, ValueError):
                    continue
                self._kill_record(rec, deadline, report)
            shutil.rmtree(d, ignore_errors=True)
        finally:
            os.close(fd)

    def _kill_record(self, rec: dict, deadline: float, report: StaleReport) -> None:
        uid_fd = None
        uid = rec.get("uid")
        if rec.get("uid_exclusive") and uid is not None:
            uid_fd = _try_lock(self.run_dir / "uids" / str(uid))
        cg_dirs = [Path(p) for p in rec.get("cgroups", [])]
        attribution = Attribution(
            pid=rec["pid"], start=rec["start"],
            uid=uid if uid_fd is not None else None,
            token=rec["token"].encode() if rec.get("token") else None,
            cgroup_pids=(lambda: _cgroup_dir_pids(cg_dirs)) if cg_dirs else None,
        )
        try:
            report.killed += kill_and_reap(lambda t: attribution.members(t, self.pid), deadline)
            for g in cg_dirs:
                if g.exists():
                    remove_cgroup_dir(g)
                    report.cgroups.append(str(g))
            home = rec.get("home")
            if home and os.path.isdir(home):
                shutil.rmtree(home, ignore_errors=True)
                report.homes.append(home)
            if uid_fd is not None:
                sweep_uid_files(uid)
        finally:
            if uid_fd is not None:
                os.close(uid_fd)


def _cgroup_dir_pids(dirs: list[Path]) -> set[int]:
    out: set[int] = set()
    for d in dirs:
        try:
            out |= {int(x) for x in (d / "cgroup.procs").read_text().split()}
        except OSError:
            pass
    return out


def _kill_cgroup_dir(d: Path, deadline: float) -> int:
    return kill_and_reap(lambda table: _cgroup_dir_pids([d]), deadline)


# ---------------------------------------------------------------------------
# permissions as seen by the bot's uid


def chown_tree(top: Path, uid: int, *, mode_for: Callable[[os.stat_result], int] | None = None) -> None:
    """Give ``top`` and everything under it to ``uid`` (and, with ``mode_for``, that mode), never
    following a symbolic link: a tree a bot's uid has written may hold links to the referee's
    files, and those must stay as they are."""
    for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
        for name in [None, *dirnames, *filenames]:
            path = dirpath if name is None else os.path.join(dirpath, name)
            os.lchown(path, uid, uid)
            st = os.lstat(path)
            if mode_for is not None and not stat.S_ISLNK(st.st_mode):
                os.chmod(path, mode_for(st))


def inaccessible_reason(path: Path, uid: int, gid: int, need: int) -> str | None:
    """Why ``uid``/``gid`` cannot use ``path`` with ``need`` (an os.R_OK|os.X_OK
    mask), or None.  Checks every ancestor for search permission.  Plain mode
    bits only: ACLs and capabilities are ignored."""
    if uid == 0:
        return None
    path = Path(os.path.abspath(path))
    chain = [*reversed(path.parents), path]
    for i, p in enumerate(chain):
        want = need if i == len(chain) - 1 else os.X_OK
        try:
            st = os.stat(p)
        except OSError as exc:
            return f"{p}: {exc.strerror}"
        if st.st_uid == uid:
            bits = (st.st_mode >> 6) & 7
        elif st.st_gid == gid:
            bits = (st.st_mode >> 3) & 7
        else:
            bits = st.st_mode & 7
        if bits & want != want:
            return f"{p} (mode {stat.filemode(st.st_mode)}, owner {st.st_uid}) is not accessible to uid {uid}"
    return None


# ---------------------------------------------------------------------------
# what a contained bot sees of the filesystem (both modes)

SANDBOX_ROOT_DIRS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
SYSTEM_DIRS = ("/usr", "/etc")
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")


def contained_view(cwd: Path, ro_binds: Iterable[Path] = ()) -> tuple[list[tuple[str, str]], list[str], list[str]]:
    """What a contained bot sees of the host: symlinks as (target, path), then read-only binds
    of the system, then read-only binds of the bot (mounted after the private /tmp, so a bot
    directory under /tmp stays visible).

    The system (/usr, /etc and the /bin, /lib... directories or their links), the bot's own
    directory and ``ro_binds``; nothing else of the host (no checkout, no store, no other bot,
    no /home or /root).  Both containments (bubblewrap and the namespace root) build this view.
    """
    links: list[tuple[str, str]] = []
    binds = list(SYSTEM_DIRS)
    for d in SANDBOX_ROOT_DIRS:
        if os.path.islink(d):
            links.append((os.readlink(d), d))
        elif os.path.isdir(d):
            binds.append(d)
    own = []
    for p in [cwd, *ro_binds]:
        if str(p) not in binds and str(p) not in own:
            own.append(str(p))
    return links, binds, own


def world_writable_dirs() -> list[str]:
    """Host directories any uid may write (sticky temp dirs): what a bot could use to leave a
    file for its next process if it could see them.  Contained bots get private ones."""
    out = []
    for d in ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/var/lock", "/dev/mqueue"):
        try:
            real = os.path.realpath(d)
            if os.stat(real).st_mode & 0o002 and real not in out:
                out.append(real)
        except OSError:
            pass
    return out


CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18

_mount = _libc.mount
_mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_mount.restype = ctypes.c_int
_unshare = _libc.unshare
_unshare.argtypes = [ctypes.c_int]
_unshare.restype = ctypes.c_int


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


@dataclass(frozen=True)
class NamespaceRoot:
    """The containment used where bubblewrap is not: new mount, network, IPC and UTS
    namespaces entered by the forked child while it is still root, with a root directory
    built from tmpfs and read-only binds (the :func:`contained_view`), a private /tmp (also
    HOME and TMPDIR), /var/tmp and /dev/shm, five device nodes, and a /proc that shows only
    the bot's own uid (``hidepid=2``).  The child then drops to the bot's private uid, which
    cannot undo any of it.  Every writable place is a tmpfs of this mount namespace, so it
    vanishes with the bot's last process.

    Everything is computed in the parent; :meth:`enter` runs in the child between fork and
    exec and only makes system calls.
    """

    mountpoint: str  # an empty host directory to build the new root on (only this child sees it)
    cwd: str
    links: tuple[tuple[str, str], ...]
    system: tuple[str, ...]
    own: tuple[str, ...]
    uid: int
    tmp_bytes: int
    writable_cwd: bool = False  # a contained build writes its products into (a copy of) its directory

    @classmethod
    def plan(cls, mountpoint: Path, cwd: Path, ro_binds: Iterable[Path], uid: int, tmp_bytes: int,
             writable_cwd: bool = False) -> NamespaceRoot:
        links, system, own = contained_view(cwd, ro_binds)
        return cls(str(mountpoint), str(cwd), tuple(links), tuple(system), tuple(own), uid, tmp_bytes,
                   writable_cwd)

    def enter(self) -> None:
        _check(_unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS), "unshare")
        # Nothing mounted from here on propagates back to the host.
        _check(_mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
        root = self.mountpoint
        _check(_mount(b"tmpfs", root.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, b"size=1m,mode=0755"), "root tmpfs")
        for target, link in self.links:
            os.symlink(target, root + link)
        for path in self.system:
            self._bind(path, root + path, MS_NOSUID | MS_NODEV)
        os.makedirs(root + "/dev", exist_ok=True)
        for dev in DEVICES:
            if os.path.exists(dev):
                self._bind(dev, root + dev, MS_NOSUID)
        for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                             ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):
            os.symlink(target, f"{root}/dev/{name}")
        private = f"mode=0700,uid={self.uid},gid={self.uid},size={self.tmp_bytes}".encode()
        for d in ("/tmp", "/dev/shm"):
            os.makedirs(root + d, exist_ok=True)
            _check(_mount(b"tmpfs", (root + d).encode(), b"tmpfs", MS_NOSUID | MS_NODEV, private), f"tmpfs {d}")
        os.makedirs(root + "/var", exist_ok=True)
        os.symlink("/tmp", root + "/var/tmp")
        for path in self.own:
            self._bind(path, root + path, MS_NOSUID | MS_NODEV,
                       read_only=not (self.writable_cwd and path == self.cwd))
        os.mkdir(root + "/proc")
        _check(_mount(b"proc", (root + "/proc").encode(), b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                      b"hidepid=2"), "proc")
        _check(_mount(None, root.encode(), None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, None),
               "read-only root")
        os.chdir(root)
        os.chroot(".")
        os.chdir(self.cwd)

    @staticmethod
    def _bind(src: str, dst: str, flags: int, read_only: bool = True) -> None:
        if os.path.isdir(src):
            os.makedirs(dst, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            os.close(os.open(dst, os.O_WRONLY | os.O_CREAT, 0o600))
        _check(_mount(src.encode(), dst.encode(), None, MS_BIND | MS_REC, None), f"bind {src}")
        _check(_mount(None, dst.encode(), None, MS_BIND | MS_REMOUNT | (MS_RDONLY if read_only else 0) | flags,
                      None), f"{'read-only' if read_only else 'remount'} {src}")


# ---------------------------------------------------------------------------
# bubblewrap


def bwrap_argv(bwrap: str, command: list[str], cwd: Path, *, ro_binds: Iterable[Path] = (),
               tmp_bytes: int, info_fd: int | None = None, writable_cwd: bool = False) -> list[str]:
    """The bwrap command line that runs ``command`` in a fresh sandbox.

    New user/pid/net/ipc/uts/cgroup namespaces (no network but a private
    loopback), a read-only system (/usr, /etc and the /bin, /lib... links),
    the bot's directory read-only at its real path, a private size-capped
    tmpfs /tmp used as HOME, no capabilities, no further user namespaces, and
    SIGKILL for the bot when bwrap or the referee dies.

    ``info_fd`` makes bwrap report the host pid of its in-sandbox init
    ("child-pid"): when the outer bwrap exits it does not wait for that
    process, which is then reparented to the referee (a subreaper) and must be
    recognised and reaped; with no private uid or cgroup nothing else links
    it to the bot.

    ``writable_cwd`` binds the directory read-write: only a contained build,
    in a copy of the bot made for it, gets that.
    """
    argv = [
        bwrap, "--unshare-all", "--unshare-user", "--disable-userns",
        "--die-with-parent", "--new-session", "--cap-drop", "ALL",
    ]
    links, system, own = contained_view(cwd, ro_binds)
    for target, link in links:
        argv += ["--symlink", target, link]
    for p in system:
        argv += ["--ro-bind", p, p]
    argv += ["--proc", "/proc", "--dev", "/dev",
             "--size", str(tmp_bytes), "--tmpfs", "/tmp", "--symlink", "/tmp", "/var/tmp"]
    for p in own:
        argv += ["--bind" if writable_cwd and p == str(cwd) else "--ro-bind", p, p]
    if info_fd is not None:
        argv += ["--info-fd", str(info_fd)]
    argv += ["--remount-ro", "/", "--chdir", str(cwd), "--", *command]
    return argv


def read_bwrap_info(fd: int, timeout: float = 5.0) -> dict:
    """Read bwrap's --info-fd JSON (written right after it forks the sandbox,
    then closed).  Blocking, bounded by ``timeout``; {} if nothing usable."""
    data = b""
    deadline = time.monotonic() + timeout
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    while len(data) < 65536:
        left = deadline - time.monotonic()
        if left <= 0 or not poller.poll(left * 1000):
            break
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
    try:
        info = json.loads(data)
    except ValueError:
        return {}
    return info if isinstance(info, dict) else {}


def unsuitable_sandbox_dir(cwd: Path) -> str | None:
    """Why ``cwd`` cannot be a sandboxed bot's directory, or None.  It is bound
    into the sandbox as is, so it must be a directory of its own: "/" would
    expose the whole host, and a system directory would hide the sandbox's
    own /tmp, /proc or /dev."""
    cwd = Path(os.path.realpath(cwd))
    special = {Path(p) for p in ("/", "/tmp", "/proc", "/dev", "/usr", "/etc", "/run", "/sys",
                                 *SANDBOX_ROOT_DIRS)}
    if cwd in special:
        return "is a system directory; give the bot a directory of its own"
    return None


def sandbox_visible(path: Path, cwd: Path, ro_binds: Iterable[Path]) -> bool:
    """Whether ``path`` lies inside what :func:`contained_view` shows a bot."""
    real = Path(os.path.realpath(path))
    _, system, own = contained_view(Path(os.path.realpath(cwd)), [Path(os.path.realpath(p)) for p in ro_binds])
    roots = [Path(b) for b in system + own]
    return any(real == r or r in real.parents for r in roots)
