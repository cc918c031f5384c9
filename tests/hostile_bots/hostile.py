"""A protocol bot that plays its first decision properly, then misbehaves in one way (the memory
hog: before its hello).

    python3 hostile.py MODE [STORE_PATH]

Used by tests/test_hostile_tournament.py: each MODE is one thing an untrusted bot might do.
"""
import json
import os
import signal
import socket
import sys
import time

mode = sys.argv[1]
store = sys.argv[2] if len(sys.argv) > 2 else ""


def send(text):
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def misbehave(msg):
    rid = msg["id"]
    if mode in ("never_answer", "ignore_term"):
        if mode == "ignore_term":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(3600)
    elif mode == "late":
        time.sleep(2.0)
        send(json.dumps({"type": "action", "request": rid, "action": 0}))
    elif mode == "garbage":
        send("this is not json {{{")
    elif mode == "not_utf8":
        sys.stdout.buffer.write(b"\xff\xfe\xfa 0\n")
        sys.stdout.flush()
    elif mode == "long_line":
        chunk = b"7" * (1 << 20)
        for _ in range(100):
            sys.stdout.buffer.write(chunk)
        sys.stdout.flush()
        time.sleep(3600)
    elif mode == "old_request":
        send(json.dumps({"type": "action", "request": rid - 1, "action": 0}))
    elif mode == "illegal":
        send(json.dumps({"type": "action", "request": rid, "action": len(msg["actions"]) + 5}))
    elif mode == "nested":
        send("[" * 100000 + "]" * 100000)
    elif mode == "close_stdin":
        os.close(0)
        time.sleep(3600)
    elif mode == "exit_mid":
        sys.exit(3)
    elif mode == "segfault":
        os.kill(os.getpid(), signal.SIGSEGV)
    elif mode == "setsid_grandchild":
        if os.fork() == 0:
            try:
                os.setsid()
            except PermissionError:  # contained: the filter refuses new sessions; fork on without one
                pass
            if os.fork() == 0:
                time.sleep(3600)
            os._exit(0)
        time.sleep(3600)
    elif mode == "fork_bomb":
        for _ in range(10000):
            try:
                if os.fork() == 0:
                    time.sleep(3600)
                    os._exit(0)
            except OSError:
                break
        time.sleep(3600)
    return True


requests = 0
for line in sys.stdin:
    msg = json.loads(line)
    kind = msg.get("type")
    if kind == "hello":
        if mode == "exit_handshake":
            sys.exit(0)
        if mode == "memory_hog":
            # Past the test's 128 MB limit before its hello, on the handshake's clock (5 s): a
            # move's 0.6 s was lost at load 13 while the kernel reclaimed before its verdict, and
            # the verdict, not the load, is what the test asks. (A crossing while the referee
            # waits for a move: tests/test_bot_process.py's memory hog, with generous waits.)
            hog = []
            while True:
                hog.append(bytearray(32 << 20))
        send(json.dumps({"type": "hello", "protocol": 1, "name": "hostile-" + mode.replace("_", "-")}))
    elif kind == "start" and mode == "snoop":
        for path in (store, "/etc/shadow", "/root"):
            try:
                with open(path, "rb") as f:
                    f.read(16)
                print(f"snoop: READ {path}", file=sys.stderr, flush=True)
            except OSError as e:
                print(f"snoop: denied {path}: {type(e).__name__}", file=sys.stderr, flush=True)
    elif kind == "request":
        requests += 1
        if requests == 2 and mode not in ("snoop", "stderr_flood", "two_replies"):
            misbehave(msg)
            continue
        if mode == "stderr_flood":
            sys.stderr.write("x" * 200_000 + "\n")
        send(json.dumps({"type": "action", "request": msg["id"], "action": 0}))
        if mode == "two_replies":
            send(json.dumps({"type": "action", "request": msg["id"], "action": 0}))
    elif kind == "shutdown":
        break
