"""#35, the eighth outside round: what the seventh named and left open on the club server.

A copied session cookie outlived its logout by 14 days; one holder of the server's token kept every
browser game's place; an anonymous visitor held the visitors' upload place again and again; a
webhook whose name never resolved held a posting thread for good; the failed-login counter kept
every name and address it was ever given; a name claimed before a bench was shown kept showing
its member. Each test below did the attack through the server as a user starts it (or through the
function the page or the deliverer calls) and saw it succeed before the fix.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="arena serve needs the serve extra: pip install 'palace-arena[serve]'")

from tests.test_serve import ServerProc, build_store  # noqa: E402
from tests.test_serve_accounts import MANY_WRITES, PASSWORD, Browser, invite, sign_up  # noqa: E402


def _copy(b: Browser) -> Browser:
    """Another browser holding a copy of ``b``'s cookies (a shared machine, a stolen cookie jar)."""
    thief = Browser(b.server)
    thief.cookies = dict(b.cookies)
    return thief


def _identified(store: Path, b: Browser) -> str | None:
    """Who the server's write limit and upload places take a request with ``b``'s cookies for."""
    import anyio

    from arena.serve import auth
    identify = auth.write_identity(store, auth.session_key(store))
    cookie = "; ".join(f"{k}={v}" for k, v in b.cookies.items()).encode()
    return anyio.run(identify, {"type": "http", "headers": [(b"cookie", cookie)]})


def test_a_copied_session_cookie_ends_with_its_logout_and_with_a_suspension(tmp_path: Path) -> None:
    """Attack: Alice logged in on a shared machine and logged out; a copy of her session cookie
    taken before still opened her account page and made API tokens in her name for 14 days (a
    signed cookie is valid wherever it is). A suspension stopped it only until the reinstatement.
    Now the cookie carries the person's session generation, which logging out and a suspension
    move on: every copy of an older cookie is nobody's at its next request, GET or POST."""
    from arena.store.people import Status, set_status
    store = tmp_path / "data" / "arena.sqlite"
    build_store(store)
    server = ServerProc(store, "--allow-submit", *MANY_WRITES)
    try:
        alice, status, _ = sign_up(server, invite(store), "alice")
        assert status == 303
        thief = _copy(alice)
        assert thief.request("GET", "/account")[0] == 200  # a live session: the copy is hers too
        csrf = thief.csrf("/account")
        assert alice.post("/logout", {"csrf": alice.csrf("/account")})[0] == 303
        assert thief.request("GET", "/account")[0] == 403
        status, _, _ = thief.post("/account/tokens", {"csrf": csrf, "name": "mine", "scope_submit": "submit"})
        assert status == 403
        db = sqlite3.connect(store)
        assert db.execute("SELECT COUNT(*) FROM api_tokens").fetchone()[0] == 0
        db.close()
        assert _identified(store, thief) is None  # the write limit and uploads count it by address
        again = Browser(server)  # her next login is a session of its own, and works
        status, _, _ = again.post("/login", {"csrf": again.csrf("/login"), "name": "alice", "password": PASSWORD})
        assert status == 303 and again.request("GET", "/account")[0] == 200
        assert _identified(store, again) is not None
        assert thief.request("GET", "/account")[0] == 403  # the old copy stays ended
        thief = _copy(again)
        db = sqlite3.connect(store, isolation_level=None)
        try:
            for status_ in (Status.SUSPENDED, Status.ACTIVE):
                set_status(db, "alice", status_, by=None, origin="test", now=time.time(), reason="test")
        finally:
            db.close()
        assert thief.request("GET", "/account")[0] == 403  # reinstated: a cookie copied before stays ended
        assert again.request("GET", "/account")[0] == 403
    finally:
        server.stop()
