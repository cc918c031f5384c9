"""Can this machine contain bots? One probe per containment, run once per machine and cached.

Each starts ``/usr/bin/true`` (gVisor: ``sh -c :``) through the normal machinery, so its leftovers are reaped like
any bot's. A probe runs on the blocking shell (no event loop needed, so a worker process probes
too); a caller inside an event loop holds it once per process, briefly. gVisor's probe costs
seconds (runsc boots a sandbox), so a process that starts workers on its own machine hands them
its answer (:func:`gvisor_seen_working`, :func:`take_gvisor_from_parent`) instead of each probing again.

A probe that passed is noted for the machine (:func:`~.notes.passed_here`), so the next process (a
worker, a server, a command) reads the note instead of starting a probe's bot (bubblewrap: 0.06 s
of CPU and 0.3 s of wall; gVisor: 0.6 s and seconds). Only a pass is noted: a note can make a
process try a containment without probing it, never choose another. A note that is wrong (forged
in the referee's own run directory, or stale in a way its name misses) can only make every start
in that containment fail, each bot's start failure, never a bot in a weaker mode.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any, Callable

from .containment import Containment, RunAs, cgroup_root, drops_uid, find_bwrap, process_registry
from .errors import BotError, BotExited, BotStartError, SandboxUnavailable
from .gvisor import find_runsc
from .notes import code_files, passed_here
from ..limits import Limits


_bwrap_checked: dict[tuple[str, bool], str | None] = {}
_namespaces_checked: dict[bool, str | None] = {}
_gvisor_checked: dict[str, str | None] = {}


def _passed_here(question: str, binary: str | None, probe: Callable[[], str | None]) -> str | None:
    """``probe()``'s answer, or a pass this machine noted (:func:`~.notes.passed_here`) for the same
    ``question``, the same system-call filter (every contained bot's) and the same ``binary`` (the
    program the probe runs through, if any) and modules that start a bot (this folder's)."""
    from .seccomp import bpf
    try:
        filtered = hashlib.sha256(bpf()).hexdigest()
    except SandboxUnavailable:  # no filter: the probe says why
        return probe()
    return passed_here((question, filtered), [*([binary] if binary else []), *code_files(Path(__file__).parent)], probe)


def _probe(command: tuple[str, ...] = ("/usr/bin/true",), folder: Path = Path("/usr/bin"), **kw: Any):
    from .spawn import spawn_bot
    return spawn_bot(list(command), folder, limits=Limits(), extra_env=None, cgroup=False, ro_binds=(), **kw)


def _tried(what: str, wait: float, start_failed: str, exit_failed, **kw: Any) -> str | None:
    """The one probe, over a mode (``kw``: spawn's mode arguments): start ``/usr/bin/true`` as a bot;
    None if it printed nothing and exited 0, else why not. ``start_failed`` prefixes a start error;
    ``exit_failed(exc, bot)`` words a non-zero exit in the mode's own terms."""
    try:
        bot = _probe(**kw)
    except BotStartError as exc:
        return f"{start_failed}{exc}"
    with bot:
        try:
            bot.receive_line(wait)
            return f"{what} probe printed output"
        except BotExited as exc:
            return None if exc.returncode == 0 else exit_failed(exc, bot)
        except BotError as exc:
            return f"{what} probe failed: {exc}"


def namespaces_problem_now() -> str | None:
    """None if this referee can contain bots without bubblewrap (private uid, new mount,
    network, IPC and UTS namespaces, a root of its own; see namespaces.NamespaceRoot), else why not.
    Needs root; tried once with ``/usr/bin/true``."""
    if os.geteuid() != 0:
        return "needs a root referee (private uids and mount namespaces)"
    if True not in _namespaces_checked:
        _namespaces_checked[True] = _passed_here("namespaces contain a bot", None, lambda: _tried(
            "namespace", 20, "", lambda exc, bot: f"namespace probe failed: {exc}",
            containment=Containment.NAMESPACES, run_as=RunAs.PRIVATE, bwrap=None))
    return _namespaces_checked[True]


def _bwrap_exit(exc: BotExited, bot: Any) -> str:
    err = " ".join(bot.take_stderr()).strip()[:300]
    return (f"bwrap cannot create its sandbox here (exit {exc.returncode}): {err}"
            " (are unprivileged user namespaces disabled? see"
            " user.max_user_namespaces, kernel.unprivileged_userns_clone,"
            " kernel.apparmor_restrict_unprivileged_userns)")


def sandbox_problem_now(run_as: RunAs = RunAs.PRIVATE) -> str | None:
    """None if bwrap can build our sandbox here (as the bots' uid), else why not.

    Starts one sandboxed ``/usr/bin/true`` through the normal machinery (so its
    leftovers are reaped like any bot's) and caches the answer per bwrap path
    and uid mode."""
    bwrap = find_bwrap()
    if bwrap is None:
        return "bwrap not found (Debian/Ubuntu package: bubblewrap)"
    key = (bwrap, drops_uid(run_as))
    if key not in _bwrap_checked:
        _bwrap_checked[key] = _passed_here(f"bubblewrap contains a bot, dropping its uid: {key[1]}", bwrap,
                                           lambda: _tried("bwrap", 20, f"cannot run {bwrap}: ", _bwrap_exit,
                                                          containment=Containment.BUBBLEWRAP, run_as=run_as,
                                                          bwrap=bwrap))
    return _bwrap_checked[key]


def capabilities() -> dict[str, Any]:
    """What containment this machine offers, for logs and docs."""
    root, note = cgroup_root()
    return {
        "root": os.geteuid() == 0,
        "private_uids": os.geteuid() == 0,
        "cgroup": root.describe() if root else None,
        "cgroup_note": note,
        "subreaper": process_registry().subreaper,
        "bwrap": sandbox_problem_now() or "ok",
        "namespaces": namespaces_problem_now() or "ok",
        "pidfd": hasattr(os, "pidfd_open"),
    }


def _runsc_exit(exc: BotExited, bot: Any) -> str:
    err = " ".join(" ".join(bot.take_stderr()).split())[-300:]
    return f"runsc run failed (exit {exc.returncode}): {err or 'no output'}"


def gvisor_problem_now() -> str | None:
    """None if a bot can run under gVisor here (``runsc run`` on a bundle, as a private uid),
    else why not, with the tail of runsc's own error. Cached per runsc path."""
    runsc = find_runsc()
    if runsc is None:
        return "runsc not found (Debian/Ubuntu package: runsc)"
    if os.geteuid() != 0:
        return "needs a root referee (runsc run, a private uid per bot)"
    if runsc not in _gvisor_checked:
        # A gVisor seat copies its bot's folder at every start (gvisor.own_copy), and /usr/bin as the
        # folder was 313 MB copied per probe: the probe is sh, in every seat's view, from an empty folder.
        def probe() -> str | None:
            with tempfile.TemporaryDirectory(prefix="arena-gvisor-probe-", ignore_cleanup_errors=True) as empty:
                os.chmod(empty, 0o755)  # entered by the bot's private uid
                return _tried("gVisor", 60, f"cannot run {runsc}: ", _runsc_exit,
                              command=("/usr/bin/sh", "-c", ":"), folder=Path(empty),
                              containment=Containment.GVISOR, run_as=RunAs.PRIVATE, bwrap=None, runsc=runsc)
        _gvisor_checked[runsc] = _passed_here("gVisor contains a bot", runsc, probe)
    return _gvisor_checked[runsc]


def gvisor_seen_working() -> str | None:
    """The runsc this process's probe saw run a bot, for the worker processes it starts on this
    machine (never for another machine, whose runsc may not run); None if it has not probed or
    the probe failed (the workers then probe for themselves)."""
    runsc = find_runsc()
    return runsc if runsc is not None and runsc in _gvisor_checked and _gvisor_checked[runsc] is None else None


def take_gvisor_from_parent(runsc: str | None) -> None:
    """Take the parent's word (:func:`gvisor_seen_working`) that ``runsc`` runs a bot here. Only for
    the runsc this process would use: another path is probed as ever. A runsc that fails later
    still fails closed: each seat's start is refused (the bot's start failure), never a weaker mode."""
    if runsc is not None and runsc == find_runsc() and os.geteuid() == 0:
        _gvisor_checked.setdefault(runsc, None)
