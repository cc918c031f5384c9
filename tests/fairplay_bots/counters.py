"""One seat of a colluding pair that talks through the kernel's shared counters (docs/SANDBOX.md,
"gVisor: the mode that shares no kernel"). Driven line by line on stdin, so a test needs no clock:

    send N   make N of everything that takes a number from a counter the host kernel shares
             (pipes, memfds, pidfds, eventfds, new sessions), then print "sent"
    read     print, as JSON, what the counters show this seat now

The reading a receiver would decode: the inode number of a new pipe and of a new memfd, the
largest jump between the inode numbers of 2,100 pipes made in a row (more than one CPU's batch of
1,024, so on a shared kernel the batch taken from the machine-wide counter shows what everybody
else took), a new pidfd's inode number, the ``eventfd-id`` of a new eventfd, and the autogroup
id a new session gets. A call that fails is read as its errno, which is a reading too.
"""

import json
import os
import sys


def attempt(f):
    try:
        return f()
    except OSError as e:
        return f"errno {e.errno}"


def pipe_ino():
    r, w = os.pipe()
    ino = os.fstat(r).st_ino
    os.close(r)
    os.close(w)
    return ino


def memfd_ino():
    fd = os.memfd_create("seat")
    ino = os.fstat(fd).st_ino
    os.close(fd)
    return ino


def pidfd_ino():
    fd = os.pidfd_open(os.getpid())
    ino = os.fstat(fd).st_ino
    os.close(fd)
    return ino


def eventfd_id():
    fd = os.eventfd(0)
    try:
        with open(f"/proc/self/fdinfo/{fd}") as f:
            ids = [line.split()[1] for line in f if line.startswith("eventfd-id")]
    finally:
        os.close(fd)
    return ids[0] if ids else "none"


def new_session_autogroup():
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            os.setsid()
            with open("/proc/self/autogroup") as f:
                text = f.read().split()[0]
        except OSError as e:
            text = f"errno {e.errno}"
        os.write(w, text.encode())
        os._exit(0)
    os.close(w)
    text = os.read(r, 200).decode()
    os.close(r)
    os.waitpid(pid, 0)
    return text


def largest_pipe_jump():
    seen = [pipe_ino() for _ in range(2100)]
    return max(b - a for a, b in zip(seen, seen[1:]))


def read():
    return {"pipe": attempt(pipe_ino), "memfd": attempt(memfd_ino), "pipe_jump": attempt(largest_pipe_jump),
            "pidfd": attempt(pidfd_ino), "eventfd": attempt(eventfd_id), "autogroup": attempt(new_session_autogroup)}


def send(n):
    for _ in range(n):
        attempt(pipe_ino)
        attempt(memfd_ino)
        attempt(pidfd_ino)
        attempt(eventfd_id)
    for _ in range(n // 1000):  # any one new session moves a shared autogroup counter; each is a fork
        attempt(new_session_autogroup)


print("ready", flush=True)
for line in sys.stdin:
    words = line.split()
    if words[:1] == ["send"]:
        send(int(words[1]))
        print("sent", flush=True)
    elif words[:1] == ["read"]:
        print(json.dumps(read()), flush=True)
