"""Burns the CPU it is told to, one request at a time: "burn SECONDS" -> burns that much CPU
(process time, not wall time), then answers "done"."""
import sys
import time

print("ready", flush=True)
for line in sys.stdin:
    seconds = float(line.split()[1])
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
    print("done", flush=True)
