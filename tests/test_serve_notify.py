"""Notifications: written by the code that makes each event happen (a ladder suspending a bot, an
admin suspending a person, a submission ending), shown only to their person on /notifications,
and posted to that person's webhook, signed, retried from the outbox when the receiver fails, and
never holding up a page; a webhook may not reach this machine unless the server allows it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import socket
import sqlite3
import threading
import time
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="arena serve needs the serve extra: pip install 'palace-arena[serve]'")
pytest.importorskip("argon2", reason="accounts need the serve extra: pip install 'palace-arena[serve]'")

from arena.ladder.tables import MemberStatus, clear_status, set_status
from arena.store import migrate
from arena.store.notes import FIRST_RETRY_S, MAX_ATTEMPTS, Delivery, failed, notify, take_due
from arena.store.people import account, claim_bot
from arena.tournament.store import Store
from tests.checks import running, until
from tests.test_serve import ServerProc, build_store
from tests.test_serve_accounts import MANY_WRITES, PASSWORD, Browser, first_admin_code, invite, sign_up


class Receiver:
    """A webhook receiver on 127.0.0.1 that answers 500 to its first ``fail`` deliveries."""

    def __init__(self, fail: int = 0):
        self.got: list[tuple[dict[str, str], bytes]] = []
        self.fail = fail
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.got.append(({k.lower(): v for k, v in self.headers.items()}, body))
                self.send_response(500 if len(outer.got) <= outer.fail else 200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}/hook"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()


def wait_for(what, timeout: float = 300):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := what():
            return found
        time.sleep(0.2)
    raise AssertionError("timed out")


def set_hook(b: Browser, url: str) -> str:
    status, _, page = b.post("/notifications/webhook", {"csrf": b.csrf("/notifications"), "url": url})
    assert status == 201, page[-2000:]
    m = re.search(r'id="webhook-secret">([^<]+)<', page)
    assert m, page[-2000:]
    return m.group(1)


def outbox(store: Path) -> list[tuple[int, str | None]]:
    """Each delivery's attempts so far, and "delivered" once it is."""
    db = sqlite3.connect(store)
    try:
        return [(n, "delivered" if done is not None else None)
                for n, done in db.execute("SELECT attempts, delivered FROM outbox ORDER BY id")]
    finally:
        db.close()


def due_now(store: Path) -> None:
    """Every pending delivery's retry time brought to now: the clock moved on to it."""
    db = sqlite3.connect(store, isolation_level=None)
    try:
        db.execute("UPDATE outbox SET next_at=? WHERE delivered IS NULL", (time.time(),))
    finally:
        db.close()


def own_bot(store: Path, person: str, bot: str) -> None:
    db = sqlite3.connect(store, isolation_level=None)
    who = account(db, person)
    assert who is not None
    claim_bot(db, bot, who, taken=False, now=time.time(), origin="test")
    db.close()


