"""People on ``arena serve``: the first admin made at the terminal, sign-up with an invitation,
login (argon2, rate-limited), sessions in signed HttpOnly SameSite=Strict cookies, CSRF on every
form; the guards of browser play and the token cookie; and every write route, read from the
route table, refusing a request that carries no person or token.
"""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import time
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette", reason="arena serve needs the serve extra: pip install 'palace-arena[serve]'")
pytest.importorskip("argon2", reason="accounts need the serve extra: pip install 'palace-arena[serve]'")

from arena.store.people import Role, create_invitation
from tests.checks import arena_here
from tests.test_serve import ServerProc, arena_cmd, build_store

FORM = {"Content-Type": "application/x-www-form-urlencoded"}
PASSWORD = "correct horse battery"


class Browser:
    """One visitor: its own cookies, sent back to the server that set them."""

    def __init__(self, server: ServerProc):
        self.server = server
        self.cookies: dict[str, str] = {}
        self.set_cookie_headers: list[str] = []

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], str]:
        headers = dict(headers or {})
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        host, port = self.server.url.removeprefix("http://").rsplit(":", 1)
        import http.client
        conn = http.client.HTTPConnection(host, int(port), timeout=60)
        try:
            conn.request(method, path, body=body, headers=headers)
            r = conn.getresponse()
            for k, v in r.getheaders():
                if k.lower() == "set-cookie":
                    self.set_cookie_headers.append(v)
                    name, _, rest = v.partition("=")
                    value = rest.split(";", 1)[0]
                    if value in ("", '""', "null") or "expires=Thu, 01 Jan 1970" in v:
                        self.cookies.pop(name, None)
                    else:
                        self.cookies[name] = value
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read().decode()
        finally:
            conn.close()

    def csrf(self, path: str) -> str:
        status, _, page = self.request("GET", path)
        assert status == 200, page
        m = re.search(r'name="csrf" value="([^"]+)"', page)
        assert m, page
        return m.group(1)

    def post(self, path: str, fields: dict[str, str], headers: dict[str, str] | None = None
             ) -> tuple[int, dict[str, str], str]:
        return self.request("POST", path, urllib.parse.urlencode(fields).encode(), {**FORM, **(headers or {})})


def first_admin_code(store: Path) -> str:
    code, out, err = arena_here("accounts", "first-admin", "--store", str(store))
    assert code == 0, err
    m = re.search(r"/signup\?code=(\S+)", out)
    assert m, out
    return m.group(1)


def invite(store: Path, uses: int = 1, hours: float = 1.0, now: float | None = None) -> str:
    db = sqlite3.connect(store, isolation_level=None)
    try:
        return create_invitation(db, Role.MEMBER, uses=uses, hours=hours, now=now or time.time(), by=None,
                                 origin="test")
    finally:
        db.close()


def sign_up(server: ServerProc, code: str, name: str, password: str = PASSWORD) -> tuple[Browser, int, str]:
    b = Browser(server)
    token = b.csrf(f"/signup?code={code}")
    status, headers, page = b.post("/signup", {"csrf": token, "code": code, "name": name, "password": password})
    return b, status, page if status != 303 else headers["location"]


def _rows(store: Path, sql: str) -> list[tuple]:
    db = sqlite3.connect(store)
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


# One test client posts for every person of a club from one address: the per-address write limit
# (tests/test_serve_cache.py holds it) would refuse the club's later forms with 429.
MANY_WRITES = ("--writes-per-minute", "60000")


def club_ladders(folder: Path, setting: str = "one_seat_per_author = false") -> tuple[str, str]:
    """``--ladders`` holding the bundled classic-2p with ``setting`` on top: a club's store turns
    one_seat_per_author on for a file that leaves it out (docs/CLUB.md), so a club's ladder says how
    its seats are set. The default: the organiser lets one author's bots share a table."""
    folder.mkdir(parents=True, exist_ok=True)
    bundled = (Path(__file__).resolve().parent.parent / "ladders" / "classic-2p.toml").read_text()
    (folder / "classic-2p.toml").write_text(f"{setting}\n{bundled}")
    return "--ladders", str(folder)


@pytest.fixture(scope="module")
def club(tmp_path_factory):
    """The module's one club server (play and uploads allowed, the club's ladder file). Its people
    are made per test with names no other test uses, and what a test compares of the store is read
    for its own people only: a test neither sees nor leaves what another does, in any order. The
    first admin's link is printed at its start, so the test that signs up with it may come after a
    test that made an admin by invitation."""
    base = tmp_path_factory.mktemp("club")
    store = base / "data" / "arena.sqlite"
    build_store(store)
    first = first_admin_code(store)
    server = ServerProc(store, "--allow-play", "--allow-submit", *club_ladders(base / "ladders"), *MANY_WRITES)
    server.store, server.first_admin = store, first  # type: ignore[attr-defined]
    yield server
    server.stop()


