"""One of a colluding pair at a table: at its start and at its first requests it sends what it
knows (a hash of its hand) through every channel two processes on one kernel might share, and
tries to read the other seat's through the same channels.  Each primitive must fail: a system
call with EPERM (the filter), a file absent, unreadable or empty.  It reports every attempt on
stderr as ``COLLUDE {"name": "denied EPERM" | "absent" | "empty" | "LEAK ..."}``; if any says
LEAK it stops answering legally (an out-of-range action), so a tournament or ``arena check``
records a fault.  tests/test_sandbox_attacks.py runs it.
"""
import ctypes
import errno
import fcntl
import hashlib
import json
import mmap
import os
import random
import struct
import subprocess
import sys

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
SHARED = "/etc/hostname"  # a file every seat can open read-only
NR = {"io_setup": 206, "inotify_init1": 294, "fanotify_init": 300, "keyctl": 250, "add_key": 248,
      "ptrace": 101, "process_vm_readv": 310, "bpf": 321, "perf_event_open": 298, "userfaultfd": 323,
      "unshare": 272, "mount": 165, "setns": 308, "sysinfo": 99, "io_uring_setup": 425, "cachestat": 451,
      "init_module": 175, "futex": 202, "reboot": 169, "swapon": 167, "mincore": 27}


