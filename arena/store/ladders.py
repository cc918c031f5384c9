"""A ladder's own tables: its recorded rules, members, their status, pauses, views, rating
snapshots and seasons; every query over them.

The games of a ladder are normal games (:mod:`.games`, read by tournament-id prefix). Functions
take a connection and return plain values or typed rows; those that write run their own
transaction, with the audit line and the owner's notification in it, so none is lost or made
for a change that did not happen.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from typing import Any, NamedTuple

from .notes import Kind, notify_owner
from .people import _tx, label_name, record


def has_ladder_tables(db: sqlite3.Connection) -> bool:
    """Whether the store has ladder tables (a read-only store of an old arena may lack them)."""
    return db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='ladder_members'").fetchone() is not None


# --------------------------------------------------------------------------- the ladder's rules

def ladder_identity(db: sqlite3.Connection, ladder: str, now_identity: dict[str, Any], now: float) -> dict[str, Any]:
    """The rules ``ladder`` was first played under; recorded as ``now_identity`` on first use."""
    row = db.execute("SELECT config FROM ladders WHERE name=?", (ladder,)).fetchone()
    if row is None:
        with _tx(db):
            db.execute("INSERT OR IGNORE INTO ladders VALUES (?,?,?)", (ladder, json.dumps(now_identity, sort_keys=True), now))
        row = db.execute("SELECT config FROM ladders WHERE name=?", (ladder,)).fetchone()
    return json.loads(row[0])


# --------------------------------------------------------------------------- members

class MemberRow(NamedTuple):
    ladder: str
    label: str
    name: str
    version: str
    hash: str
    ref: str  # as stored: relative to the store directory when inside it
    origin: str
    placement: str
    registered: float


def member_rows(db: sqlite3.Connection, ladder: str) -> list[MemberRow]:
    """The ladder's members in the order they joined."""
    rows = db.execute("SELECT ladder, label, name, version, hash, ref, origin, placement, registered "
                      "FROM ladder_members WHERE ladder=? ORDER BY registered, label", (ladder,))
    return [MemberRow(*r) for r in rows]


def add_member(db: sqlite3.Connection, row: MemberRow) -> None:
    """Register a member; a concurrent insert of the same label is left as it is (the caller
    compares its files)."""
    with _tx(db):
        db.execute("INSERT OR IGNORE INTO ladder_members VALUES (?,?,?,?,?,?,?,?,?)", tuple(row))


def rehash_member(db: sqlite3.Connection, ladder: str, label: str, old: str, new: str) -> None:
    """Replace a member's files hash ``old`` by ``new`` (the same files' framed hash); a member
    whose hash is no longer ``old`` is left as it is."""
    with _tx(db):
        db.execute("UPDATE ladder_members SET hash=? WHERE ladder=? AND label=? AND hash=?", (new, ladder, label, old))


def refs_of(db: sqlite3.Connection, label: str) -> list[str]:
    """Where every ladder's member ``label`` runs from (stored refs), earliest first."""
    return [r for (r,) in db.execute("SELECT ref FROM ladder_members WHERE label=? ORDER BY registered", (label,))]


# --------------------------------------------------------------------------- retired and suspended members

class StatusRow(NamedTuple):
    label: str
    status: str  # retired or suspended
    since: float
    reason: str
    detail: dict[str, Any]


def status_rows(db: sqlite3.Connection, ladder: str) -> list[StatusRow]:
    rows = db.execute("SELECT label, status, since, reason, detail FROM ladder_bot_status WHERE ladder=?", (ladder,))
    return [StatusRow(r[0], r[1], r[2], r[3], json.loads(r[4])) for r in rows]


def set_status(db: sqlite3.Connection, ladder: str, label: str, status: str, reason: str, detail: dict[str, Any],
               *, account: int | None, origin: str, action: str, kind: Kind, text: str, link: str,
               now: float) -> None:
    """Retire or suspend a member, with its audit line and its owner's notification, in one transaction."""
    with _tx(db):
        db.execute("INSERT OR REPLACE INTO ladder_bot_status VALUES (?,?,?,?,?,?)",
                   (ladder, label, status, now, reason, json.dumps(detail)))
        record(db, account, action, f"bot:{ladder}/{label}", origin, now, reason=reason)
        notify_owner(db, label_name(label), kind, text, link, now)


