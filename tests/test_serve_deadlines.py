"""The server's deadlines: a client slow to send a request (its headers, or any form's body) is
cut off, and one whose request arrived while the server's loop had stopped (a loaded machine, a
long step of its own) is served, on the writable server (hypercorn) and the read-only one (uvicorn).

The server is a real ``arena serve`` process, stopped with SIGSTOP and resumed
with SIGCONT: what the client sends while it is stopped waits in the kernel, so the order of
events is fixed by the test and no wall clock decides the outcome. ``--read-timeout 1`` makes
the idle deadline one second, so a stop of a second and a half outlasts it.

* Before the fix: a request sent while the server was stopped past its idle deadline was
  dropped (the connection reset, no answer) when it resumed: hypercorn's idle timer and the
  request came due in the same tick, and the timer closed the connection. It reddened CI once,
  on the first upload of tests/test_strangers_rule.py. The read-only server dropped one the same
  way (uvloop runs due timers before it reads).
* Before the body deadline: a POST to any form but an upload (log in, sign up, tokens, webhooks,
  admin actions, a game) whose body came a byte a second held its connection and
  its request's task as long as the client liked (#35). Each is now answered 408 and closed.
* The body deadline blames the client only: a body that was there when a busy server asked for it
  after the deadline is read (fake clock, no server), and one that never comes is 408.
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
from tests.test_serve_accounts import first_admin_code, sign_up  # noqa: E402

STOP_S = 1.5  # past the one-second idle deadline


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    store = tmp_path_factory.mktemp("deadlines") / "data" / "arena.sqlite"
    code = first_admin_code(store)
    server = ServerProc(store, "--allow-submit", "--allow-play", "--read-timeout", "1")
    server.admin = sign_up(server, code, "admin")[0]  # a member's forms read their bodies only for a member
    yield server
    server.stop()


@pytest.fixture(scope="module")
def read_only(tmp_path_factory):
    server = ServerProc(tmp_path_factory.mktemp("read-only") / "data" / "arena.sqlite", "--read-timeout", "1")
    yield server
    server.stop()


def _address(server: ServerProc) -> tuple[str, int]:
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def _kept_alive(server: ServerProc) -> http.client.HTTPConnection:
    """A connection that has had one answer and is idle: its keep-alive deadline runs."""
    conn = http.client.HTTPConnection(*_address(server), timeout=60)
    conn.request("GET", "/health")
    first = conn.getresponse()
    first.read()
    assert first.status == 200
    return conn


@pytest.fixture(scope="module")
def one_stop(server: ServerProc, read_only: ServerProc):
    """The connections of the four tests of a stop, each server's made ready just before that server is
    stopped (every deadline here is a second, so each server's are made as close to its stop as one
    test's were); then, both stopped for STOP_S, each connection sends what its test sends, and each
    test reads its own answers. Each connection's deadline is its own, so one stop tries them all (a
    stop a test was four waits of STOP_S)."""
    body = b"name=nobody&password=wrong"
    opened: list = []
    stopped: list[int] = []

    def made(conn):  # type: ignore[no-untyped-def]
        opened.append(conn)
        return conn

    def stop(target: ServerProc) -> None:
        time.sleep(0.2)  # the server has armed its deadlines (if not yet, these tests can only pass)
        os.kill(target.proc.pid, signal.SIGSTOP)
        stopped.append(target.proc.pid)

    try:
        try:
            fresh = made(http.client.HTTPConnection(*_address(read_only), timeout=60))  # its read deadline
            fresh.connect()
            ready = {"read-only": [fresh] + [made(_kept_alive(read_only)) for _ in range(2)]}
            stop(read_only)
            ready["stall"] = made(socket.create_connection(_address(server)))  # headers begun in the stop
            ready["body"] = made(socket.create_connection(_address(server)))  # its headers now, its body in the stop
            ready["body"].sendall(b"POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                                  b"application/x-www-form-urlencoded\r\nContent-Length: %d\r\n\r\n" % len(body))
            ready["GET"], ready["POST"] = made(_kept_alive(server)), made(_kept_alive(server))  # idle: keep-alive deadlines
            stop(server)
            time.sleep(STOP_S)
            ready["GET"].request("GET", "/login")
            ready["POST"].request("POST", "/login", body=b"username=nobody&password=wrong",
                                  headers={"content-type": "application/x-www-form-urlencoded"})
            for conn in ready["read-only"]:
                conn.request("GET", "/health")
            ready["stall"].sendall(b"POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            ready["body"].sendall(body)
        finally:
            for pid in stopped:
                os.kill(pid, signal.SIGCONT)
        yield ready
    finally:
        for conn in opened:
            conn.close()


def test_a_request_sent_while_the_server_was_stopped_is_served(one_stop: dict) -> None:
    """A GET and a POST, each on its own idle connection, sent in the stop."""
    for method in ("GET", "POST"):
        answer = one_stop[method].getresponse()  # before the fix: ConnectionResetError / RemoteDisconnected
        answer.read()
        assert 200 <= answer.status < 500 and answer.status != 408, (method, answer.status)


def test_a_request_sent_while_the_read_only_server_was_stopped_is_served(one_stop: dict) -> None:
    """uvicorn on uvloop, whose timers run before it reads: its deadlines closed the connection with
    the request unread (on a kept-alive connection, 2 of 3 dropped, seen). In the stop, each
    deadline its connection's own: a new connection (the read deadline, from its opening) and two
    kept-alive ones (the keep-alive deadline)."""
    for conn in one_stop["read-only"]:
        answer = conn.getresponse()  # before the fix: ConnectionResetError
        answer.read()
        assert answer.status == 200


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


def test_a_stall_does_not_give_a_slow_client_more_time(one_stop: dict) -> None:
    """Headers begun while the server was stopped, never finished: the bytes that waited are read,
    and the connection is then closed like any other slow client's."""
    assert _closed_within(one_stop["stall"], 30) == b""


