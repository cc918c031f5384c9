"""One of two seats trying an abstract UNIX socket (a name in the network namespace, no file):
``listen NAME`` binds it and waits for a byte; ``send NAME HOSTNAME`` connects and sends one, then
says whether its /proc/net/unix lists the listener's name or ``HOSTNAME`` (one the host bound).
tests/test_sandbox_attacks.py runs a pair in separate sandboxes."""
import errno
import socket
import sys

kind, name = sys.argv[1], sys.argv[2]
if kind == "listen":
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind("\0" + name)
    s.listen(1)
    print("listening", flush=True)
    conn, _ = s.accept()
    print("got " + conn.recv(1).decode(), flush=True)
else:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect("\0" + name)
        s.sendall(b"1")
        sent = "sent"
    except OSError as e:
        sent = errno.errorcode.get(e.errno, str(e.errno))
    try:
        with open("/proc/net/unix") as f:
            table = f.read()
    except OSError as e:
        table = ""
    seen = [n for n in (name, sys.argv[3]) if "@" + n in table]
    print(f"{sent} seen {','.join(seen) or 'none'}", flush=True)
