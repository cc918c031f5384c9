"""Forking a bot: its environment, uid, rlimits, cgroup and containment, from one long-lived thread.

:func:`spawn_bot` does the work for :func:`arena.bots.start.start_bot` and for
the probes that check a containment works here (:mod:`.probes`).
"""

from __future__ import annotations

import errno
import os
import queue
import resource
import secrets
import shutil
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any, Callable, Generator, Sequence

from .blocking import BlockingBot
from .bwrap import args_fd, bwrap_argv, read_bwrap_info
from .cgroups import BotCgroup
from .containment import Containment, RunAs, cgroup_root, describe_containment, drops_uid, process_registry
from .errors import BotCommandError, BotStartError, StartErrorKind
from .filesystem import (BOT_PATH, STRANGER_SYSTEM, MissingSystemPath, SystemView, SystemViewError, open_bot_dir,
                         sandbox_visible, stranger_system, unsuitable_sandbox_dir)
from ..limits import Limits, MiB
from .namespaces import NamespaceRoot
from .process import ENV_TOKEN
from . import gvisor as gvisor_mod
from . import pagecache, seccomp
from .procs import children_of, drop_to, read_proc, scan_procs, stand_in
from .uids import UidLease, chown_tree, inaccessible_reason


DEFAULT_PATH = BOT_PATH
BASE_ENV = {"PATH": DEFAULT_PATH, "LANG": "C.UTF-8"}  # all of the environment a bot gets from us, its token aside
HOST_ENV = {"PATH": DEFAULT_PATH, "LANG": "C.UTF-8"}
"""The whole environment of every process the arena runs on the host for a bot (bwrap, the
interpreter checks): fixed, the arena's own, never the referee's nor the bot's (a bot's
``[env]`` is applied inside its sandbox only; see bwrap.bwrap_argv)."""


_spawner: _SpawnThread | None = None


