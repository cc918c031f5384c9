"""Takes 0.5 s before its first line."""
import time

time.sleep(0.5)
print("ready", flush=True)
time.sleep(60)