def admin_by_invitation(server: ServerProc, name: str) -> Browser:
    """An admin of the club's server, invited by the store (the first admin's link is another test's)."""
    db = sqlite3.connect(server.store, isolation_level=None)  # type: ignore[attr-defined]
    try:
        code = create_invitation(db, Role.ADMIN, uses=1, hours=1, now=time.time(), by=None, origin="test")
    finally:
        db.close()
    admin, status, where = sign_up(server, code, name)
    assert (status, where) == (303, "/account")
    return admin


def test_the_first_admin_signs_up_with_the_link_printed_at_the_terminal_once(club: ServerProc) -> None:
    store: Path = club.store  # type: ignore[attr-defined]
    code = club.first_admin  # type: ignore[attr-defined]
    admin, status, where = sign_up(club, code, "root")
    assert (status, where) == (303, "/account")
    status, _, page = admin.request("GET", "/account")
    assert status == 200 and "Logged in as <strong>root</strong> (admin)" in page
    again, status, page = sign_up(club, code, "mallory")
    assert status == 400 and "used as many times as it allows" in page
    assert _rows(store, "SELECT name, role FROM accounts WHERE name IN ('root', 'mallory')") == [("root", "admin")]
    # in this process: an exception would be raised here, where a real process prints a traceback
    code, _, err = arena_here("accounts", "first-admin", "--store", str(store))
    assert code == 2 and err.startswith("error:") and "admin already" in err


@pytest.mark.parametrize("case", ["expired", "used", "duplicate", "short-password", "unknown-code"])
def test_a_refused_sign_up_shows_why_and_changes_nothing(club: ServerProc, case: str) -> None:
    store: Path = club.store  # type: ignore[attr-defined]
    name, password = f"p-{case}", PASSWORD
    if case == "expired":
        code, why = invite(store, now=time.time() - 7200), "expired"
    elif case == "used":
        code = invite(store)
        assert sign_up(club, code, f"first-{case}")[1] == 303
        why = "used as many times"
    elif case == "duplicate":
        code = invite(store, uses=2)
        assert sign_up(club, code, "Taken-Name")[1] == 303
        name, why = "taken-name", "is taken"
    elif case == "short-password":
        code, password, why = invite(store), "short", "at least"
    else:
        code, why = "no-such-code", "not valid"
    before = _rows(store, "SELECT * FROM accounts ORDER BY id"), _rows(store, "SELECT * FROM invitations")
    b, status, page = sign_up(club, code, name, password)
    assert status == 400 and why in page and 'id="error"' in page
    assert (_rows(store, "SELECT * FROM accounts ORDER BY id"), _rows(store, "SELECT * FROM invitations")) == before
    assert "uid" not in b.cookies.get("arena_session", "")  # not logged in
    assert b.request("GET", "/account")[0] == 403


def test_login_with_the_right_password_only(club: ServerProc) -> None:
    store: Path = club.store  # type: ignore[attr-defined]
    sign_up(club, invite(store), "login-ok")
    b = Browser(club)
    status, _, page = b.post("/login", {"csrf": b.csrf("/login"), "name": "login-ok", "password": PASSWORD + "x"})
    assert status == 401 and "Wrong name or password" in page
    assert b.request("GET", "/account")[0] == 403
    status, headers, _ = b.post("/login", {"csrf": b.csrf("/login"), "name": "login-ok", "password": PASSWORD})
    assert (status, headers["location"]) == (303, "/account")
    assert "Logged in as <strong>login-ok</strong> (member)" in b.request("GET", "/account")[2]
    status, _, _ = b.post("/logout", {"csrf": b.csrf("/account")})
    assert status == 303 and b.request("GET", "/account")[0] == 403
    stored = _rows(store, "SELECT password FROM accounts WHERE name='login-ok'")[0][0]
    assert stored.startswith("$argon2id$") and PASSWORD not in stored


def test_a_session_cookie_is_signed_httponly_and_same_site_strict(club: ServerProc) -> None:
    store: Path = club.store  # type: ignore[attr-defined]
    b, status, _ = sign_up(club, invite(store), "cookie-check")
    assert status == 303
    header = next(h for h in reversed(b.set_cookie_headers) if h.startswith("arena_session="))
    flags = {f.strip().lower() for f in header.split(";")[1:]}
    assert "httponly" in flags and "samesite=strict" in flags
    forged = Browser(club)  # a cookie edited by hand does not log anyone in
    value = b.cookies["arena_session"]
    forged.cookies["arena_session"] = value[:-2] + ("AA" if not value.endswith("AA") else "BB")
    assert forged.request("GET", "/account")[0] == 403
    assert b.request("GET", "/account")[0] == 200