def clear_status(db: sqlite3.Connection, ladder: str, label: str, *, account: int | None, origin: str, text: str,
                 link: str, now: float) -> bool:
    """Put a member back in matchmaking (audited with the last game row, so only later faults count;
    its owner told); False when it was in play already."""
    with _tx(db):
        cleared = db.execute("DELETE FROM ladder_bot_status WHERE ladder=? AND label=?", (ladder, label)).rowcount > 0
        if cleared:
            after = db.execute("SELECT COALESCE(MAX(rowid), 0) FROM games").fetchone()[0]
            record(db, account, "reinstate", f"bot:{ladder}/{label}", origin, now, after_game=after)
            notify_owner(db, label_name(label), Kind.REINSTATED, text, link, now)
    return cleared


def reinstated_after(db: sqlite3.Connection, ladder: str, label: str) -> int:
    """The last game row stored when ``label`` was last reinstated on ``ladder`` (0: never)."""
    row = db.execute("SELECT detail FROM audit WHERE action='reinstate' AND target=? ORDER BY id DESC LIMIT 1",
                     (f"bot:{ladder}/{label}",)).fetchone()
    return int(json.loads(row[0]).get("after_game", 0)) if row else 0


# --------------------------------------------------------------------------- paused ladders

def pause(db: sqlite3.Connection, ladder: str, reason: str, *, account: int | None, origin: str, now: float) -> None:
    with _tx(db):
        db.execute("INSERT OR REPLACE INTO ladder_pauses VALUES (?,?,?)", (ladder, now, reason))
        record(db, account, "pause", f"ladder:{ladder}", origin, now, reason=reason)


def resume(db: sqlite3.Connection, ladder: str, *, account: int | None, origin: str, now: float) -> bool:
    with _tx(db):
        done = db.execute("DELETE FROM ladder_pauses WHERE ladder=?", (ladder,)).rowcount > 0
        if done:
            record(db, account, "resume", f"ladder:{ladder}", origin, now)
    return done


def paused(db: sqlite3.Connection, ladder: str) -> str | None:
    """Why ``ladder`` is paused, or None when it plays."""
    row = db.execute("SELECT reason FROM ladder_pauses WHERE ladder=?", (ladder,)).fetchone()
    return None if row is None else row[0]


def roster(db: sqlite3.Connection) -> dict[str, Any]:
    """Every ladder's members with their status and owner, and the paused ladders: the admin's view."""
    rows = db.execute(
        "SELECT m.ladder, m.label, COALESCE(s.status, 'active'), COALESCE(s.reason, ''), COALESCE(a.name, '') "
        "FROM ladder_members m LEFT JOIN ladder_bot_status s ON s.ladder=m.ladder AND s.label=m.label "
        "LEFT JOIN bot_owners o ON o.name=m.name LEFT JOIN accounts a ON a.id=o.account ORDER BY m.ladder, m.label")
    members = [{"ladder": r[0], "label": r[1], "status": r[2], "reason": r[3], "owner": r[4]} for r in rows]
    ladders = sorted({m["ladder"] for m in members} | {r[0] for r in db.execute("SELECT name FROM ladders")})
    pauses = dict(db.execute("SELECT ladder, reason FROM ladder_pauses").fetchall())
    return {"members": members, "ladders": [{"name": n, "paused": pauses.get(n)} for n in ladders]}


# --------------------------------------------------------------------------- views and rating snapshots

def last_view(db: sqlite3.Connection, ladder: str) -> tuple[float, int] | None:
    """When ``arena ladder NAME`` was last shown, and how many games the ladder had then."""
    row = db.execute("SELECT viewed_at, games FROM ladder_views WHERE ladder=?", (ladder,)).fetchone()
    return None if row is None else (row[0], row[1])


def record_view(db: sqlite3.Connection, ladder: str, now: float, games: int) -> None:
    with _tx(db):
        db.execute("INSERT OR REPLACE INTO ladder_views VALUES (?,?,?)", (ladder, now, games))


Rated = tuple[float, float, float]  # (elo, interval low, interval high)
Note = tuple[str, Kind, str, str]  # (bot name, kind, text, link) for its owner


