"""The serving processes' part of the CPU beside a ladder: a bounded share, so the games come first.

The weight (``arena serve --pages-share``, default ``PAGES_SHARE`` = 0.25 of a default group's with
``--ladder``) is weighed against everything else the scheduler sees at the same level: the ladder's
referee processes (default weight each), the bots' group (one default weight for all the bots, so
theirs is what must not starve), and every other session or process on the machine. Beside a
busy ladder of two games on two CPUs (two default entities), the pages take at most 0.25/2.25 =
11% of the CPUs, so the ladder keeps about 89% of its rate alone (the target is 80%; 0.5 would
give 80% exactly, with no margin for the runner's own process). Against any other busy process
the pages get a quarter of its part. The earlier 0.1 was fine against the ladder but, beside the
machine's other processes, left the pages about 1% of the CPUs at load 13-20 (a bot's page took
24-82 s); 0.25 gives them 2.5 times that, and a bot page's build is cheaper too (serve/data.py).

On a small machine the pages (and whoever loads them) otherwise take the CPU the ladder's referee
and bots need. ``os.nice`` alone does not reach far: with Linux autogroups every session is
weighed as one group (the ladder's runner has a session of its own, its bots sit in cgroups of
their own), so a nice value ranks the server's processes only against each other. What works is
a weight on the whole group the scheduler sees: a ``cpu`` cgroup of the pages' own (v2
``cpu.weight``, v1 ``cpu.shares``) below this process's cgroup, or where no cgroup can be made,
this session's autogroup niced (``/proc/self/autogroup``, no privilege needed to lower one's own
priority). Each is a weight: the pages use CPU the ladder leaves idle. A cgroup also gets a
ceiling, the same share of all the CPUs (0.25 of two CPUs: half a CPU), because a weight alone
did not hold the ladder at 80%: this ladder waits on its bots' pipes and leaves a quarter of the
machine idle, so the pages (and whoever loads them) filled it and more, 27-30% of the CPUs and wrk
11-14% more, and the ladder's processes woke onto busy CPUs (its rate beside 64 clients a median
71% and 74-79% in runs without the ceiling; with it 93%, and 94% beside 256 clients against the
previous main's 82% in the same run: bench_serve.py --ladder, README). Beside the ladder the capped
pages still served 1,360-2,350 requests a second, where a club's room needs some 50.
The fallbacks (an autogroup, a nice) have no ceiling; their note says which was used.

:func:`bound_pages` is called in the serving process after the ladder's runner has started (the
runner keeps the group it was started in); forked serving processes inherit the share.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

from ..bots.cgroups import own_cgroups, read_small, write
from ..bots.procs import cgroup_mounts

PAGES_CGROUP = "palace-arena-pages"
_DEFAULT = {"v2": 100, "v1": 1024}  # a group's weight when nobody set one (the ladder's)
_KNOB = {"v2": "cpu.weight", "v1": "cpu.shares"}
_LOWEST = {"v2": 1, "v1": 2}
PERIOD_US = 100_000  # the ceiling's accounting period (the kernel's default)


@dataclass(frozen=True)
class PagesShare:
    """How the share was applied: ``how`` is "cgroup v2", "cgroup v1", "autogroup" or "nice"
    (the fallback, which ranks only against processes of the same group); ``where`` the group's
    directory or file; ``value`` what was written there; ``before`` the autogroup's nice before
    it. :func:`release` undoes it on a clean stop (an autogroup is the session's: it outlives
    the server)."""

    how: str
    where: str
    value: int
    note: str = ""
    before: int = 0
    cap_us: int = 0  # a cgroup's ceiling, microseconds of CPU per PERIOD_US (0: none)

    def describe(self) -> str:
        cap = f", at most {self.cap_us / PERIOD_US:g} CPUs" if self.cap_us else ""
        return f"{self.how} {self.where} = {self.value}{cap}" + (f" ({self.note})" if self.note else "")


def autogroup_nice(share: float) -> int:
    """The nice value whose scheduler weight is nearest ``share`` of nice 0's (each step is
    about 1.25x), within 0-19."""
    return max(0, min(19, round(-math.log(share) / math.log(1.25))))


def cpus() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def cgroup_cap(share: float, ncpus: int) -> int:
    """The cgroup's ceiling for ``share``: that part of all ``ncpus`` CPUs, in microseconds of CPU
    per ``PERIOD_US`` (``share`` 1 is every CPU: no ceiling at all)."""
    return max(1000, round(share * ncpus * PERIOD_US))


def cgroup_weight(kind: str, share: float) -> int:
    """The ``cpu.weight`` (v2) or ``cpu.shares`` (v1) that is ``share`` of the default."""
    return max(_LOWEST[kind], round(_DEFAULT[kind] * share))


def bound_pages(share: float) -> PagesShare:
    """Give this process (and what it forks from now on) ``share`` of the CPU weight of a
    default group. Never raises: a host that allows neither a cgroup nor an autogroup's nice
    gets a plain nice, and the note says why."""
    notes = []
    try:
        return _into_cgroup(share)
    except OSError as exc:
        notes.append(f"no cpu cgroup: {exc.strerror or exc}")
    try:
        return _nice_autogroup(share, "; ".join(notes))
    except OSError as exc:
        notes.append(f"no autogroup: {exc.strerror or exc}")
    os.nice(max(0, autogroup_nice(share) - os.nice(0)))
    return PagesShare("nice", f"pid {os.getpid()}", os.nice(0), "; ".join(notes))


def _cpu_dir() -> tuple[str, Path]:
    """("v2" or "v1", this process's directory in the hierarchy that can have the cpu controller)."""
    own = own_cgroups()
    for fstype, mnt, root, opts in cgroup_mounts():
        if fstype == "cgroup" and "cpu" in opts and "cpu" in own:
            kind, path = "v1", own["cpu"]
        elif fstype == "cgroup2" and "" in own and not [c for c in own if c]:  # a pure v2 host
            kind, path = "v2", own[""]
        else:
            continue
        rel = path[len(root.rstrip("/")):] if path.startswith(root) else ""
        return kind, Path(mnt + rel)
    raise OSError(0, "no cgroup hierarchy with the cpu controller")


def _into_cgroup(share: float) -> PagesShare:
    kind, base = _cpu_dir()
    if kind == "v2":
        if "cpu" not in read_small(base / "cgroup.controllers").split():
            raise OSError(0, f"the cpu controller is not delegated to {base}")
        # Enabling it below a group that holds processes fails (EBUSY) except at the root.
        if "cpu" not in read_small(base / "cgroup.subtree_control").split():
            write(base / "cgroup.subtree_control", "+cpu")
    _sweep(base)
    group = base / f"{PAGES_CGROUP}-{os.getpid()}"
    group.mkdir(exist_ok=True)
    try:
        value = cgroup_weight(kind, share)
        write(group / _KNOB[kind], str(value))
        quota = cgroup_cap(share, cpus())
        if kind == "v2":
            write(group / "cpu.max", f"{quota} {PERIOD_US}")
        else:
            write(group / "cpu.cfs_period_us", str(PERIOD_US))
            write(group / "cpu.cfs_quota_us", str(quota))
        write(group / "cgroup.procs", "0")  # this process; in v1 its threads follow
    except OSError:
        _rmdir(group)
        raise
    return PagesShare(f"cgroup {kind}", str(group), value, cap_us=quota)


def _sweep(base: Path) -> None:
    """Remove pages groups left by servers that were killed (an emptied group is removable;
    one still serving is not)."""
    for d in base.glob(f"{PAGES_CGROUP}-*"):
        _rmdir(d)


def _rmdir(d: Path) -> None:
    try:
        d.rmdir()
    except OSError:
        pass


def _nice_autogroup(share: float, note: str) -> PagesShare:
    """This session's autogroup niced: only where this session has an autogroup of its own."""
    if read_small("/proc/sys/kernel/sched_autogroup_enabled").strip() != "1":
        raise OSError(0, "autogroups are off")
    before = autogroup_nice_of("self")
    nice = max(autogroup_nice(share), before)
    write(Path("/proc/self/autogroup"), str(nice))
    return PagesShare("autogroup", "/proc/self/autogroup", nice, note, before)


def autogroup_nice_of(pid: int | str) -> int:
    """The nice of a process's autogroup: its file reads "/autogroup-N nice K". It is empty for a
    session in the kernel's default group, the root group (a container's first session, as in
    CI): an OSError, since niceing that group is refused and a plain nice does the job there."""
    words = read_small(f"/proc/{pid}/autogroup").split()
    if len(words) != 3 or words[1] != "nice":
        raise OSError(0, "this session is in the root group, not an autogroup of its own")
    return int(words[2])


def release(applied: PagesShare) -> None:
    """On a clean stop: leave the pages' group (and remove it), or give the session's autogroup
    its nice back, so nothing of the server's share outlives it."""
    try:
        if applied.how.startswith("cgroup"):
            group = Path(applied.where)
            write(group.parent / "cgroup.procs", "0")
            _rmdir(group)
        elif applied.how == "autogroup":
            write(Path(applied.where), str(applied.before))
    except OSError:
        pass
