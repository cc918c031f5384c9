"""Waits for "shutdown" (or EOF), takes a moment to write its statistics to stderr, exits 0.
With "stubborn" among its arguments it never exits by itself."""
import sys
import time

print("ready", flush=True)
sys.stdin.readline()
if "stubborn" in sys.argv[1:]:
    time.sleep(3600)
time.sleep(0.3)
print("last words: 42 games, 0 faults", file=sys.stderr, flush=True)
