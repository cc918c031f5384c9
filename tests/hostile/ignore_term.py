"""Ignores SIGTERM, SIGINT and SIGHUP."""
import signal
import time

for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(s, signal.SIG_IGN)
print("ready", flush=True)
while True:
    time.sleep(60)
