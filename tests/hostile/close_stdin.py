"""Closes its stdin (or with argv[1] == "stdout", its stdout) and keeps running."""
import os
import sys
import time

if sys.argv[1] == "stdout":
    print("closing", flush=True)
    os.close(1)
else:
    os.close(0)
    print("closed", flush=True)
time.sleep(60)
