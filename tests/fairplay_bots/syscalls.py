"""Tries, from inside a sandbox, each system call the filter must refuse and prints one JSON line
{name: "ran" | errno name}. A call that must be refused is tried so that, if it ran, it would
have done its work (a socket made, a session created, a CPU mask set). tests/test_sandbox_attacks.py
runs it contained and on the host, where the same calls run (so the test can tell)."""
import ctypes
import errno
import json
import os
import socket
import struct

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


def raw(nr, *args):
    res = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    return "ran" if res >= 0 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))


def in_child(nr):
    """System call ``nr`` in a forked child (for calls that act on the caller: a new session)."""
    pid = os.fork()
    if pid == 0:
        res = libc.syscall(ctypes.c_long(nr))
        os._exit(0 if res >= 0 else min(ctypes.get_errno(), 200))
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    return "ran" if code == 0 else errno.errorcode.get(code, str(code))


def make_socket(family, kind=socket.SOCK_STREAM):
    try:
        socket.socket(family, kind).close()
        return "ran"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))


def ofd_setlkw():
    fd = os.open("/etc/hostname", os.O_RDONLY)
    lk = ctypes.create_string_buffer(struct.pack("hhqqi4x", 0, 0, 0, 1, 0))  # F_RDLCK, one byte
    try:
        return raw(72, fd, 38, ctypes.addressof(lk))  # fcntl(fd, F_OFD_SETLKW)
    finally:
        os.close(fd)


def clone_pidfd():
    pidfd = ctypes.c_int(-1)
    res = libc.syscall(ctypes.c_long(56), ctypes.c_long(0x1000 | 17), ctypes.c_long(0),
                       ctypes.byref(pidfd), ctypes.c_long(0), ctypes.c_long(0))  # clone(CLONE_PIDFD|SIGCHLD)
    if res == 0:
        os._exit(0)
    if res > 0:
        os.waitpid(res, 0)
        return "ran"
    return errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))


def affinity():
    mask = ctypes.c_ulong(1)
    return raw(203, 0, ctypes.sizeof(mask), ctypes.addressof(mask))  # sched_setaffinity(0, CPU 0)


def read(path):
    try:
        with open(path, "rb") as f:
            return "ran" if f.read(4096) else "empty"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))


report = {
    "open_tree_attr": raw(467, -100, 0, 0, 0, 0),
    "listmount": raw(458, 0, 0, 0, 0),
    "statmount": raw(457, 0, 0, 0, 0),
    "memfd_secret": raw(447, 0),
    "personality": raw(135, 0xFFFFFFFF),  # the query form: it would change nothing
    "unassigned 600": raw(600),
    "unassigned 1000": raw(1000),
    "x32 getpid": raw(0x40000000 | 39),
    "memfd_create": raw(319, ctypes.addressof(ctypes.create_string_buffer(b"m")), 0),
    "pidfd_open": raw(434, os.getpid(), 0),
    "clone CLONE_PIDFD": clone_pidfd(),
    "setsid": in_child(112),
    "sched_setaffinity": affinity(),
    "inotify_init": raw(253),
    "F_OFD_SETLKW": ofd_setlkw(),
    "AF_INET6 socket": make_socket(socket.AF_INET6),
    "AF_NETLINK socket": make_socket(socket.AF_NETLINK, socket.SOCK_RAW),
    "AF_INET socket": make_socket(socket.AF_INET),
    "read /proc/zoneinfo": read("/proc/zoneinfo"),
}
print(json.dumps(report), flush=True)
