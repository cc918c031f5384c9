"""Prints short lines forever."""
import sys

line = b"y" * 99 + b"\n"
while True:
    sys.stdout.buffer.write(line * 100)
