"""The system-call filter every contained bot process runs under, built with libseccomp (``pyseccomp``).

An allow-list, as Docker's default profile is: :data:`ALLOWED` names what the starter bots in
every language, their builds and their runtimes call (traced with strace), with argument rules
where a call's other uses are a channel between the seats of a table or a way out of containment
(sockets, clone flags, fcntl, ioctl, futex). Everything else fails with an errno and never a kill
(a bot that tries gets an error it can handle): ``EPERM`` for a call this machine's libseccomp
knows, ``ENOSYS`` for a number past the newest call listed, so a runtime built for a newer kernel
falls back as it would on an older one (runc's rule). Calls of another ABI (``int 0x80``, x32) are
refused entirely. Why each group is in or out: docs/SANDBOX.md. There is no way to run a contained
bot without it: when the filter cannot be built, :func:`bpf` raises and the bot does not start
(fail closed). The upload worker (serve/unpacker.py) runs under the same list without
:data:`WORKER_REFUSED`: it reads an archive in one thread with the limits it was given, and code a
hostile archive ran in it must neither fork the server's machine full nor raise those limits.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import tempfile

from .errors import SandboxUnavailable


class FilterUnavailable(SandboxUnavailable):
    """The system-call filter cannot be built or installed here: no contained bot may start."""


ALLOWED = (
    # files and directories (the bot's own and the read-only system)
    "read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev", "open", "openat",
    "openat2", "close", "close_range", "creat", "lseek", "stat", "fstat", "lstat", "newfstatat",
    "statx", "statfs", "fstatfs", "access", "faccessat", "faccessat2", "readlink", "readlinkat",
    "getdents", "getdents64", "getcwd", "chdir", "fchdir", "mkdir", "mkdirat", "rmdir", "unlink",
    "unlinkat", "rename", "renameat", "renameat2", "link", "linkat", "symlink", "symlinkat",
    "chmod", "fchmod", "fchmodat", "fchmodat2", "fchown", "chown", "lchown", "fchownat", "umask", "truncate",
    "ftruncate", "fsync", "fdatasync", "sync_file_range", "fallocate", "utime", "utimes",
    "utimensat", "futimesat", "dup", "dup2", "dup3", "pipe", "pipe2", "sendfile", "splice", "tee",
    "copy_file_range", "getxattr", "lgetxattr", "fgetxattr", "listxattr", "llistxattr", "flistxattr",
    # waiting for input
    "select", "pselect6", "poll", "ppoll", "epoll_create", "epoll_create1", "epoll_ctl", "epoll_wait",
    "epoll_pwait", "epoll_pwait2", "eventfd", "eventfd2", "timerfd_create", "timerfd_settime",
    "timerfd_gettime", "signalfd", "signalfd4",
    # memory
    "brk", "mmap", "munmap", "mremap", "mprotect", "msync", "mlock", "mlock2", "munlock", "mlockall",
    "munlockall", "pkey_alloc", "pkey_free", "pkey_mprotect", "membarrier", "get_mempolicy",
    # processes and threads (in the bot's own pid namespace)
    "execve", "execveat", "fork", "vfork", "exit", "exit_group", "wait4", "waitid", "kill", "tkill",
    "tgkill", "getpid", "getppid", "gettid", "getpgrp", "getpgid", "setpgid", "getsid",
    "set_tid_address", "set_robust_list", "get_robust_list", "rseq", "arch_prctl", "prctl",
    "seccomp", "capget", "getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid",
    "getgroups", "getrlimit", "setrlimit", "prlimit64", "getrusage", "times", "getpriority",
    "setpriority", "sched_yield", "sched_getaffinity", "sched_getparam", "sched_getscheduler",
    "sched_get_priority_max", "sched_get_priority_min", "sched_rr_get_interval", "sched_getattr",
    "uname", "getrandom", "getcpu", "restart_syscall", "sigaltstack", "rt_sigaction", "rt_sigprocmask",
    "rt_sigreturn", "rt_sigpending", "rt_sigsuspend", "rt_sigtimedwait", "rt_sigqueueinfo",
    "rt_tgsigqueueinfo", "pause", "alarm", "getitimer", "setitimer", "timer_create",
    "timer_settime", "timer_gettime", "timer_getoverrun", "timer_delete",
    # System V and POSIX IPC: each bot has an IPC namespace of its own
    "shmget", "shmat", "shmdt", "shmctl", "semget", "semop", "semtimedop", "semctl", "msgget", "msgsnd",
    "msgrcv", "msgctl", "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify",
    "mq_getsetattr",
    # time
    "clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "time",
    # UNIX sockets only (the socket rules below): what a bot uses between its own processes
    "connect", "accept", "accept4", "bind", "listen", "shutdown", "sendto", "recvfrom", "sendmsg",
    "recvmsg", "sendmmsg", "recvmmsg", "getsockname", "getpeername", "getsockopt", "setsockopt",
)
"""Calls a bot may make with any arguments."""

WORKER_REFUSED = ("fork", "vfork", "clone", "setrlimit", "prlimit64")
"""Left out of the upload worker's filter (``bpf(worker=True)``), so each fails with EPERM: the calls
that make a process or a thread (``clone3`` is answered ENOSYS whatever, so the C library falls back
to ``clone``; a thread is a task too, a pid and a kernel stack that no memory limit counts), and the
calls that set rlimits (its memory and file size are rlimits, soft and hard alike; a root worker
with ``CAP_SYS_RESOURCE`` could raise them, and reading an archive sets none). ``prlimit64`` stays
allowed without a new limit (its third argument NULL): that is how the C library's ``getrlimit``
reads one."""

NEWER = {"fchmodat2": 452, "faccessat2": 439, "close_range": 436, "openat2": 437, "epoll_pwait2": 441, "clone3": 435,
         "futex_waitv": 449, "futex_wake": 454, "futex_wait": 455, "futex_requeue": 456}
"""Numbers of calls newer than some libseccomp releases know (the same on every architecture from 424 on)."""

AF_UNIX = 1
CLONE_FORBIDDEN = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x00001000
"""CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET, and CLONE_PIDFD: a clone with any is refused."""
FCNTL_ALLOWED = (0, 1, 2, 3, 4, 1030, 1031, 1032)
"""F_DUPFD, F_GETFD, F_SETFD, F_GETFL, F_SETFL, F_DUPFD_CLOEXEC, F_SETPIPE_SZ, F_GETPIPE_SZ: no locks,
leases or directory notifications (a lock on a file both seats can open is a channel without a write)."""
IOCTL_ALLOWED = (0x5401, 0x540F, 0x5413, 0x541B, 0x5421, 0x5450, 0x5451)
"""TCGETS (isatty), TIOCGPGRP, TIOCGWINSZ, FIONREAD, FIONBIO, FIONCLEX, FIOCLEX."""
FUTEX_CMD = 0x7F | 128
"""The futex command and FUTEX_PRIVATE_FLAG (128), without FUTEX_CLOCK_REALTIME."""
FUTEX_SHARED_WAITS = (0, 9, 11)
"""FUTEX_WAIT, FUTEX_WAIT_BITSET, FUTEX_WAIT_REQUEUE_PI without the private flag: answered EAGAIN."""
FUTEX_SHARED_OTHERS = (1, 4, 5, 7, 10)
"""FUTEX_WAKE, CMP_REQUEUE, WAKE_OP, UNLOCK_PI, WAKE_BITSET: allowed shared (nobody can wait to be woken)."""
RWF_NOWAIT = 0x8
MADV_COLD, MADV_PAGEOUT = 20, 21
MAX_NR = 1024
"""Past this no architecture numbers a call (x86-64's x32 calls are above, and refused as another ABI)."""


def _rules(sc, worker: bool) -> list[tuple[int, str | int, tuple]]:
    """(action, syscall, argument conditions) for every allowed call and every non-default answer;
    ``worker``: the upload worker's (:data:`WORKER_REFUSED`)."""
    allow = sc.ALLOW
    rules: list[tuple[int, str | int, tuple]] = [(allow, name, ()) for name in ALLOWED
                                                 if not (worker and name in WORKER_REFUSED)]
    rules += [(allow, name, (sc.Arg(0, sc.EQ, AF_UNIX),)) for name in ("socket", "socketpair")]
    if worker:
        rules.append((allow, "prlimit64", (sc.Arg(2, sc.EQ, 0),)))  # reads a limit, sets none
    else:
        rules.append((allow, "clone", (sc.Arg(0, sc.MASKED_EQ, CLONE_FORBIDDEN, 0),)))
    # clone3 passes its flags in memory, out of a filter's reach: ENOSYS makes the C library use clone
    rules.append((sc.ERRNO(errno.ENOSYS), "clone3", ()))
    # flock on a file both seats can open is a channel: refused, but as a file system without locks
    # answers (ENOSYS), which build tools handle by going on unlocked (cargo stops on EPERM)
    rules.append((sc.ERRNO(errno.ENOSYS), "flock", ()))
    rules += [(allow, "fcntl", (sc.Arg(1, sc.EQ, cmd),)) for cmd in FCNTL_ALLOWED]
    rules += [(allow, "ioctl", (sc.Arg(1, sc.EQ, cmd),)) for cmd in IOCTL_ALLOWED]
    for name in ("preadv2", "pwritev2"):  # RWF_NOWAIT says whether a page is cached, without reading it
        rules.append((allow, name, (sc.Arg(5, sc.MASKED_EQ, RWF_NOWAIT, 0),)))
    for advice in (MADV_COLD, MADV_PAGEOUT):  # evicting shared pages from the cache
        rules.append((allow, "madvise", (sc.Arg(2, sc.NE, advice),)))
    # A shared futex on a page of a file every seat maps (a system library, /etc/...) is keyed by
    # the file, not the process: one seat waits, another wakes it. Waiting on a shared futex
    # answers EAGAIN ("the value changed"), which every caller handles by checking again: threads
    # that join or process-shared locks then spin instead of sleeping. Private futexes (what
    # threads of one process use) are untouched; the futex2 calls, which carry the flag in memory
    # or are new, are refused as absent.
    rules.append((allow, "futex", (sc.Arg(1, sc.MASKED_EQ, 128, 128),)))
    rules += [(allow, "futex", (sc.Arg(1, sc.MASKED_EQ, FUTEX_CMD, cmd),)) for cmd in FUTEX_SHARED_OTHERS]
    rules += [(sc.ERRNO(errno.EAGAIN), "futex", (sc.Arg(1, sc.MASKED_EQ, FUTEX_CMD, cmd),))
              for cmd in FUTEX_SHARED_WAITS]
    rules += [(sc.ERRNO(errno.ENOSYS), name, ()) for name in ("futex_waitv", "futex_wait", "futex_wake", "futex_requeue")]
    return rules


def _number(sc, name: str | int) -> int:
    if isinstance(name, int):
        return name
    try:
        nr = sc.resolve_syscall(sc.system_arch(), name)
    except Exception:  # noqa: BLE001  libseccomp does not know it
        nr = -1
    if nr < 0:
        nr = NEWER.get(name, -1)
    return nr


@functools.cache
def bpf(worker: bool = False) -> bytes:
    """The filter as a BPF program (what ``bwrap --seccomp`` and ``PR_SET_SECCOMP`` take); with
    ``worker``, the upload worker's: no process or thread made, no rlimit set (:data:`WORKER_REFUSED`).

    Other ABIs' system calls (a 32-bit binary, ``int 0x80``, x32) fail with EPERM: the list is
    this architecture's. Raises :class:`FilterUnavailable`
    when libseccomp or its bindings are missing, or a rule cannot be added."""
    try:
        import pyseccomp as sc
    except (ImportError, RuntimeError, OSError) as e:
        raise FilterUnavailable(f"the system-call filter cannot be built: {e} (install libseccomp2 "
                                f"and the pyseccomp package); no bot runs unfiltered") from None
    try:
        f = sc.SyscallFilter(sc.ERRNO(errno.EPERM))
        f.set_attr(sc.Attr.ACT_BADARCH, sc.ERRNO(errno.EPERM))
        f.set_attr(sc.Attr.CTL_OPTIMIZE, 2)  # a binary tree over the call numbers, not one long chain
        listed = set()
        for action, name, args in _rules(sc, worker):
            nr = _number(sc, name)
            if nr < 0:
                continue  # absent on this architecture (x86-64 has no plain "eventfd" on arm64...)
            f.add_rule(action, nr, *args)
            listed.add(nr)
        for nr in range(max(listed) + 1, MAX_NR):  # newer than the list: absent, as on an older kernel
            f.add_rule(sc.ERRNO(errno.ENOSYS), nr)
        with tempfile.TemporaryFile() as out:
            f.export_bpf(out)
            out.seek(0)
            program = out.read()
    except FilterUnavailable:
        raise
    except Exception as e:  # noqa: BLE001  libseccomp reports failures as OSError or ValueError
        raise FilterUnavailable(f"the system-call filter cannot be built: {e}; no bot runs unfiltered") from None
    if not program or len(program) % 8:
        raise FilterUnavailable("the system-call filter came out empty; no bot runs unfiltered")
    return program


def memfd(worker: bool = False) -> int:
    """A file descriptor holding :func:`bpf`, at offset 0, for ``bwrap --seccomp FD`` (the caller closes it)."""
    program = bpf(worker)
    fd = os.memfd_create("arena-seccomp", os.MFD_CLOEXEC)
    try:
        os.write(fd, program)
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError:
        os.close(fd)
        raise
    return fd


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
_libc = ctypes.CDLL(None, use_errno=True)
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
_libc.prctl.restype = ctypes.c_int


class Installer:
    """Installs :func:`bpf` in the calling process (a forked child before exec): everything is
    allocated here, in the parent, so the child only makes one system call. The child must have
    set ``PR_SET_NO_NEW_PRIVS`` (it has no capabilities left)."""

    def __init__(self, worker: bool = False) -> None:
        self._buffer = ctypes.create_string_buffer(bpf(worker))
        self._prog = _SockFprog(len(self._buffer.raw) // 8, ctypes.addressof(self._buffer))

    def install(self) -> int:
        """0, or the errno that refused the filter."""
        if _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(self._prog), 0, 0) != 0:
            return ctypes.get_errno() or errno.EPERM
        return 0
