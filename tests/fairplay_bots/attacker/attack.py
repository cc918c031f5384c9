"""A cheating bot: before it answers ``hello`` it tries everything a contained bot must not
manage, then plays legal moves.  It reports each attempt on stderr as one line
``ATTACK {"name": "LEAK ..." | "denied ..." | "absent"}``; tests/test_fairplay.py asserts that
no attempt says LEAK.

Its targets (the store's path, another bot's directory, the referee's pid, a listener's port,
a secret in another process's command line and environment) are in ``targets.json`` beside
it: a real attacker would guess them, the test hands them over so a miss means containment,
not ignorance.  ``python3 attack.py victim`` writes a secret to its HOME and TMPDIR, prints
the paths, and waits.
"""
import json
import os
import socket
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def attempt(report, name, fn):
    try:
        report[name] = "LEAK " + repr(fn())[:80]
    except Exception as exc:  # every failure is a defence working
        report[name] = f"denied {type(exc).__name__}"


def read(path, n=64):
    with open(path, "rb") as f:
        return f.read(n)


def list_and_read(path):
    names = sorted(os.listdir(path))
    for name in names:
        full = os.path.join(path, name)
        if os.path.isfile(full):
            read(full, 1)
    return names


def referee_memory(pid):
    with open(f"/proc/{pid}/maps") as f:
        first = f.readline()
    start = int(first.split("-")[0], 16)
    with open(f"/proc/{pid}/mem", "rb") as mem:
        mem.seek(start)
        return mem.read(16)


def find_secret_cmdline(secret):
    seen = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cmdline = read(f"/proc/{name}/cmdline", 4096)
        except OSError:
            continue
        seen += 1
        if secret.encode() in cmdline:
            return f"found in pid {name}"
    raise LookupError(f"not among the {seen} command lines visible")


def find_secret_environ(secret):
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if secret.encode() in read(f"/proc/{name}/environ", 1 << 16):
                    return f"found in pid {name}"
            except OSError:
                continue
    raise LookupError("no readable environment holds it")


def connect(port):
    socket.create_connection(("127.0.0.1", port), timeout=2).close()
    return "connected"


def remember(report, nonce):
    """Look for what an earlier process of this bot left, then leave it for the next one."""
    home = os.environ.get("HOME", "/nonexistent")
    tmpdir = os.environ.get("TMPDIR", "/nonexistent")
    places = {"/tmp": "/tmp", "/var/tmp": "/var/tmp", "/dev/shm": "/dev/shm", "/run/lock": "/run/lock",
              "HOME": home, "TMPDIR": tmpdir}
    for key, place in places.items():  # look everywhere first: some of these are one directory
        path = os.path.join(place, f".arena-memory-{nonce}")
        report["remember " + key] = ("LEAK found " + path) if os.path.exists(path) else "absent"
    for place in places.values():
        path = os.path.join(place, f".arena-memory-{nonce}")
        try:
            with open(path, "w") as f:
                f.write("the deal I saw")
        except OSError:
            pass


def attack(targets):
    report = {}
    store = targets["store"]
    for suffix in ("", "-wal", "-shm"):
        attempt(report, "read store" + suffix, lambda: read(store + suffix))
    attempt(report, "list store dir", lambda: list_and_read(os.path.dirname(store)))
    attempt(report, "list run dir", lambda: list_and_read("/run/palace-arena"))
    attempt(report, "read other bot", lambda: list_and_read(targets["other_bot"]))
    attempt(report, "list checkout", lambda: list_and_read(targets["checkout"]))
    if targets.get("other_home"):
        attempt(report, "read other HOME", lambda: read(os.path.join(targets["other_home"], "secret.txt")))
        attempt(report, "read other TMPDIR", lambda: read(os.path.join(targets["other_tmpdir"], "secret.txt")))
    attempt(report, "connect 127.0.0.1", lambda: connect(targets["port"]))
    referee = targets["referee"]
    attempt(report, "signal referee", lambda: os.kill(referee, 0))
    attempt(report, "read referee environ", lambda: read(f"/proc/{referee}/environ"))
    attempt(report, "read referee memory", lambda: referee_memory(referee))
    attempt(report, "find secret command line", lambda: find_secret_cmdline(targets["secret"]))
    attempt(report, "find secret environment", lambda: find_secret_environ(targets["secret"]))
    attempt(report, "write own directory", lambda: open(os.path.join(HERE, "planted.txt"), "w").close())
    remember(report, targets["nonce"])
    return report


def victim():
    for var in ("HOME", "TMPDIR"):
        with open(os.path.join(os.environ[var], "secret.txt"), "w") as f:
            f.write("my secret plan")
    print(json.dumps({"home": os.environ["HOME"], "tmpdir": os.environ["TMPDIR"]}), flush=True)
    sys.stdin.readline()


def play():
    with open(os.path.join(HERE, "targets.json")) as f:
        targets = json.load(f)
    report = attack(targets)
    sys.stderr.write("ATTACK " + json.dumps(report) + "\n")
    sys.stderr.flush()
    for line in sys.stdin:
        msg = json.loads(line)
        kind = msg.get("type")
        if kind == "hello":
            out = {"type": "hello", "protocol": 1, "name": "attacker", "version": "1.0"}
        elif kind == "request":
            out = {"type": "action", "request": msg["id"], "action": 0}
        elif kind == "shutdown":
            return
        else:
            continue
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


def build():
    """As the bot's ``build`` command: a build is a stranger's code too, so it tries the same, plus
    writing to the directory it was copied from and leaving a link to a file only the referee may
    read (the referee hands the built copy back to itself afterwards and must not follow it). It
    writes its report into the directory it builds in; the test reads it from the built copy."""
    with open(os.path.join(HERE, "targets.json")) as f:
        targets = json.load(f)
    report = attack(targets)
    del report["write own directory"]  # a build writes its own copy: that is what it is for
    attempt(report, "write source directory",
            lambda: open(os.path.join(targets["source"], "planted.txt"), "w").close())
    attempt(report, "link referee file", lambda: os.symlink(targets["root_only"], os.path.join(HERE, "link")))
    report["link referee file"] = "made"  # the link itself is allowed; following it is what must fail
    report["uid"] = str(os.geteuid())
    with open(os.path.join(HERE, "build-report.json"), "w") as f:
        json.dump(report, f)


if __name__ == "__main__":
    {"victim": victim, "build": build}.get(sys.argv[1] if sys.argv[1:] else "", play)()
