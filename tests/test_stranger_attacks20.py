"""#35, an outside round on the operator's terminal, the local cluster and a referee that is not root.

What got through on 682bd3f, each now closed:
- a visitor whose form body stopped short of its length (no token, no account, a read-only server
  too) made a 500 and two tracebacks in the operator's log each time; a signed-in person's on a path
  of her own choosing put it there raw (escape codes and all);
- with bokeh installed, ``--cluster local`` served Dask's whole dashboard in plain HTTP to any local
  user, whose 8-bit request bytes then reached the operator's terminal as C1 controls through
  tornado's error log; any connection without the run's key printed a warning line (10,588 lines,
  2.3 MB, in 5 s from one process);
- a referee in a venv made from the system's Python gave contained bots the venv's path, which no
  seat's view holds: every contained Python bot forfeited its handshake.
"""

from __future__ import annotations

import io
import json
import logging
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HOSTILE = "\x1b]0;owned\x07\x1b[2J\u202e\x9b31m\rforged\x08"  # a title, a cleared screen, bidi, C1 CSI, CR, BS


def _raw_controls(text: str) -> list[str]:
    """The characters of ``text`` a terminal could act on (newlines aside)."""
    return sorted({c for c in text if not c.isprintable() and c != "\n"})


def _short_post(url: str, path: str, cookies: dict[str, str]) -> bytes:
    """POST ``path`` announcing 100 bytes of form, sending 9, then closing our side: the client left."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=60) as s:
        cookie = "; ".join(f"{k}={v}" for k, v in cookies.items())
        s.sendall((f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nCookie: {cookie}\r\n"
                   "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\ncsrf=abcd").encode())
        s.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := s.recv(4096):
            answer += chunk
        return answer


@pytest.mark.parametrize("writable", [False, True], ids=["read-only", "writable"])
def test_a_client_that_leaves_mid_form_is_no_500_and_no_line_in_the_log(tmp_path: Path, writable: bool) -> None:
    """The body of a form read by ``checked_form`` (log in, sign up, revoke a token...) ended by the
    client's leaving raised starlette's ClientDisconnect: a 500 with ``error serving PATH`` and two
    tracebacks on the operator's terminal, for anyone (no token, no account: /login), and for a
    signed-in person on a path she chose, written there raw. Now it is nobody's failure: nothing is
    answered to a client that left, nothing is logged."""
    pytest.importorskip("starlette", reason="arena serve needs the serve extra")
    pytest.importorskip("argon2", reason="accounts need the serve extra")
    from tests.test_serve import ServerProc, build_store
    from tests.test_serve_accounts import MANY_WRITES, invite, sign_up
    store = tmp_path / "data" / "arena.sqlite"
    build_store(store)
    server = ServerProc(store, *(("--allow-play", *MANY_WRITES) if writable else ()))
    try:
        paths = ["/login", "/signup"]
        cookies: dict[str, str] = {}
        if writable:  # a person with an account, on a path of her choosing
            alice, status, _ = sign_up(server, invite(store), "alice-a22b")
            assert status == 303
            cookies = alice.cookies
            paths.append("/account/tokens/%1B%5D0;owned%07%1B%5B2J%C2%9B31m/revoke")
        for path in paths:
            answer = _short_post(server.url, path, cookies)
            assert not answer.startswith(b"HTTP/1.1 500"), (path, answer[:200])
        assert server.get("/health")[0] == 200  # still serving (and past the requests above, in order)
        log = server.stderr()
        assert "Traceback" not in log and "ERROR" not in log, log[-3000:]
        assert not _raw_controls(log), log[-3000:]
    finally:
        server.stop()


LOGGERS = ("arena.serve", "uvicorn.error", "hypercorn.error", "tornado.application", "distributed.comm.tcp")


@pytest.fixture
def record_factory():
    """Put back the factory of log records a test changed (pytest's process serves every test)."""
    before = logging.getLogRecordFactory()
    yield
    logging.setLogRecordFactory(before)


def test_every_log_line_a_command_writes_shows_its_text_escaped(record_factory: None) -> None:
    """One place for every log line of an arena process, whoever made the handler: the root logger's
    (``arena serve``), uvicorn's own formatter, tornado's and Dask's loggers. A command installs it on
    its start; a visitor's path, a bot's words or an exception's text carrying them are shown as
    escapes, and a newline in such a text cannot start a forged line of its own."""
    from uvicorn.logging import DefaultFormatter

    from arena.cli.common import guard
    guard(lambda: None)()  # what every command of the CLI runs inside
    out = io.StringIO()
    plain, uvicorn_style = logging.StreamHandler(out), logging.StreamHandler(out)
    plain.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))  # arena serve's root
    uvicorn_style.setFormatter(DefaultFormatter("%(levelprefix)s %(message)s", use_colors=False))
    for name in LOGGERS:
        log = logging.getLogger(name)
        handler = uvicorn_style if name.startswith("uvicorn") else plain
        log.addHandler(handler)
        log.propagate = False
        try:
            log.error("error serving %s", f"/bots/{HOSTILE}\n2026-01-01 00:00:00 arena.serve ERROR forged line")
            log.warning("Uncaught exception GET %(uri)s", {"uri": f"/sitemap.json?{HOSTILE}"})
            try:
                raise ValueError(f"a bot said {HOSTILE}")
            except ValueError:
                log.exception("game %d failed", 7)
            log.warning("stack shown", stack_info=True)
        finally:
            log.removeHandler(handler)
            log.propagate = True
    text = out.getvalue()
    assert not _raw_controls(text), _raw_controls(text)
    assert "\\x1b]0;owned\\x07" in text and "\\u202e" in text and "\\x9b" in text and "\\r" in text
    assert not any(line.startswith("2026-01-01") for line in text.splitlines()), text  # no forged line
    assert "Traceback (most recent call last):\n" in text  # the code's own newlines are kept


