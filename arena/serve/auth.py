"""People on the web: sign-up with an invitation, login, logout, and who is asking.

A session is a signed cookie (starlette's SessionMiddleware over itsdangerous; HttpOnly,
SameSite=Strict) holding the account's id, the person's session generation when it was made and
the session's CSRF token; every form carries that token and every POST here checks it and the
request's Origin. A cookie is its person's only while the store's generation is still the one it
carries: logging out or a suspension moves it on, ending every copy of every older cookie (a
signed cookie alone is valid wherever it is copied until it expires). Passwords are hashed with
argon2 (argon2-cffi's defaults, rehashed at login when the server's parameters differ from the
stored hash's: :class:`PasswordCost`). Failed logins are
counted per client address and per name; past the limit a login is refused, even with the
right password, until the window has passed.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from enum import Enum

import anyio
from argon2 import PasswordHasher, profiles
from argon2.exceptions import InvalidHashError, VerificationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..store import connect
from ..store.people import (MIN_PASSWORD, Account, PeopleError, Role, Scope, Status, account, account_by_id,
                            invitation_role, sign_up)
from .pages import redirect, render

hasher = PasswordHasher()  # production's: argon2-cffi's defaults
SESSION_COOKIE = "arena_session"
SESSION_DAYS = 14
MAX_FORM_FIELD = 200
# verified when the name is unknown, so that both cases take as long: a hash with the hasher's own
# parameters (a test holds that) of a random password thrown away when it was made; written out
# rather than made at import, which cost every server start and CLI import 64 MiB and about 1 s of CPU.
# Were its password ever found, it would still log nobody in (``found is None`` refuses).
_NOBODY = "$argon2id$v=19$m=65536,t=3,p=4$Iu+zFqA3XJbAZT5e5VIBfw$SQFPwChz2AU6WHF6T080T0ybbwf8/GgdZkaf9gpt3nA"


class PasswordCost(str, Enum):
    """What a password's hash costs on this server. ``production``: argon2-cffi's defaults (RFC 9106's
    low-memory profile: 64 MiB, three passes, about 0.2 s of CPU a sign-up or login). ``cheapest``:
    argon2-cffi's profile for tests (8 KiB, one pass, microseconds), which lets a test server sign
    up and log in dozens of people without paying production's cost each time; never for a server
    people use. Hashes say their own parameters, so a login on a server of the other cost still
    checks, then rehashes the password to this server's."""

    PRODUCTION = "production"
    CHEAPEST = "cheapest"

    def hasher(self) -> tuple[PasswordHasher, str]:
        """The hasher, and the hash an unknown name is checked against (made with its parameters)."""
        if self is PasswordCost.PRODUCTION:
            return hasher, _NOBODY
        cheap = PasswordHasher.from_parameters(profiles.CHEAPEST)
        return cheap, cheap.hash(secrets.token_hex(16))


