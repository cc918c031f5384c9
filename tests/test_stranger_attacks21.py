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
from functools import partial
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="arena serve needs the serve extra: pip install 'palace-arena[serve]'")

from arena.serve.limits import PER_ADDRESS  # noqa: E402
from tests.checks import reachable, running, until  # noqa: E402
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


PROBE_BOT = '''"""Lowest-first; says on stderr which kernel it runs on."""
import os
import sys

from arena.botkit import serve
from arena.strategies import lowest_first

sys.stderr.write("PROBE kernel=" + os.uname().release + "\\n")
sys.stderr.flush()
serve(lowest_first, "probe", "1.0")
'''


def _member_store(tmp_path: Path, ladders: dict[str, str]) -> tuple[Path, Path]:
    """A store whose ladders (name -> the file's settings) each hold the member ``probe@1.0`` (a
    bot that prints its kernel), and the ladders' folder."""
    from arena.tournament.store import Store
    bot = tmp_path / "probe"
    bot.mkdir()
    (bot / "bot.toml").write_text('name = "probe"\nversion = "1.0"\nauthor = "mallory"\n'
                                  'command = ["python3", "bot.py"]\n')
    (bot / "bot.py").write_text(PROBE_BOT)
    bot = reachable(bot)  # its private uid reads it (pytest's folders are 0700)
    folder = tmp_path / "ladders"
    folder.mkdir()
    store = tmp_path / "data" / "arena.sqlite"
    db = Store(store)
    for name, settings in ladders.items():
        (folder / f"{name}.toml").write_text(f'rules = "classic"\nseats = 2\nbots = ["random", "lowest"]\n{settings}\n')
        db.db.execute("INSERT INTO ladder_members (ladder, label, name, version, hash, ref, origin, placement, "
                      "registered) VALUES (?, 'probe@1.0', 'probe', '1.0', '', ?, 'submitted', 'p', 0)",
                      (name, str(bot)))
    db.close()
    return store, folder