LOCAL_CLUSTER = r"""
import json, socket, sys, urllib.error, urllib.request
from arena.tournament import cluster

def poke(address):
    host, port = address.rsplit("/", 1)[1].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(b"GET / HTTP/1.0\r\n\r\n\x9b\x1b")  # no TLS, no key: what any local user can send
        try:
            while s.recv(4096):
                pass
        except ConnectionResetError:
            pass

def main():
    client, local = cluster._connect("local:1")
    try:
        info = client.scheduler_info()["workers"]
        addresses = [local.scheduler_address, *info, *(w["nanny"] for w in info.values())]
        for address in addresses:
            poke(address)
        client.run(lambda: 1)  # after the pokes on each loop: each one's log line is written by now
        pages = {}
        for page in ("status", "individual-task-stream", "sitemap.json"):
            try:
                pages[page] = urllib.request.urlopen(
                    f"http://127.0.0.1:{local.scheduler.http_server.port}/{page}", timeout=30).status
            except urllib.error.HTTPError as e:
                pages[page] = e.code
        print(json.dumps({"poked": len(addresses), "pages": pages}), flush=True)
    finally:
        client.close()
        local.close()

if __name__ == "__main__":
    main()
"""


def test_a_local_cluster_gives_a_local_user_no_dashboard_no_line_on_the_terminal_and_no_scratch_space(
        tmp_path: Path) -> None:
    """``--cluster local`` listens on 127.0.0.1, where every local user can connect. Dask's own routes
    were gone, but its dashboard is another switch: it was on, served in plain HTTP (the whole Bokeh
    dashboard where bokeh is installed: the games, the workers, their call stacks; its missing-bokeh
    page elsewhere). Each connection without the run's key, to the scheduler, a nanny or a worker,
    printed a warning on the operator's terminal (or in the log file it fills). And its files went
    in Dask's ``dask-scratch-space`` of the temporary directory, which the first user to make it
    owns: a file by that name failed every local cluster at its start ("an arena bug", exit 70).
    Now no dashboard, no line, and a scratch folder of the run's own, gone when it ends."""
    pytest.importorskip("distributed", reason="clusters need the dask extra")
    tmp = tmp_path / "tmp"
    tmp.mkdir(mode=0o1777)
    tmp.chmod(0o1777)
    squat = tmp / "dask-scratch-space"  # another local user's, made before the run
    squat.write_text("mine\n")
    if os.geteuid() == 0:
        os.chown(squat, 65534, 65534)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp)}
    done = subprocess.run([sys.executable, "-c", LOCAL_CLUSTER], capture_output=True, text=True, timeout=300,
                          cwd=str(tmp_path), env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert squat.read_text() == "mine\n"
    assert not list(tmp.glob("palace-arena-cluster-*")), list(tmp.iterdir())  # the run's scratch: removed
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["poked"] == 3
    assert seen["pages"]["status"] == 404 and seen["pages"]["individual-task-stream"] == 404, seen
    assert "handshake" not in done.stderr and not _raw_controls(done.stderr), done.stderr[-3000:]


def test_a_referee_in_a_venv_of_the_systems_python_gives_its_seats_an_interpreter_they_can_see(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``python3 -m venv ~/venv`` with Debian's Python, then ``pip install palace-arena``: the commonest
    install. Its ``python`` is a link to /usr/bin/python3.11; the arena saw that it leads under /usr
    and gave contained Python bots the venv's own path, which a seat's view (the system, its folder,
    the package) does not hold: ``bwrap: execvp /home/bob/venv/bin/python: No such file or
    directory``, a handshake forfeit for every contained Python bot, root referee or not."""
    from arena.bots import launch
    system = next((p for p in ("/usr/bin/python3", "/usr/local/bin/python3") if os.path.exists(p)), None)
    if system is None or not os.path.realpath(system).startswith("/usr/"):
        pytest.skip("no system Python under /usr here")
    venv = tmp_path / "home" / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(system)
    monkeypatch.setattr(sys, "executable", str(venv / "python"))
    found = launch.python_for(True)
    assert found is not None
    python, _ = found
    assert not Path(python).is_relative_to(tmp_path), python  # the venv's link: in no seat's view
    assert os.path.samefile(python, system)


HELD_CLUSTER = r"""
import json, os, resource, sys
soft = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_NOFILE, (soft, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))  # the usual soft limit, scaled down
from arena.tournament import cluster

def main():
    client, local = cluster._connect("local:1")
    try:
        nannies = [w.address for w in local.workers.values()]
        print(" ".join([local.scheduler_address, *nannies, *client.scheduler_info()["workers"]]), flush=True)
        sys.stdin.readline()  # another local user has tried to hold idle connections to each
        files = len(os.listdir("/proc/self/fd"))
        ran = client.submit(sum, [1, 2], pure=False).result(timeout=120)
        print(json.dumps({"files": files, "ran": ran, "soft": resource.getrlimit(resource.RLIMIT_NOFILE)[0],
                          "workers": list(client.run(lambda: len(os.listdir("/proc/self/fd"))).values())}), flush=True)
    finally:
        client.close()
        local.close()

if __name__ == "__main__":
    main()
"""

HOLD = r"""
import encodings.idna, os, select, socket, sys, time  # (all loaded first: the interpreter's files may be root's alone)
os.setgid(65534)
os.setuid(65534)  # another local user, with no key of the run
held = []
for address in sys.argv[2:]:
    host, port = address.rsplit("/", 1)[1].rsplit(":", 1)
    held += [socket.create_connection((host, int(port)), timeout=60) for _ in range(int(sys.argv[1]))]
closed, deadline = 0, time.monotonic() + 60  # a bound only connections held open reach
poller = select.poll()
for s in held:
    poller.register(s, select.POLLIN)
open_ = {s.fileno(): s for s in held}
while open_ and time.monotonic() < deadline:
    for fd, _ in poller.poll(1000):
        closed += open_[fd].recv(1) == b""  # the listener closed it without a byte
        poller.unregister(fd)
        del open_[fd]
print(closed, len(held))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="acting as another local user needs root")
def test_idle_connections_of_a_local_user_do_not_take_a_local_clusters_files() -> None:
    """Dask's TLS handshake has no deadline: a connection that sends nothing holds a file of the
    listener until its maker lets go. 1,050 idle connections from any local user to a local
    cluster's scheduler took every file of a referee at the usual soft limit of 1,024 (asyncio
    logged a traceback per try, 43 MB in 40 s, and the run stalled). A local cluster's listeners
    now ask the kernel who made each loopback connection and close another user's unread: here,
    at a soft limit of 128, 200 connections to each of the scheduler, the nanny and the worker,
    every one closed, the processes' files few, and the cluster's work still run."""
    pytest.importorskip("distributed", reason="clusters need the dask extra")
    soft, each = 128, 200
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", HELD_CLUSTER, str(soft)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(ROOT), env=env)
    try:
        assert proc.stdout is not None and proc.stdin is not None
        addresses = proc.stdout.readline().split()
        assert len(addresses) == 3, addresses  # a scheduler, a nanny, a worker
        hold = subprocess.run([sys.executable, "-c", HOLD, str(each), *addresses], capture_output=True, text=True,
                              timeout=600)
        proc.stdin.write("\n")
        proc.stdin.flush()
        out, err = proc.communicate(timeout=300)
    finally:
        proc.kill()
        proc.wait()
    assert hold.returncode == 0, hold.stderr[-3000:]
    assert hold.stdout.split() == [str(3 * each)] * 2, hold.stdout  # every one closed unread
    assert proc.returncode == 0, err[-3000:]
    seen = json.loads(out.strip().splitlines()[-1])
    assert seen["ran"] == 3 and seen["soft"] == soft, seen  # (no limit raised: none is needed)
    assert seen["files"] < soft - 32 and all(n < soft - 32 for n in seen["workers"]), seen
    assert "Traceback" not in err, err[-3000:]


def test_a_local_cluster_that_cannot_tell_who_connected_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the kernel does not say who made a loopback connection, a local cluster would take
    every local user's idle connections again: it is refused with the reason, never run open."""
    pytest.importorskip("distributed", reason="clusters need the dask extra")
    from arena.tournament import cluster, localcomm
    monkeypatch.setattr(localcomm, "socket_owner", lambda *a: None)
    with pytest.raises(cluster.ClusterError, match="cannot keep other local users' connections off.*NETLINK_SOCK_DIAG"):
        cluster._connect("local:1")
