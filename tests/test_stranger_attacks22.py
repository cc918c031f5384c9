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
from functools import partial
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="arena serve needs the serve extra: pip install 'palace-arena[serve]'")

from tests.checks import running, until  # noqa: E402
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


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One server for the cookie and the browser-game tests (each's people and games its own)."""
    store = tmp_path_factory.mktemp("attacks22") / "data" / "arena.sqlite"
    build_store(store)
    server = ServerProc(store, "--allow-submit", "--allow-play", *MANY_WRITES)
    server.store = store  # type: ignore[attr-defined]
    yield server
    server.stop()


def test_a_copied_session_cookie_ends_with_its_logout_and_with_a_suspension(server: ServerProc) -> None:
    """Attack: Alice logged in on a shared machine and logged out; a copy of her session cookie
    taken before still opened her account page and made API tokens in her name for 14 days (a
    signed cookie is valid wherever it is). A suspension stopped it only until the reinstatement.
    Now the cookie carries the person's session generation, which logging out and a suspension
    move on: every copy of an older cookie is nobody's at its next request, GET or POST."""
    from arena.store.people import Status, set_status
    store: Path = server.store  # type: ignore[attr-defined]
    alice, status, _ = sign_up(server, invite(store), "alice")
    assert status == 303
    thief = _copy(alice)
    assert thief.request("GET", "/account")[0] == 200  # a live session: the copy is hers too
    csrf = thief.csrf("/account")
    stale = dict(thief.cookies)
    assert alice.post("/logout", {"csrf": alice.csrf("/account")})[0] == 303
    assert _identified(store, thief) is None  # the write limit and uploads count it by address
    status, _, _ = thief.post("/account/tokens", {"csrf": csrf, "name": "mine", "scope_submit": "submit"})
    assert status == 403
    db = sqlite3.connect(store)
    assert db.execute("SELECT COUNT(*) FROM api_tokens").fetchone()[0] == 0
    db.close()
    assert thief.request("GET", "/account")[0] == 403
    assert "arena_session" not in thief.cookies  # the ended session's cookie is dropped
    again = Browser(server)  # her next login is a session of its own, and works
    status, _, _ = again.post("/login", {"csrf": again.csrf("/login"), "name": "alice", "password": PASSWORD})
    assert status == 303 and again.request("GET", "/account")[0] == 200
    assert _identified(store, again) is not None
    thief.cookies = dict(stale)
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


def _start_game(server: ServerProc, source: str) -> tuple[int, str]:
    """``POST /play`` with the server's token from ``source`` (an address of 127/8): the status and page."""
    import http.client
    from urllib.parse import urlencode
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=60, source_address=(source, 0))
    try:
        conn.request("POST", "/play", urlencode({"token": server.token, "opponent": "random", "seat": "0"}),
                     {"Content-Type": "application/x-www-form-urlencoded"})
        r = conn.getresponse()
        return r.status, r.read().decode()
    finally:
        conn.close()


def test_one_holder_of_the_token_cannot_take_every_browser_game(server: ServerProc) -> None:
    """Attack: one holder of the server's token started four browser games and moved once every 14
    minutes: every place was theirs (10,000 turns each, 15 minutes a move: days), and everyone else
    was told "4 games are being played already". Now one person (an account, else an address)
    plays one game at a time, told why; another visitor still gets a place."""
    assert _start_game(server, "127.0.0.1")[0] == 303
    status, page = _start_game(server, "127.0.0.1")
    assert status == 429 and "you have a game in play already" in page, (status, page[-1500:])
    assert _start_game(server, "127.0.0.2")[0] == 303  # another visitor plays


def test_a_browser_game_ends_at_its_time_however_often_the_person_moves(monkeypatch: pytest.MonkeyPatch,
                                                                       tmp_path: Path) -> None:
    """Attack (the other half): a move within every idle wait kept a game, and its place, for as long
    as its 10,000 turns lasted. Now a game has a whole-game bound besides (``GAME_S``): past it the
    person's seat forfeits like a seat that timed out, saying why, and the bots finish the game.
    Here the person never moves and the idle wait is an hour: only the game's bound can end it."""
    from types import SimpleNamespace

    import trio

    from arena.bots.manifest import HUMAN, load_bot
    from arena.engine import PRESETS
    from arena.referee import TimeControl
    from arena.serve import play
    monkeypatch.setattr(play, "IDLE_S", 3600)
    monkeypatch.setattr(play, "GAME_S", 0.5, raising=False)
    store = tmp_path / "arena-data" / "arena.sqlite"
    app = SimpleNamespace(state=SimpleNamespace(options=SimpleNamespace(store=store)))
    session = play.Session("s1", 0, ["you", "random"])

    async def main() -> None:
        with trio.fail_after(60):  # a bound should the game wait for the hour, not a timing
            await play.play_game(app, session, [HUMAN, load_bot("random")], PRESETS["classic"], 7,  # type: ignore[arg-type]
                                 TimeControl(move_ms=1000, bank_ms=5000), 2000)
    trio.run(main)
    assert session.status == "over" and session.stored, session.error
    said = [m for m in session.messages if m.get("type") == "error"]
    assert said and said[0]["reason"] == "timeout" and "the most a browser game may last" in said[0]["message"], said


