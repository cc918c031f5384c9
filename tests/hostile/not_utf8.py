"""Prints one line of invalid UTF-8, then a valid one."""
import sys
import time

sys.stdout.buffer.write(b"\xff\xfe\xc3(bad\n")
sys.stdout.buffer.write(b"ok\n")
sys.stdout.flush()
time.sleep(60)
