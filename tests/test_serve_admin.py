"""The admin's tools on the web: every admin write route, read from the route table, refuses a
logged-in member with a valid form; an admin suspends, reinstates and retires a bot (its owner is
told), pauses and resumes a ladder, revokes a person's tokens; each act audited with who, what,
when and from where.
"""

from __future__ import annotations

import re
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="arena serve needs the serve extra: pip install 'palace-arena[serve]'")
pytest.importorskip("argon2", reason="accounts need the serve extra: pip install 'palace-arena[serve]'")

from tests.test_serve import ServerProc, arena_cmd, build_store
from tests.test_serve_accounts import (MANY_WRITES, WRITE_METHODS, _make_token, _route_table, first_admin_code,
                                       invite, sign_up)
from tests.test_serve_notify import own_bot


def _rows(store: Path, sql: str, *args: object) -> list[tuple]:
    db = sqlite3.connect(store)
    try:
        return db.execute(sql, args).fetchall()
    finally:
        db.close()


def _member(store: Path, ladder: str, label: str) -> None:
    db = sqlite3.connect(store, isolation_level=None)
    name, _, version = label.partition("@")
    db.execute("INSERT INTO ladder_members VALUES (?,?,?,?,?,?,?,?,?)",
               (ladder, label, name, version, "h", "/nowhere", "submitted", f"ladder:{ladder}:placement:{label}",
                time.time()))
    db.close()


@pytest.fixture(scope="module")
def club(tmp_path_factory):
    store = tmp_path_factory.mktemp("admin") / "data" / "arena.sqlite"
    build_store(store)
    admin_code = first_admin_code(store)
    server = ServerProc(store, *MANY_WRITES, "--settle", "0")
    root, _, _ = sign_up(server, admin_code, "root")
    code = invite(store, uses=2)
    alice, _, _ = sign_up(server, code, "alice")
    bob, _, _ = sign_up(server, code, "bob")
    own_bot(store, "alice", "alpha")
    _member(store, "test-ladder", "alpha@1.0")
    # the ladder's page built before the acts, as the server's warm-up at its start may build it: the
    # tests read pages right after each act, so the server takes every change at once (--settle 0),
    # where by default one within a second of the last is shown a second late (a stale page, seen)
    bob.request("GET", "/ladders/test-ladder")
    yield server, store, root, alice, bob
    server.stop()


def test_every_admin_write_route_refuses_a_member(club) -> None:
    server, store, root, alice, bob = club
    routes = [(p, m & WRITE_METHODS) for p, m in _route_table() if m & WRITE_METHODS and p.startswith("/admin")]
    assert {"/admin/bots", "/admin/ladders/{name}/{act:str}", "/admin/accounts/{name}/{act:str}"} <= \
        {p for p, _ in routes}
    acts = {"/admin/ladders/{name}/{act:str}": ("test-ladder", ["pause", "resume"]),
            "/admin/accounts/{name}/{act:str}": ("alice", ["suspend", "reinstate", "revoke-tokens"])}
    before = _rows(store, "SELECT COUNT(*) FROM audit")
    for path, methods in routes:
        name, verbs = acts.get(path, ("", [""]))
        for verb in verbs:
            url = path.replace("{name}", name).replace("{act:str}", verb)
            for method in methods:
                fields = {"csrf": bob.csrf("/account"), "ladder": "test-ladder", "label": "alpha@1.0",
                          "act": "suspend", "reason": "x"}
                body = "&".join(f"{k}={v}" for k, v in fields.items()).encode()
                status, _, page = bob.request(method, url, body, {"Content-Type": "application/x-www-form-urlencoded"})
                assert status == 403 and "needs the role admin" in page, (url, status, page[:300])
    assert _rows(store, "SELECT COUNT(*) FROM audit") == before  # nothing was done
    assert _rows(store, "SELECT COUNT(*) FROM ladder_bot_status") == [(0,)]


