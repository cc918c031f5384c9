"""Crashes: 'segv' kills itself with SIGSEGV, 'raise' dies with a traceback."""
import os
import signal
import sys

print("ready", flush=True)
if sys.argv[1] == "segv":
    os.kill(os.getpid(), signal.SIGSEGV)
raise RuntimeError("boom from the bot")