def test_forms_need_this_sessions_csrf_token_and_this_sites_origin(club: ServerProc) -> None:
    store: Path = club.store  # type: ignore[attr-defined]
    sign_up(club, invite(store), "csrf-check")
    b = Browser(club)
    other = Browser(club)
    fields = {"name": "csrf-check", "password": PASSWORD}
    assert b.post("/login", fields)[0] == 403                                    # no token
    assert b.post("/login", {**fields, "csrf": other.csrf("/login")})[0] == 403  # another session's
    b.csrf("/login")
    token = b.csrf("/login")
    assert b.post("/login", {**fields, "csrf": token}, {"Origin": "http://attacker.example"})[0] == 403
    assert b.request("GET", "/account")[0] == 403
    assert b.post("/login", {**fields, "csrf": token})[0] == 303


@pytest.fixture(scope="module")
def short_of_disk(tmp_path_factory):
    """A second server, asking more free disk of an upload than any disk holds. The failed-login
    test spends this server's login failures for the test client's address, which would refuse the
    club's later logins (the limit counts the address too); no test logs in here but that one."""
    store = tmp_path_factory.mktemp("short") / "data" / "arena.sqlite"
    build_store(store)
    server = ServerProc(store, "--allow-submit", "--min-free-mb", str(10**12), *MANY_WRITES)
    server.store = store  # type: ignore[attr-defined]
    yield server
    server.stop()


def test_failed_logins_are_limited_even_for_the_right_password(short_of_disk: ServerProc) -> None:
    server = short_of_disk
    sign_up(server, invite(server.store), "victim")  # type: ignore[attr-defined]
    b = Browser(server)
    for _ in range(5):
        status, _, page = b.post("/login", {"csrf": b.csrf("/login"), "name": "victim", "password": "guess-guess"})
        assert status == 401, page
    status, _, page = b.post("/login", {"csrf": b.csrf("/login"), "name": "victim", "password": PASSWORD})
    assert status == 429 and "Too many failed logins" in page
    assert b.request("GET", "/account")[0] == 403


# --------------------------------------------------------------------------- the guards of today's web

def test_the_token_cookie_is_httponly_and_same_site_strict(club: ServerProc) -> None:
    b = Browser(club)
    status, _, _ = b.request("GET", f"/?token={club.token}")
    assert status == 200
    header = next(h for h in b.set_cookie_headers if h.startswith("arena_token="))
    flags = {f.strip().lower() for f in header.split(";")[1:]}
    assert "httponly" in flags and "samesite=strict" in flags
    wrong = Browser(club)
    assert wrong.request("GET", "/?token=wrong")[0] == 200 and "arena_token" not in wrong.cookies


def _started_game(server: ServerProc) -> str:
    """A browser game started by a member of its own (one person plays one game at a time)."""
    import secrets
    b, status, _ = sign_up(server, invite(server.store), f"player-{secrets.token_hex(4)}")  # type: ignore[attr-defined]
    assert status == 303
    status, headers, page = b.post("/play", {"token": server.token, "opponent": "random", "rules": "classic",
                                             "move_ms": "30000", "max_turns": "100"})
    assert status == 303, page
    return headers["location"].rsplit("/", 1)[1]


def test_a_move_needs_the_token_and_this_sites_origin(club: ServerProc) -> None:
    sid = _started_game(club)
    move = json.dumps({"request": 10**9, "action": 0}).encode()  # no such request: the game ignores it
    kinds = {"Content-Type": "application/json"}
    b = Browser(club)
    assert b.request("POST", f"/play/{sid}/act", move, kinds)[0] == 403                 # nothing
    assert b.request("POST", f"/play/{sid}/act", move, {**kinds, "X-Arena-Token": "wrong"})[0] == 403
    assert b.request("POST", f"/play/{sid}/act", move, {**kinds, "X-Arena-Token": club.token,
                                                          "Origin": "http://attacker.example"})[0] == 403
    b.request("GET", f"/?token={club.token}")                                          # the cookie, then
    assert "arena_token" in b.cookies
    assert b.request("POST", f"/play/{sid}/act", move, {**kinds, "Origin": "http://attacker.example"})[0] == 403
    assert b.request("POST", f"/play/{sid}/act", move, {**kinds, "X-Arena-Token": club.token})[0] == 200


# --------------------------------------------------------------------------- every write route

def _route_table() -> list[tuple[str, set[str]]]:
    """(path, methods) of every route of the app, read from the app itself."""
    import trio

    from arena.serve.app import Options, build_app

    found: list[tuple[str, set[str]]] = []

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            app = build_app(Options(store=Path("/nonexistent/arena.sqlite"), allow_play=True, allow_submit=True,
                                    writes_per_s=1000.0),
                            nursery)
            for route in app.routes:
                methods = getattr(route, "methods", None)
                if methods is not None:
                    found.append((route.path, set(methods)))
            nursery.cancel_scope.cancel()

    trio.run(main)
    return found


WRITE_METHODS = {"POST", "PUT", "PATCH", "DELETE"}


