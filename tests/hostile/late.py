"""Answers every line, but only after 0.6 s."""
import sys
import time

for line in sys.stdin:
    time.sleep(0.6)
    print("late " + line.strip(), flush=True)