def test_an_admin_suspends_reinstates_and_retires_a_bot_and_its_owner_is_told(club) -> None:
    server, store, root, alice, bob = club

    def act(act: str, reason: str = "") -> int:
        return root.post("/admin/bots", {"csrf": root.csrf("/admin"), "ladder": "test-ladder",
                                         "label": "alpha@1.0", "act": act, "reason": reason})[0]

    assert act("suspend", "plays far too slowly") == 303
    assert _rows(store, "SELECT status, reason FROM ladder_bot_status") == [("suspended", "plays far too slowly")]
    assert "suspended: plays far too slowly" in root.request("GET", "/admin")[2]
    ladder = bob.request("GET", "/ladders/test-ladder")[2]  # the web standings: author and status
    row = re.search(r'<tr data-bot="alpha@1.0">.*?</tr>', ladder, re.S)
    assert row and '<span class="author">by alice</span>' in row.group(0), ladder[-3000:]
    assert '<span class="member-status suspended">suspended</span>' in row.group(0)
    status, _, page = bob.request("GET", "/bots/alpha@1.0")
    assert status == 200 and "by <b>alice</b>" in page and "suspended on test-ladder" in page
    assert "too slowly" not in page  # the reason is the owner's and the admins'
    assert "suspended on test-ladder: plays far too slowly" in alice.request("GET", "/bots/alpha@1.0")[2]
    page = alice.request("GET", "/notifications")[2]
    assert "alpha@1.0 was suspended on ladder test-ladder: plays far too slowly" in page
    assert act("reinstate") == 303
    assert _rows(store, "SELECT COUNT(*) FROM ladder_bot_status") == [(0,)]
    assert "alpha@1.0 is back in play on ladder test-ladder" in alice.request("GET", "/notifications")[2]
    assert act("retire", "left the course") == 303
    assert _rows(store, "SELECT status FROM ladder_bot_status") == [("retired",)]
    assert act("reinstate") == 303
    status, _, page = root.post("/admin/bots", {"csrf": root.csrf("/admin"), "ladder": "test-ladder",
                                                "label": "nobody@1.0", "act": "suspend"})
    assert status == 400 and "not a member" in page
    audit = _rows(store, "SELECT p.name, a.action, a.target, a.origin FROM audit a JOIN accounts p ON p.id=a.account "
                         "WHERE a.target LIKE 'bot:test-ladder/%' ORDER BY a.id")
    assert audit == [("root", verb, "bot:test-ladder/alpha@1.0", "127.0.0.1")
                     for verb in ("suspend", "reinstate", "retire", "reinstate")]
    assert "alpha" not in bob.request("GET", "/notifications")[2]


def test_an_admin_pauses_and_resumes_a_ladder_and_revokes_a_persons_tokens(club) -> None:
    server, store, root, alice, bob = club
    status, _, _ = root.post("/admin/ladders/test-ladder/pause", {"csrf": root.csrf("/admin"), "reason": "exam week"})
    assert status == 303 and _rows(store, "SELECT ladder, reason FROM ladder_pauses") == [("test-ladder", "exam week")]
    assert re.search(r'data-ladder="test-ladder">.*?paused: exam week', root.request("GET", "/admin")[2], re.S)
    assert root.post("/admin/ladders/test-ladder/resume", {"csrf": root.csrf("/admin")})[0] == 303
    assert _rows(store, "SELECT COUNT(*) FROM ladder_pauses") == [(0,)]
    assert root.post("/admin/ladders/nowhere/pause", {"csrf": root.csrf("/admin")})[0] == 404

    _make_token(alice, "CI", "submit")
    _make_token(alice, "laptop", "submit")
    assert root.post("/admin/accounts/alice/revoke-tokens", {"csrf": root.csrf("/admin")})[0] == 303
    assert _rows(store, "SELECT COUNT(*) FROM api_tokens t JOIN accounts a ON a.id=t.account "
                        "WHERE a.name='alice' AND t.revoked IS NULL") == [(0,)]
    audit = _rows(store, "SELECT p.name, a.action, a.target, a.origin FROM audit a JOIN accounts p ON p.id=a.account "
                         "WHERE a.action IN ('pause', 'resume', 'token-revoke-all') ORDER BY a.id")
    assert audit == [("root", "pause", "ladder:test-ladder", "127.0.0.1"),
                     ("root", "resume", "ladder:test-ladder", "127.0.0.1"),
                     ("root", "token-revoke-all", "account:alice", "127.0.0.1")]

    _make_token(alice, "again", "submit")
    done = subprocess.run(arena_cmd("accounts", "revoke-tokens", "alice", "--store", str(store)), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and "revoked 1 token(s) of alice" in done.stdout
    assert _rows(store, "SELECT a.origin FROM audit a WHERE a.action='token-revoke-all' ORDER BY a.id DESC LIMIT 1") == \
        [("terminal",)]