class _SpawnThread:
    """Forks every bot from one long-lived daemon thread.

    PR_SET_PDEATHSIG fires when the *thread* that forked the child exits, so
    the fork must come from a thread that lives as long as the referee: a
    thread pool's worker threads (trio's retire after 10 s idle) would take
    their bots with them (verified on this machine).
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

    def run_blocking(self, fn):
        """Run ``fn`` (the fork) on this thread and wait here for its result."""
        box: list = []
        done = threading.Event()

        def deliver(result) -> None:
            box.append(result)
            done.set()

        self._jobs.put((fn, deliver))
        done.wait()
        value, exc = box[0]
        if exc is not None:
            raise exc
        return value


def _get_spawner() -> _SpawnThread:
    global _spawner
    if _spawner is None or _spawner.pid != os.getpid():
        _spawner = _SpawnThread()
    return _spawner


def _child_setup(uid: int | None, join_fds: list[int], rlimits: list[tuple[int, int, int]],
                 nsroot: NamespaceRoot | None = None, filter: seccomp.Installer | None = None,
                 gvisor_bind: tuple[int, Path, tuple[tuple[bytes, int], ...], bytes | None] | None = None):
    """preexec_fn: runs in the forked child, before exec, in this order:
    join the cgroup (needs root); with ``gvisor_bind`` (the checked folder's descriptor, the
    bot's state directory and the shared paths to bind read-only), give runsc a mount namespace with that folder bound in it; with ``nsroot``, unshare a pid namespace and
    fork: the child stays behind as the bot's stand-in (:func:`~.procs.stand_in`) and
    the grandchild, pid 1 of the new namespace, goes on to enter the other
    namespaces and the root of ``nsroot`` (needs root); drop to the bot uid, forbid privilege gain,
    ask for SIGKILL when the referee thread dies (after the uid change, which
    would reset it), bail out if the referee already died, set rlimits
    (RLIMIT_AS last: the child is still a copy of the big referee), and last
    install the system-call filter (it refuses mount and unshare, and needs
    no_new_privs); a filter that will not install stops the start.
    Only async-signal-safe-ish calls: no imports, no locks, no logging."""
    referee = os.getpid()

    def setup() -> None:
        for fd in join_fds:
            os.write(fd, b"0")
        parent = referee
        if gvisor_bind is not None:  # runsc's mount namespace, with the checked folder bound in it
            gvisor_mod.bind_checked(*gvisor_bind)
        if nsroot is not None:
            nsroot.new_pid_namespace()
            child = os.fork()
            if child:
                stand_in(child, uid, referee)  # never returns
            parent = 0  # the stand-in lives outside this pid namespace
            nsroot.enter()
        drop_to(uid)
        if os.getppid() != parent:
            os._exit(111)
        for res, soft, hard in rlimits:
            resource.setrlimit(res, (soft, hard))
        if filter is not None:
            err = filter.install()
            if err:
                raise OSError(err, "cannot install the system-call filter")

    return setup


def _clamp_to_hard(res: int, soft: int, hard: int) -> tuple[int, int, int]:
    """A process without CAP_SYS_RESOURCE cannot raise a hard limit: stay within ours."""
    ours = resource.getrlimit(res)[1]
    if ours == resource.RLIM_INFINITY:
        return res, soft, hard
    return res, min(soft, ours), min(hard, ours)


def resolve_command(exe: str, cwd: Path, path: str) -> Path | None:
    """The file ``exe`` names: relative to ``cwd`` if it has a slash, else found on ``path``."""
    if "/" in exe:
        p = cwd / exe
        return p if p.is_file() else None
    found = shutil.which(exe, path=path)
    return Path(found) if found else None


# exec of the bot's own program failing on the program itself (missing, not runnable, not a
# program): the bot's fault; anything else a failed start raises (no memory, no processes) is ours
BOT_FILE_ERRNOS = frozenset({errno.ENOENT, errno.EACCES, errno.ENOEXEC, errno.ENOTDIR, errno.ELOOP,
                             errno.EISDIR, errno.ETXTBSY, errno.ENAMETOOLONG})


def spawn_bot(command: list[str], cwd: Path | str, **kw: Any) -> BlockingBot:
    """:func:`~arena.bots.start.start_bot` once its containment was checked (``bwrap``
    found): every argument explicit (see :func:`_spawn`); the fork runs on the spawner thread and
    is waited for here."""
    steps = _spawn(command, cwd, **kw)
    fork = next(steps)
    try:
        forked = _get_spawner().run_blocking(fork)
    except BaseException as exc:
        return _finish(steps, exc, None)
    return _finish(steps, None, forked)


def _finish(steps: Generator[Any, Any, BlockingBot], exc: BaseException | None, forked: Any) -> BlockingBot:
    """Hand the fork's outcome back to :func:`_spawn` and return the bot it builds."""
    try:
        if exc is not None:
            steps.throw(exc)
        else:
            steps.send(forked)
    except StopIteration as stop:
        return stop.value
    raise RuntimeError("spawn steps did not finish")


def _own_copy(cwd: Path, cwd_fd: int, home: Path, files_hash: str, files_root: Path | str | None) -> Path | None:
    """A gVisor seat's own copy of its folder (:func:`.gvisor.own_copy`), compared with ``files_hash``:
    of ``cwd`` itself, or, where the bot's command runs in a folder below its root (``files_root``,
    the folder the hash is of), of that whole root, the folder below then served from the copy."""
    below = os.path.relpath(cwd, os.path.abspath(files_root)) if files_root is not None else "."
    if below == ".":
        return gvisor_mod.own_copy(cwd_fd, home, files_hash)
    if below.startswith(".."):
        raise BotStartError(f"bot directory {cwd} is not inside the folder its files hash is of ({files_root})")
    try:
        root_fd = open_bot_dir(Path(os.path.abspath(files_root)))
    except OSError as exc:
        raise BotCommandError(f"bot directory {files_root} cannot be reached without following a link "
                              f"({exc.strerror})") from None
    try:
        return gvisor_mod.own_copy(root_fd, home, files_hash, below)
    finally:
        os.close(root_fd)


between_check_and_mount: Callable[[Path], None] | None = None
"""A test's hook, called with the bot's directory after every check and before the fork that
mounts it: where an author racing the start would swap the directory for a link."""


def _spawn(command: list[str], cwd: Path | str, *, limits: Limits, containment: Containment,
           extra_env: dict[str, str] | None, run_as: RunAs,
           cgroup: bool | None, ro_binds: Sequence[Path | str],
           bwrap: str | None, writable_cwd: bool = False, runsc: str | None = None,
           view: SystemView = SystemView.HOST, system: Sequence[str] = (),
           files_hash: str = "", files_root: Path | str | None = None) -> Generator[Any, Any, BlockingBot]:
    """Every step of starting a bot but waiting for the fork: a generator that yields the fork (a
    callable for the spawner thread), is sent its result, and returns the bot (a :class:`~.blocking.BlockingBot`), so
    the fork itself runs where a thread that outlives the bot can own it.
    If anything fails, whatever was allocated is released. ``bwrap`` and ``runsc`` are the
    programs BUBBLEWRAP and GVISOR run, found (and their containment probed) by the caller."""
    if not isinstance(containment, Containment) or containment is Containment.AUTO:
        raise BotStartError(f"containment must be a Containment other than AUTO, not {containment!r}")
    sandbox, namespaces = containment is Containment.BUBBLEWRAP, containment is Containment.NAMESPACES
    gvisor = runsc if containment is Containment.GVISOR else None
    if (sandbox and not bwrap) or (containment is Containment.GVISOR and not runsc):
        raise BotStartError(f"{containment} containment without its program (bwrap or runsc) found")
    command = [str(c) for c in command]
    if not command:
        raise BotCommandError("empty command")
    cwd = Path(os.path.abspath(cwd))  # never resolved: a folder swapped for a link is refused below, not followed
    if not cwd.is_dir():
        raise BotCommandError(f"bot directory {cwd} does not exist")
    registry = process_registry()
    root = os.geteuid() == 0

    cg_root = None
    if cgroup is not False:
        cg_root, note = cgroup_root()
        if cg_root is None and cgroup:
            raise BotStartError(f"cgroups required but unavailable: {note}")

    if not isinstance(run_as, RunAs):  # fail closed: no other value may mean "the referee's uid"
        raise BotStartError(f"run_as must be a RunAs, not {run_as!r}")
    if namespaces and not drops_uid(run_as):
        raise BotStartError("namespace containment needs a root referee and a private bot uid (RunAs.PRIVATE)")

    if gvisor and not drops_uid(run_as):
        raise BotStartError("gVisor containment needs a root referee and a private bot uid (RunAs.PRIVATE)")
    contained = sandbox or namespaces or bool(gvisor)
    if not isinstance(view, SystemView):  # fail closed: no other value may mean the host's system
        raise BotStartError(f"view must be a SystemView, not {view!r}")
    if view is SystemView.STRANGER and not contained:
        raise BotStartError("the stranger view is for a contained bot")
    seen = SystemView.HOST if gvisor else view  # a gVisor bundle holds the stranger view, checked there
    if contained:
        seccomp.bpf()  # fail closed, before anything is allocated: no filter, no bot
    shown: list[str] = []
    if seen is SystemView.STRANGER:
        try:
            shown = list(stranger_system((*STRANGER_SYSTEM, *system))[1])
        except (MissingSystemPath, SystemViewError) as e:
            raise BotStartError(f"a stranger's seat cannot start: {e}") from None
    token = secrets.token_hex(8)
    name = registry.next_name()
    env = {**BASE_ENV, **(extra_env or {}), ENV_TOKEN: token}
    exe = resolve_command(command[0], cwd, env["PATH"])
    if exe is None:
        raise BotCommandError(f"command not found: {command[0]!r} (PATH={env['PATH']}, cwd={cwd})")
    if contained:
        why = unsuitable_sandbox_dir(cwd)
        if why:
            raise BotCommandError(f"bot directory {cwd} {why}")
        if not sandbox_visible(exe, cwd, map(Path, ro_binds), seen, system):
            if seen is SystemView.STRANGER:
                raise BotCommandError(f"{command[0]} is not in a stranger's seat's system view (Python 3 and bash, "
                                      f"and the run's system list: {', '.join(system) or 'empty'}); name its "
                                      "language in the ladder's or tournament's system list (docs/SANDBOX.md)")
            raise BotCommandError(f"{exe} is not visible inside the sandbox; add it to ro_binds")
        script = next((a for a in command[1:] if not a.startswith("-")), None)
        if script is not None:  # the program's script (python3 /elsewhere/adapter.py): the interpreter
            try:               # would only say "can't open file"; later arguments are the bot's own business
                path = Path(cwd, script)
                named = path.is_file()
            except (OSError, ValueError):  # not a file name (python3 -c CODE): nothing to check
                named = False
            if named and not sandbox_visible(path, cwd, map(Path, ro_binds), seen, system):
                raise BotCommandError(f"the command names {script}, which the contained bot cannot see: it sees only "
                                      f"the system and its own directory ({cwd}); copy the file into the bot's "
                                      "directory and name it relative to it")

    lease: UidLease | None = None
    home: Path | None = None
    cg: BotCgroup | None = None
    popen: subprocess.Popen | None = None
    fds: list[int] = []  # our ends of the pipes, owned by the bot once it exists
    parent_fds: list[int] = []  # the child's ends (and cgroup fds): closed once it has them
    try:
        uid: int | None = None
        if drops_uid(run_as):
            lease = registry.lease_uid()
            lease.contained = (sandbox or namespaces) and not writable_cwd
            uid = lease.uid
        cwd_fd = -1
        if contained:  # the directory checked below is the one mounted, whatever the path names later
            try:
                cwd_fd = open_bot_dir(cwd)
            except OSError as exc:
                raise BotCommandError(f"bot directory {cwd} cannot be reached without following a link "
                                      f"({exc.strerror})") from None
            parent_fds.append(cwd_fd)
        if uid is not None and writable_cwd:
            chown_tree(cwd, uid)
        if uid is not None:
            for path, need in ((exe, os.X_OK), (cwd, os.R_OK | os.X_OK)):
                why = inaccessible_reason(path, uid, uid, need)
                if why:
                    raise BotStartError(f"bot uid {uid} cannot use {path}: {why}", StartErrorKind.UID_DENIED)
        if contained:
            held, now = os.fstat(cwd_fd), os.stat(cwd)
            if (held.st_dev, held.st_ino) != (now.st_dev, now.st_ino):
                raise BotCommandError(f"bot directory {cwd} was replaced while the bot was started")
        if contained:  # a private tmpfs, new at every start
            env["HOME"] = env["TMPDIR"] = "/tmp"
        if gvisor:  # the bundle and runsc's state: the referee's alone, removed with the bot
            home = registry.temp_dir(f"palace-arena-home-{name}-gvisor-")
        elif not contained:
            home = registry.temp_dir(f"palace-arena-home-{name}-")
            if uid is not None:
                os.chown(home, uid, uid)
            env.setdefault("HOME", str(home))
            env.setdefault("TMPDIR", str(home))

        extra_procs = (2 if sandbox else 1 if namespaces else  # bwrap and its pid-1 monitor; the stand-in
                       gvisor_mod.host_threads(system, ro_binds) if gvisor else 0)  # runsc's own threads
        if cg_root is not None:
            try:
                cg = BotCgroup(cg_root, name, memory_bytes=limits.memory_mb * MiB,
                                  max_pids=limits.max_processes + extra_procs)
            except OSError as exc:
                raise BotStartError(f"cannot create the bot's cgroup: {exc}") from exc
        if lease is not None:
            nproc = limits.max_processes + extra_procs
        elif (cg is not None and cg.has_pids) or root:
            nproc = None  # shared uid: the count would include unrelated processes
        else:  # unprivileged, no cgroup: cap the uid's total a bit above today's
            mine = sum(1 for i in scan_procs().values() if i.uid == os.geteuid())
            nproc = mine + limits.max_processes + extra_procs
        rlimits = limits.rlimits(nproc=nproc, memory_cgroup=cg is not None and cg.has_memory)
        # within ours even as root: raising a hard limit needs CAP_SYS_RESOURCE, which a container's
        # root often lacks, and a limit the arena cannot set would fail every start
        rlimits = [_clamp_to_hard(*rl) for rl in rlimits]
        if gvisor:  # the limits go inside gVisor, in the bundle; runsc itself needs room
            rlimits = []

        argv = [str(exe), *command[1:]]
        info_r = info_w = -1
        popen_env = env  # namespaces and trusted modes: applied by the exec of the bot's own program
        pass_fds: tuple[int, ...] = ()
        shared: tuple[tuple[bytes, int], ...] = ()  # gVisor: the paths every seat sees, bound read-only for runsc
        own: Path | None = None  # gVisor: the seat's own copy of its folder (gvisor.own_copy)
        if sandbox:
            info_r, info_w = os.pipe2(os.O_CLOEXEC)
            parent_fds += [info_r, info_w]
            filter_fd = seccomp.memfd()
            parent_fds.append(filter_fd)
            pass_fds = (info_w, filter_fd, cwd_fd)
            argv = bwrap_argv(bwrap, argv, cwd, ro_binds=[Path(p) for p in ro_binds],
                                 tmp_bytes=limits.memory_mb * MiB, env=env, seccomp_fd=filter_fd,
                                 info_fd=info_w, writable_cwd=writable_cwd, cwd_fd=cwd_fd, view=seen,
                                 system=system)
            argv, arguments = args_fd(argv)  # the bot's environment on no host command line
            parent_fds.append(arguments)
            pass_fds += (arguments,)
            popen_env = {**HOST_ENV, ENV_TOKEN: token}  # bwrap runs on the host: the arena's environment
        if gvisor:
            assert home is not None and uid is not None
            bundle = gvisor_mod.write_bundle(home, argv, cwd, uid=uid, env=env, limits=limits,
                                             ro_binds=[Path(p) for p in ro_binds], writable_cwd=writable_cwd,
                                             system=tuple(system))
            # (a build writes its folder)
            own = None if writable_cwd else _own_copy(cwd, cwd_fd, home, files_hash, files_root)
            shared = gvisor_mod.shared_binds(bundle, own)
            argv = gvisor_mod.runsc_argv(gvisor, home / "state", bundle, name)
            popen_env = dict(HOST_ENV)
        nsroot = None
        installer = seccomp.Installer() if namespaces else None
        if namespaces:
            mountpoint = registry.dir / "nsroot"
            mountpoint.mkdir(mode=0o700, exist_ok=True)
            nsroot = NamespaceRoot.plan(mountpoint, cwd, [Path(p) for p in ro_binds], uid,
                                           limits.memory_mb * MiB, writable_cwd=writable_cwd, cwd_fd=cwd_fd,
                                           view=seen, extra_system=system)
        if shown:  # as gvisor.write_bundle does: no cold page in what the seats share (docs/SANDBOX.md)
            pagecache.warm([*shown, *map(str, ro_binds)])
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
                argv, stdin=in_r, stdout=out_w, stderr=err_w, cwd=home if gvisor else cwd, env=popen_env,
                close_fds=True, start_new_session=True, restore_signals=True, pass_fds=pass_fds,
                preexec_fn=_child_setup(None if gvisor else uid, join_fds, rlimits, nsroot, installer,
                                        (cwd_fd, home, shared, bytes(own) if own else None)
                                        if gvisor and home is not None else None),
            )
            if not sandbox:
                return child, {}
            os.close(info_w)  # our copy: EOF on info_r once bwrap closes its own
            parent_fds.remove(info_w)
            return child, read_bwrap_info(info_r)

        if between_check_and_mount is not None:
            between_check_and_mount(cwd)
        try:
            popen, bwrap_info = yield spawn
        except (OSError, subprocess.SubprocessError) as exc:
            if not sandbox and isinstance(exc, OSError) and exc.errno in BOT_FILE_ERRNOS:
                raise BotCommandError(f"cannot start {command!r}: {exc}") from exc  # its program, run directly
            detail = (" (entering the namespaces, dropping to the bot's uid or installing the "
                      "system-call filter failed)" if isinstance(exc, subprocess.SubprocessError) and contained else "")
            raise BotStartError(f"cannot start {command!r}: {exc}{detail}") from exc
        finally:
            while parent_fds:
                os.close(parent_fds.pop())
        info = read_proc(popen.pid)
        start = info.start if info else 0
        sandbox_init = read_proc(bwrap_info.get("child-pid", 0) or 0)
        # Every process started for the bot, on disk: the one we forked and, contained, the one it
        # forked (bwrap's init, pid 1 of the sandbox; the bot itself under namespaces). Should this
        # process die, they are orphaned to its parent, and only the record names them there.
        helpers = children_of(popen.pid) if contained else {}
        registry.write_record(name, {
            "procs": [[popen.pid, start], *map(list, helpers.items())],
            "pid": popen.pid, "start": start,  # what arena versions before "procs" read
            "uid": uid, "uid_exclusive": lease is not None,
            "token": f"{ENV_TOKEN}={token}", "home": str(home) if home else None,
            "cgroups": [str(d) for d in cg.dirs.values()] if cg else [],
            "command": command,
        })
        bot = BlockingBot(
            popen=popen, fds=(in_w, out_r, err_r), name=name, command=command, limits=limits,
            cgroup=cg, uid=uid, uid_lease=lease, home=home, sandboxed=sandbox, token=token,
            start=start, registry=registry,
            containment=describe_containment(containment, who=_who(uid), cgroup=cg.root.kind if cg else None,
                                             view=SystemView.STRANGER if gvisor else seen),
        )
        bot._attribution.extra.update(helpers)
        bot.status_carries_signal = sandbox or bool(gvisor)
        bot.scan_all = bool(gvisor)  # runsc, its sandbox and gofer run as root, not as the bot's uid
        if sandbox_init is not None and sandbox_init.ppid == popen.pid:
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


def _who(uid: int | None) -> str:
    return f"the referee's uid {os.geteuid()}" if uid is None else f"uid {uid}"