def syscall(name, *args):
    res = libc.syscall(NR[name], *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    if res < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return res


def attempt(report, name, fn, *, reader=False, denied=errno.EPERM):
    """A primitive: LEAK when it works (or reads anything), else how it failed: ``denied`` is the
    filter's answer (EPERM, or EAGAIN for a futex wait)."""
    try:
        out = fn()
    except OSError as e:
        code = errno.errorcode.get(e.errno, str(e.errno))
        if e.errno in (errno.ENOENT,):
            report[name] = "absent"
        elif e.errno == denied or (reader and e.errno in (errno.EPERM, errno.EACCES)):
            report[name] = f"denied {code}"
        else:  # a filtered call fails with EPERM; anything else means the kernel ran it
            report[name] = f"LEAK reached the kernel ({code})"
        return
    if reader and not out:
        report[name] = "empty"
    else:
        report[name] = "LEAK " + repr(out)[:60]


def read(path):
    with open(path, "rb") as f:
        return f.read(4096)


def flock_struct(kind, start, length):
    return struct.pack("hhqqi4x", kind, 0, start, length, 0)


def lock(cmd, start):
    fd = os.open(SHARED, os.O_RDONLY)
    try:
        return fcntl.fcntl(fd, cmd, flock_struct(fcntl.F_RDLCK, start, 1))
    finally:
        os.close(fd)  # an OFD lock held by an open fd would stay: the test only needs the call's answer


def probe(bits):
    """Send ``bits`` and read the other seat's through every channel; returns the report."""
    r = {}
    # byte-range and whole-file locks on a file both can read (no write needed)
    attempt(r, "flock", lambda: fcntl.flock(os.open(SHARED, os.O_RDONLY), fcntl.LOCK_SH | fcntl.LOCK_NB),
            denied=errno.ENOSYS)  # the filter answers as a file system without locks
    attempt(r, "F_OFD_SETLK", lambda: lock(37, bits))
    attempt(r, "F_SETLK", lambda: lock(fcntl.F_SETLK, bits))
    attempt(r, "F_OFD_GETLK", lambda: lock(36, 0))
    attempt(r, "F_GETLK", lambda: lock(fcntl.F_GETLK, 0))
    attempt(r, "read /proc/locks", lambda: read("/proc/locks"), reader=True)
    # the system-wide AIO counter
    attempt(r, "io_setup", lambda: syscall("io_setup", 1 + bits % 64, ctypes.byref(ctypes.c_ulong(0))))
    attempt(r, "io_uring_setup", lambda: syscall("io_uring_setup", 1, ctypes.create_string_buffer(120)))
    attempt(r, "read /proc/sys/fs/aio-nr", lambda: read("/proc/sys/fs/aio-nr"), reader=True)
    # inotify / fanotify on a shared read-only directory (the sender opens files in it)
    for name in sorted(os.listdir("/usr/share/zoneinfo"))[: bits % 8]:
        try:
            os.close(os.open(os.path.join("/usr/share/zoneinfo", name), os.O_RDONLY))
        except OSError:
            pass
    attempt(r, "inotify_init1", lambda: syscall("inotify_init1", 0))
    attempt(r, "fanotify_init", lambda: syscall("fanotify_init", 0, 0))
    # the pty count
    attempt(r, "open /dev/ptmx", lambda: os.open("/dev/ptmx", os.O_RDWR | os.O_NOCTTY))
    attempt(r, "read /proc/sys/kernel/pty/nr", lambda: read("/proc/sys/kernel/pty/nr"), reader=True)
    # page-cache residency of a shared file
    fd = os.open(SHARED, os.O_RDONLY)
    attempt(r, "posix_fadvise DONTNEED", lambda: os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED))
    attempt(r, "preadv2 RWF_NOWAIT", lambda: os.preadv(fd, [bytearray(16)], 0, os.RWF_NOWAIT))
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    base = libc.mmap(None, 4096, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
    buf = ctypes.create_string_buffer(1)
    attempt(r, "mincore", lambda: syscall("mincore", ctypes.c_void_p(base), 4096, buf))
    attempt(r, "cachestat", lambda: syscall("cachestat", fd, ctypes.create_string_buffer(16),
                                           ctypes.create_string_buffer(32), 0))
    # a shared futex on that page is keyed by the file: a seat waiting on it is woken by another
    word = ctypes.c_uint32.from_address(base).value
    timeout = struct.pack("qq", 0, 20_000_000)
    attempt(r, "futex wait on a shared file page",
            lambda: syscall("futex", ctypes.c_void_p(base), 0, word, ctypes.c_char_p(timeout), 0, 0), denied=errno.EAGAIN)
    libc.munmap(ctypes.c_void_p(base), ctypes.c_size_t(4096))
    os.close(fd)
    # kernel keyrings: join (create) a named session keyring the other seat could join too
    attempt(r, "keyctl join named keyring", lambda: syscall("keyctl", 1, ctypes.c_char_p(b"palace-%d" % bits)))
    attempt(r, "add_key", lambda: syscall("add_key", ctypes.c_char_p(b"user"), ctypes.c_char_p(b"hand"),
                                         ctypes.c_char_p(b"x"), 1, -2))
    attempt(r, "read /proc/keys", lambda: read("/proc/keys"), reader=True)
    # kernel-wide counters: read directly or through sysinfo
    for path in ("/proc/loadavg", "/proc/meminfo", "/proc/stat", "/proc/vmstat", "/proc/pressure/cpu",
                 "/proc/sys/fs/inode-nr", "/proc/sys/fs/file-nr", "/proc/interrupts", "/proc/diskstats",
                 "/proc/softirqs", "/proc/uptime"):
        attempt(r, f"read {path}", lambda: read(path), reader=True)
    attempt(r, "sysinfo", lambda: syscall("sysinfo", ctypes.create_string_buffer(128)))
    attempt(r, "TCP socket (moves /proc/net/sockstat)", lambda: __import__("socket").socket())
    # other processes, the kernel, containment itself
    # a nested user namespace, first: a raw unshare() that worked would leave this process in an
    # unmapped one, where the command could no longer map its uid
    try:
        done = subprocess.run(["unshare", "-U", "-r", "id", "-u"], capture_output=True, text=True, timeout=10)
        r["unshare -U -r"] = ("LEAK " + done.stdout.strip()) if done.returncode == 0 else "denied"
    except OSError as e:
        r["unshare -U -r"] = f"absent {e.errno}"
    attempt(r, "ptrace", lambda: syscall("ptrace", 2, os.getppid(), 0, 0))  # PTRACE_PEEKDATA: ESRCH unless filtered
    attempt(r, "process_vm_readv", lambda: syscall("process_vm_readv", os.getpid(), 0, 0, 0, 0, 0))
    attempt(r, "bpf", lambda: syscall("bpf", 0, 0, 0))
    attempt(r, "perf_event_open", lambda: syscall("perf_event_open", 0, 0, -1, -1, 0))
    attempt(r, "userfaultfd", lambda: syscall("userfaultfd", 0))
    attempt(r, "mount", lambda: syscall("mount", ctypes.c_char_p(b"none"), ctypes.c_char_p(b"/nonexistent-palace"),
                                       ctypes.c_char_p(b"tmpfs"), 0, 0))
    attempt(r, "unshare user namespace", lambda: syscall("unshare", 0x10000000))
    attempt(r, "setns", lambda: syscall("setns", -1, 0))
    for name in ("init_module", "reboot", "swapon"):  # arguments no kernel would accept, filter or not
        attempt(r, name, lambda: syscall(name, 0, 0, 0, 0))
    # the host's pid counter: forks by one seat would move the pid the other's next fork gets
    pid = os.getpid()
    r["pid namespace of its own"] = "yes" if pid <= 3 else f"LEAK host pid {pid}"
    status = read("/proc/self/status").decode()
    r["no_new_privs"] = "set" if "NoNewPrivs:\t1" in status else "LEAK not set"
    r["seccomp"] = "filtered" if "Seccomp:\t2" in status else "LEAK no filter"
    return r


def main():
    role = sys.argv[1] if sys.argv[1:] else "pair"
    leaks = []
    answered = 0
    rng = random.Random(7)
    for line in sys.stdin:
        msg = json.loads(line)
        kind = msg.get("type")
        if kind == "hello":
            out = {"type": "hello", "protocol": 1, "name": role, "version": "1.0"}
        elif kind == "request":
            if answered < 3:  # at the start and at the first requests, each time with the hand it holds
                hand = json.dumps(msg.get("view", {}).get("hand", []))
                bits = int.from_bytes(hashlib.sha256(hand.encode()).digest()[:2], "big")
                report = probe(bits)
                sys.stderr.write("COLLUDE " + json.dumps(report) + "\n")
                sys.stderr.flush()
                leaks += [k for k, v in report.items() if v.startswith("LEAK")]
            answered += 1
            out = {"type": "action", "request": msg["id"],
                   "action": 10_000 if leaks else rng.randrange(len(msg.get("actions") or [0]))}
            if leaks:
                sys.stderr.write("LEAKED " + ", ".join(sorted(set(leaks))) + "\n")
                sys.stderr.flush()
        elif kind == "shutdown":
            return
        else:
            continue
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