def test_every_write_route_refuses_a_request_without_a_person_or_token(club: ServerProc) -> None:
    """On the club's server (play and uploads allowed): each request is refused before its form is
    read, so it counts no failed login and changes nothing the club's other tests read."""
    routes = [(p, m & WRITE_METHODS) for p, m in _route_table() if m & WRITE_METHODS]
    assert {"/login", "/signup", "/logout", "/play", "/submit", "/play/{sid}/act"} <= {p for p, _ in routes}
    sid = _started_game(club)
    for path, methods in routes:
        url = re.sub(r"\{sid[^}]*\}", sid, re.sub(r"\{(?!sid)[^}]*\}", "x", path))
        for method in methods:
            for headers in ({}, {"Origin": "http://attacker.example"}):
                b = Browser(club)
                status, _, page = b.request(method, url, b"name=x&password=y&csrf=&token=", {**FORM, **headers})
                assert status == 403, (method, path, headers, status, page[:300])


# --------------------------------------------------------------------------- bots owned by their submitter

def owners_among(store: Path, *people: str) -> list[tuple]:
    """(bot, owner) of every bot these people own, by bot name: a test's own rows of the club's store."""
    marks = ",".join("?" * len(people))
    db = sqlite3.connect(store)
    try:
        return db.execute("SELECT b.name, a.name FROM bot_owners b JOIN accounts a ON a.id=b.account "
                          f"WHERE a.name IN ({marks}) ORDER BY b.name", people).fetchall()
    finally:
        db.close()


@pytest.fixture
def submit_club(tmp_path: Path):
    """A fresh store served with --allow-submit, and two members who joined by one invitation:
    (store path, server, alice's browser, bob's browser). For tests that read the whole store
    (tests/test_stranger_attacks.py); this module's own use the club's server (members_pair)."""
    store = tmp_path / "data" / "arena.sqlite"
    build_store(store)
    server = ServerProc(store, "--allow-submit", *club_ladders(tmp_path / "ladders"), *MANY_WRITES)
    try:
        code = invite(store, uses=2)
        alice, _, _ = sign_up(server, code, "alice")
        bob, _, _ = sign_up(server, code, "bob")
        yield store, server, alice, bob
    finally:
        server.stop()


@pytest.fixture
def members_pair(club: ServerProc, request: pytest.FixtureRequest):
    """Two members of the club who joined by one invitation, named for the test:
    (store path, server, alice's browser, bob's browser, alice's name, bob's name)."""
    store: Path = club.store  # type: ignore[attr-defined]
    tag = request.node.name.removeprefix("test_")[:12].rstrip("_")
    names = f"alice-{tag}", f"bob-{tag}"
    code = invite(store, uses=2)
    alice, _, _ = sign_up(club, code, names[0])
    bob, _, _ = sign_up(club, code, names[1])
    return store, club, alice, bob, *names


def _bot_zip(name: str, version: str, author: str) -> bytes:
    from tests.test_serve import zip_bytes
    manifest = f'name = "{name}"\nversion = "{version}"\nauthor = "{author}"\ncommand = ["false"]\n'
    return zip_bytes({"bot.toml": manifest.encode()})


def _upload(b: Browser, name: str, version: str, author: str) -> tuple[int, dict[str, str], str]:
    from tests.test_serve import multipart
    body, ctype = multipart({"ladder": "classic-2p", "csrf": b.csrf("/submit")},
                            ("bot.zip", _bot_zip(name, version, author)))
    return b.request("POST", "/submit", body, {"Content-Type": ctype})


def test_only_the_owner_submits_versions_of_a_bot(members_pair) -> None:
    store, _, alice, bob, her, him = members_pair
    status, headers, page = _upload(alice, "owned-bot", "1.0", her)
    assert status == 303 and headers["location"].startswith("/submit/"), page[-2000:]
    assert owners_among(store, her, him) == [("owned-bot", her)]
    uploads = store.parent / "uploads"
    before = sorted(p.name for p in uploads.iterdir())
    for name, version, author, why in [("owned-bot", "1.0.1", "me", "belongs to another account"),
                                       ("owned-bot", "1.0.1", her, "belongs to another account"),
                                       ("alpha", "9.0", him, "not yours")]:  # a ladder bot nobody owns
        status, _, page = _upload(bob, name, version, author)
        assert status == 403 and why in page, (name, page[-2000:])
    # A refused upload leaves nothing behind. Accepted ones may be gone meanwhile: an upload's folder
    # is removed when its job ends, and the queue runs beside this test.
    assert {p.name for p in uploads.iterdir()} <= set(before)
    assert owners_among(store, her, him) == [("owned-bot", her)]
    status, _, page = _upload(alice, "owned-bot", "1.1", "anyone")  # the owner's next version
    assert status == 303, page[-2000:]
    audit = _rows(store, "SELECT a.action, a.target FROM audit a JOIN accounts p ON p.id=a.account "
                         f"WHERE p.name='{her}' AND a.action='claim'")
    assert audit == [("claim", "bot:owned-bot")]


