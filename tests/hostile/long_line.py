"""Writes a 100 MB line with no newline (1 MiB at a time, so the bot itself stays small)."""
import sys

chunk = b"x" * (1 << 20)
for _ in range(100):
    sys.stdout.buffer.write(chunk)
sys.stdout.flush()
import time
time.sleep(60)
