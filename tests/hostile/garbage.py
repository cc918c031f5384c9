"""Prints things that are not JSON."""
print("}{ this is not json \x00\x07 \u2603", flush=True)
print("", flush=True)
import time
time.sleep(60)
