"""Writes 10 MiB to stderr (lines of 1000 bytes), then says done on stdout."""
import sys

line = b"e" * 999 + b"\n"
for _ in range(10 * 1024 * 1024 // 1000):
    sys.stderr.buffer.write(line)
sys.stderr.buffer.write(b"e" * (10 * 1024 * 1024 % 1000))
sys.stderr.flush()
print("done", flush=True)
sys.stdin.readline()