def test_one_seat_per_author_counts_the_account_not_the_manifest(tmp_path: Path) -> None:
    """Two bots whose manifests name different authors but one account owns never share a table."""
    from arena.store.people import Role as R, claim_bot, sign_up as join
    from arena.tournament.config import load_bots, load_config
    from arena.tournament.run import table_authors
    from arena.tournament.schedule import schedule
    from arena.tournament.store import Store
    from tests.test_think_time import _bot
    bots = [_bot(tmp_path, "a1", "Alice"), _bot(tmp_path, "a2", "someone else"), _bot(tmp_path, "b1", "Bob"),
            _bot(tmp_path, "m1", "alice")]
    store = Store(tmp_path / "s.sqlite")
    try:
        code = create_invitation(store.db, R.MEMBER, uses=1, hours=1, now=1.0, by=None, origin="test")
        alice = join(store.db, code, "alice", "h", now=2.0, origin="test")
        for name in ("a1", "a2"):
            claim_bot(store.db, name, alice, taken=False, now=3.0, origin="test")
        cfg = load_config(None, {"bots": bots, "one_seat_per_author": True, "accept_kernel_channels": True, "seats": 2})
        specs = load_bots(cfg)
        authors = table_authors(specs, store)
    finally:
        store.close()
    assert authors == {"a1@1.0": "alice", "a2@1.0": "alice", "b1@1.0": "Bob", "m1@1.0": "alice"}
    tables = {frozenset(g.seats) for g in schedule(cfg, {r: s.label for r, s in specs.items()}, b"k" * 32, authors)}
    assert frozenset({"a1@1.0", "a2@1.0"}) not in tables and frozenset({"a1@1.0", "b1@1.0"}) in tables


# --------------------------------------------------------------------------- private lines

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "store_v0.sqlite"


def _private_store(store: Path) -> str:
    """A store with one real game between alice-bot and bob-bot whose every step and tail carries
    its seat's secret lines, and one faulted game of alice-bot; returns the real game's id."""
    import zlib

    from arena.tournament.store import Store
    from tests.test_serve import fake_record
    old = sqlite3.connect(FIXTURE)
    record = json.loads(zlib.decompress(old.execute("SELECT log FROM game_logs WHERE game='mini-000001'").fetchone()[0]))
    old.close()
    seats = ["alice-bot@1.0", "bob-bot@1.0"]
    record["players"] = seats
    for step in record["steps"]:
        if isinstance(step.get("seat"), int):
            step["stderr"] = [f"SECRET-ERR-{step['seat']}"]
            step["info"] = {"text": f"SECRET-INFO-{step['seat']}"}
    record["stderr"] = [["SECRET-TAIL-0"], ["SECRET-TAIL-1"]]
    db = Store(store)
    try:
        db.begin_tournament("t", {"format": "round-robin"}, 2)
        db.save_game("t", 0, seats, record)
        faulted = fake_record("faulted-1", seats, [[1], [0]], {"0": "bad_json"})
        faulted["faults"][0]["message"] = "bad_json: the bot wrote SECRET-FAULT-0"
        db.save_game("t", 1, seats, faulted)
    finally:
        db.close()
    return record["game_id"]


def test_stderr_info_and_fault_lines_reach_only_their_owner_and_admins(club: ServerProc) -> None:
    from arena.store.people import account, claim_bot
    store: Path = club.store  # type: ignore[attr-defined]
    gid = _private_store(store)
    server = club
    root = admin_by_invitation(server, "lines-root")
    code = invite(store, uses=3)
    alice, _, _ = sign_up(server, code, "lines-alice")
    bob, _, _ = sign_up(server, code, "lines-bob")
    carol, _, _ = sign_up(server, code, "lines-carol")
    db = sqlite3.connect(store, isolation_level=None)
    for person, bot in (("lines-alice", "alice-bot"), ("lines-bob", "bob-bot")):
        who = account(db, person)
        assert who is not None
        claim_bot(db, bot, who, taken=False, now=time.time(), origin="test")
    db.close()
    pages = [f"/games/{gid}", f"/games/{gid}?as=0", f"/games/{gid}?as=1", "/games/faulted-1",
             "/games/faulted-1?as=0", "/bots/alice-bot@1.0", "/bots/bob-bot@1.0", "/games", "/",
             "/tournaments/t"]
    secrets_of = {0: ("SECRET-ERR-0", "SECRET-INFO-0", "SECRET-TAIL-0", "SECRET-FAULT-0", "&lt;boom&gt; faulted-1"),
                  1: ("SECRET-ERR-1", "SECRET-INFO-1", "SECRET-TAIL-1")}
    seen: dict[str, set[str]] = {}
    for name, visitor in (("anonymous", Browser(server)), ("carol", carol), ("bob", bob), ("alice", alice),
                          ("root", root)):
        text = ""
        for path in pages:
            status, _, body = visitor.request("GET", path)
            assert status == 200, (name, path, status)
            text += body
        seen[name] = {s for seat in secrets_of.values() for s in seat if s in text}
    assert seen["anonymous"] == set() and seen["carol"] == set()
    assert seen["alice"] == {"SECRET-ERR-0", "SECRET-INFO-0", "SECRET-FAULT-0", "&lt;boom&gt; faulted-1"}
    assert seen["bob"] == {"SECRET-ERR-1", "SECRET-INFO-1"}
    assert seen["root"] == seen["alice"] | seen["bob"]


