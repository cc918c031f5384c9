"""The system-call filter every contained bot process runs under, built with libseccomp (``pyseccomp``).

It denies, with ``EPERM`` and never a kill (a bot that tries gets an error it can handle), what a bot
never needs and what carries information between the seats of a table or out of containment: file
locks of every kind, the kernel's shared counters and notifications (AIO, inotify, page-cache
residency, keyrings), debugging other processes, and mount and namespace calls. The reasoning for
each group is in docs/SANDBOX.md. There is no way to run a contained bot without it: when the filter
cannot be built, :func:`bpf` raises and the bot does not start (fail closed).
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


F_GETLK, F_SETLK, F_SETLKW = 5, 6, 7
F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW = 36, 37, 38
F_SETLEASE, F_GETLEASE, F_NOTIFY = 1024, 1025, 1026
RWF_NOWAIT = 0x8
MADV_COLD, MADV_PAGEOUT = 20, 21
AF_UNIX = 1
FUTEX_WAIT, FUTEX_WAIT_BITSET, FUTEX_WAIT_REQUEUE_PI, FUTEX_PRIVATE_FLAG = 0, 9, 11, 128
NAMESPACE_FLAGS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000)
"""CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET: a clone with any of them is denied."""

DENIED = (
    # locks: a byte-range lock on a file both seats can read is a channel without a single write
    "flock",
    # debugging, reading or comparing other processes
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd", "process_madvise",
    "process_mrelease",
    # kernel keyrings: named keyrings and /proc/keys are shared by every process of a uid or more
    "keyctl", "add_key", "request_key",
    # kernel programs, performance counters, page-fault handling
    "bpf", "perf_event_open", "userfaultfd",
    # mounts, namespaces, the root
    "mount", "umount2", "pivot_root", "unshare", "setns", "chroot", "open_tree", "move_mount",
    "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
    # kernel-wide counters and notifications a seat could set and another read
    "io_setup", "io_submit", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "inotify_init", "inotify_init1", "fanotify_init", "fanotify_mark",
    "fadvise64", "mincore", "cachestat", "sysinfo", "syslog",
    # the usual container deny list: the machine itself
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot",
    "swapon", "swapoff", "acct", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
    "quotactl", "quotactl_fd", "lookup_dcookie", "vhangup", "iopl", "ioperm", "sethostname",
    "setdomainname", "name_to_handle_at", "open_by_handle_at", "migrate_pages", "move_pages",
    "uselib", "nfsservctl", "_sysctl", "ustat",
)
NEWER = {"cachestat": 451, "mount_setattr": 442, "quotactl_fd": 443, "process_mrelease": 448,
         "pidfd_getfd": 438, "process_madvise": 440, "open_tree": 428, "move_mount": 429, "fsopen": 430,
         "fsconfig": 431, "fsmount": 432, "fspick": 433, "io_uring_setup": 425, "io_uring_enter": 426,
         "io_uring_register": 427, "clone3": 435, "futex_waitv": 449, "futex_wake": 454, "futex_wait": 455,
         "futex_requeue": 456}
"""Numbers of calls newer than some libseccomp releases know (the same on every architecture from 424 on)."""


def _rules(sc) -> list[tuple[int, str | int, tuple]]:
    """(action, syscall, argument conditions) for every denial."""
    eperm = sc.ERRNO(errno.EPERM)
    rules: list[tuple[int, str | int, tuple]] = [(eperm, name, ()) for name in DENIED]
    for cmd in (F_GETLK, F_SETLK, F_SETLKW, F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW,
                F_SETLEASE, F_GETLEASE, F_NOTIFY):
        rules.append((eperm, "fcntl", (sc.Arg(1, sc.EQ, cmd),)))
    for flag in NAMESPACE_FLAGS:
        rules.append((eperm, "clone", (sc.Arg(0, sc.MASKED_EQ, flag, flag),)))
    # clone3 passes its flags in memory, out of a filter's reach: ENOSYS makes the C library use clone
    rules.append((sc.ERRNO(errno.ENOSYS), "clone3", ()))
    for name in ("preadv2", "pwritev2"):  # RWF_NOWAIT says whether a page is cached, without reading it
        rules.append((eperm, name, (sc.Arg(5, sc.MASKED_EQ, RWF_NOWAIT, RWF_NOWAIT),)))
    for advice in (MADV_COLD, MADV_PAGEOUT):  # evicting shared pages from the cache
        rules.append((eperm, "madvise", (sc.Arg(2, sc.EQ, advice),)))
    # A shared futex on a page of a file every seat maps (a system library, /etc/...) is keyed by
    # the file, not the process: one seat waits, another wakes it. Waiting on a shared futex
    # answers EAGAIN ("the value changed"), which every caller handles by checking again: threads
    # that join or process-shared locks then spin instead of sleeping. Private futexes (what
    # threads of one process use) are untouched; the futex2 calls, which carry the flag in memory
    # or are new, are refused as absent.
    for cmd in (FUTEX_WAIT, FUTEX_WAIT_BITSET, FUTEX_WAIT_REQUEUE_PI):
        rules.append((sc.ERRNO(errno.EAGAIN), "futex", (sc.Arg(1, sc.MASKED_EQ, 0x7F | FUTEX_PRIVATE_FLAG, cmd),)))
    for name in ("futex_waitv", "futex_wait", "futex_wake", "futex_requeue"):
        rules.append((sc.ERRNO(errno.ENOSYS), name, ()))
    # only UNIX sockets: TCP and UDP sockets move the kernel-wide counters of /proc/net/sockstat
    rules.append((eperm, "socket", (sc.Arg(0, sc.NE, AF_UNIX),)))
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
def bpf() -> bytes:
    """The filter as a BPF program (what ``bwrap --seccomp`` and ``PR_SET_SECCOMP`` take).

    Allows everything else; other architectures' system calls (a 32-bit binary, ``int 0x80``)
    fail with EPERM, since the rules are written for this one. Raises :class:`FilterUnavailable`
    when libseccomp or its bindings are missing, or a rule cannot be added."""
    try:
        import pyseccomp as sc
    except (ImportError, RuntimeError, OSError) as e:
        raise FilterUnavailable(f"the system-call filter cannot be built: {e} (install libseccomp2 "
                                f"and the pyseccomp package); no bot runs unfiltered") from None
    try:
        f = sc.SyscallFilter(sc.ALLOW)
        f.set_attr(sc.Attr.ACT_BADARCH, sc.ERRNO(errno.EPERM))
        for action, name, args in _rules(sc):
            nr = _number(sc, name)
            if nr < 0:
                if name in ("_sysctl", "uselib", "nfsservctl", "ustat", "iopl", "ioperm", "vhangup"):
                    continue  # absent on some architectures: nothing to deny there
                raise FilterUnavailable(f"the system-call filter cannot name {name!r} on this machine")
            f.add_rule(action, nr, *args)
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


def memfd() -> int:
    """A file descriptor holding :func:`bpf`, at offset 0, for ``bwrap --seccomp FD`` (the caller closes it)."""
    program = bpf()
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

    def __init__(self) -> None:
        self._buffer = ctypes.create_string_buffer(bpf())
        self._prog = _SockFprog(len(self._buffer.raw) // 8, ctypes.addressof(self._buffer))

    def install(self) -> int:
        """0, or the errno that refused the filter."""
        if _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(self._prog), 0, 0) != 0:
            return ctypes.get_errno() or errno.EPERM
        return 0