def test_a_visitor_with_no_account_holds_no_upload_place_on_a_clubs_server(tmp_path: Path) -> None:
    """Attack: the visitors' one upload place (senders no account, API token or token cookie names)
    was held by one visitor trickling a body for the 30 s read deadline, then again: every other
    sender who could only be named by a token in the body was answered 503, for as long as the
    visitor liked. A club's server (its store has accounts) now takes uploads from people only: a
    visitor is answered 403 saying so, holding no place while its body is read and dropped, and a
    member's upload (an API token) is read and judged as before."""
    import trio
    import trio.testing

    from arena.serve.app import Options, build_app
    from arena.store.people import Role, Scope, create_invitation, create_token
    from arena.store.people import sign_up as make_account
    from arena.tournament.store import Store
    from tests.test_stranger_attacks5 import HEAD, _honest_body, trickle

    store = tmp_path / "data" / "arena.sqlite"
    db = Store(store)
    code = create_invitation(db.db, Role.MEMBER, uses=1, hours=1, now=time.time(), by=None, origin="test")
    alice = make_account(db.db, code, "alice", "h", now=time.time(), origin="test")
    token = create_token(db.db, alice, "ci", {Scope.SUBMIT}, now=time.time(), origin="test")
    db.close()
    options = Options(store=store, allow_submit=True, token="right", read_timeout_s=3600.0)
    answers: dict[str, list[int]] = {}

    async def main() -> None:
        async with running() as nursery:  # every wait below is for a state
            app = build_app(options, nursery)
            nursery.start_soon(trickle, app, answers, "visitor", "10.0.0.1", [HEAD] + [b"A"] * 100_000, 1.0)
            await trio.testing.wait_all_tasks_blocked()
            assert app.state.sending == set()  # nothing held while its body trickles
            nursery.start_soon(trickle, app, answers, "another", "10.0.0.2", [_honest_body()], 0.0)
            nursery.start_soon(trickle, app, answers, "member", "10.0.0.9", [_honest_body()], 0.0,
                               [(b"authorization", f"Bearer {token}".encode())])
            await until(lambda: "member" in answers and "another" in answers)
            assert answers["another"] == [403], answers  # told to log in, not 503 behind the visitor
            assert answers["member"] == [400], answers  # read and judged (no ladder offered)

    trio.run(main)


