"""A bot that answers at once, but at its first request leaves CHILDREN processes that sit in the
kernel: each maps GIB GiB (a fraction allowed) of anonymous memory read-only with MAP_POPULATE (every page the shared
zero page: page tables only, 2 MiB per GiB) and unmaps it, over and over. A freezer stops a process
only on its way back to user space, so frozen or not these run on through the other seats' turns
Under gVisor the populated pages are real memory (its kernel zero-fills them): 2 children of 1 GiB
reached 340-530 MB of a 512 MB limit in the sitter's first turn, so it raced its memory limit;
there it maps an eighth. With CHILDREN 0 it is a quiet opponent."""
import ctypes
import mmap
import os
import sys
import time

from arena.botkit import serve

CHILDREN, GIB = int(sys.argv[1]), float(sys.argv[2]) if len(sys.argv) > 2 else 16.0
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
MAP_NORESERVE = 0x4000
started = False


def sit() -> None:
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        os.dup2(null, fd)
    size = int(GIB * (1 << 30))
    while True:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | mmap.MAP_POPULATE
                         | MAP_NORESERVE, -1, 0)
        if addr in (None, 2**64 - 1):
            print(f"sitter: mmap failed, errno {ctypes.get_errno()}", file=sys.stderr, flush=True)
            os._exit(3)
        libc.munmap(addr, size)


def choose(msg):
    global started
    if CHILDREN and not started:
        started = True
        for _ in range(CHILDREN):
            if os.fork() == 0:
                sit()
    if CHILDREN:  # thawed only for its turns: its children get into their long calls meanwhile
        time.sleep(0.05)
    return msg["actions"][0]["id"]


serve(choose, "sitter", "1.0")