def test_a_client_trickling_its_headers_is_disconnected_and_others_are_served(read_only: ServerProc) -> None:
    """Slowloris on the read-only server: a request must arrive whole within --read-timeout, however
    often its bytes come (four a second here, each well within the deadline of the one before: an idle
    deadline would never close these); a connection that sends nothing is closed too, and a normal
    client is answered meanwhile."""
    host, port = _address(read_only)
    slow = [socket.create_connection((host, port), timeout=60) for _ in range(3)]  # one silent, two trickle
    try:
        request = f"GET /health HTTP/1.1\r\nHost: {host}:{port}\r\nX-Slow: " + "a" * 400
        started = time.monotonic()
        closed = set()
        for i, byte in enumerate(request.encode()):
            for k, s in enumerate(slow[1:], 1):
                if k in closed:
                    continue
                try:
                    s.sendall(bytes([byte]))
                except OSError:
                    closed.add(k)
            if i == 1:
                status, _, _ = read_only.get("/health")  # a normal client, while they trickle
                assert status == 200
            if len(closed) == 2 or time.monotonic() - started > 60:
                break
            time.sleep(0.25)
        for s in slow:  # each is closed by the server: the read ends, with nothing answered
            assert _closed_within(s, 30) == b""
        assert len(closed) == 2, "a trickling client was never cut off"
    finally:
        for s in slow:
            s.close()


# The forms a visitor's POST reaches the body of, and those only a member's (an admin's) does. A
# move in a game (/play/ID/act) reads its body after finding its game, which this test has none of;
# the deadline is the same for every route.
VISITORS = ["/login", "/signup", "/logout", "/play", "/submit"]
MEMBERS = ["/account/tokens", "/account/tokens/1/revoke", "/notifications/webhook", "/notifications/webhook/clear",
           "/admin/bots", "/admin/accounts/admin/suspend", "/admin/ladders/classic-2p/close"]


def _slow_body(server: ServerProc, path: str, source: str, cookie: str = "") -> socket.socket:
    """A POST whose headers promise a body, of which one byte comes; from its own loopback address,
    so that the write limit (per address, for a visitor) answers none of them first."""
    sock = socket.socket()
    sock.bind((source, 0))
    sock.connect(_address(server))
    sock.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\n"
                 f"Content-Length: 1000\r\n{cookie}\r\nn".encode())
    return sock


def test_slow_bodies_on_every_form_are_answered_408_and_closed(server: ServerProc) -> None:
    """What must be refused: the body of any form not arrived whole within the read deadline. Three
    visitors sending slowly on each of a visitor's forms, and an admin on each of a member's (one
    each: a person's writes share one bucket of ten); an honest request is answered meanwhile."""
    cookie = "Cookie: " + "; ".join(f"{k}={v}" for k, v in server.admin.cookies.items()) + "\r\n"
    socks = [(path, _slow_body(server, path, f"127.0.{i}.{j + 2}")) for i, path in enumerate(VISITORS) for j in range(3)]
    socks += [(path, _slow_body(server, path, "127.0.0.1", cookie)) for path in MEMBERS]
    try:
        status, _, _ = server.request("POST", "/login", body=b"name=nobody&password=wrong",
                                      headers={"content-type": "application/x-www-form-urlencoded"})
        assert status in (401, 403), status  # read and judged
        answers = {}
        for path, sock in socks:
            answers.setdefault(path, set()).add(_closed_within(sock, 30).split(b"\r\n", 1)[0])
        assert answers == {path: {b"HTTP/1.1 408 "} for path in VISITORS + MEMBERS}, answers
    finally:
        for _, sock in socks:
            sock.close()


def test_a_body_sent_while_the_server_was_stopped_is_served(one_stop: dict) -> None:
    """A form's body that waited in the kernel while the server was stopped past its deadline is read."""
    sock = one_stop["body"]
    sock.settimeout(30)
    head = sock.recv(65536).split(b"\r\n", 1)[0]
    assert head.startswith(b"HTTP/1.1 4") and head != b"HTTP/1.1 408 ", head


def _through_deadline(app, receive) -> list[int]:
    """``app`` behind a 30 s body deadline on a fake clock; the statuses it answered."""
    import trio
    import trio.testing

    from arena.serve.limits import BodyDeadline
    statuses: list[int] = []

    async def send(message: dict) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    scope = {"type": "http", "method": "POST", "path": "/login", "headers": []}
    trio.run(BodyDeadline(app, 30.0), scope, receive, send, clock=trio.testing.MockClock(autojump_threshold=0))
    return statuses


async def _echo_after(seconds: float, scope: dict, receive, send) -> None:
    """A request that asks for its body only ``seconds`` after its headers (a busy server)."""
    import trio
    await trio.sleep(seconds)
    message = await receive()
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": message["body"]})


def test_a_body_the_server_was_slow_to_ask_for_is_not_late() -> None:
    """The body was there all along; the server asked for it after the deadline had passed."""
    import functools

    import trio

    async def arrived() -> dict:
        await trio.lowlevel.checkpoint()  # as a channel's receive: cancelled first if the deadline passed
        return {"type": "http.request", "body": b"name=x", "more_body": False}

    assert _through_deadline(functools.partial(_echo_after, 40.0), arrived) == [200]


def test_a_body_that_never_comes_is_late_on_a_fake_clock() -> None:
    import functools

    import trio

    async def never() -> dict:
        await trio.sleep_forever()

    assert _through_deadline(functools.partial(_echo_after, 0.0), never) == [408]
