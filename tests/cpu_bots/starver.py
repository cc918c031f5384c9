"""A bot that answers at once but leaves SPINNERS processes spinning, each in a session of its own
where it may (with scheduler autogroups, every session is one more group the kernel shares the CPU
among). The system-call filter refuses setsid (docs/SANDBOX.md): a spinner then spins in the bot's
session, as an attacker's would, rather than dying of the refusal.
The spinners are niced, so the starver's own replies still come in time out of its share (a nice
value counts inside an autogroup or cgroup, not between them). With SPINNERS 0 it is a quiet
opponent."""
import os
import sys

from arena.botkit import serve

for _ in range(int(sys.argv[1])):
    if os.fork() == 0:
        try:
            os.setsid()
        except OSError:
            pass
        os.nice(19)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        while True:
            pass

serve(lambda msg: msg["actions"][0]["id"], "starver", "1.0")
