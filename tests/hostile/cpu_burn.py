"""Spins on the CPU forever."""
print("burning", flush=True)
while True:
    pass
