"""Starting a bot: :func:`start_bot`, which refuses a containment that does not work here
before it forks."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from .containment import Containment, RunAs, find_bwrap
from .gvisor import find_runsc
from .errors import SandboxUnavailable
from .filesystem import SystemView
from ..limits import Limits
from .blocking import BlockingBot
from .probes import gvisor_problem_now, sandbox_problem_now
from .spawn import spawn_bot


def start_bot(command: Sequence[str], cwd: Path | str, *, limits: Limits = Limits(),
                       containment: Containment = Containment.TRUSTED,
                       extra_env: dict[str, str] | None = None, run_as: RunAs = RunAs.PRIVATE,
                       cgroup: bool | None = None, ro_binds: Sequence[Path | str] = (),
                       writable_cwd: bool = False, view: SystemView = SystemView.HOST,
                       system: Sequence[str] = (), files_hash: str = "",
                       files_root: Path | str | None = None) -> BlockingBot:
    """Start a bot and return it (use ``with start_bot(...) as bot``).

    command: argv; command[0] is looked up on the bot's PATH
        (/usr/local/bin:/usr/bin:/bin unless extra_env sets PATH) or relative
        to ``cwd`` if it contains a slash.
    cwd: the bot's directory; must be readable by the bot's uid.
    containment: the wall around the bot, a :class:`~.containment.Containment` (AUTO is
        refused: a Launcher resolves it). BUBBLEWRAP: no network, read-only system,
        only ``cwd`` and ``ro_binds`` visible, private /tmp; SandboxUnavailable if bwrap
        is missing or cannot create namespaces here. NAMESPACES, for a root referee
        without bubblewrap: new mount, network, IPC and UTS namespaces and a root of its
        own with the same view (namespaces.NamespaceRoot); needs a private uid. GVISOR:
        ``runsc run`` on a bundle written for the bot (see :mod:`.gvisor`);
        SandboxUnavailable, with runsc's reason, where it cannot run. TRUSTED: no wall,
        rlimits (and cgroups) only, under the uid ``run_as`` says.
    extra_env: added to the minimal environment (PATH, HOME, TMPDIR, LANG).
    run_as: RunAs.PRIVATE = when the referee is root, a private uid from
        uids.BOT_UID_BASE.. leased for this bot alone (so it cannot read
        root-only files nor touch other bots, and RLIMIT_NPROC is its own);
        RunAs.REFEREE = keep the referee's uid.
    cgroup: None = use a per-bot cgroup when one can be created; True =
        require it (BotStartError otherwise); False = rlimits only.
    ro_binds: extra read-only paths visible in the sandbox (e.g. a JDK in /opt).
    writable_cwd: ``cwd`` is writable and, under a private uid, handed to that uid
        first: for a contained build, in a copy of the bot made for it (see
        launch.Launcher.build), never for a bot that plays.
    view: what a BUBBLEWRAP or NAMESPACES bot sees of the system (filesystem.SystemView): the
        host's /usr and /etc, or the stranger view a GVISOR bot always gets, its files warmed in
        the page cache before the start.
    system: extra system paths the stranger view holds, with their libraries (checked by
        filesystem.system_paths: a ladder's or a tournament's ``system`` list).
    files_hash: for GVISOR, what the seat's own copy of ``cwd`` must hash to (the run's reading of
        the bot, ``BotSpec.files_hash``); a copy that does not is the bot's refusal. "": not compared.
    files_root: the folder ``files_hash`` is of, where it is not ``cwd`` but a folder above it (the
        bot's root, its command running in a folder below): the seat's copy is then of that root,
        compared whole, and ``cwd``'s folder in it is served.

    The fork happens on a dedicated thread (see spawn._SpawnThread for why); the
    pipes are waited on with ``poll`` and the exit through a pidfd, by this thread's
    :class:`~arena.bots.blocking.Hub`.
    """
    bwrap = runsc = None  # a containment that is no Containment, or AUTO, is refused by the spawn
    if containment is Containment.BUBBLEWRAP:
        problem = sandbox_problem_now(run_as)
        if problem:
            raise SandboxUnavailable(problem)
        bwrap = find_bwrap()
    if containment is Containment.GVISOR:
        problem = gvisor_problem_now()
        if problem:
            raise SandboxUnavailable(f"gVisor cannot run here: {problem}")
        runsc = find_runsc()
    return spawn_bot(list(command), cwd, limits=limits, containment=containment,
                              extra_env=extra_env, run_as=run_as, cgroup=cgroup, ro_binds=ro_binds,
                              bwrap=bwrap, runsc=runsc, writable_cwd=writable_cwd,
                              view=view, system=tuple(system), files_hash=files_hash, files_root=files_root)