def add_snapshot(db: sqlite3.Connection, ladder: str, now: float, games: int, table: dict[str, Rated],
                 notes: Callable[[dict[str, Rated]], list[Note]]) -> int:
    """Store the fitted table (one row per bot) and, in the same transaction, the notes ``notes``
    makes from the table before it (the latest snapshot's); returns the rows written."""
    with _tx(db):
        before = {bot: (elo, lo, hi) for bot, elo, lo, hi in db.execute(
            "SELECT bot, elo, lo, hi FROM rating_snapshots WHERE ladder=? AND taken_at=(SELECT "
            "MAX(taken_at) FROM rating_snapshots WHERE ladder=?)", (ladder, ladder))}
        db.executemany("INSERT INTO rating_snapshots VALUES (?,?,?,?,?,?,?)",
                       [(ladder, now, games, label, *rated) for label, rated in table.items()])
        for name, kind, text, link in notes(before):
            notify_owner(db, name, kind, text, link, now)
    return len(table)


# --------------------------------------------------------------------------- seasons

class SeasonRecord(NamedTuple):
    ladder: str
    number: int
    frozen: dict[str, Any]
    secret_name: str
    commitment: str
    first_batch: int
    last_batch: int | None
    started: float
    ends_at: float | None
    end_games: int | None
    ended: float | None
    members: tuple[str, ...]
    secret: bytes | None  # once revealed


_SEASON = "ladder, number, frozen, secret, first_batch, last_batch, started, ends_at, end_games, ended"


def _season(db: sqlite3.Connection, r: tuple) -> SeasonRecord:
    ladder, number, frozen, name, first, last, started, ends_at, end_games, ended = r
    sec = db.execute("SELECT secret, commitment, revealed FROM deal_secrets WHERE name=?", (name,)).fetchone()
    who = tuple(x for (x,) in db.execute("SELECT label FROM season_members WHERE ladder=? AND season=? ORDER BY label",
                                         (ladder, number)))
    return SeasonRecord(ladder, number, json.loads(frozen), name, sec[1], first, last, started, ends_at, end_games,
                        ended, who, bytes(sec[0]) if sec[2] is not None else None)


def season_records(db: sqlite3.Connection, ladder: str, number: int | None = None) -> list[SeasonRecord]:
    """The ladder's seasons in order (or the one numbered ``number``, if it exists)."""
    sql = f"SELECT {_SEASON} FROM seasons WHERE ladder=?"
    args: list[Any] = [ladder]
    if number is not None:
        sql += " AND number=?"; args.append(number)
    return [_season(db, r) for r in db.execute(sql + " ORDER BY number", args).fetchall()]


def add_season(db: sqlite3.Connection, ladder: str, number: int, frozen: dict[str, Any], secret_name: str,
               first_batch: int, started: float, ends_at: float | None, end_games: int | None,
               members: list[str]) -> None:
    with _tx(db):
        db.execute("INSERT INTO seasons VALUES (?,?,?,?,?,NULL,?,?,?,NULL)",
                   (ladder, number, json.dumps(frozen, sort_keys=True), secret_name, first_batch, started, ends_at,
                    end_games))
        db.executemany("INSERT INTO season_members VALUES (?,?,?)", [(ladder, number, m) for m in members])


class ArchivedRow(NamedTuple):
    rank: int
    bot: str
    games: int
    elo: float | None
    lo: float | None
    hi: float | None
    division: int


def end_season(db: sqlite3.Connection, ladder: str, number: int, secret_name: str, last_batch: int, now: float,
               table: list[ArchivedRow]) -> None:
    """Close a season: its last batch, its secret revealed and its standings archived, at once."""
    with _tx(db):
        db.execute("UPDATE seasons SET last_batch=?, ended=? WHERE ladder=? AND number=?", (last_batch, now, ladder, number))
        db.execute("UPDATE deal_secrets SET revealed=? WHERE name=?", (now, secret_name))
        db.executemany("INSERT INTO season_standings VALUES (?,?,?,?,?,?,?,?,?)",
                       [(ladder, number, *row) for row in table])


def archived_rows(db: sqlite3.Connection, ladder: str, number: int) -> list[ArchivedRow]:
    """An ended season's table as archived, by rank."""
    rows = db.execute("SELECT rank, bot, games, elo, lo, hi, division FROM season_standings WHERE ladder=? "
                      "AND season=? ORDER BY rank", (ladder, number))
    return [ArchivedRow(*r) for r in rows]
