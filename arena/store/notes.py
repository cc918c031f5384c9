"""What a person is told: notifications, written by the code that makes each event happen (a
submission's end, a ladder suspending a bot, an admin's act), and their webhook deliveries.

A notification is a row for its person's /notifications page; when the person has a webhook, the
same transaction writes a delivery to the outbox, so a delivery is never lost and never made for
an event that was rolled back. The server's deliverer (arena/serve/notify.py) posts them.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import sqlite3
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

MAX_ATTEMPTS = 8  # deliveries tried at 0, 10 s, 20 s, 40 s, ... about 21 minutes in all
FIRST_RETRY_S = 10.0
MAX_RETRY_S = 3600.0


class Kind(StrEnum):
    CHECK_FAILED = "check failed"
    PLACED = "placed"
    REFUNDED = "refunded"
    NOT_PLACED = "not placed"  # refused on its merits after upload (a version or ladder rule)
    SUSPENDED = "suspended"
    REINSTATED = "reinstated"
    RETIRED = "retired"
    PASSED = "passed"          # the bot's rating moved past a rival's


@dataclass(frozen=True)
class Note:
    id: int
    at: float
    kind: str
    text: str
    link: str
    seen: bool


def notify(db: sqlite3.Connection, account: int, kind: Kind, text: str, link: str, now: float) -> int | None:
    """One notification for ``account`` (inside the caller's transaction), and its webhook delivery;
    none for an account that is gone (removed by hand): telling nobody must not undo what the
    transaction records (a job's end, a suspension)."""
    if db.execute("SELECT 1 FROM accounts WHERE id=?", (account,)).fetchone() is None:
        return None
    note = db.execute("INSERT INTO notifications (account, at, kind, text, link) VALUES (?,?,?,?,?)",
                      (account, now, Kind(kind).value, text, link)).lastrowid
    hook = db.execute("SELECT url FROM webhooks WHERE account=?", (account,)).fetchone()
    if hook is not None:
        body = json.dumps({"id": note, "at": now, "kind": Kind(kind).value, "text": text, "link": link},
                          sort_keys=True)
        db.execute("INSERT INTO outbox (account, url, body, next_at) VALUES (?,?,?,?)", (account, hook[0], body, now))
    assert note is not None
    return note


def notify_owner(db: sqlite3.Connection, bot_name: str, kind: Kind, text: str, link: str, now: float) -> int | None:
    """Tell the account that owns bot ``bot_name``, if one does (a store with no accounts has none)."""
    if db.execute("SELECT 1 FROM sqlite_master WHERE name='bot_owners'").fetchone() is None:
        return None
    row = db.execute("SELECT account FROM bot_owners WHERE name=?", (bot_name,)).fetchone()
    return None if row is None else notify(db, row[0], kind, text, link, now)


def notes(db: sqlite3.Connection, account: int, limit: int = 100) -> list[Note]:
    rows = db.execute("SELECT id, at, kind, text, link, seen FROM notifications WHERE account=? "
                      "ORDER BY id DESC LIMIT ?", (account, limit))
    return [Note(r[0], r[1], r[2], r[3], r[4], bool(r[5])) for r in rows]


def unseen(db: sqlite3.Connection, account: int) -> int:
    return db.execute("SELECT COUNT(*) FROM notifications WHERE account=? AND seen=0", (account,)).fetchone()[0]


def mark_seen(db: sqlite3.Connection, account: int) -> None:
    db.execute("UPDATE notifications SET seen=1 WHERE account=? AND seen=0", (account,))


# --------------------------------------------------------------------------- webhooks

def webhook(db: sqlite3.Connection, account: int) -> str | None:
    row = db.execute("SELECT url FROM webhooks WHERE account=?", (account,)).fetchone()
    return None if row is None else row[0]


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """What ``X-Arena-Signature`` carries: HMAC-SHA256 over ``timestamp.body`` (so an old delivery
    replayed with a new timestamp does not verify)."""
    return "sha256=" + hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Delivery:
    id: int
    url: str
    body: str
    secret: str
    attempts: int


LEASE_S = 60.0  # a delivery taken by one server is not taken by another for this long


def take_due(db: sqlite3.Connection, now: float, limit: int = 20) -> list[Delivery]:
    """Deliveries whose time has come, each with its account's current secret, leased to the caller
    (so two serving processes never post one at once; a dead one's lease runs out and it is retried).
    One per account, its oldest: a person whose receiver never answers, with a backlog of failed
    submissions' notices, took every place of a batch, and each cost the timeout; another person's
    delivery waited behind all of them (65 s behind eight)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        rows = db.execute("SELECT id, url, body, secret, attempts FROM (SELECT o.id, o.url, o.body, w.secret, "
                          "o.attempts, o.next_at, ROW_NUMBER() OVER (PARTITION BY o.account ORDER BY o.next_at, o.id) "
                          "AS n FROM outbox o JOIN webhooks w ON w.account=o.account WHERE o.delivered IS NULL "
                          "AND o.given_up IS NULL AND o.next_at<=?) WHERE n=1 ORDER BY next_at, id LIMIT ?",
                          (now, limit)).fetchall()
        db.executemany("UPDATE outbox SET next_at=? WHERE id=?", [(now + LEASE_S, r[0]) for r in rows])
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
    return [Delivery(*r) for r in rows]


def delivered(db: sqlite3.Connection, delivery: int, now: float) -> None:
    db.execute("UPDATE outbox SET delivered=?, attempts=attempts+1 WHERE id=?", (now, delivery))


def failed(db: sqlite3.Connection, delivery: int, error: str, now: float) -> None:
    """A failed attempt: tried again after a doubling wait, given up after :data:`MAX_ATTEMPTS`."""
    attempts = db.execute("SELECT attempts FROM outbox WHERE id=?", (delivery,)).fetchone()[0] + 1
    wait = min(MAX_RETRY_S, FIRST_RETRY_S * 2 ** (attempts - 1))
    db.execute("UPDATE outbox SET attempts=?, last_error=?, next_at=?, given_up=? WHERE id=?",
               (attempts, error[:300], now + wait, now if attempts >= MAX_ATTEMPTS else None, delivery))


def outbox_rows(db: sqlite3.Connection, account: int, limit: int = 20) -> list[dict[str, Any]]:
    """A person's latest deliveries, for their notifications page."""
    rows = db.execute("SELECT id, attempts, next_at, delivered, given_up, last_error FROM outbox WHERE account=? "
                      "ORDER BY id DESC LIMIT ?", (account, limit))
    return [{"id": r[0], "attempts": r[1], "next_at": r[2], "delivered": r[3], "given_up": r[4], "error": r[5]}
            for r in rows]
