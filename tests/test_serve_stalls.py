"""A writable server whose loop stops for a while (a loaded machine, a long step of its own) must
still serve what arrived meanwhile, and still cut off a client that is really slow.

The server is a real ``arena serve --allow-submit`` process, stopped with SIGSTOP and resumed
with SIGCONT: what the client sends while it is stopped waits in the kernel, so the order of
events is fixed by the test and no wall clock decides the outcome. ``--read-timeout 1`` makes
the idle deadline one second, so a stop of a second and a half outlasts it.

* Before the fix: a request sent while the server was stopped past its idle deadline was
  dropped (the connection reset, no answer) when it resumed: hypercorn's idle timer and the
  request came due in the same tick, and the timer closed the connection. It reddened CI once,
  on the first upload of tests/test_strangers_rule.py.
"""

from __future__ import annotations

import http.client
import os
import signal
import socket
import time
from pathlib import Path

import pytest

pytest.importorskip("hypercorn", reason="arena serve needs the serve extra: pip install 'palace-arena[serve]'")

from tests.test_serve import ServerProc  # noqa: E402

STOP_S = 1.5  # past the one-second idle deadline


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    server = ServerProc(tmp_path_factory.mktemp("stalls") / "data" / "arena.sqlite",
                        "--allow-submit", "--read-timeout", "1", "--writes-per-minute", "6000")
    yield server
    server.stop()


def _address(server: ServerProc) -> tuple[str, int]:
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def _stopped(server: ServerProc, send) -> None:
    """``send()`` runs while the server is stopped for STOP_S seconds."""
    os.kill(server.proc.pid, signal.SIGSTOP)
    try:
        time.sleep(STOP_S)
        send()
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_a_request_sent_while_the_server_was_stopped_is_served(server: ServerProc, method: str) -> None:
    conn = http.client.HTTPConnection(*_address(server), timeout=60)
    try:
        conn.request("GET", "/health")  # the connection is accepted and idle: its idle deadline runs
        first = conn.getresponse()
        first.read()
        assert first.status == 200
        time.sleep(0.2)  # the server has armed the deadline again after its answer (if not, this test can only pass)
        body = b"username=nobody&password=wrong"
        _stopped(server, lambda: conn.request(method, "/login", body=body if method == "POST" else None,
                                              headers={"content-type": "application/x-www-form-urlencoded"}
                                              if method == "POST" else {}))
        answer = conn.getresponse()  # before the fix: ConnectionResetError / RemoteDisconnected
        answer.read()
        assert 200 <= answer.status < 500 and answer.status != 408, answer.status
    finally:
        conn.close()


def _closed_within(sock: socket.socket, seconds: float) -> bytes:
    """What the server answered before it closed the connection ("" when it closed without one);
    fails if it is still open after ``seconds`` (a generous bound, not a timing)."""
    sock.settimeout(seconds)
    got = b""
    try:
        while chunk := sock.recv(65536):
            got += chunk
    except ConnectionResetError:
        pass
    except TimeoutError:
        pytest.fail(f"the connection is still open after {seconds} s: {got!r}")
    return got


def test_a_client_slow_to_send_its_headers_is_still_cut_off(server: ServerProc) -> None:
    with socket.create_connection(_address(server)) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and never the blank line
        assert _closed_within(sock, 30) == b""


def test_a_stall_does_not_give_a_slow_client_more_time(server: ServerProc) -> None:
    """Headers begun while the server was stopped, never finished: the bytes that waited are read,
    and the connection is then closed like any other slow client's."""
    with socket.create_connection(_address(server)) as sock:
        time.sleep(0.2)
        _stopped(server, lambda: sock.sendall(b"POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\n"))
        assert _closed_within(sock, 30) == b""