def test_a_suspension_reaches_its_owner_only_and_their_webhook_signed_and_retried(tmp_path: Path) -> None:
    store = tmp_path / "data" / "arena.sqlite"
    build_store(store)
    admin_code = first_admin_code(store)
    receiver = Receiver(fail=1)
    server = ServerProc(store, "--local-webhooks", *MANY_WRITES)
    try:
        root, _, _ = sign_up(server, admin_code, "root")
        code = invite(store, uses=2)
        alice, _, _ = sign_up(server, code, "alice")
        bob, _, _ = sign_up(server, code, "bob")
        own_bot(store, "alice", "alice-bot")
        secret = set_hook(alice, receiver.url)
        assert secret not in alice.request("GET", "/notifications")[2]  # shown once

        s = Store(store)  # what `arena ladder run` does when a bot faults game after game
        try:
            set_status(s, "classic-2p", "alice-bot@1.0", MemberStatus.SUSPENDED, "3 faulted games in a row",
                       {"last_game": "g-17", "last_turn": 12, "last_seat": 1})
        finally:
            s.close()
        page = alice.request("GET", "/notifications")[2]
        assert "alice-bot@1.0 was suspended on ladder classic-2p: 3 faulted games in a row" in page
        assert 'href="/games/g-17#t12/s1"' in page
        assert "alice-bot" not in bob.request("GET", "/notifications")[2]
        assert Browser(server).request("GET", "/notifications")[0] == 403

        # The first post answered 500: the deliverer writes the retry FIRST_RETRY_S ahead (the wait
        # itself is test_retries_wait_longer_each_time_then_give_up's, on a given clock). Here the
        # row's time is brought forward, as the clock reaching it would, instead of waited out.
        wait_for(lambda: outbox(store) == [(1, None)])
        assert len(receiver.got) == 1
        due_now(store)
        wait_for(lambda: len(receiver.got) >= 2)
        (h1, b1), (h2, b2) = receiver.got[:2]
        assert b1 == b2 and h1["x-arena-delivery"] == h2["x-arena-delivery"]  # the same delivery, again
        for headers, body in receiver.got[:2]:
            mac = hmac.new(secret.encode(), headers["x-arena-timestamp"].encode() + b"." + body, hashlib.sha256)
            assert headers["x-arena-signature"] == "sha256=" + mac.hexdigest()
        sent = json.loads(b2)
        assert sent["kind"] == "suspended" and sent["link"] == "/games/g-17#t12/s1"
        wait_for(lambda: "delivered" in alice.request("GET", "/notifications")[2])
        # delivered on the second attempt, so no deliverer takes it again (take_due skips it)
        assert outbox(store) == [(2, "delivered")] and len(receiver.got) == 2

        # an admin's act on a person is told to that person
        assert root.post("/admin/accounts/bob/suspend", {"csrf": root.csrf("/admin"), "reason": "shared a key"})[0] == 303
        assert root.post("/admin/accounts/bob/reinstate", {"csrf": root.csrf("/admin"), "reason": "ok"})[0] == 303
        assert bob.post("/login", {"csrf": bob.csrf("/login"), "name": "bob", "password": PASSWORD})[0] == 303
        page = bob.request("GET", "/notifications")[2]
        assert "your account was suspended by an admin: shared a key" in page and "reinstated" in page
        assert "shared a key" not in alice.request("GET", "/notifications")[2]
    finally:
        server.stop()
        receiver.close()


def test_a_notice_another_process_stores_is_posted_when_the_store_moves(tmp_path: Path) -> None:
    """A bot suspended by another process (``arena ladder run``) moves the store the server follows
    for its pages, and that wakes the deliverer: the owner's webhook is posted although the
    deliverer's own look is an hour away."""
    from types import SimpleNamespace

    import trio

    from arena.serve import notify
    from arena.serve.cache import StoreVersion
    from arena.serve.live import StoreFollower
    from arena.serve.wake import Wake

    store = tmp_path / "data" / "arena.sqlite"
    receiver = Receiver()
    s = Store(store)
    s.db.execute("INSERT INTO accounts (name, password, role, created) VALUES ('ann', 'x', 'member', 0)")
    s.db.execute("INSERT INTO webhooks VALUES (1, ?, 'k', 0)", (receiver.url,))
    s.db.execute("INSERT INTO bot_owners VALUES ('ann-bot', 1, 0)")
    s.close()
    follower = StoreFollower(StoreVersion(store, settle=0.0), interval=0.01)
    options = SimpleNamespace(store=store, local_webhooks=True, webhook_timeout_s=10.0)
    app = SimpleNamespace(state=SimpleNamespace(options=options, follower=follower, outbox_wake=Wake()))

    def suspend() -> None:  # another writer of the store, on a connection of its own
        other = Store(store)
        try:
            set_status(other, "classic-2p", "ann-bot@1", MemberStatus.SUSPENDED, "3 faulted games in a row")
        finally:
            other.close()

    async def main() -> None:
        # store_moved first: it reads the serial before any look; bounded should it wait for the hour's look
        async with running(partial(notify.store_moved, app), follower.run, partial(notify.deliverer, app, 3600.0)):
            await until(lambda: follower.serial and app.state.outbox_wake.sleeping)  # followed, looked, empty
            await trio.to_thread.run_sync(suspend)
            await until(lambda: receiver.got)

    try:
        trio.run(main)
    finally:
        follower.close()
        receiver.close()
    sent = json.loads(receiver.got[0][1])
    assert sent["kind"] == "suspended" and "ann-bot@1 was suspended" in sent["text"]