def session_key(store: Path) -> str:
    """The key that signs session cookies: kept 0600 beside the store, so logins survive a restart.

    With no store directory yet there are no accounts to log into; the key is then made for this
    run only, and nothing is written."""
    path = store.parent / "session.key"
    if not store.parent.is_dir():
        return secrets.token_hex(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        return path.read_text(encoding="ascii").strip()
    with os.fdopen(fd, "w", encoding="ascii") as f:
        key = secrets.token_hex(32)
        f.write(key)
    return key


def write_identity(store: Path, key: str, max_age: int = SESSION_DAYS * 86400
                   ) -> Callable[[dict], Any]:
    """For the write limit (:class:`arena.serve.limits.WriteLimit`), which runs before the session
    is read: the account of a request, from its signed session cookie (checked with ``key``, as
    the session middleware checks it) or from a live API token (looked up), as ``account:ID``;
    None for anyone else, who is then counted by address. A forged cookie or an unknown token
    gets no bucket of its own."""
    import base64
    import json

    import itsdangerous
    from starlette.requests import HTTPConnection

    from ..store.people import session_generation, token_holder
    signer = itsdangerous.TimestampSigner(str(key))

    async def identify(scope: dict) -> str | None:
        conn = HTTPConnection(scope)
        given = conn.headers.get("authorization", "")
        kind, _, token = given.partition(" ")
        if kind.lower() == "bearer" and token.strip() and store.exists():
            holder = await db_call(store, lambda db: token_holder(db, token.strip()))
            return f"account:{holder}" if holder is not None else None
        cookie = conn.cookies.get(SESSION_COOKIE)
        if not cookie:
            return None
        try:
            session = json.loads(base64.b64decode(signer.unsign(cookie.encode(), max_age=max_age)))
            uid, generation = session.get("uid"), session.get("gen")
        except (itsdangerous.BadSignature, ValueError, AttributeError):
            return None
        if not isinstance(uid, int) or not isinstance(generation, int) or not store.exists():
            return None
        # an ended session (logged out, suspended) gets no account's bucket or upload slot
        live = await db_call(store, lambda db: session_generation(db, uid) == generation)
        return f"account:{uid}" if live else None

    return identify


class LoginLimiter:
    """At most ``failures`` failed logins per key (client address, account name) in ``window_s``.

    Keys are forgotten once their last failure has left the window, and past ``keys`` of them the
    ones whose last failure is oldest go first: every name and address ever tried was kept for
    the server's life (a million made-up names, a million entries). Asking whether a key is
    blocked adds nothing. A key being tried now is among the newest, so a flood of made-up keys
    pushes out only keys nobody has tried for longest (a flood of ``keys`` failures, each its own
    write under the write limit, can unblock an old one: the price of a bound)."""

    def __init__(self, failures: int = 5, window_s: float = 900.0, clock: Callable[[], float] = time.monotonic,
                 keys: int = 100_000):
        self.failures, self.window_s, self.clock, self.keys = failures, window_s, clock, keys
        self.seen: OrderedDict[str, deque[float]] = OrderedDict()  # oldest last failure first

    def _forget_old(self, now: float) -> None:
        while self.seen:
            key, times = next(iter(self.seen.items()))
            if times[-1] > now - self.window_s and len(self.seen) <= self.keys:
                return
            del self.seen[key]

    def blocked(self, *keys: str) -> bool:
        now = self.clock()
        return any(sum(t > now - self.window_s for t in self.seen.get(k, ())) >= self.failures for k in keys)

    def failed(self, *keys: str) -> None:
        now = self.clock()
        for k in keys:
            times = self.seen.pop(k, None) or deque(maxlen=self.failures)
            times.append(now)
            self.seen[k] = times
        self._forget_old(now)


def open_write(store: Path) -> sqlite3.Connection:
    """A writing connection to the store, its schema brought up to date."""
    from ..tournament.store import create_private_store
    create_private_store(store)
    return connect(store)


async def with_db(request: Request, fn: Callable[[sqlite3.Connection], Any]) -> Any:
    """``fn`` on a writing connection, in a worker thread."""
    return await db_call(request.app.state.options.store, fn)


async def db_call(store: Path, fn: Callable[[Any], Any], opener: Callable[[Path], Any] = open_write) -> Any:
    """``fn`` on a writing connection to ``store`` (or what ``opener`` makes of it, closed after),
    in a worker thread (for work outside a request too)."""

    def work() -> Any:
        db = opener(store)
        try:
            return fn(db)
        finally:
            db.close()

    return await anyio.to_thread.run_sync(work)


def origin_of(request: Request) -> str:
    return request.client.host if request.client else "unknown"


async def current(request: Request) -> Account | None:
    """The logged-in, active account of this request, or None: also None when the session was
    ended since its cookie was made (its generation is no longer the person's)."""
    uid, generation = request.session.get("uid"), request.session.get("gen")
    if not isinstance(uid, int) or not request.app.state.options.store.exists():
        return None
    found = await with_db(request, lambda db: account_by_id(db, uid))
    live = found is not None and found.status == Status.ACTIVE and found.sessions == generation
    if not live:  # ended: its cookie is dropped with this answer, so no page takes it for a person's
        request.session.clear()
    return found if live else None


async def require(request: Request, *roles: Role) -> Account:
    """The account making this request, which must hold one of ``roles`` (any role when none given)."""
    who = await current(request)
    if who is None:
        raise HTTPException(403, "Log in first (/login).")
    if roles and who.role not in roles:
        raise HTTPException(403, f"This needs the role {' or '.join(r.value for r in roles)}; you are {who.role.value}.")
    return who


def csrf_token(request: Request) -> str:
    """The session's CSRF token, made on first use; every form of a logged-in page carries it."""
    token = request.session.get("csrf")
    if not isinstance(token, str):
        token = request.session["csrf"] = secrets.token_urlsafe(24)
    return token


def check_form(request: Request, csrf: str) -> None:
    """Raise 403 unless the request comes from this site's page and carries the session's CSRF token."""
    origin = request.headers.get("origin")
    if origin is not None and origin != f"{request.url.scheme}://{request.headers.get('host', '')}":
        raise HTTPException(403, "This request came from another site's page; refused.")
    expected = request.session.get("csrf")
    if not (isinstance(expected, str) and secrets.compare_digest(csrf, expected)):
        raise HTTPException(403, "This form has expired or did not come from this site: reload the page and try again.")


async def checked_form(request: Request) -> dict[str, str]:
    """The POSTed form, after :func:`check_form`."""
    form = await request.form(max_files=0, max_fields=20)
    fields = {k: str(v)[:MAX_FORM_FIELD] for k, v in form.items() if isinstance(v, str)}
    check_form(request, fields.get("csrf", ""))
    return fields


# --------------------------------------------------------------------------- pages

def _signup_form(request: Request, status: int = 200, error: str = "", code: str = "", name: str = "") -> Response:
    return render(request, "signup.html", status, title="Sign up", error=error, code=code, person=name,
                  csrf=csrf_token(request), min_password=MIN_PASSWORD)


async def signup_page(request: Request) -> Response:
    return _signup_form(request, code=request.query_params.get("code", "")[:MAX_FORM_FIELD])


async def signup(request: Request) -> Response:
    form = await checked_form(request)
    code, name, password = form.get("code", "").strip(), form.get("name", "").strip(), form.get("password", "")
    if len(password) < MIN_PASSWORD:
        return _signup_form(request, 400, f"A password has at least {MIN_PASSWORD} characters.", code, name)
    try:  # before the hash (argon2id: 64 MiB, 0.2 s of CPU), which a visitor with no invitation got for free
        await with_db(request, lambda db: invitation_role(db, code, name, now=time.time()))
        hashed = await anyio.to_thread.run_sync(request.app.state.hasher.hash, password)
        made = await with_db(request, lambda db: sign_up(db, code, name, hashed, now=time.time(),
                                                         origin=origin_of(request)))
    except PeopleError as e:
        return _signup_form(request, 400, str(e).capitalize() + ".", code, name)
    _log_in(request, made)
    return redirect("/account")


def _log_in(request: Request, who: Account) -> None:
    request.session.clear()  # a new session: nothing set before login carries over
    request.session["uid"] = who.id
    request.session["gen"] = who.sessions
    csrf_token(request)


def _login_form(request: Request, status: int = 200, error: str = "", name: str = "") -> Response:
    return render(request, "login.html", status, title="Log in", error=error, person=name, csrf=csrf_token(request))


async def login_page(request: Request) -> Response:
    return _login_form(request)


async def login(request: Request) -> Response:
    form = await checked_form(request)
    name, password = form.get("name", "").strip(), form.get("password", "")
    limiter: LoginLimiter = request.app.state.login_limiter
    keys = (f"addr:{origin_of(request)}", f"name:{name.lower()}")
    if limiter.blocked(*keys):
        return _login_form(request, 429, "Too many failed logins: wait a quarter of an hour and try again.", name)
    found = await with_db(request, lambda db: account(db, name)) if request.app.state.options.store.exists() else None
    hasher, nobody = request.app.state.hasher, request.app.state.nobody

    def verify() -> bool:
        try:
            return hasher.verify(found.password if found else nobody, password)
        except (VerificationError, InvalidHashError):
            return False

    if not (await anyio.to_thread.run_sync(verify)) or found is None:
        limiter.failed(*keys)
        return _login_form(request, 401, "Wrong name or password.", name)
    if found.status != Status.ACTIVE:
        return _login_form(request, 403, "This account is suspended: ask an admin why.", name)
    if hasher.check_needs_rehash(found.password):
        from ..store.people import set_password_hash
        rehashed = await anyio.to_thread.run_sync(hasher.hash, password)
        await with_db(request, lambda db: set_password_hash(db, found.id, rehashed))
    _log_in(request, found)
    return redirect("/account")


async def logout(request: Request) -> Response:
    """End every session of the person, everywhere: a copy of this cookie (or of one on another
    browser) is nobody's from now on, not only this browser's."""
    from ..store.people import end_sessions
    await checked_form(request)
    who = await current(request)
    if who is not None:
        await with_db(request, lambda db: end_sessions(db, who.id))
    request.session.clear()
    return redirect("/")


async def account_page(request: Request, status: int = 200, new_token: str = "", error: str = "") -> Response:
    from ..store.people import tokens
    who = await require(request)
    return render(request, "account.html", status, title="Your account", who=who, csrf=csrf_token(request),
                  tokens=await with_db(request, lambda db: tokens(db, who.id)), new_token=new_token, error=error,
                  scopes=[s.value for s in Scope])


async def make_token(request: Request) -> Response:
    """A new API token, shown on this page once."""
    from ..store.people import create_token
    who = await require(request)
    form = await checked_form(request)
    wanted = {Scope(v) for v in (form.get("scope_submit"), form.get("scope_read_logs")) if v in {s.value for s in Scope}}
    try:
        token = await with_db(request, lambda db: create_token(db, who, form.get("name", ""), wanted,
                                                               now=time.time(), origin=origin_of(request)))
    except PeopleError as e:
        return await account_page(request, 400, error=str(e).capitalize() + ".")
    return await account_page(request, 201, new_token=token)


async def revoke(request: Request) -> Response:
    from ..store.people import revoke_token
    who = await require(request)
    await checked_form(request)
    from .data import int_or_none
    try:
        token_id = int_or_none(request.path_params["tid"])
        if token_id is None:  # not a number, or past what the store holds (SQLite would raise: a 500)
            raise ValueError
        await with_db(request, lambda db: revoke_token(db, who, token_id, now=time.time(), origin=origin_of(request)))
    except (ValueError, PeopleError):
        raise HTTPException(404, "No such token.") from None
    return redirect("/account")


async def bearer(request: Request, scope: Scope) -> Account | None:
    """The account of an ``Authorization: Bearer`` API token with ``scope``; None when the request
    carries none; 403 when it carries one that is unknown, revoked, of another scope or suspended."""
    from ..store.people import token_account
    given = request.headers.get("authorization", "")
    if not given:
        return None
    kind, _, token = given.partition(" ")
    if kind.lower() != "bearer" or not token.strip() or not request.app.state.options.store.exists():
        raise HTTPException(403, "This API token is not valid here.")
    who = await with_db(request, lambda db: token_account(db, token.strip(), scope, time.time()))
    if who is None:
        raise HTTPException(403, f"This API token is unknown, revoked, or lacks the scope {scope.value}.")
    return who


def routes() -> list[Route]:
    return [
        Route("/signup", signup_page, methods=["GET"]),
        Route("/signup", signup, methods=["POST"]),
        Route("/login", login_page, methods=["GET"]),
        Route("/login", login, methods=["POST"]),
        Route("/logout", logout, methods=["POST"]),
        Route("/account", account_page, methods=["GET"]),
        Route("/account/tokens", make_token, methods=["POST"]),
        Route("/account/tokens/{tid}/revoke", revoke, methods=["POST"]),
    ]


def setup(app: Any) -> None:
    app.state.login_limiter = LoginLimiter()
    app.state.hasher, app.state.nobody = PasswordCost(app.state.options.password_cost).hasher()
