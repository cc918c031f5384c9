"""A bot with a fixed amount of work per decision: it spins until it has used WORK_S seconds of
its own CPU, then plays the first legal action. Starve it and it runs out of time."""
import sys
import time

from arena.botkit import serve

WORK_S = float(sys.argv[1])


def choose(msg):
    t0 = time.process_time()
    while time.process_time() - t0 < WORK_S:
        pass
    return msg["actions"][0]["id"]


serve(choose, "worker", "1.0")
