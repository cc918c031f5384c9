"""Tries something it should not be able to do and reports what happened.

read PATH        read a file
list DIR         list a directory and read the first file in it
connect H P      open a TCP connection
write PATH       create a file
"""
import os
import socket
import sys


def attempt(what, *args):
    if what == "read":
        with open(args[0]) as f:
            return "LEAK " + f.read(40)
    if what == "list":
        names = sorted(os.listdir(args[0]))
        for n in names:
            p = os.path.join(args[0], n)
            if os.path.isfile(p):
                with open(p) as f:
                    f.read(1)
        return "LEAK " + " ".join(names)
    if what == "connect":
        socket.create_connection((args[0], int(args[1])), timeout=1).close()
        return "LEAK connected"
    if what == "write":
        with open(args[0], "w") as f:
            f.write("x")
        return "LEAK wrote"
    raise SystemExit(f"unknown probe {what}")


try:
    result = attempt(*sys.argv[1:-1])
except OSError as exc:
    result = f"denied {type(exc).__name__}"
print(result, flush=True)
sys.stdin.readline()
