"""The bubblewrap sandbox: its command line for one bot, and the pid of its in-sandbox init."""

from __future__ import annotations

import json
import os
import select
import time
from pathlib import Path
from typing import Iterable

from .filesystem import DEVICE_LINKS, DEVICES, SystemView, contained_view, hidden_proc_entries


def bwrap_argv(bwrap: str, command: list[str], cwd: Path, *, ro_binds: Iterable[Path] = (),
               tmp_bytes: int, env: dict[str, str], seccomp_fd: int, info_fd: int | None = None,
               writable_cwd: bool = False, cwd_fd: int | None = None, view: SystemView = SystemView.HOST,
               system: Iterable[str] = ()) -> list[str]:
    """The bwrap command line that runs ``command`` in a fresh sandbox.

    New user/pid/net/ipc/uts/cgroup namespaces (no network but a private
    loopback), a read-only system (/usr, /etc and the /bin, /lib... links),
    the bot's directory read-only at its real path, a private size-capped
    tmpfs /tmp used as HOME, five device nodes (no /dev/ptmx), the kernel-wide
    files of /proc covered (:func:`hidden_proc_entries`), no capabilities, no
    further user namespaces, the system-call filter read from ``seccomp_fd``,
    and SIGKILL for the bot when bwrap or the referee dies.

    ``env`` is the bot's whole environment, set by bwrap inside the sandbox
    (``--clearenv``, ``--setenv``): bwrap itself runs on the host with the
    arena's own, so nothing of a bot's manifest acts on a host process (a
    loader variable would otherwise load a bot's library into bwrap before any
    namespace exists).

    ``info_fd`` makes bwrap report the host pid of its in-sandbox init
    ("child-pid"): when the outer bwrap exits it does not wait for that
    process, which is then reparented to the referee (a subreaper) and must be
    recognised and reaped; with no private uid or cgroup nothing else links
    it to the bot.

    ``writable_cwd`` binds the directory read-write: only a contained build,
    in a copy of the bot made for it, gets that.

    ``cwd_fd`` is the bot's directory as the referee checked it
    (:func:`~arena.bots.filesystem.open_bot_dir`): bwrap binds it with
    ``--ro-bind-fd`` and refuses to start if what it mounted is not that
    directory, so a path swapped for a link after the check mounts nothing.

    ``view`` and ``system``: what it sees of the system (:func:`~arena.bots.filesystem.contained_view`).
    """
    argv = [
        bwrap, "--unshare-all", "--unshare-user", "--disable-userns",
        "--die-with-parent", "--new-session", "--cap-drop", "ALL",
    ]
    links, shown, own = contained_view(cwd, ro_binds, view, system)
    for target, link in links:
        argv += ["--symlink", target, link]
    for p in shown:
        argv += ["--ro-bind", p, p]
    argv += ["--proc", "/proc"]
    files, dirs = hidden_proc_entries()
    for p in files:
        argv += ["--ro-bind", "/dev/null", p]
    for p in dirs:
        argv += ["--size", "4096", "--tmpfs", p, "--remount-ro", p]
    argv += ["--size", "65536", "--tmpfs", "/dev"]
    for dev in DEVICES:
        argv += ["--dev-bind-try", dev, dev]
    for target, link in DEVICE_LINKS:
        argv += ["--symlink", target, link]
    argv += ["--size", str(tmp_bytes), "--tmpfs", "/dev/shm", "--remount-ro", "/dev",
             "--size", str(tmp_bytes), "--tmpfs", "/tmp", "--symlink", "/tmp", "/var/tmp"]
    for p in own:
        if p == str(cwd) and cwd_fd is not None:
            argv += ["--bind-fd" if writable_cwd else "--ro-bind-fd", str(cwd_fd), p]
        else:
            argv += ["--bind" if writable_cwd and p == str(cwd) else "--ro-bind", p, p]
    if info_fd is not None:
        argv += ["--info-fd", str(info_fd)]
    argv += ["--clearenv"]
    for key, value in env.items():
        argv += ["--setenv", key, value]
    argv += ["--seccomp", str(seccomp_fd), "--remount-ro", "/", "--chdir", str(cwd), "--", *command]
    return argv


def args_fd(argv: list[str]) -> tuple[list[str], int]:
    """``argv`` with its options moved into a file descriptor (``bwrap --args FD``): the bot's
    environment then appears on no host command line (its command still does). Returns the
    short command line and the descriptor, which the caller passes to bwrap and closes."""
    split = argv.index("--")  # bwrap takes options from the descriptor, the command from argv
    fd = os.memfd_create("arena-bwrap-args", os.MFD_CLOEXEC)
    try:
        os.write(fd, b"".join(a.encode() + b"\0" for a in argv[1:split]))
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError:
        os.close(fd)
        raise
    return [argv[0], "--args", str(fd), *argv[split:]], fd


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