def _play(server: ServerProc, form: dict[str, str]) -> dict:
    """A browser game as the page plays it: started, the person's every request answered with its
    first action, followed to its end; the last state."""
    import json
    from urllib.parse import urlencode
    status, headers, page = server.request("POST", "/play", urlencode({"token": server.token, **form}).encode(),
                                           {"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 303, page[-2000:]
    sid = headers["location"].rsplit("/", 1)[1]
    seen = 0
    while True:
        state = json.loads(server.get(f"/play/{sid}/state?seen={seen}")[2])
        for m in state["messages"]:
            if m["raw"].get("type") == "request":
                server.request("POST", f"/play/{sid}/act", json.dumps({"request": m["raw"]["id"], "action": 0}).encode(),
                               {"Content-Type": "application/json", "X-Arena-Token": server.token})
        seen = state["count"]
        if state["status"] not in ("starting", "playing"):
            return state


def test_browser_play_seats_a_ladder_member_in_the_sandbox_its_ladder_names(tmp_path: Path) -> None:
    """Attack: a stranger's bot placed on a ``gvisor = true`` ladder (its check and placement ran
    under gVisor, 'Linux 4.4.0') was chosen as an opponent at /play, and ran under bubblewrap on the
    host's kernel with the host's system view: its owner read the host's kernel release in her own
    replay's stderr. Now the game gets the member's ladder's containment: under gVisor where it
    runs, and where it cannot, the game fails saying so; never the host's kernel."""
    import json
    import os

    from arena.bots.probes import gvisor_problem_now
    from arena.tournament.store import Store
    store, folder = _member_store(tmp_path, {"strangers": "gvisor = true\none_seat_per_author = true"})
    server = ServerProc(store, "--allow-play", "--ladders", str(folder))
    try:
        state = _play(server, {"rules": "classic", "opponent": "probe@1.0", "seat": "1", "max_turns": "30"})
    finally:
        server.stop()
    if gvisor_problem_now() is not None:
        assert state["status"] == "failed" and "gVisor" in state["error"], state
        return
    assert state["status"] == "over", state
    db = Store(store, readonly=True)
    record = json.dumps(db.game_record(state["game"]))
    db.close()
    assert "PROBE kernel=" in record, json.loads(record)["faults"]
    assert f"PROBE kernel={os.uname().release}" not in record  # not the host's kernel: gVisor's own


def test_browser_play_refuses_members_whose_sandbox_it_cannot_know_or_share(tmp_path: Path) -> None:
    """A member is seated in what its ladder names (gVisor and the stranger view here); where its
    ladder file cannot be read, or two seated members' ladders name different sandboxes, there is
    no one sandbox to seat them in: refused with the reason, never the default."""
    from arena.bots.containment import Containment
    from arena.bots.filesystem import SystemView
    from arena.serve import play
    (tmp_path / "one").mkdir()
    store, folder = _member_store(tmp_path / "one", {"strangers": "gvisor = true\none_seat_per_author = true"})
    launcher = play.members_launcher(store, folder, ["probe@1.0"])
    assert launcher.containment is Containment.GVISOR and launcher.view is SystemView.STRANGER
    with pytest.raises(ValueError, match="cannot be read here"):
        play.members_launcher(store, tmp_path / "elsewhere", ["probe@1.0"])
    launcher = play.members_launcher(store, folder, [])  # bundled bots only: the default, as before
    assert launcher.containment is Containment.AUTO and launcher.view is SystemView.HOST
    (tmp_path / "two").mkdir()
    store, folder = _member_store(tmp_path / "two", {"strangers": "gvisor = true\none_seat_per_author = true",
                                                     "friends": "one_seat_per_author = false"})
    with pytest.raises(ValueError, match="different sandboxes"):
        play.members_launcher(store, folder, ["probe@1.0"])


def test_a_move_is_a_small_body_and_bad_numbers_in_it_are_a_400(tmp_path: Path) -> None:
    """Attack (with the token, on a game in play): ``{"request": Infinity}`` raised OverflowError and
    ``[[[...`` 100,000 deep RecursionError, each a 500 with a traceback in the log; a move's body
    was read whole whatever its size (a 400 MB one took the server from 530 MB to 1.5 GB), and moves
    are exempt from the write limit. Now a move is at most ``MOVE_BYTES``: past that 413 before the
    rest is read, and any body that is not two whole numbers a 400. A good move still counts."""
    import json
    from urllib.parse import urlencode

    from arena.serve.play import MOVE_BYTES
    store = tmp_path / "data" / "arena.sqlite"
    build_store(store)
    server = ServerProc(store, "--allow-play")
    try:
        status, headers, _ = server.request(
            "POST", "/play", urlencode({"token": server.token, "opponent": "random", "seat": "0"}).encode(),
            {"Content-Type": "application/x-www-form-urlencoded"})
        assert status == 303
        sid = headers["location"].rsplit("/", 1)[1]
        move = {"Content-Type": "application/json", "X-Arena-Token": server.token}
        for body in (b'{"request": Infinity, "action": 0}', b'{"request": 1e999, "action": 0}',
                     b'{"request": NaN, "action": 0}', b"[" * (MOVE_BYTES - 4), b'{"request": "9' + b"9" * 900 + b'"}'):
            status, _, answer = server.request("POST", f"/play/{sid}/act", body, move)
            assert status == 400, (body[:40], status, answer[-300:])
        host, port = server.url.removeprefix("http://").rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=60) as sock:  # 400 MB announced, 64 KB sent
            sock.sendall(f"POST /play/{sid}/act HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                         f"X-Arena-Token: {server.token}\r\nContent-Length: {400 * 2**20}\r\n\r\n".encode() + b" " * 65536)
            assert sock.recv(200).startswith(b"HTTP/1.1 413"), "the body was read past its bound"
        sent: list[dict] = []
        while not any(m.get("type") == "request" for m in sent):  # the long poll answers each new message
            sent += [m["raw"] for m in json.loads(server.get(f"/play/{sid}/state?seen={len(sent)}")[2])["messages"]]
        first = next(m for m in sent if m.get("type") == "request")
        status, _, answer = server.request("POST", f"/play/{sid}/act",
                                           json.dumps({"request": first["id"], "action": 0}).encode(), move)
        assert status == 200 and json.loads(answer)["ok"], answer
        assert len(json.dumps({"request": 2**40, "action": 2**40})) < MOVE_BYTES
        log = server.stderr()
        assert "Traceback" not in log and "ERROR" not in log, log[-3000:]
    finally:
        server.stop()


def test_a_sign_up_without_an_invitation_costs_no_password_hash(tmp_path: Path) -> None:
    """Attack: a visitor with no invitation posted /signup with any code and a 10-character password;
    the server ran argon2id (64 MiB, 0.19 s of CPU here) before it looked at the code: 8 at once
    took 1.5 s of the server's CPU and 770 MB, bounded only by the write limit (login has a failure
    limiter, sign-up none). Now the invitation and the name are looked at first; the hash is made
    for a sign-up that can succeed only. (The page's own handler, with a hasher that counts.)"""
    import anyio
    from types import SimpleNamespace
    from urllib.parse import urlencode

    from starlette.requests import Request

    from arena.serve import auth
    from arena.serve.app import Options
    from arena.store.people import Role, create_invitation
    from arena.tournament.store import Store

    class Counting:
        def __init__(self) -> None:
            self.hashed = 0

        def hash(self, password: str) -> str:
            self.hashed += 1
            return "$argon2id$v=19$m=8,t=1,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNo"

    store = tmp_path / "data" / "arena.sqlite"
    Store(store).close()
    db = auth.open_write(store)
    code = create_invitation(db, Role.MEMBER, uses=1, hours=1, now=time.time(), by=None, origin="test")
    db.close()
    hasher = Counting()
    app = SimpleNamespace(state=SimpleNamespace(options=Options(store=store), hasher=hasher))

    def post(form: dict[str, str]) -> int:
        body = urlencode({"csrf": "t", **form}).encode()

        async def receive() -> dict:
            return {"type": "http.request", "body": body, "more_body": False}

        scope = {"type": "http", "method": "POST", "path": "/signup", "query_string": b"", "scheme": "http",
                 "headers": [(b"content-type", b"application/x-www-form-urlencoded"), (b"host", b"127.0.0.1")],
                 "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80), "session": {"csrf": "t"}, "app": app}
        return anyio.run(auth.signup, Request(scope, receive)).status_code

    password = "correct horse battery"
    assert post({"code": "no-such-code", "name": "mallory", "password": password}) == 400
    assert post({"code": code, "name": "-bad name-", "password": password}) == 400
    assert hasher.hashed == 0  # refused before the hash
    assert post({"code": code, "name": "mallory", "password": password}) == 303
    assert hasher.hashed == 1
    assert post({"code": code, "name": "eve", "password": password}) == 400  # used up: no hash either
    assert hasher.hashed == 1


def test_a_relative_server_path_is_hidden_as_a_path_not_inside_words() -> None:
    """Seen on the way: `arena serve --ladders lad` told an uploader "seeding [server path]der mini":
    the relative folder `lad` was replaced inside the word "ladder". It is hidden where it starts a
    path, and only there; an absolute one as before."""
    from arena.serve.submit import SERVER_PATH, hide_paths
    hidden = [(Path("lad"), SERVER_PATH)]
    assert hide_paths("seeding ladder mini (lad/mini.toml)", hidden) == f"seeding ladder mini ({SERVER_PATH}/mini.toml)"
    assert hide_paths("no ladder 'lad'", hidden) == f"no ladder '{SERVER_PATH}'"
    assert hide_paths(f"{Path('lad').resolve()}/mini.toml", hidden) == f"{SERVER_PATH}/mini.toml"


def test_a_member_cannot_take_a_bench_students_name_and_read_their_games(tmp_path: Path) -> None:
    """Attack: a course's bench (``arena serve --bench``) shows a member's grade, games and stderr to
    the account owning the bot's name. Its members are the organiser's folders, whose names nobody
    had claimed: Mallory uploaded a bot named as Ann's folder to any ladder, and /benches/cs101 showed
    her Ann's row, games and the stderr Ann's bot wrote. The bench's member and reference names are
    now the organiser's, as a ladder's initial bots are: such an upload is refused and claims nothing."""
    from tests.test_bench import bench_file
    from tests.test_serve_accounts import MANY_WRITES, _upload, club_ladders, invite, owners_among, sign_up
    path = bench_file(tmp_path / "course", deals=1)
    store = tmp_path / "data" / "arena.sqlite"
    build_store(store)
    server = ServerProc(store, "--allow-submit", "--bench", str(path), *club_ladders(tmp_path / "ladders"),
                        *MANY_WRITES)
    try:
        mallory, status, _ = sign_up(server, invite(store), "mallory")
        assert status == 303
        for name in ("ann", "strong"):  # a member's folder, a reference's
            status, _, page = _upload(mallory, name, "9.0", "mallory")
            assert status == 403 and "not yours" in page, (name, status, page[-1500:])
        assert owners_among(store, "mallory") == []
        status, _, page = _upload(mallory, "mallorys-own", "1.0", "mallory")  # a name of her own: taken
        assert status == 303, page[-1500:]
        assert owners_among(store, "mallory") == [("mallorys-own", "mallory")]
    finally:
        server.stop()


def test_a_bench_reads_its_members_with_the_one_folder_reader(tmp_path: Path) -> None:
    """Attack: a bench's members are students' folders, copied at the deadline with shutil.copytree.
    A 2 GiB sparse file in one (a few KB on disk) became 2.1 GB written into the bench's copies (a
    larger one fills the disk); a FIFO ended `arena bench` with a Python list's repr. And a root
    referee could not seat any member at all: the copies lay in the store's 0700 folder unmarked, so
    each was taken for a user's private folder ("a bot's private uid cannot use ..."). Copies are
    made by the folder reader (caps, no special files, sizes by length and blocks), refused naming
    the member and the file, and marked as the arena's own."""
    import datetime as dt
    import os

    import trio

    from arena.bots.folder import ARENA_COPIES
    from arena.tournament.bench import load_bench, run_bench, snapshot, snapshot_dir
    from arena.tournament.config import ConfigError
    from arena.tournament.store import Store
    from tests.test_bench import folder
    now = dt.datetime.now(dt.timezone.utc)
    for name in ("ann", "random"):
        folder(tmp_path / "bots", name)
    (tmp_path / "bench.toml").write_text('references = ["random"]\nmembers = ["bots/ann"]\ndeals = 1\n'
                                         'store = "data/s.sqlite"\ndeadline = "2026-01-01T00:00:00Z"\n'
                                         '[bands]\nA = 0.5\nF = 0.0\n')
    bench = load_bench(tmp_path / "bench.toml")
    sparse = tmp_path / "bots" / "ann" / "weights.bin"
    with open(sparse, "wb") as f:
        f.truncate(2 << 30)
    with pytest.raises(ConfigError, match="weights.bin: the bot's files exceed"):
        snapshot(bench, now)
    sparse.unlink()
    os.mkfifo(tmp_path / "bots" / "ann" / "notes")
    with pytest.raises(ConfigError, match="notes: a FIFO"):
        snapshot(bench, now)
    assert sum(f.stat().st_blocks for f in snapshot_dir(bench).rglob("*") if f.is_file()) < 64  # nothing kept
    (tmp_path / "bots" / "ann" / "notes").unlink()
    db = Store(bench.store)  # its folder 0700, as every store's
    try:
        labels = trio.run(lambda: run_bench(bench, db, now=now))  # the default launcher: contained as root
        assert labels == ["ann@1.0"] and (snapshot_dir(bench) / ARENA_COPIES).is_file()
        games = db.games(tournament=f"{bench.name}/ann@1.0", limit=10)
        assert len(games) == 2 and not any(g["result"].get("forfeits") for g in games), games
    finally:
        db.close()


def test_a_receiver_that_never_answers_holds_up_only_its_own_persons_deliveries(tmp_path: Path) -> None:
    """Attack: Mallory set her webhook to an address that accepts and never answers, and submitted
    bots that fail their check (no quota counts them; each failure is a notice). The one deliverer
    posted in order of due time, each of hers cut only at the timeout and tried again: Alice's
    notice, due after eight of Mallory's, reached Alice's receiver 65 s after her job ended. Now a
    batch takes one delivery per person and posts them at once: Alice's arrives while Mallory's
    first still hangs (its timeout an hour here)."""
    import json
    from types import SimpleNamespace

    import trio

    from arena.serve import notify
    from arena.serve.wake import Wake
    from arena.store.notes import notify as tell
    from arena.store.notes import take_due
    from arena.tournament.store import Store
    from tests.test_serve_notify import Receiver

    store = tmp_path / "data" / "arena.sqlite"
    hang = socket.socket()
    hang.bind(("127.0.0.1", 0))
    hang.listen(16)  # the kernel accepts; nobody ever answers
    alices = Receiver()
    s = Store(store)
    s.db.execute("INSERT INTO accounts (name, password, role, created) VALUES ('mallory', 'x', 'member', 0), "
                 "('alice', 'x', 'member', 0)")
    s.db.execute("INSERT INTO webhooks VALUES (1, ?, 'k1', 0), (2, ?, 'k2', 0)",
                 (f"http://127.0.0.1:{hang.getsockname()[1]}/", alices.url))
    for n in range(8):
        tell(s.db, 1, "check failed", f"mallory's failure {n}", "/", 100.0 + n)
    tell(s.db, 2, "check failed", "alice's notice", "/", 200.0)
    s.close()
    options = SimpleNamespace(store=store, local_webhooks=True, webhook_timeout_s=3600.0)
    app = SimpleNamespace(state=SimpleNamespace(options=options, outbox_wake=Wake()))

    async def main() -> None:
        async with running(partial(notify.deliver_due, app)):  # bounded should it wait behind Mallory's hour
            await until(lambda: alices.got)

    try:
        trio.run(main)
    finally:
        hang.close()
        alices.close()
    assert b"alice's notice" in alices.got[0][1]
    s = Store(store)
    try:  # a batch is one per person, each person's oldest first
        s.db.execute("UPDATE outbox SET next_at=0 WHERE delivered IS NULL")
        texts = [json.loads(d.body)["text"] for d in take_due(s.db, 1.0)]  # (Alice's too, if its end was not written)
        assert [t for t in texts if t.startswith("mallory")] == ["mallory's failure 0"], texts
    finally:
        s.close()


def test_visitors_without_an_account_cannot_take_the_members_upload_slots(tmp_path: Path) -> None:
    """Attack: one sender holds one upload slot while its body trickles in (test_stranger_attacks5),
    but a sender with no account is its address: four visitors at four addresses, sending a byte a
    second, held all four slots for the read deadline, again and again, and every member's upload
    was answered 503. A sender nobody knows yet (no session, no API token, no token cookie) now
    holds one visitors' slot besides: the second visitor is turned away, and a member's upload
    (an API token here) is read and judged while the first visitor still trickles."""
    import trio
    import trio.testing

    from arena.serve.app import Options, build_app
    from arena.store.people import Role, Scope, create_invitation, create_token, sign_up
    from arena.tournament.store import Store
    from tests.test_stranger_attacks5 import HEAD, _honest_body, trickle

    store = tmp_path / "data" / "arena.sqlite"
    db = Store(store)
    code = create_invitation(db.db, Role.MEMBER, uses=1, hours=1, now=time.time(), by=None, origin="test")
    alice = sign_up(db.db, code, "alice", "h", now=time.time(), origin="test")
    token = create_token(db.db, alice, "ci", {Scope.SUBMIT}, now=time.time(), origin="test")
    db.close()
    options = Options(store=store, allow_submit=True, token="right", read_timeout_s=3600.0)
    answers: dict[str, list[int]] = {}
    app: list = []

    async def main() -> None:
        async with running() as nursery:  # every wait below is for a state
            app.append(build_app(options, nursery))
            for i in range(1, 5):  # four visitors at four addresses, a byte a second
                nursery.start_soon(trickle, app[0], answers, f"visitor-{i}", f"10.0.0.{i}", [HEAD] + [b"A"] * 100_000, 1.0)
                await trio.testing.wait_all_tasks_blocked()  # its slot taken, or refused, before the next
            assert app[0].state.sending == set()  # a club's server: visitors hold none (test_stranger_attacks22)
            nursery.start_soon(trickle, app[0], answers, "member", "10.0.0.9", [_honest_body()], 0.0,
                               [(b"authorization", f"Bearer {token}".encode())])
            await until(lambda: "member" in answers)
            assert answers["member"] == [400], answers  # read and judged (no ladder offered), not 503
            assert "visitor-1" not in answers  # still trickling, its slot held

    trio.run(main)
