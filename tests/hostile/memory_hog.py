"""Allocates (and touches) 8 MiB blocks until something stops it."""
hog = []
print("eating", flush=True)
while True:
    hog.append(b"\x01" * (8 << 20))
