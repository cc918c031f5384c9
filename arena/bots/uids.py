"""Private bot uids and the run directory: leases from the uid pool, the records of running bots,
the cleanup after a referee that died, and what a bot's uid may read.

A root referee leases each bot a uid of its own (``BOT_UID_BASE`` onwards) so bots cannot read
the referee's files or signal each other. The run directory records every bot a referee starts,
so :meth:`Registry.cleanup_stale` can kill what a killed referee left behind.
"""

from __future__ import annotations

import atexit
import fcntl
import fnmatch
import json
import secrets
import os
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from .cgroups import CgroupRoot, cgroup_dir_pids, kill_cgroup_dir, remove_cgroup_dir
from .filesystem import world_writable_dirs
from .namespaces import release_space
from .places import RUN, arena_place
from .procs import BOTS_GID, Attribution, died, kill_and_reap, read_proc, reap_zombie_children, scan_procs, set_child_subreaper


BOT_UID_BASE = 1_900_000_000
"""Private uids for bots are BOT_UID_BASE .. BOT_UID_BASE+BOT_UID_COUNT-1.

Chosen outside the ranges used by distributions, systemd (dynamic users,
nspawn containers) and the usual /etc/subuid allocations, so that a uid in
this range belongs to a bot and nothing else."""
BOT_UID_COUNT = 1000
DEAD_REFEREE_WAIT_S = 10.0  # another arena's cleanup holds a dead referee's directory while it kills (5 s at most)
TEMPS = "temps"  # in a referee's run directory: the temporary directories it made, one a line
TEMPS_COMPACT_BYTES = 64 * 1024  # past this, the lines of directories already removed are dropped
OWNER = "owner"  # in a referee's run directory: who started that arena process (JSON), for the cleanup's message
HOST_RUN_TOKEN = "PALACE_ARENA_RUN"  # in the environment of a program run on the host (Registry.run): what the cleanup finds it by
UNREAPED = "unreaped"
"""In a dead referee's bot record: the processes a cleanup killed that are not its children, as
[pid, start time] pairs. The record stays until they are gone, so that their parent, another arena
process (the subreaper they were orphaned to), finds them named there and reaps them however it
cleans, whichever process cleaned first: after the kill a zombie shows no token, and one of a
trusted build has no pool uid, so nothing else would name it."""


def default_run_dir() -> Path:
    """This user's run directory on this machine (:func:`~.places.arena_place`); root's is the machine's."""
    return arena_place(RUN)


def _private_dir(path: Path) -> Path:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():  # (its name is known: another user may make it)
        raise PermissionError(f"{path} is not a directory owned by uid {os.geteuid()} (another user made it?): "
                              "remove it, or set TMPDIR to a folder of your own")
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


def _entries(directory: Path, pattern: str) -> list[Path]:
    """``directory.glob(pattern)`` (one level) that reads a directory removed meanwhile as empty:
    other arenas clean the same run directory at the same time (``Path.glob`` over two levels
    raised FileNotFoundError when one of them removed a referee directory between its steps)."""
    try:
        with os.scandir(directory) as it:
            names = [e.name for e in it]
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [directory / n for n in sorted(fnmatch.filter(names, pattern))]


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
    return died(kill_and_reap(lambda table: {i.pid for i in table.values() if i.uid == uid}, deadline))


SWEPT = b"swept"
"""What a uid's lock file holds once its last lease ended swept with no process of it left: the
next lease may skip its own sweep (each reads every entry of every world-writable folder, 6 ms of
CPU where ``/tmp`` holds 1,400). A lease empties the file first, so a referee killed while it held
the uid, or a release that found a process of it alive, leaves it unmarked, and the next lease sweeps."""


def _marked_swept(fd: int) -> bool:
    return os.pread(fd, len(SWEPT) + 1, 0) == SWEPT


