"""People on a club server: invitations, accounts and the audit of every write, as SQL over a
migrated store connection (:func:`arena.store.migrate`).

Passwords arrive here already hashed (the web layer owns the hashing policy); invitation codes
are stored as their SHA-256 and shown once. Every function that writes does so in one
transaction and checks everything first, so a refusal changes nothing.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

from ..errors import ArenaError
from .notes import Kind, notify


class Role(StrEnum):
    ADMIN = "admin"
    ORGANISER = "organiser"  # runs ladders
    MEMBER = "member"


class Status(StrEnum):
    ACTIVE = "active"
    SUSPENDED = "suspended"


class PeopleError(ArenaError, ValueError):
    """A refused sign-up, invitation or account change, with the reason a person can act on."""


NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{1,31}")
MIN_PASSWORD = 10
MAX_INVITE_USES = 1000


@dataclass(frozen=True)
class Account:
    id: int
    name: str
    password: str  # the argon2 hash
    role: Role
    status: Status
    created: float
    sessions: int = 0  # the session generation: a cookie of an older one is no longer this person's


def digest(secret: str) -> str:
    """How a code or token is kept: its SHA-256 (they are random, so no salt or stretching is needed)."""
    return hashlib.sha256(secret.encode()).hexdigest()


@contextmanager
def _tx(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def record(db: sqlite3.Connection, account: int | None, action: str, target: str, origin: str, now: float,
           **detail: Any) -> None:
    """One line of the audit (inside the caller's transaction): who, what, when, from where."""
    db.execute("INSERT INTO audit (at, account, action, target, detail, origin) VALUES (?,?,?,?,?,?)",
               (now, account, action, target, json.dumps(detail, sort_keys=True), origin))


def create_invitation(db: sqlite3.Connection, role: Role, *, uses: int, hours: float, now: float,
                      by: int | None, origin: str, note: str = "") -> str:
    """A new invitation code for ``uses`` sign-ups within ``hours``; the code is returned once."""
    if not 1 <= uses <= MAX_INVITE_USES:
        raise PeopleError(f"an invitation is for 1 to {MAX_INVITE_USES} sign-ups, not {uses}")
    if not 0 < hours <= 24 * 366:
        raise PeopleError(f"an invitation lasts more than 0 and at most {24 * 366} hours, not {hours}")
    code = secrets.token_urlsafe(18)
    with _tx(db):
        db.execute("INSERT INTO invitations (code_hash, role, uses_left, expires, created_by, note, created) "
                   "VALUES (?,?,?,?,?,?,?)", (digest(code), Role(role).value, uses, now + hours * 3600, by, note, now))
        record(db, by, "invite", Role(role).value, origin, now, uses=uses, hours=hours, note=note)
    return code


def first_admin_link(db: sqlite3.Connection, now: float, hours: float = 1.0) -> str:
    """The one-time invitation that makes the first admin, for the server's own terminal only.

    Refused once an admin exists: later admins are invited by an admin."""
    if db.execute("SELECT 1 FROM accounts WHERE role='admin'").fetchone():
        raise PeopleError("this server has an admin already: an admin invites the others")
    return create_invitation(db, Role.ADMIN, uses=1, hours=hours, now=now, by=None, origin="terminal",
                             note="first admin")


def invitation_role(db: sqlite3.Connection, code: str, name: str, *, now: float) -> str:
    """The role invitation ``code`` gives ``name``; PeopleError when it may not sign up with it (the
    code unknown, expired or used up, the name malformed or taken). A sign-up asks this before it
    hashes the password, so a visitor without an invitation costs the server no argon2 hash."""
    if not NAME.fullmatch(name):
        raise PeopleError("a name is 2 to 32 letters, digits, '.', '_' or '-', starting with a letter or digit")
    row = db.execute("SELECT role, uses_left, expires FROM invitations WHERE code_hash=?", (digest(code),)).fetchone()
    if row is None:
        raise PeopleError("this invitation code is not valid: check the link, or ask for a new one")
    role, uses_left, expires = row
    if expires <= now:
        raise PeopleError("this invitation has expired: ask whoever sent it for a new one")
    if uses_left <= 0:
        raise PeopleError("this invitation has been used as many times as it allows: ask for a new one")
    if db.execute("SELECT 1 FROM accounts WHERE name=?", (name,)).fetchone():
        raise PeopleError(f"the name {name!r} is taken: choose another")
    return role


def sign_up(db: sqlite3.Connection, code: str, name: str, password_hash: str, *, now: float, origin: str) -> Account:
    """Make an account from an invitation code, using one of its sign-ups; nothing changes on refusal."""
    with _tx(db):
        role = invitation_role(db, code, name, now=now)  # again: another sign-up may have used it meanwhile
        cur = db.execute("INSERT INTO accounts (name, password, role, status, created) VALUES (?,?,?,?,?)",
                         (name, password_hash, role, Status.ACTIVE.value, now))
        db.execute("UPDATE invitations SET uses_left=uses_left-1 WHERE code_hash=?", (digest(code),))
        record(db, cur.lastrowid, "sign-up", name, origin, now, role=role)
    found = account(db, name)
    assert found is not None
    return found


def _account(row: tuple | None) -> Account | None:
    return None if row is None else Account(row[0], row[1], row[2], Role(row[3]), Status(row[4]), row[5], row[6])


def has_accounts(db: sqlite3.Connection) -> bool:
    """Whether anyone has an account here: the store is then a club's (a store from before accounts has no table)."""
    if db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='accounts'").fetchone() is None:
        return False
    return db.execute("SELECT 1 FROM accounts LIMIT 1").fetchone() is not None


_COLUMNS = "id, name, password, role, status, created, sessions"


def account(db: sqlite3.Connection, name: str) -> Account | None:
    return _account(db.execute(f"SELECT {_COLUMNS} FROM accounts WHERE name=?", (name,)).fetchone())


def account_by_id(db: sqlite3.Connection, account_id: int) -> Account | None:
    return _account(db.execute(f"SELECT {_COLUMNS} FROM accounts WHERE id=?", (account_id,)).fetchone())


def session_generation(db: sqlite3.Connection, account_id: int) -> int | None:
    """The generation a session cookie of this active person must carry; None: no such active person."""
    row = db.execute("SELECT sessions FROM accounts WHERE id=? AND status=?", (account_id, Status.ACTIVE.value)).fetchone()
    return None if row is None else row[0]


def end_sessions(db: sqlite3.Connection, account_id: int) -> None:
    """End every session of this person, on every browser and every copy of its cookie (logging
    out, "log out everywhere"): the next request with an older cookie is nobody's."""
    db.execute("UPDATE accounts SET sessions=sessions+1 WHERE id=?", (account_id,))


def accounts(db: sqlite3.Connection) -> list[Account]:
    rows = db.execute(f"SELECT {_COLUMNS} FROM accounts ORDER BY name")
    return [a for a in (_account(r) for r in rows) if a]


def set_password_hash(db: sqlite3.Connection, account_id: int, password_hash: str) -> None:
    """Store a rehashed password (the hasher's parameters changed since the person signed up)."""
    db.execute("UPDATE accounts SET password=? WHERE id=?", (password_hash, account_id))


def set_status(db: sqlite3.Connection, name: str, status: Status, *, by: int | None, origin: str, now: float,
               reason: str) -> Account:
    """Suspend or reinstate a person (an admin's act, audited)."""
    with _tx(db):
        found = account(db, name)
        if found is None:
            raise PeopleError(f"no account named {name!r}")
        db.execute("UPDATE accounts SET status=? WHERE id=?", (Status(status).value, found.id))
        if status == Status.SUSPENDED:  # a cookie copied before would live again at a reinstatement
            end_sessions(db, found.id)
        record(db, by, "suspend" if status == Status.SUSPENDED else "reinstate", f"account:{found.name}", origin,
               now, reason=reason)
        suspended = status == Status.SUSPENDED
        notify(db, found.id, Kind.SUSPENDED if suspended else Kind.REINSTATED,
               f"your account was {'suspended' if suspended else 'reinstated'} by an admin" +
               (f": {reason}" if reason else ""), "/account", now)
    changed = account(db, name)
    assert changed is not None
    return changed


def audit_rows(db: sqlite3.Connection, limit: int = 200) -> list[dict[str, Any]]:
    """The latest writes, newest first, each with the name of who made it ('terminal' for none)."""
    rows = db.execute("SELECT a.at, COALESCE(p.name, 'terminal'), a.action, a.target, a.detail, a.origin "
                      "FROM audit a LEFT JOIN accounts p ON p.id=a.account ORDER BY a.id DESC LIMIT ?", (limit,))
    return [{"at": r[0], "who": r[1], "action": r[2], "target": r[3], "detail": json.loads(r[4]), "origin": r[5]}
            for r in rows]


def claim_bot(db: sqlite3.Connection, name: str, who: Account, *, taken: bool, now: float, origin: str) -> bool:
    """Make ``who`` the owner of bot ``name`` (every version, every ladder) unless another account is.

    ``taken``: the name is already on a ladder with no owner (the organiser's own bots, or bots
    placed before accounts): only an admin or organiser may claim it. True when newly claimed."""
    with _tx(db):
        row = db.execute("SELECT account FROM bot_owners WHERE name=?", (name,)).fetchone()
        if row is not None:
            if row[0] != who.id:
                raise PeopleError(f"the bot name {name!r} belongs to another account: only its owner submits "
                                  "versions of it; choose another name")
            return False
        if taken and who.role == Role.MEMBER:
            raise PeopleError(f"the bot name {name!r} is already this server's (a ladder's or a bench's bot) and "
                              "is not yours: choose another name")
        db.execute("INSERT INTO bot_owners (name, account, since) VALUES (?,?,?)", (name, who.id, now))
        record(db, who.id, "claim", f"bot:{name}", origin, now)
    return True


def owner_names(db: sqlite3.Connection) -> dict[str, str]:
    """Bot name -> the name of the account that owns it (empty on a store without accounts)."""
    return dict(db.execute("SELECT b.name, a.name FROM bot_owners b JOIN accounts a ON a.id=b.account"))


def label_name(label: str) -> str:
    """The bot name of a label ``name@version``. A name holds no ``@`` but a version may: the owner of
    ``yy@1@mallory`` is ``yy``'s, never ``yy@1``'s (which nobody owns, so the manifest's claimed
    author stood in for the account at a strangers' table)."""
    return label.partition("@")[0]


def account_authors(authors: dict[str, str], owners: dict[str, str]) -> dict[str, str]:
    """Label -> author for ``one_seat_per_author``, with the owning account standing in for whatever
    ``author`` the manifest of an owned bot claims (``authors``: from the manifests)."""
    return {label: owners.get(label_name(label), author) for label, author in authors.items()}


class Scope(StrEnum):
    SUBMIT = "submit"        # upload bots (arena submit --server)
    READ_LOGS = "read-logs"  # read one's own bots' private lines


TOKEN_PREFIX = "arena_"


def create_token(db: sqlite3.Connection, who: Account, name: str, scopes: set[Scope], *, now: float,
                 origin: str) -> str:
    """A new API token for ``who``'s machines; returned once, kept as its SHA-256."""
    name = name.strip()
    if not 1 <= len(name) <= 60:
        raise PeopleError("a token needs a name of 1 to 60 characters (say where it is used: 'CI', 'laptop')")
    if not scopes:
        raise PeopleError("a token needs at least one scope: submit, read-logs")
    token = TOKEN_PREFIX + secrets.token_urlsafe(24)
    with _tx(db):
        db.execute("INSERT INTO api_tokens (account, token_hash, name, scopes, created) VALUES (?,?,?,?,?)",
                   (who.id, digest(token), name, " ".join(sorted(Scope(s).value for s in scopes)), now))
        record(db, who.id, "token-create", f"token:{name}", origin, now, scopes=sorted(s.value for s in scopes))
    return token


def tokens(db: sqlite3.Connection, account_id: int) -> list[dict[str, Any]]:
    rows = db.execute("SELECT id, name, scopes, created, last_used, revoked FROM api_tokens WHERE account=? "
                      "ORDER BY id", (account_id,))
    return [{"id": r[0], "name": r[1], "scopes": r[2].split(), "created": r[3], "last_used": r[4], "revoked": r[5]}
            for r in rows]


def revoke_token(db: sqlite3.Connection, who: Account, token_id: int, *, now: float, origin: str) -> None:
    """Revoke one of ``who``'s tokens (an admin may revoke anyone's)."""
    with _tx(db):
        row = db.execute("SELECT account, name, revoked FROM api_tokens WHERE id=?", (token_id,)).fetchone()
        if row is None or (row[0] != who.id and who.role != Role.ADMIN):
            raise PeopleError("no such token")
        if row[2] is None:
            db.execute("UPDATE api_tokens SET revoked=? WHERE id=?", (now, token_id))
            record(db, who.id, "token-revoke", f"token:{row[1]}", origin, now, owner=row[0])


def revoke_all_tokens(db: sqlite3.Connection, name: str, *, by: int | None, now: float, origin: str) -> int:
    """Revoke every live token of the account ``name`` (an admin's act, audited); how many."""
    with _tx(db):
        found = account(db, name)
        if found is None:
            raise PeopleError(f"no account named {name!r}")
        n = db.execute("UPDATE api_tokens SET revoked=? WHERE account=? AND revoked IS NULL", (now, found.id)).rowcount
        record(db, by, "token-revoke-all", f"account:{found.name}", origin, now, revoked=n)
    return n


def token_holder(db: sqlite3.Connection, token: str) -> int | None:
    """The id of the account a live (unrevoked) token was made for, whatever its scopes; None if none."""
    row = db.execute("SELECT account FROM api_tokens WHERE token_hash=? AND revoked IS NULL",
                     (digest(token),)).fetchone()
    return None if row is None else row[0]


def token_account(db: sqlite3.Connection, token: str, scope: Scope, now: float) -> Account | None:
    """The active account a live token with ``scope`` belongs to (its last use noted), else None."""
    row = db.execute("SELECT id, account, scopes FROM api_tokens WHERE token_hash=? AND revoked IS NULL",
                     (digest(token),)).fetchone()
    if row is None or scope.value not in row[2].split():
        return None
    who = account_by_id(db, row[1])
    if who is None or who.status != Status.ACTIVE:
        return None
    db.execute("UPDATE api_tokens SET last_used=? WHERE id=?", (now, row[0]))
    return who


# --------------------------------------------------------------------------- a person's webhook

def check_url(url: str) -> str:
    """A webhook address: http or https, a host, a port that is one, no user or password in it.
    What ``urlsplit`` cannot read (``http://[::1``, a port of letters) is refused here, not a 500."""
    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018 - raises on a port that is no number from 0 to 65535
    except ValueError:
        raise PeopleError("a webhook address must be one a browser could open (a host, and a port "
                          "from 0 to 65535 if it names one)") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.username or parts.password:
        raise PeopleError("a webhook is an http:// or https:// address with a host (and no user or password)")
    if len(url) > 500:
        raise PeopleError("a webhook address has at most 500 characters")
    return url.strip()


def set_webhook(db: sqlite3.Connection, who: Account, url: str, *, now: float, origin: str) -> str:
    """Set ``who``'s webhook (arena/store/notes.py delivers to it); returns its new signing secret,
    shown once. It is kept as it is: the server signs each delivery with it."""
    url = check_url(url)
    secret = "whsec_" + secrets.token_urlsafe(24)
    with _tx(db):
        db.execute("INSERT OR REPLACE INTO webhooks (account, url, secret, created) VALUES (?,?,?,?)",
                   (who.id, url, secret, now))
        record(db, who.id, "webhook-set", f"account:{who.name}", origin, now, url=url)
    return secret


def clear_webhook(db: sqlite3.Connection, who: Account, *, now: float, origin: str) -> None:
    """Remove ``who``'s webhook; deliveries not yet made are dropped."""
    with _tx(db):
        db.execute("DELETE FROM webhooks WHERE account=?", (who.id,))
        db.execute("UPDATE outbox SET given_up=?, last_error='the webhook was removed' "
                   "WHERE account=? AND delivered IS NULL AND given_up IS NULL", (now, who.id))
        record(db, who.id, "webhook-clear", f"account:{who.name}", origin, now)
