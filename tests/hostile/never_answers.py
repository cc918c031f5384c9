"""Reads its input and never answers."""
import sys
import time

sys.stdin.readline()
time.sleep(60)