@dataclass
class UidLease:
    uid: int
    fd: int
    contained: bool = False
    """Set by the spawn for a seat in bubblewrap or namespaces whose folder is read-only: its mount
    namespace shows it no host folder it may write (each world-writable one is its own tmpfs or
    absent; ``test_uids`` plants a file in each from such a seat), so there is nothing of it to
    sweep at its release; the lease before it found the uid swept or swept it."""

    def release(self) -> None:
        if self.fd >= 0:
            alone = not pids_of_uid(self.uid)  # first: nothing of the uid can write once none is left
            if not self.contained:
                sweep_uid_files(self.uid)
            if alone:
                os.pwrite(self.fd, SWEPT, 0)
            os.close(self.fd)
            self.fd = -1


@dataclass
class StaleReport:
    """What cleanup_stale() found and removed."""

    referees: list[int] = field(default_factory=list)
    owners: dict[int, str] = field(default_factory=dict)  # referee pid -> who started it, where recorded
    killed: int = 0
    cgroups: list[str] = field(default_factory=list)
    homes: list[str] = field(default_factory=list)
    temps: list[str] = field(default_factory=list)  # its copies of the arena package and of bots

    def __bool__(self) -> bool:
        """True when something was cleaned: a dead referee's empty directory alone is not news."""
        return bool(self.killed or self.cgroups or self.homes or self.temps)

    def __str__(self) -> str:
        parts = [f"{n} {what}" for n, what in ((self.killed, "bot process(es) killed"),
                                              (len(self.cgroups), "cgroup(s) removed"),
                                              (len(self.homes), "temporary home(s) removed"),
                                              (len(self.temps), "copy(ies) of the arena or a bot removed")) if n]
        whose = [f"pid {pid} {self.owners.get(pid, '(no record of its user)')}" for pid in self.referees[:3]]
        if len(self.referees) > 3:
            whose.append(f"{len(self.referees) - 3} more")
        return (f"{', '.join(parts)}, left by {len(self.referees) or 'the'} earlier arena process(es) that "
                "ended without cleaning up (killed, or crashed)" + (f": {'; '.join(whose)}" if whose else ""))


