"""#35, the seventh outside round: the club server as a stranger with an account and as a visitor.

What it found: a visitor could take every descriptor of ``arena serve`` with event streams; browser
play ran a stranger's bot outside the sandbox its ladder names; a game's move took a body of any
size and answered ``Infinity`` with a 500; sign-up hashed a password before looking at the
invitation. Each test below did the attack through the server as a user starts it, or through the
function the page calls, and saw it succeed before the fix.
"""

from __future__ import annotations

import resource
import socket
import time
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="arena serve needs the serve extra: pip install 'palace-arena[serve]'")

from arena.serve.limits import PER_ADDRESS  # noqa: E402
from tests.test_serve import ServerProc, build_store  # noqa: E402


def _open_stream(server: ServerProc, source: str) -> tuple[socket.socket, bytes]:
    """A ``GET /events`` from ``source`` (an address of 127/8), its first answer read, then never
    read again: the stream stays open as long as the socket does."""
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=60, source_address=(source, 0))
    sock.sendall(b"GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    return sock, sock.recv(200)


def _status_from(server: ServerProc, source: str, path: str = "/health") -> int:
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=60, source_address=(source, 0)) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        head = b""
        while b"\r\n" not in head:
            chunk = sock.recv(200)
            if not chunk:
                break
            head += chunk
    return int(head.split()[1]) if head.startswith(b"HTTP/1.1 ") else 0


@pytest.mark.parametrize("mode", [(), ("--allow-play",)], ids=["read-only", "writable"])
def test_event_streams_cannot_take_the_servers_descriptors(tmp_path: Path, mode: tuple[str, ...]) -> None:
    """Attack: a visitor opened 1,100 ``/events`` streams and never read them. Under systemd's soft
    limit of 1,024 descriptors the server had none left: no page answered anyone (10 s, nothing),
    and trio's accept loop logged EMFILE with a traceback ten times a second. Now one address holds
    at most ``PER_ADDRESS`` connections and all of them at most half the process's descriptors;
    one more is answered 503 at once, others are served, and the log stays quiet. Both servers
    (uvicorn read-only, hypercorn writable)."""
    store = tmp_path / "data" / "arena.sqlite"
    build_store(store)
    server = ServerProc(store, *mode)
    held: list[socket.socket] = []
    try:
        hard = resource.prlimit(server.proc.pid, resource.RLIMIT_NOFILE)[1]
        resource.prlimit(server.proc.pid, resource.RLIMIT_NOFILE, (256, hard))  # 128 connections in all
        for _ in range(PER_ADDRESS):
            sock, first = _open_stream(server, "127.0.0.1")
            held.append(sock)
            assert first.startswith(b"HTTP/1.1 200"), first
        sock, first = _open_stream(server, "127.0.0.1")  # one too many for this address
        sock.close()
        assert first.startswith(b"HTTP/1.1 503") and b"retry-after: 5" in first.lower(), first
        assert _status_from(server, "127.0.0.2") == 200  # another visitor is served
        for _ in range(PER_ADDRESS):  # a second address fills what connections may hold in all
            sock, first = _open_stream(server, "127.0.0.2")
            held.append(sock)
            assert first.startswith(b"HTTP/1.1 200"), first
        assert _status_from(server, "127.0.0.3") == 503  # past half the descriptors: refused, not EMFILE
        for sock in held[:PER_ADDRESS]:
            sock.close()
        deadline = time.monotonic() + 60  # the server sees the closes in its own time: asked until then
        while _status_from(server, "127.0.0.1") != 200:
            assert time.monotonic() < deadline, "the closed streams were never released"
        log = server.stderr()
        assert "Too many open files" not in log and "Traceback" not in log, log[-3000:]
    finally:
        for sock in held:
            sock.close()
        server.stop()