def test_a_webhook_name_that_never_resolves_holds_up_nobody(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Attack: Mallory set her webhook to a name whose servers never answer. The deliverer looked it
    up with no deadline (the C resolver takes none), so her delivery held its posting thread for
    good, the batch it was in never ended, and no later notice of anyone's went out. (No outside
    network here: the resolver is replaced by one that never answers for her name.) Now a lookup
    has the delivery's deadline: hers fails, saying so, and Alice's next notice goes out."""
    import socket
    import threading
    from types import SimpleNamespace

    import trio

    from arena.serve import notify
    from arena.serve.wake import Wake
    from arena.store.notes import notify as tell
    from arena.tournament.store import Store
    from tests.test_serve_notify import Receiver

    never = threading.Event()
    real = socket.getaddrinfo

    def resolver(host, *args, **kwargs):  # type: ignore[no-untyped-def]
        if host == "mallory.invalid":
            never.wait()
            raise socket.gaierror("released at the test's end")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    store = tmp_path / "data" / "arena.sqlite"
    alices = Receiver()
    s = Store(store)
    s.db.execute("INSERT INTO accounts (name, password, role, created) VALUES ('mallory', 'x', 'member', 0), "
                 "('alice', 'x', 'member', 0)")
    s.db.execute("INSERT INTO webhooks VALUES (1, 'http://mallory.invalid/', 'k1', 0), (2, ?, 'k2', 0)", (alices.url,))
    tell(s.db, 1, "check failed", "mallory's notice", "/", 100.0)
    tell(s.db, 2, "check failed", "alice's first", "/", 101.0)
    s.close()
    options = SimpleNamespace(store=store, local_webhooks=True, webhook_timeout_s=1.0)
    app = SimpleNamespace(state=SimpleNamespace(options=options, outbox_wake=Wake()))

    async def main() -> None:
        async with running(partial(notify.deliverer, app, 0.05)):  # bounded should a batch wait on the lookup for good
            await until(lambda: alices.got)
            s = Store(store)
            tell(s.db, 2, "check failed", "alice's second", "/", 102.0)
            s.close()
            await until(lambda: len(alices.got) >= 2)

    try:
        trio.run(main)
    finally:
        never.set()
        alices.close()
    assert b"alice's second" in alices.got[1][1]
    db = sqlite3.connect(store)
    try:
        error = db.execute("SELECT last_error FROM outbox WHERE account=1").fetchone()[0]
    finally:
        db.close()
    assert "mallory.invalid did not resolve within 1 s" in error, error


def test_lookups_given_up_on_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A lookup given up on keeps its thread until the resolver answers: many webhooks of names
    that never resolve would pile up threads without end. Past ``HANGING_LOOKUPS`` of them no
    lookup is started (the delivery fails at once and is tried later); once they answer, the
    places come back."""
    import socket
    import threading

    from arena.serve import notify
    never = threading.Event()

    def resolver(host, *args, **kwargs):  # type: ignore[no-untyped-def]
        never.wait()
        raise socket.gaierror("released")

    deadline = time.monotonic() + 60  # another test's lookups, released at its end, finish first
    while notify._lookups._value < notify.HANGING_LOOKUPS:  # type: ignore[attr-defined]
        assert time.monotonic() < deadline
        time.sleep(0.01)
    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    try:
        for n in range(notify.HANGING_LOOKUPS):
            with pytest.raises(TimeoutError, match="did not resolve"):
                notify.resolve(f"never-{n}.invalid", 80, 0.01)
        with pytest.raises(TimeoutError, match="are still being looked up"):
            notify.resolve("one-more.invalid", 80, 1.0)  # refused before any wait
    finally:
        never.set()
    while notify._lookups._value < notify.HANGING_LOOKUPS:  # type: ignore[attr-defined]
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_the_failed_login_counter_forgets_and_stays_bounded() -> None:
    """Attack: every failed login added its address and its name to the counter for the server's
    life, and so did every question whether one was blocked: a million made-up names were a million
    entries (about 400 MB), never given back. Now keys are forgotten when their failures leave the
    window, the longest untried go first past a bound, asking adds nothing, and what is being tried
    now is still blocked."""
    from arena.serve.auth import LoginLimiter
    now = [0.0]
    limiter = LoginLimiter(clock=lambda: now[0], keys=1000)
    for n in range(1_000_000):  # one address, a million names (a real server's write limit spaces them)
        if n % 1000 == 0:
            now[0] += 1.0
            assert len(limiter.seen) <= 1000
        limiter.failed("addr:mallory", f"name:made-up-{n}")
    assert limiter.blocked("addr:mallory")  # the key being tried stays counted
    for n in range(1000):
        assert not limiter.blocked(f"addr:asker-{n}", f"name:asked-{n}")
    assert "addr:asker-0" not in limiter.seen and len(limiter.seen) <= 1000
    now[0] += limiter.window_s  # a quarter of an hour later every failure has left the window
    limiter.failed("addr:alice", "name:alice")
    assert set(limiter.seen) == {"addr:alice", "name:alice"}
    assert not limiter.blocked("addr:mallory")


def test_a_bench_name_claimed_before_the_bench_was_shown_is_named_at_the_start(tmp_path: Path) -> None:
    """Left from the last round: uploads refuse a bench folder's name once the bench is shown, but
    Mallory had uploaded a bot named ``ann`` before the organiser added ``--bench`` with Ann's
    folder, and the bench page shows her Ann's row, games and stderr. The server cannot tell her
    claim from Ann's own (a student owning her folder's name is how she sees her grade), so it
    names every such claim at its start for the organiser to check."""
    from arena.store.people import account, claim_bot
    from tests.test_bench import bench_file
    path = bench_file(tmp_path / "course", deals=1)
    store = tmp_path / "data" / "arena.sqlite"
    build_store(store)
    db = sqlite3.connect(store, isolation_level=None)
    try:
        from arena.store import migrate
        migrate(db)
        code = invite(store)
        from arena.store.people import sign_up as make_account
        make_account(db, code, "mallory", "h", now=time.time(), origin="test")
        who = account(db, "mallory")
        assert who is not None and claim_bot(db, "ann", who, taken=False, now=time.time(), origin="test")
    finally:
        db.close()
    server = ServerProc(store, "--bench", str(path))
    server.stop()
    said = "".join(server.banner)
    assert "the account mallory owns the bot name ann" in said and "check it is the student's" in said, said
    assert "owns the bot name bob" not in said


def test_a_browser_games_bots_cannot_take_longer_than_a_game_may_last() -> None:
    """The bots' side of the same hold: after the person's seat forfeits, the bots play on, each with
    the time per decision the form chose. A ladder member that thinks its whole time, chosen with
    60 s a decision and 10,000 turns, kept its place for a week. The form's turn cap times its
    time per decision is at most a game's bound; the defaults fit."""
    from arena.serve import play
    from tests.test_serve_play import _Form
    with pytest.raises(ValueError, match="at most 60 minutes"):
        play._parse(_Form(rules="classic", opponent=["random"], max_turns="10000", move_ms="60000"), {})
    play._parse(_Form(rules="classic", opponent=["random"]), {})  # 2,000 turns of 1 s: fits
