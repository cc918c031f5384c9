"""Reports its environment, identity and what it can see, as one JSON line."""
import json
import os
import sys

home = os.environ.get("HOME", "")
st = os.stat(home) if home else None
print(json.dumps({
    "env": dict(os.environ), "uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups(),
    "cwd": os.getcwd(), "home_mode": oct(st.st_mode & 0o777) if st else None,
    "home_owner": st.st_uid if st else None, "ppid": os.getppid(), "pgid": os.getpgid(0),
    "sid": os.getsid(0), "pid": os.getpid(),
    "nofile": __import__("resource").getrlimit(__import__("resource").RLIMIT_NOFILE),
}), flush=True)
sys.stdin.readline()
