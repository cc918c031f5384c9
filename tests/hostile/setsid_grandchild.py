"""Double-forks a daemon in a new session (where allowed) that outlives the bot.

The grandchild prints its pid, detaches from every pipe and sleeps; the bot
then exits.  argv[1] == "scrub" also wipes the grandchild's environment."""
import os
import sys
import time

if os.fork() == 0:
    try:
        os.setsid()
    except PermissionError:  # contained: the system-call filter refuses new sessions; escape by forking alone
        pass
    if os.fork() == 0:
        print(os.getpid(), flush=True)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        if sys.argv[1:2] == ["scrub"]:
            os.execve(sys.executable, [sys.executable, "-c", "import time; time.sleep(60)"]
                      + sys.argv[2:], {})
        time.sleep(60)
        os._exit(0)
    os._exit(0)
os.wait()
time.sleep(0.1)
print("parent done", flush=True)