# --------------------------------------------------------------------------- bounded disk

def test_an_upload_is_refused_when_the_disk_is_short_and_removed_when_its_job_ends(short_of_disk: ServerProc,
                                                                                   club: ServerProc) -> None:
    from tests.test_serve import _finished, multipart
    body, ctype = multipart({"ladder": "classic-2p"}, ("bot.zip", _bot_zip("gone", "1.0", "x")))
    short = short_of_disk
    uploads = short.store.parent / "uploads"  # type: ignore[attr-defined]
    b = Browser(short)
    b.request("GET", f"/?token={short.token}")
    status, _, page = b.request("POST", "/submit", body, {"Content-Type": ctype})
    assert status == 507 and "short of disk space" in page
    assert not uploads.exists() or [p for p in uploads.iterdir() if p.is_dir()] == []
    server = club  # where the disk has room, the upload's folder lives as long as its job
    uploads = server.store.parent / "uploads"  # type: ignore[attr-defined]
    b = Browser(server)
    b.request("GET", f"/?token={server.token}")
    status, headers, page = b.request("POST", "/submit", body, {"Content-Type": ctype})
    assert status == 303, page[-2000:]
    job = headers["location"].rsplit("/", 1)[1]
    _finished(server, headers["location"])
    # The job's end is written first, then its folder removed (a server stopped between the two
    # runs the job again, upload and all): the page can say it ended a moment before the folder goes
    deadline = time.monotonic() + 60  # a bound should it never go, not a timing
    while (uploads / job).exists():
        assert time.monotonic() < deadline, f"the ended job's upload folder {job} is still there"
        time.sleep(0.05)


# --------------------------------------------------------------------------- API tokens

def _make_token(b: Browser, name: str, *scopes: str) -> str:
    fields = {"csrf": b.csrf("/account"), "name": name}
    fields.update({f"scope_{s.replace('-', '_')}": s for s in scopes})
    status, _, page = b.post("/account/tokens", fields)
    assert status == 201, page[-2000:]
    m = re.search(r'id="new-token">([^<]+)<', page)
    assert m, page[-2000:]
    return m.group(1)


def _bearer_upload(server: ServerProc, token: str, name: str, version: str) -> tuple[int, str]:
    from tests.test_serve import multipart
    body, ctype = multipart({"ladder": "classic-2p"}, ("bot.zip", _bot_zip(name, version, "x")))
    status, _, page = Browser(server).request("POST", "/submit", body, {"Content-Type": ctype,
                                                                        "Authorization": f"Bearer {token}"})
    return status, page


def test_api_tokens_are_shown_once_kept_hashed_scoped_revocable_and_noted_when_used(members_pair) -> None:
    from arena.store.people import Status, set_status
    store, server, alice, bob, her, him = members_pair
    ci = _make_token(alice, "CI", "submit")
    reader = _make_token(alice, "reader", "read-logs")
    assert ci.startswith("arena_") and ci not in alice.request("GET", "/account")[2]  # shown once
    assert all(ci not in str(row) and reader not in str(row) for row in _rows(store, "SELECT * FROM api_tokens"))
    hers = f"FROM api_tokens t JOIN accounts a ON a.id=t.account WHERE a.name='{her}' AND t.name='CI'"
    assert _rows(store, f"SELECT t.last_used {hers}") == [(None,)]

    status, page = _bearer_upload(server, ci, "alice-ci-bot", "1.0")
    assert status == 303, page[-2000:]
    assert owners_among(store, her, him) == [("alice-ci-bot", her)]
    assert _rows(store, f"SELECT t.last_used IS NOT NULL {hers}") == [(1,)]
    assert _bearer_upload(server, reader, "alice-ci-bot", "1.1")[0] == 403    # no submit scope
    assert _bearer_upload(server, ci + "x", "alice-ci-bot", "1.1")[0] == 403  # unknown

    (ci_id,) = _rows(store, f"SELECT t.id {hers}")[0]
    assert bob.post(f"/account/tokens/{ci_id}/revoke", {"csrf": bob.csrf("/account")})[0] == 404  # not his
    assert _bearer_upload(server, ci, "alice-ci-bot", "1.2")[0] != 403
    assert alice.post(f"/account/tokens/{ci_id}/revoke", {"csrf": alice.csrf("/account")})[0] == 303
    assert _bearer_upload(server, ci, "alice-ci-bot", "1.3")[0] == 403
    assert "revoked" in alice.request("GET", "/account")[2]

    other = _make_token(alice, "laptop", "submit")
    db = sqlite3.connect(store, isolation_level=None)
    set_status(db, her, Status.SUSPENDED, by=None, origin="test", now=time.time(), reason="test")
    db.close()
    assert _bearer_upload(server, other, "alice-ci-bot", "1.4")[0] == 403  # a suspended person's token
    assert alice.request("GET", "/account")[0] == 403                     # and session


