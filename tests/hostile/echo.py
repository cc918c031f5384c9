"""Well-behaved: says ready, then echoes every line."""
import sys

print("ready", flush=True)
for line in sys.stdin:
    sys.stdout.write(line)
    sys.stdout.flush()
