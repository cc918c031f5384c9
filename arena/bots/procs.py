"""The bot's processes as the kernel shows them: prctl, /proc scans, which processes are
whose (:class:`Attribution`), and killing and reaping them.

Mechanism only, synchronous and cheap (a few syscalls or one /proc scan); which bot gets
what is decided by :mod:`arena.bots.spawn` and :mod:`arena.bots.process`.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable


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


PR_CAPBSET_READ, PR_CAPBSET_DROP = 23, 24
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
CAP_LAST = 63  # past the kernel's last capability PR_CAPBSET_READ answers EINVAL


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_capabilities() -> bool:
    """Give up every capability for good, before an exec: effective, permitted, inheritable and
    ambient cleared, and the bounding set emptied where this process may (it needs
    ``CAP_SETPCAP``). Whether none is left that an exec could give back (False: the caller refuses
    to go on): an exec as uid 0 is given the whole bounding set, so there it must be empty; any
    other uid, under ``no_new_privs``, gets no more than it holds, nothing. Only system calls: it
    runs between fork and exec."""
    _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    for cap in range(CAP_LAST + 1):
        if _prctl(PR_CAPBSET_READ, cap, 0, 0, 0) == 1:
            _prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    header, data = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0), (_CapData * 2)()
    if _libc.capset(ctypes.byref(header), data) != 0:
        return False
    if _libc.capget(ctypes.byref(header), data) != 0 or any(d.effective or d.permitted or d.inheritable for d in data):
        return False
    return os.geteuid() != 0 or not any(_prctl(PR_CAPBSET_READ, cap, 0, 0, 0) == 1 for cap in range(CAP_LAST + 1))


def become(uid: int) -> None:
    """This root process as ``uid`` alone (gid the same, no supplementary groups), its bounding set
    emptied first (that takes ``CAP_SETPCAP``, which the change of uid then clears with every other
    capability). Only system calls: it runs between fork and exec."""
    for cap in range(CAP_LAST + 1):
        if _prctl(PR_CAPBSET_READ, cap, 0, 0, 0) == 1 and _prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "give up the bounding set")
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)


BOTS_GID = 1_900_001_000
"""The one supplementary group of every bot process with a private uid, a gid no user or private uid
has: the folders of the arena's copies of bots are root's and this group's, ``0750``
(``uids.seal``), so bubblewrap, started as the bot's uid, reaches the copy it binds, and no other
local user can (a ladder member's source, an upload's)."""


def drop_to(uid: int | None) -> None:
    """In a forked child: the bot's uid (its one group :data:`BOTS_GID`), no new privileges ever,
    and death with the parent. The bot and, in namespaces mode, its stand-in take these same steps."""
    if uid is not None:
        os.setgroups([BOTS_GID])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def stand_in(child: int, uid: int | None, referee: int) -> None:
    """The process the referee started, in namespaces mode (or a root server's upload worker's, in a
    root of its own): it stays in the host's pid namespace
    while ``child``, pid 1 of a namespace of its own, becomes the bot, so the bot's processes
    never see (or move) the host's pid numbers. As the bot's uid, without files (its copies of the
    pipes would hide the bot's end of them), it waits for the bot and ends as the bot ended; its
    death kills the bot (PR_SET_PDEATHSIG, and pid 1 takes its namespace with it)."""
    try:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        drop_to(uid)
        if os.getppid() != referee:
            os.kill(child, signal.SIGKILL)
            os._exit(111)
        os.closerange(0, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
        while True:
            try:
                _, status = os.waitpid(child, 0)
                break
            except InterruptedError:
                continue
        if os.WIFSIGNALED(status):
            os.kill(os.getpid(), os.WTERMSIG(status))
        os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)
    except BaseException:
        os._exit(112)


def set_child_subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants.

    A bot that double-forks (setsid + fork, the classic daemon dance) would
    otherwise hand its grandchild to init, out of our sight.  As a subreaper we
    become its parent, can find it through /proc and must reap it ourselves.
    """
    return prctl(PR_SET_CHILD_SUBREAPER, 1) == 0



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


PF_EXITING = 0x4  # a task's flag (/proc/<pid>/stat, field 9) from the start of its exit


def exiting(pid: int) -> bool:
    """True if ``pid`` is gone, a zombie, or in its exit: its files are closed or about to be, and
    its exit, not what it holds, tells what became of it."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return True
    rest = raw[raw.rindex(b")") + 2:].split()
    return rest[0] in (b"Z", b"X", b"x") or bool(int(rest[6]) & PF_EXITING)


def scan_procs() -> dict[int, ProcInfo]:
    """Snapshot of every process visible in /proc (threads excluded)."""
    table: dict[int, ProcInfo] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            info = read_proc(int(name))
            if info is not None:
                table[info.pid] = info
    return table


def children_of(pid: int) -> dict[int, int]:
    """The children of single-threaded ``pid`` that run now, each with its start time: the kernel's
    list of them where it keeps one, else a scan of every process."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            pids = [int(p) for p in f.read().split()]
    except OSError:
        pids = [i.pid for i in scan_procs().values() if i.ppid == pid]
    found = (read_proc(p) for p in pids)
    return {i.pid: i.start for i in found if i is not None and i.ppid == pid}


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


ARENA_CGROUP = "palace-arena"  # the folder every bot's cgroup is made in (arena.bots.cgroups)


def cgroup_mounts(mountinfo: str = "/proc/self/mountinfo") -> list[tuple[str, str, str, set[str]]]:
    """(fstype, mountpoint, root, superoptions) for cgroup mounts: the one reader of them
    (:mod:`.cgroups` finds its hierarchies with it, the thaw below its freezers). ``root`` is the
    part of the hierarchy the mount shows: "/" on a host, a group's path in a container that was
    given one group of the host's tree without a cgroup namespace."""
    out = []
    with open(mountinfo) as f:
        for line in f:
            left, _, right = line.partition(" - ")
            lf, rf = left.split(), right.split()
            if rf and rf[0] in ("cgroup", "cgroup2"):
                mnt = lf[4].replace("\\040", " ")
                out.append((rf[0], mnt, lf[3], set(rf[2].split(",")) if len(rf) > 2 else set()))
    return out


def cgroup_dir(mount: str, root: str, path: str) -> str | None:
    """Where the group ``path`` (as /proc/PID/cgroup names it) is under a hierarchy mounted at
    ``mount`` showing ``root``; None when the mount does not show it."""
    root = root.rstrip("/")
    if root and path != root and not path.startswith(root + "/"):
        return None
    return mount + path[len(root):]


def _freezers(mountinfo: str) -> dict[str, tuple[str, str]]:
    """"unified" (v2) and "freezer" (v1) -> (mount point, root): the first mount of each."""
    found: dict[str, tuple[str, str]] = {}
    try:
        for fstype, mnt, root, opts in cgroup_mounts(mountinfo):
            if fstype == "cgroup2":
                found.setdefault("unified", (mnt, root))
            elif "freezer" in opts:
                found.setdefault("freezer", (mnt, root))
    except OSError:
        pass
    return found


def thaw_arena_cgroups(pids: Iterable[int], proc: str = "/proc") -> None:
    """Thaw the arena's frozen cgroups these processes are in. A bot is frozen off its turn, and a
    frozen process does not die of SIGKILL until thawed: a referee that died with a seat frozen
    left processes no kill could end. Only groups below the arena's own folder are touched.
    ``proc``: where /proc is (tests give a fake one)."""
    mounts = None
    for pid in pids:
        try:
            with open(f"{proc}/{pid}/cgroup") as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        for line in lines:
            _, controllers, path = line.split(":", 2)
            if f"/{ARENA_CGROUP}/" not in path + "/" or ".." in path:
                continue
            if mounts is None:
                mounts = _freezers(f"{proc}/self/mountinfo")
            if controllers == "" and "unified" in mounts:
                kind, knob, value = "unified", "cgroup.freeze", b"0"
            elif "freezer" in controllers.split(",") and "freezer" in mounts:
                kind, knob, value = "freezer", "freezer.state", b"THAWED"
            else:
                continue
            group = cgroup_dir(*mounts[kind], path)
            if group is None:
                continue
            try:
                fd = os.open(f"{group}/{knob}", os.O_WRONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
                try:
                    os.write(fd, value)
                finally:
                    os.close(fd)
            except OSError:
                pass


def kill_and_reap(collect: Callable[[dict[int, ProcInfo]], set[int]], deadline: float) -> dict[int, int]:
    """Synchronous kill loop for cleanup paths: SIGKILL whatever ``collect``
    names until nothing is left (reaping those that were reparented to us),
    or until ``deadline`` (time.monotonic()).  Returns the processes it hit,
    pid -> start time: a zombie of another process stays for its parent to reap, and one it may
    not signal (another user's) is hit until the deadline and lives on (:func:`died` counts).

    A process once hit stays a member until it is gone: a dying process leaves its cgroup's
    list before its parent reaps it, so a cgroup's ``collect`` no longer names the zombie an
    orphaned ``bwrap`` becomes, and it would stay unreaped under this subreaper."""
    me = os.getpid()
    seen: dict[int, int] = {}  # pid -> start time (a recycled pid is not the process hit)
    while time.monotonic() < deadline:
        table = scan_procs()
        hit = {p for p, start in seen.items() if p in table and table[p].start == start}
        pids = still_present(collect(table) | hit, table, me)
        if not pids:
            break
        seen.update((p, table[p].start) for p in pids)
        kill_pids(pids)
        thaw_arena_cgroups(p for p in pids if table[p].state != "Z")  # SIGKILL is pending: they die, running nothing
        for pid in pids:
            if table[pid].ppid == me:
                reap_if_child(pid)
        time.sleep(0.002)
    return seen


def died(hit: dict[int, int]) -> int:
    """How many of the processes a kill hit (:func:`kill_and_reap`) are gone or dead now: a
    cleanup's report never says killed what still runs."""
    return sum(1 for p, start in hit.items()
               if (info := read_proc(p)) is None or info.start != start or info.state == "Z")


def reap_zombie_children(table: dict[int, ProcInfo], wanted: Callable[[ProcInfo], bool]) -> int:
    """Reap this process's zombie children that ``wanted`` names; how many. Waiting for one's own
    child is always safe, whatever lock another process holds: nobody else can reap it."""
    me, reaped = os.getpid(), 0
    for info in table.values():
        if info.ppid == me and info.state == "Z" and wanted(info):
            try:
                reaped += os.waitpid(info.pid, os.WNOHANG)[0] == info.pid
            except ChildProcessError:
                pass
    return reaped


def reap_runsc_orphans() -> int:
    """Reap this process's zombie children named "exe": runsc runs its sandbox and gofer as
    ``/proc/self/exe`` (as root, then as nobody), and when ``runsc run`` ends before them they are
    reparented to this process, the subreaper, where nothing waits for them (each gVisor seat left
    two zombies, which a long ``arena serve`` piled up). In every contained mode a bot's own first
    process is bwrap or runsc; only a trusted bot whose program is named "exe" could be one of
    ours too, and its close then finds it gone (an unknown exit status), nothing worse. How many."""
    return reap_zombie_children(scan_procs(), lambda info: _comm(info.pid) == b"exe")


def _comm(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/comm", "rb") as f:
            return f.read().rstrip(b"\n")
    except OSError:
        return b""


def still_present(pids: set[int], table: dict[int, ProcInfo], referee_pid: int) -> set[int]:
    """Members that still need work: alive, or zombies we must reap ourselves.

    A zombie whose parent is someone else is that parent's business (and the
    parent, if it is ours, is being killed too; its zombies then come to us).
    """
    return {
        p for p in pids
        if p in table and (table[p].state != "Z" or table[p].ppid == referee_pid)
    }