def test_a_receiver_that_never_answers_does_not_hold_up_pages(tmp_path: Path) -> None:
    store = tmp_path / "data" / "arena.sqlite"
    build_store(store)
    hang = socket.socket()
    hang.bind(("127.0.0.1", 0))
    hang.listen(8)  # accepts (the kernel does) and never answers
    server = ServerProc(store, "--local-webhooks", "--webhook-timeout", "3600", *MANY_WRITES)
    try:
        alice, _, _ = sign_up(server, invite(store), "alice")
        set_hook(alice, f"http://127.0.0.1:{hang.getsockname()[1]}/")
        s = Store(store)
        try:
            with s.tx() as db:
                notify(db, 1, "placed", "a placement", "/", time.time())
        finally:
            s.close()
        conn, _ = hang.accept()  # the delivery is in flight, waiting on this receiver
        conn.settimeout(60)
        got = b""
        while b"a placement" not in got:  # read the whole request; never answer it
            got += conn.recv(65536)
        for path in ("/", "/notifications", "/account"):
            assert alice.request("GET", path)[0] == 200
        conn.setblocking(False)
        with pytest.raises(BlockingIOError):  # still in flight: the pages did not wait for it to end
            conn.recv(1, socket.MSG_PEEK)
        conn.close()
    finally:
        server.stop()
        hang.close()


def test_a_webhook_may_not_reach_this_machine_unless_allowed(tmp_path: Path) -> None:
    from arena.serve.notify import Refused, post
    receiver = Receiver()
    try:
        for url in (receiver.url, receiver.url.replace("127.0.0.1", "localhost")):
            with pytest.raises(Refused, match="this machine or a private network"):
                post(Delivery(1, url, "{}", "k", 0), allow_local=False, now=1.0)
        assert receiver.got == []
        assert post(Delivery(1, receiver.url, "{}", "k", 0), allow_local=True, now=1.0) == 200
    finally:
        receiver.close()


def test_retries_wait_longer_each_time_then_give_up(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "s.sqlite", isolation_level=None)
    migrate(db)
    db.execute("INSERT INTO accounts (name, password, role, created) VALUES ('ann', 'x', 'member', 0)")
    db.execute("INSERT INTO webhooks VALUES (1, 'http://example.org/', 'k', 0)")
    notify(db, 1, "placed", "x", "/", 100.0)
    now, waits = 100.0, []
    while taken := take_due(db, now):
        assert take_due(db, now) == []  # leased: another server does not take it meanwhile
        failed(db, taken[0].id, "the receiver answered 500", now)
        nxt = db.execute("SELECT next_at FROM outbox").fetchone()[0]
        waits.append(nxt - now)
        now = nxt
    assert waits[:4] == [FIRST_RETRY_S, 2 * FIRST_RETRY_S, 4 * FIRST_RETRY_S, 8 * FIRST_RETRY_S]
    assert len(waits) == MAX_ATTEMPTS
    assert db.execute("SELECT given_up IS NOT NULL, attempts FROM outbox").fetchone() == (1, MAX_ATTEMPTS)
    db.close()


def test_reinstating_a_bot_tells_its_owner(tmp_path: Path) -> None:
    s = Store(tmp_path / "s.sqlite")
    try:
        s.db.execute("INSERT INTO accounts (name, password, role, created) VALUES ('ann', 'x', 'member', 0)")
        s.db.execute("INSERT INTO bot_owners VALUES ('ann-bot', 1, 0)")
        set_status(s, "lad", "ann-bot@2", MemberStatus.RETIRED, "retired by the operator")
        assert clear_status(s, "lad", "ann-bot@2")
        set_status(s, "lad", "nobody-bot@1", MemberStatus.SUSPENDED, "x")  # no owner: nobody to tell
        rows = s.db.execute("SELECT account, kind, text, link FROM notifications ORDER BY id").fetchall()
    finally:
        s.close()
    assert rows == [(1, "retired", "ann-bot@2 was retired on ladder lad: retired by the operator", "/bots/ann-bot@2"),
                    (1, "reinstated", "ann-bot@2 is back in play on ladder lad", "/bots/ann-bot@2")]