def test_arena_submit_to_a_server_with_a_token_from_the_environment_or_a_private_file(tmp_path: Path,
                                                                                      club: ServerProc) -> None:
    import os
    store: Path = club.store  # type: ignore[attr-defined]
    server = club
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "bot.toml").write_text('name = "term-bot"\nversion = "1.0"\ncommand = ["python3", "bot.py"]\n')
    (folder / "bot.py").write_text("print('not a protocol line', flush=True)\n")
    alice, _, _ = sign_up(server, invite(store), "term-alice")
    token = _make_token(alice, "terminal", "submit")
    # the refusals, in this process (what they say and the exit status; an exception would be raised
    # here, as a real process would print a traceback); the real submission below is a real process:
    # the status a shell sees and a stderr with no traceback
    here = ("submit", str(folder), "--ladder", "classic-2p", "--server", server.url)
    code, _, err = arena_here(*here, env={"ARENA_TOKEN": None})
    assert code == 2 and "no API token" in err
    loose = tmp_path / "token"
    loose.write_text(token)
    loose.chmod(0o644)
    code, _, err = arena_here(*here, "--token-file", str(loose), env={"ARENA_TOKEN": None})
    assert code == 2 and "can be read by other users" in err
    code, _, err = arena_here(*here, env={"ARENA_TOKEN": token + "x"})
    assert code == 2 and "refused the upload (403)" in err and "unknown" in err
    loose.chmod(0o600)
    env = {k: v for k, v in os.environ.items() if k != "ARENA_TOKEN"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parent.parent)
    done = subprocess.run(arena_cmd(*here, "--token-file", str(loose)), capture_output=True, text=True, env=env,
                          timeout=600)
    out = done.stdout + done.stderr
    assert done.returncode == 1 and "failed arena check on the server" in done.stderr, out[-3000:]
    assert "Traceback" not in done.stderr
    assert "uploaded: " + server.url + "/submit/" in out and "checking term-bot@1.0" in out
    assert owners_among(store, "term-alice") == [("term-bot", "term-alice")]


def test_the_ci_example_submits_on_a_tag_with_the_token_from_a_secret() -> None:
    yaml = pytest.importorskip("yaml")
    flow = yaml.safe_load((Path(__file__).resolve().parent.parent / "examples" / "ci" / "submit-on-tag.yml").read_text())
    assert flow[True]["push"]["tags"] == ["v*"]  # YAML reads the key `on` as True
    step = next(s for s in flow["jobs"]["submit"]["steps"] if s.get("name") == "Submit")
    assert step["env"]["ARENA_TOKEN"] == "${{ secrets.ARENA_TOKEN }}"
    assert "--server" in step["run"] and "TOKEN" not in step["run"]  # never on the command line


# --------------------------------------------------------------------------- admin tools

def test_an_admin_suspends_and_reinstates_a_person_on_the_web_and_at_the_terminal(club: ServerProc) -> None:
    store: Path = club.store  # type: ignore[attr-defined]
    server = club
    root = admin_by_invitation(server, "adm-root")
    code = invite(store, uses=2)
    alice, _, _ = sign_up(server, code, "adm-alice")
    bob, _, _ = sign_up(server, code, "adm-bob")
    assert bob.request("GET", "/admin")[0] == 403
    status, _, page = bob.post("/admin/accounts/adm-alice/suspend", {"csrf": bob.csrf("/account"), "reason": "x"})
    assert status == 403 and "needs the role admin" in page
    assert alice.request("GET", "/account")[0] == 200

    status, _, _ = root.post("/admin/accounts/adm-alice/suspend", {"csrf": root.csrf("/admin"), "reason": "spam uploads"})
    assert status == 303
    assert alice.request("GET", "/account")[0] == 403  # her session ends at once
    status, _, page = alice.post("/login", {"csrf": alice.csrf("/login"), "name": "adm-alice", "password": PASSWORD})
    assert status == 403 and "suspended" in page
    page = root.request("GET", "/admin")[2]
    assert "spam uploads" in page and "account:adm-alice" in page
    assert root.post("/admin/accounts/adm-root/suspend", {"csrf": root.csrf("/admin")})[0] == 400  # not oneself

    # at the terminal, in this process: what the commands say and store (a real process's exit
    # status and clean stderr for a refused accounts command: the first-admin test above)
    code, out, _ = arena_here("accounts", "reinstate", "adm-alice", "--store", str(store), "--reason", "ok")
    assert code == 0 and "adm-alice is active" in out
    status, _, _ = alice.post("/login", {"csrf": alice.csrf("/login"), "name": "adm-alice", "password": PASSWORD})
    assert status == 303
    code, _, err = arena_here("accounts", "suspend", "nobody", "--store", str(store), "--reason", "x")
    assert code == 2 and err.startswith("error:") and "no account" in err
    audit = arena_here("accounts", "audit", "--store", str(store))[1]
    assert "reinstate" in audit and "suspend" in audit and "terminal" in audit


