"""Writes two lines in one write: at start, and for every line it reads."""
import os
import sys

os.write(1, b"one\ntwo\n")
for line in sys.stdin:
    word = line.strip()
    os.write(1, f"{word} 1\n{word} 2\n".encode())
