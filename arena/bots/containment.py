"""This referee process's containment machinery: the uid registry, the cgroup root, the bubblewrap
binary; the one line that says what contains a bot; and the cleanup after a referee that died.

Each is found once per process and found again after a fork (a worker process gets its own).
"""

from __future__ import annotations

import logging
import os
import shutil
from enum import Enum, StrEnum
from typing import Iterable

from .cgroups import CgroupRoot, detect_cgroups
from .uids import Registry, StaleReport


log = logging.getLogger(__name__)


BWRAP: str | None = None
"""Path of bwrap; None means look it up on PATH (and /usr/bin)."""


_registry: Registry | None = None
_cgroups: tuple[CgroupRoot | None, str] | None = None


def process_registry() -> Registry:
    """This process's run directory registry (uid leases, bot records), made anew after a fork."""
    global _registry
    if _registry is None or _registry.pid != os.getpid():
        _registry = Registry()
        if _registry.report:
            log.warning("cleaned up: %s", _registry.report)
    return _registry


def cgroup_root() -> tuple[CgroupRoot | None, str]:
    """Where this process may create bot cgroups (None if nowhere) and a note saying why."""
    global _cgroups
    if _cgroups is None:
        _cgroups = detect_cgroups()
    return _cgroups


def find_bwrap() -> str | None:
    """The bwrap binary to use: ``BWRAP`` if set (tests point it elsewhere), else the one on PATH."""
    if BWRAP is not None:
        return BWRAP if os.path.isfile(BWRAP) and os.access(BWRAP, os.X_OK) else None
    return shutil.which("bwrap") or shutil.which("bwrap", path="/usr/bin:/bin")


class RunAs(Enum):
    """Whose uid a bot runs under: a policy, not a uid."""

    PRIVATE = "private"  # a root referee leases a uid for this bot alone (uids.BOT_UID_BASE..); else the referee's
    REFEREE = "referee"  # the referee's own uid, on purpose (--trusted-bots, a benchmark's or test's own bots)


def drops_uid(run_as: RunAs) -> bool:
    """Whether ``run_as`` gives the bot a uid other than the referee's."""
    return run_as is RunAs.PRIVATE and os.geteuid() == 0


class Containment(StrEnum):
    """What holds a bot (docs/SANDBOX.md): one value, made from the user's options once
    (:func:`arena.bots.launch.containment_for`) and carried as it is through the config, a worker's
    setup and the cluster's probe. AUTO is a request only: a Launcher resolves it where the bots
    start (bubblewrap where it works, else namespaces), and a bot is never started with it."""

    AUTO = "auto"
    BUBBLEWRAP = "bubblewrap"
    NAMESPACES = "namespaces"  # a root referee without bubblewrap: a private uid and namespaces
    GVISOR = "gvisor"
    TRUSTED = "trusted"  # no wall, rlimits only (--trusted-bots: the referee's own user)


def describe_containment(containment: Containment, *, who: str, cgroup: str | None = None,
                         view: str = "host") -> str:
    """One line saying what contains a bot, e.g. "bubblewrap: uid 1900000003, no network,
    private /tmp, pid namespace, ..., cgroup v1"; ``who`` names the uid it runs as, ``view`` what
    it sees of the system (a :class:`~.filesystem.SystemView`'s value)."""
    seen = ("only a small system view (Python 3, bash, the run's system list; kept in the page cache), "
            "its own directory and the arena package visible" if view == "stranger" else
            "only the system, its own directory and the arena package visible")
    if containment is Containment.GVISOR:
        parts = ["gVisor (runsc run): " + who, "no network", "its own kernel (no host kernel counters)",
                 "private /tmp", seen]
    elif containment is Containment.BUBBLEWRAP:
        parts = ["bubblewrap: " + who, "no network", "private /tmp", "pid namespace", seen,
                 "system-call filter", "kernel-wide /proc files hidden"]
    elif containment is Containment.NAMESPACES:
        parts = ["namespaces: " + who, "no network", "private /tmp /var/tmp /dev/shm",
                 "pid namespace", seen,
                 "system-call filter", "kernel-wide /proc files hidden"]
    else:
        parts = ["no containment: " + who, "sees what that uid may read, network open"]
    if cgroup:
        parts.append(f"cgroup {cgroup}")
    return ", ".join(parts)


def cleanup_stale(dead: Iterable[int] = ()) -> StaleReport:
    """Kill what a previous referee left behind when it died without aclose()
    (kill -9, OOM, power cut of the VM but not of /run...): its bots and their
    descendants, cgroups, temp dirs and bot uids.  Referees that are still
    running (their lock is held) are left alone; those in ``dead`` (worker
    processes this one reaped) are cleared before it returns, whoever clears
    them.  Call when a tournament starts or resumes; returns what was cleaned,
    for the log."""
    registry = process_registry()
    report = registry.cleanup_stale(cgroup_root()[0], dead)
    if report:
        log.warning("cleaned up: %s", report)
    return report