# --------------------------------------------------------------------------- the write limit, per person

def test_the_write_limit_counts_each_person_not_their_shared_address(tmp_path: Path) -> None:
    """A class behind one address: each logged-in person has their own write bucket (burst 10); a
    visitor with no session, or a forged one, shares the address's bucket."""
    store = tmp_path / "data" / "arena.sqlite"
    build_store(store)
    server = ServerProc(store, "--writes-per-minute", "0.06")  # ten at once, then one every 1000 s
    try:
        code = invite(store, uses=2)
        alice, _, _ = sign_up(server, code, "alice")  # two anonymous posts from the address
        bob, _, _ = sign_up(server, code, "bob")

        def writes(b: Browser, n: int) -> list[int]:
            token = b.csrf("/notifications")
            return [b.post("/notifications/webhook/clear", {"csrf": token})[0] for _ in range(n)]

        token = _make_token(alice, "laptop", "submit")   # one of her ten
        assert writes(alice, 9) == [303] * 9             # her own bucket, spent
        machine = {"Authorization": f"Bearer {token}"}   # her token is her, too
        assert Browser(server).post("/logout", {"csrf": "x"}, machine)[0] == 429
        assert writes(bob, 10) == [303] * 10             # his, untouched by hers
        forged = Browser(server)
        forged.cookies["arena_session"] = "eyJ1aWQiOiAzfQ==.ZZZZZZ.forgedsignature"  # {"uid": 3}, not signed
        bogus = {"Authorization": "Bearer arena_not-a-token"}
        anonymous = [forged.post("/logout", {"csrf": "x"})[0] for _ in range(4)] + \
            [Browser(server).post("/logout", {"csrf": "x"}, bogus)[0] for _ in range(5)]
        assert anonymous == [403] * 8 + [429]  # the address's ten, less the two sign-ups
        assert writes(bob, 1) == [429]
    finally:
        server.stop()


def test_an_unknown_names_login_costs_what_a_known_ones_does() -> None:
    """An unknown name's password is checked against a written-out hash (none is made at import):
    it must carry the hasher's own parameters, or an unknown name would answer faster or slower
    than a known one and say which names have accounts. It matches no password given here."""
    from arena.serve.auth import _NOBODY, hasher
    from argon2.exceptions import VerificationError
    assert not hasher.check_needs_rehash(_NOBODY)
    with pytest.raises(VerificationError):
        hasher.verify(_NOBODY, "")


def test_a_server_hashes_at_production_cost_and_a_cheaper_hash_is_rehashed_at_login(tmp_path: Path) -> None:
    """The other tests' servers hash at argon2's cheapest cost (ServerProc). One started as people
    start it hashes with argon2-cffi's defaults; a password hashed at another cost (a test server's
    account, or one from before the defaults changed) still logs in, and is rehashed to them."""
    from argon2 import PasswordHasher, profiles

    from arena.store.people import sign_up as join
    store = tmp_path / "data" / "arena.sqlite"
    build_store(store)
    production = PasswordHasher()
    db = sqlite3.connect(store, isolation_level=None)
    try:
        cheap = PasswordHasher.from_parameters(profiles.CHEAPEST).hash(PASSWORD)
        join(db, invite(store), "old-hash", cheap, now=time.time(), origin="test")
    finally:
        db.close()
    server = ServerProc(store, "--allow-submit", password_cost="production")
    try:
        assert sign_up(server, invite(store), "new-hash")[1:] == (303, "/account")
        b = Browser(server)
        fields = {"csrf": b.csrf("/login"), "name": "old-hash"}
        assert b.post("/login", {**fields, "password": PASSWORD + "x"})[0] == 401
        assert _rows(store, "SELECT password FROM accounts WHERE name='old-hash'") == [(cheap,)]
        assert b.post("/login", {**fields, "password": PASSWORD})[0] == 303
    finally:
        server.stop()
    stored = dict(_rows(store, "SELECT name, password FROM accounts WHERE name LIKE '%-hash'"))
    assert stored["old-hash"] != cheap
    for name, hashed in stored.items():
        assert not production.check_needs_rehash(hashed), name
        assert production.verify(hashed, PASSWORD)