class Registry:
    """This referee's footprint in the run directory.

    ``<run>/ref-<pid>/lock`` is flocked for the referee's lifetime and
    ``<run>/ref-<pid>/<bot>.json`` records each live bot (pid, uid, cgroups,
    home).  ``uids/<uid>`` in the machine's run directory (:attr:`pool`, whatever
    ``<run>`` is) is flocked while a bot holds that uid.  A
    referee killed -9 loses its locks, which is how cleanup_stale() tells its
    leftovers from those of a referee that is still running.
    """

    def __init__(self, run_dir: Path | None = None):
        self.pid = os.getpid()
        self.run_dir = _private_dir(run_dir or default_run_dir())
        # The uid pool is the machine's: whatever run directory holds this registry's records, a
        # root referee locks its uids where every other root referee looks (a lock free in a run
        # directory of its own says nothing of the uid's owner). No other user leases any.
        self.pool = _private_dir((_private_dir(default_run_dir()) if os.geteuid() == 0 else self.run_dir) / "uids")
        self.dir = self.run_dir / f"ref-{self.pid}"
        self.subreaper = set_child_subreaper()
        self._uid_next = 0
        self._leased: set[int] = set()
        self._temps_lock = threading.Lock()  # bots start from several threads (a hub per thread)
        self.report = StaleReport()
        if self.dir.exists():  # a dead referee had our pid: its leftovers go first
            self._clean_referee_dir(self.dir, None, self.report)
        if self.dir.exists():  # records of processes not gone yet: kept, under a name no referee has
            self.dir.rename(self.run_dir / f"ref-{self.pid}-{time.time_ns()}")
        # Bot names go on after those that dead referees with our pid left records of: a later
        # cleanup finds a record's cgroups by name, and would take a live bot's for the dead one's.
        self._seq = max((_last_bot_number(d) for d in _entries(self.run_dir, f"ref-{self.pid}-*")), default=0)
        # Lock first, publish second: a cleaner never sees an unlocked ref dir.
        tmp = self.run_dir / f".ref-{self.pid}"
        shutil.rmtree(tmp, ignore_errors=True)
        _private_dir(tmp)
        self._lock_fd = _try_lock(tmp / "lock")
        (tmp / OWNER).write_text(json.dumps(owner_now()))
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
        dead referee) is killed first. A uid whose leftovers outlive that (zombies
        only their parent may reap, or a process SIGKILL has not ended yet) is
        passed over until they are gone: a lease would hide them from that parent's
        cleanup, which cannot lock the uid while we hold it."""
        for i in range(BOT_UID_COUNT):
            uid = BOT_UID_BASE + (self._uid_next + i) % BOT_UID_COUNT
            if uid in self._leased:
                continue
            fd = _try_lock(self.pool / str(uid))
            if fd is None:
                continue
            self._uid_next = (self._uid_next + i + 1) % BOT_UID_COUNT
            killed = kill_uid(uid, time.monotonic() + 2.0)
            if pids_of_uid(uid):
                os.close(fd)
                continue
            if killed or not _marked_swept(fd):  # a process it killed may have written after the last sweep
                sweep_uid_files(uid)
            os.ftruncate(fd, 0)  # held: unmarked until a release marks it again
            self._leased.add(uid)
            return UidLease(uid, fd)
        raise RuntimeError(f"all {BOT_UID_COUNT} bot uids are in use")

    def release_uid(self, lease: UidLease) -> None:
        lease.release()
        self._leased.discard(lease.uid)

    def write_record(self, name: str, record: dict) -> None:
        _write_record(self.dir / f"{name}.json", record)

    def run(self, argv: list[str], *, timeout: float, **popen_kw) -> subprocess.CompletedProcess:
        """:func:`subprocess.run` with output captured, for a program the arena runs on the host
        outside a bot's containment (a trusted bot's build, an interpreter's version): recorded
        here while it runs, in a session of its own, so that should this process die, the cleanup
        after it kills that session and reaps what is orphaned, as it does a bot's processes. At
        the timeout the session is killed and TimeoutExpired raised.

        The record, with a token the program and all it forks carry in their environment, is
        written before the program starts: written after, a kill between the fork and the write
        left the program running with nothing naming it (seen when the machine was busy)."""
        name = self.next_name()
        value = secrets.token_hex(16)
        token = f"{HOST_RUN_TOKEN}={value}"
        given = popen_kw.pop("env", None)  # an empty env is the caller's choice, not "inherit"
        env = dict(os.environ if given is None else given, **{HOST_RUN_TOKEN: value})
        self.write_record(name, {"procs": [], "token": token, "command": argv})
        with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                              env=env, **popen_kw) as proc:
            info = read_proc(proc.pid)
            self.write_record(name, {"procs": [[proc.pid, info.start if info else 0]], "token": token,
                                     "command": argv})
            try:
                out, err = proc.communicate(timeout=timeout)
            except BaseException:
                try:  # the leader is not reaped yet: its group is still its own
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
                raise
            finally:
                self.drop_record(name)
        return subprocess.CompletedProcess(argv, proc.returncode, out, err)

    def temp_dir(self, prefix: str) -> Path:
        """A new private directory in the temporary directory, for copies this referee makes for
        its bots; removed at a normal exit by whoever made it, and by :meth:`cleanup_stale` after a
        kill -9, when no exit handler ran. Its name is noted here *before* it exists, so a kill at
        any instant leaves no directory nobody named (noting it after ``mkdtemp`` left an empty
        copy behind when a worker was killed in between)."""
        base = Path(tempfile.gettempdir()).resolve()  # once, here: a bot start never follows a link (spawn)
        listing = self.dir / TEMPS
        with self._temps_lock:  # a compaction must not drop a name noted but not yet made
            self._compact_temps(listing)
            for _ in range(100):
                path = base / f"{prefix}{secrets.token_hex(8)}"
                fd = os.open(listing, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                try:  # one unbuffered write: in the kernel's hands before the directory exists
                    os.write(fd, f"{path}\n".encode())
                finally:
                    os.close(fd)
                try:
                    path.mkdir(mode=0o700)
                except FileExistsError:  # 64 random bits met a name in use: try another
                    continue
                return path
        raise FileExistsError(f"no free temporary directory name with prefix {prefix!r} in {base}")

    @staticmethod
    def _compact_temps(listing: Path) -> None:
        """Keep the listing as long as the directories still there, not one line per bot ever
        started (a server starts bots for weeks): past a size, rewrite it with the names that
        still exist, in one rename, so a kill at any instant leaves one whole listing."""
        try:
            if listing.stat().st_size <= TEMPS_COMPACT_BYTES:
                return
            lines = listing.read_text().splitlines()
        except OSError:
            return
        kept = "".join(f"{line}\n" for line in lines if line and os.path.lexists(line))
        tmp = listing.with_name(f".{TEMPS}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, kept.encode())
        finally:
            os.close(fd)
        os.replace(tmp, listing)

    def drop_record(self, name: str) -> None:
        try:
            (self.dir / f"{name}.json").unlink()
        except FileNotFoundError:
            pass

    # -- stale cleanup -----------------------------------------------------

    def cleanup_stale(self, cgroups: CgroupRoot | None, dead: Iterable[int] = ()) -> StaleReport:
        """What dead referees left, cleared. ``dead``: referees this process saw end (its worker
        processes, reaped): their directories are waited for where another arena's cleanup holds
        them (for as long as its kills may take), so that they are gone on return, not a moment
        after, whoever cleared them."""
        report = StaleReport()
        for pid in dead:
            self._clean_referee_dir(self.run_dir / f"ref-{pid}", cgroups, report, DEAD_REFEREE_WAIT_S)
        for d in _entries(self.run_dir, "ref-*"):
            if d != self.dir:
                self._clean_referee_dir(d, cgroups, report)
        deadline = time.monotonic() + 5.0
        if cgroups is not None:  # groups whose record was never written or was lost
            for parent in cgroups.parents.values():  # (another arena removes the parent once empty)
                groups = _entries(parent, "r*-b*")
                # Read after the listing: a referee publishes its directory before it makes a group,
                # so one that started while this cleanup ran is not taken for a dead one.
                live = {self.pid} | {int(d.name[4:]) for d in _entries(self.run_dir, "ref-*") if d.name[4:].isdigit()}
                for g in groups:
                    owner = g.name[1:].split("-", 1)[0]
                    if owner.isdigit() and int(owner) not in live:
                        report.killed += kill_cgroup_dir(g, deadline)
                        remove_cgroup_dir(g)
                        report.cgroups.append(str(g))
        # Bot uids with no live owner: a process of a pool uid whose lock in the machine's run
        # directory is free (every root referee leases there, whatever run directory it records in).
        # Only a root referee leases them: to any other referee every one looks free (its run
        # directory is its own) and their processes are not its to kill. Swept as such, each batch
        # of a non-root ladder run spent the cleanup's deadline trying to kill the bots of a root
        # run beside it, and said it had killed them ("3-9 bot process(es) killed" that were never
        # its own).
        stray = {i.uid for i in scan_procs().values() if uid_in_pool(i.uid)} if os.geteuid() == 0 else set()
        for uid in sorted(stray - self._leased):
            fd = _try_lock(self.pool / str(uid))
            if fd is not None:
                try:
                    report.killed += kill_uid(uid, deadline)
                    sweep_uid_files(uid)
                finally:
                    os.close(fd)
        # Our own zombie children of dead referees' bots, whoever holds their uid's lock or their
        # referee's directory: nobody but this process can reap them.
        named = self._recorded_procs()
        report.killed += reap_zombie_children(scan_procs(), lambda i: (
            (i.pid, i.start) in named or (uid_in_pool(i.uid) and i.uid not in self._leased)))
        return report

    def _recorded_procs(self) -> set[tuple[int, int]]:
        """(pid, start time) of every process the records of other referees name, those a cleanup
        left to their parent (:data:`UNREAPED`) included."""
        named: set[tuple[int, int]] = set()
        for d in _entries(self.run_dir, "ref-*"):
            if d != self.dir:
                for rec_path in _entries(d, "*.json"):
                    named |= set(_named_procs(_read_record(rec_path)).items())
        return named

    def _clean_referee_dir(self, d: Path, cgroups: CgroupRoot | None, report: StaleReport,
                           wait: float = 0.0) -> None:
        deadline = time.monotonic() + wait
        while True:
            try:
                fd = _try_lock(d / "lock")
            except (FileNotFoundError, NotADirectoryError):
                return  # gone: its referee (or another arena's cleanup) removed it since it was listed
            if fd is not None or time.monotonic() >= deadline:
                break
            time.sleep(0.05)  # a referee known dead: another arena's cleanup holds it for now
        if fd is None:
            return  # that referee is alive (or still being cleared by another arena's cleanup)
        try:
            before = (report.killed, len(report.cgroups), len(report.homes), len(report.temps))
            deadline = time.monotonic() + 5.0
            kept = False
            for rec_path in _entries(d, "*.json"):
                rec = _read_record(rec_path)
                left = self._kill_record(rec, deadline, report) if rec else {}
                if not left:
                    rec_path.unlink(missing_ok=True)
                    continue
                kept = True
                started = _record_procs(rec)
                unreaped = {p: t for p, t in left.items() if p not in started}
                if unreaped != _pairs(rec.get(UNREAPED)):  # named for their parent while they are there
                    _write_record(rec_path, {**rec, UNREAPED: [[p, t] for p, t in unreaped.items()]})
            for temp in _kept_temps(d / TEMPS):
                release_space(temp)  # a build's tmpfs (its files are memory): detached, then removed
                shutil.rmtree(temp, ignore_errors=True)
                report.temps.append(str(temp))
            if (report.killed, len(report.cgroups), len(report.homes), len(report.temps)) != before:
                pid = int(d.name[4:].split("-")[0])
                report.referees.append(pid)  # it left something: counted, and named
                who = owner_text(d / OWNER)
                if who:
                    report.owners[pid] = who
            if not kept:  # a record goes only with the last of its processes
                shutil.rmtree(d, ignore_errors=True)
        finally:
            os.close(fd)

    def _kill_record(self, rec: dict, deadline: float, report: StaleReport) -> dict[int, int]:
        """Kill and reap what a dead referee's record names; what is left of the processes it names
        or the kill hit (pid -> start time), for the record to name until none is. A zombie whose
        parent is another live process stays until that parent reaps it: its own cleanup does,
        reading this same record."""
        uid_fd = None
        uid = rec.get("uid")
        if rec.get("uid_exclusive") and uid is not None:
            uid_fd = _try_lock(self.pool / str(uid))
        cg_dirs = [Path(p) for p in rec.get("cgroups", [])]
        named = _named_procs(rec)
        leader, start = next(iter(_record_procs(rec).items()), (0, 0))
        attribution = Attribution(
            pid=leader, start=start, extra=dict(named),
            uid=uid if uid_fd is not None else None,
            token=rec["token"].encode() if rec.get("token") else None,
            cgroup_pids=(lambda: cgroup_dir_pids(cg_dirs)) if cg_dirs else None,
        )
        try:
            hit = kill_and_reap(lambda t: attribution.members(t, self.pid), deadline)
            report.killed += died(hit)
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
        return {p: t for p, t in (named | hit).items() if (info := read_proc(p)) is not None and info.start == t}


def _user_name(uid: int) -> str:
    import pwd
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def owner_now() -> dict:
    """Who this arena process runs for: its user, and the person behind it when that differs (the
    login uid the kernel keeps across sudo, else sudo's SUDO_USER). The run directory of a root
    arena is shared by everyone's root runs on the machine (its uid pool is machine-wide), so a
    cleanup says whose leftovers it removed."""
    uid = os.geteuid()
    login = None
    try:
        with open("/proc/self/loginuid") as f:
            luid = int(f.read().strip())
        if luid != uid and luid != 0xFFFFFFFF:  # (unset, as in most containers)
            login = _user_name(luid)
    except (OSError, ValueError):
        pass
    if login is None and os.environ.get("SUDO_USER") not in (None, "", _user_name(uid)):
        login = os.environ["SUDO_USER"]
    return {"user": _user_name(uid), "login": login,
            "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}


def owner_text(path: Path) -> str:
    """What a referee's owner file says, as "of user root (logged in as alice), started ..."; empty
    when there is none (an arena from before the file, or a torn write)."""
    try:
        rec = json.loads(path.read_text())
        user, login, started = str(rec["user"]), rec.get("login"), str(rec.get("started") or "?")
    except (OSError, ValueError, TypeError, KeyError):
        return ""
    return f"of user {user}" + (f" (logged in as {login})" if login else "") + f", started {started}"


def _read_record(path: Path) -> dict:
    """A bot's record, or {} when it is unreadable (a torn write can leave no other trace)."""
    try:
        rec = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return rec if isinstance(rec, dict) else {}


def _write_record(path: Path, record: dict) -> None:
    """Write a record in one rename: a cleanup reading it meanwhile sees the old one or the new one."""
    tmp = path.with_name(f".{path.stem}.tmp")
    tmp.write_text(json.dumps(record))
    tmp.replace(path)


def _pairs(value: Any) -> dict[int, int]:
    """pid -> start time from a record's list of [pid, start] pairs; {} for anything else."""
    try:
        return {int(p): int(t) for p, t in value or []}
    except (TypeError, ValueError):
        return {}


def _record_procs(rec: dict) -> dict[int, int]:
    """pid -> start time of every process its referee noted in a record, the one it forked first
    first. Records written before ``procs`` existed name that one alone, as ``pid`` and ``start``."""
    return _pairs(rec.get("procs") or ([[rec["pid"], rec["start"]]] if "pid" in rec and "start" in rec else []))


def _named_procs(rec: dict) -> dict[int, int]:
    """pid -> start time of every process a record names: its referee's, then those a cleanup
    killed and left to their parent (:data:`UNREAPED`)."""
    return _record_procs(rec) | _pairs(rec.get(UNREAPED))


def _last_bot_number(d: Path) -> int:
    """The highest ``n`` of the records ``r<pid>-b<n>.json`` in a referee's directory; 0 if none."""
    return max((int(n) for p in _entries(d, "r*-b*.json") if (n := p.stem.rpartition("-b")[2]).isdigit()), default=0)


def _kept_temps(listing: Path) -> list[Path]:
    """The directories a dead referee noted with :meth:`Registry.keep_temp` that still exist. Only
    ``palace-arena-*`` directories directly in a temp directory, whatever the file says (it sits
    in the private run directory, but a wrong path must never cost a user's files)."""
    try:
        lines = listing.read_text().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        path = Path(line)
        if (path.is_absolute() and path.name.startswith("palace-arena-") and ".." not in path.parts
                and path.is_dir() and not path.is_symlink()):
            out.append(path)
    return out


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


def seal(top: Path) -> None:
    """``top``, a folder this process made to hold its copies of bots (``launch.world_readable_copy``),
    closed to every user but its owner and bots: no other local user may list or read a copy there
    (a ladder member's or an upload's source, a user's ``0600`` file). A root referee's are root's
    and :data:`~.procs.BOTS_GID`'s, ``0750``: a bot's private uid holds that group and reaches the
    copy its seat binds; elsewhere ``0700``."""
    if os.geteuid() == 0:
        os.chown(top, 0, BOTS_GID)
        top.chmod(0o750)
    else:
        top.chmod(0o700)


def inaccessible_reason(path: Path, uid: int, gid: int, need: int) -> str | None:
    """Why ``uid``/``gid`` cannot use ``path`` with ``need`` (an os.R_OK|os.X_OK
    mask), or None.  Checks every ancestor for search permission; a private uid
    holds :data:`~.procs.BOTS_GID` too.  Plain mode bits only: ACLs and capabilities are ignored."""
    if uid == 0:
        return None
    path = Path(os.path.abspath(path))
    chain = [*reversed(path.parents), path]
    groups = (gid, BOTS_GID) if uid_in_pool(uid) else (gid,)
    for i, p in enumerate(chain):
        want = need if i == len(chain) - 1 else os.X_OK
        try:
            st = os.stat(p)
        except OSError as exc:
            return f"{p}: {exc.strerror}"
        if st.st_uid == uid:
            bits = (st.st_mode >> 6) & 7
        elif st.st_gid in groups:
            bits = (st.st_mode >> 3) & 7
        else:
            bits = st.st_mode & 7
        if bits & want != want:
            return f"{p} (mode {stat.filemode(st.st_mode)}, owner {st.st_uid}) is not accessible to uid {uid}"
    return None
