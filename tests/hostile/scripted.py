"""Does what it is told, byte for byte: argv[1] (at start, before any request) and then every
line it reads are hex of a JSON list of steps: ["out", hex] and ["err", hex] write those bytes
in one write, ["flood", fd, n] writes n bytes of "f" lines, ["close", fd] closes stdout or
stderr, ["sleep", s], ["kill"] sends itself SIGKILL (mid-line if it wrote a part line), ["exit", n]."""
import json
import os
import signal
import sys
import time


def run(steps):
    for step in steps:
        kind = step[0]
        if kind in ("out", "err"):
            data = bytes.fromhex(step[1])
            fd = 1 if kind == "out" else 2
            while data:
                data = data[os.write(fd, data):]
        elif kind == "flood":
            chunk = b"f" * 4095 + b"\n"
            left = step[2]
            while left > 0:
                left -= os.write(step[1], chunk[:left])
        elif kind == "close":
            os.close(step[1])
        elif kind == "sleep":
            time.sleep(step[1])
        elif kind == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        elif kind == "exit":
            os._exit(step[1])


run(json.loads(bytes.fromhex(sys.argv[1])))
for line in sys.stdin.buffer:
    run(json.loads(bytes.fromhex(line.strip().decode())))
