"""What the pages and reports read: every query of the web server's pages, in one place.

Each function takes a connection (usually read-only) and returns plain rows or values; none
writes. The schema is the one :mod:`.schema` guarantees (a store is upgraded, or refused, when
it is opened), so no reader probes for a table.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

LADDER_PREFIX = "ladder:"  # a ladder's tournaments are named ``ladder:NAME:...``

GAME_COLUMNS = ("g.id, g.tournament, g.idx, g.seed, g.seats, g.reason, g.draw, g.result, g.turns, g.wall_ms, "
                "g.faults, g.finished")


def versions_of(name: str) -> str:
    """A LIKE pattern for every ``name@version`` (LIKE's wildcards in the name matched as text)."""
    return name.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "@%"


def game_filter(*, tournament: str | None = None, tournament_prefix: str | None = None, bot: str | None = None,
                reason: str | None = None, fault: str | None = None, min_turns: int | None = None,
                max_turns: int | None = None, lost_by: str | None = None) -> tuple[str, list[Any]]:
    """The WHERE clause over ``games g`` (and its arguments) for every game list: the CLI's and the
    web page's. A ``bot`` matches that name and each of its versions (``name@version``); so does
    ``lost_by``, for the games where that bot did not finish first alone (as ``arena deals
    from-games --lost-by``)."""
    where: list[str] = []
    args: list[Any] = []
    if lost_by:
        # another seat finished first (alone or beside it): the bot did not win outright
        where.append("EXISTS (SELECT 1 FROM game_seats s WHERE s.game=g.id AND (s.bot=? OR s.bot LIKE ? ESCAPE '\\') "
                     "AND EXISTS (SELECT 1 FROM game_seats o WHERE o.game=g.id AND o.seat<>s.seat AND o.place=1))")
        args += [lost_by, versions_of(lost_by)]
    if tournament:
        where.append("g.tournament=?"); args.append(tournament)
    if tournament_prefix:
        where.append("substr(g.tournament, 1, ?)=?"); args += [len(tournament_prefix), tournament_prefix]
    if bot:
        # IN over the seats' index (the name, then its versions' range): a correlated EXISTS reads every game
        where.append(f"g.id IN (SELECT game FROM game_seats WHERE {_named('bot')})")
        args += named_args(bot)
    if reason:
        where.append("g.reason=?"); args.append(reason)
    if fault:
        where.append("EXISTS (SELECT 1 FROM game_seats s WHERE s.game=g.id AND s.forfeit=?)"); args.append(fault)
    if min_turns is not None:
        where.append("g.turns>=?"); args.append(min_turns)
    if max_turns is not None:
        where.append("g.turns<=?"); args.append(max_turns)
    return (" WHERE " + " AND ".join(where) if where else ""), args


def _prefixed(column: str) -> str:
    return f"substr({column}, 1, ?)=?"


def _named(column: str) -> str:
    """``column`` is a bot's name or one of its versions (``name@...``), as two ranges an index can
    answer (:func:`named_args` gives the arguments): ``@`` sorts just before ``A``."""
    return f"({column}=? OR ({column}>=? AND {column}<?))"


def named_args(name: str) -> list[str]:
    return [name, name + "@", name + "A"]


# --------------------------------------------------------------------------- the store's version

def data_version(db: sqlite3.Connection) -> int:
    """A number that changes when another connection commits to the store (SQLite's ``data_version``)."""
    return db.execute("PRAGMA data_version").fetchone()[0]


def counts(db: sqlite3.Connection) -> tuple:
    """Games (count, highest row: the last finish was a scan of every game), tournaments (count,
    last update), snapshots, ladder members, bots registered and owned (count, last): what changes
    whenever anything a page shows is stored."""
    n, last = db.execute("SELECT COUNT(*), COALESCE(MAX(rowid), 0) FROM games").fetchone()
    tours = db.execute("SELECT COUNT(*), COALESCE(MAX(updated), 0) FROM tournaments").fetchone()
    snaps = db.execute("SELECT COUNT(*) FROM rating_snapshots").fetchone()[0]
    members = db.execute("SELECT COUNT(*) FROM ladder_members").fetchone()[0]
    bots = db.execute("SELECT COUNT(*), COALESCE(MAX(registered), 0) FROM bots").fetchone()
    owned = db.execute("SELECT COUNT(*), COALESCE(MAX(since), 0) FROM bot_owners").fetchone()
    return (n, last, *tours, snaps, members, *bots, *owned)


# --------------------------------------------------------------------------- tournaments

def tournament_rows(db: sqlite3.Connection, ladders: bool | None = None, unfinished: bool = False) -> list[tuple]:
    """(id, planned, status, created, updated, config, games, first finish, last finish), the most
    recently active first; only a ladder's batches (``ladders`` True) or only the rest (False),
    only those running or interrupted (``unfinished``): the overview reads its few, not every batch."""
    where, args = [], []
    if ladders is not None:
        where.append(("" if ladders else "NOT ") + _prefixed("t.id")); args += [len(LADDER_PREFIX), LADDER_PREFIX]
    if unfinished:
        where.append("t.status IN ('running', 'interrupted')")
    return db.execute(
        "SELECT t.id, t.planned, t.status, t.created, t.updated, t.config, COUNT(g.id), MIN(g.finished), "
        f"MAX(g.finished) FROM tournaments t LEFT JOIN games g ON g.tournament=t.id "
        f"{' WHERE ' + ' AND '.join(where) if where else ''} GROUP BY t.id "
        "ORDER BY MAX(COALESCE(g.finished, t.updated), t.updated) DESC", args).fetchall()


def games_since(db: sqlite3.Connection, tid: str, since: float) -> int:
    return db.execute("SELECT COUNT(*) FROM games WHERE tournament=? AND finished>=?", (tid, since)).fetchone()[0]


def prefix_counts(db: sqlite3.Connection, prefix: str) -> tuple[int, int]:
    """Under tournaments named ``prefix...``: (games, tournaments)."""
    n = db.execute(f"SELECT COUNT(*) FROM games WHERE {_prefixed('tournament')}", (len(prefix), prefix)).fetchone()[0]
    batches = db.execute(f"SELECT COUNT(*) FROM tournaments WHERE {_prefixed('id')}", (len(prefix), prefix)).fetchone()[0]
    return n, batches


# --------------------------------------------------------------------------- games

def game_rows(db: sqlite3.Connection, clause: str, args: list[Any], limit: int, offset: int) -> tuple[list[tuple], int]:
    """Rows (:data:`GAME_COLUMNS`) under a :func:`game_filter` clause, the last stored first (a game's
    finish is its storing's time, so this is newest first, read down the table's own order rather
    than sorting every game), and how many match."""
    total = db.execute(f"SELECT COUNT(*) FROM games g{clause}", args).fetchone()[0]
    rows = db.execute(f"SELECT {GAME_COLUMNS} FROM games g{clause} ORDER BY g.rowid DESC LIMIT ? OFFSET ?",
                      [*args, limit, offset]).fetchall()
    return rows, total


def game_list_stamp(db: sqlite3.Connection, clause: str, args: list[Any]) -> tuple[int, int]:
    """(how many games match, the highest row among them) under a :func:`game_filter` clause: moves
    whenever a matching game is stored (games are never changed or removed), and with nothing else."""
    return db.execute(f"SELECT COUNT(*), COALESCE(MAX(g.rowid), 0) FROM games g{clause}", args).fetchone()


def game_stamp(db: sqlite3.Connection, gid: str) -> tuple | None:
    """(row, finish) of the stored game ``gid``, or None: a stored game never changes, so its page
    is kept by this alone."""
    return db.execute("SELECT rowid, finished FROM games WHERE id=?", (gid,)).fetchone()


def game_row(db: sqlite3.Connection, gid: str) -> tuple | None:
    return db.execute(f"SELECT {GAME_COLUMNS} FROM games g WHERE g.id=?", (gid,)).fetchone()


def game_log(db: sqlite3.Connection, gid: str) -> bytes | None:
    """The game's compressed log, as stored."""
    row = db.execute("SELECT log FROM game_logs WHERE game=?", (gid,)).fetchone()
    return None if row is None else row[0]


def tournament_menu(db: sqlite3.Connection) -> tuple[list[str], list[str]]:
    """What a list of tournaments offers a person: the ladders with tournaments (by name; a ladder
    stores a batch every dozen games, hundreds an hour, so each is one entry for all of them) and
    the other tournaments' ids, the newest created first. Reads the ladders' ids off the index and
    sorts only the others."""
    clause, bounds = "id>=? AND id<?", (LADDER_PREFIX, LADDER_PREFIX[:-1] + ";")  # ';' follows ':'
    start = len(LADDER_PREFIX) + 1
    ladders = [r[0] for r in db.execute(
        f"SELECT DISTINCT substr(id, {start}, instr(substr(id, {start}) || ':', ':') - 1) AS name "
        f"FROM tournaments WHERE {clause} ORDER BY name", bounds)]
    others = [r[0] for r in db.execute(f"SELECT id FROM tournaments WHERE NOT ({clause}) ORDER BY created DESC",
                                       bounds)]
    return ladders, others


def choices_after(db: sqlite3.Connection, after: int) -> tuple[int, int, int, set[str], set[str], set[str]]:
    """For the games stored after row ``after``: (the highest row, how many games the store holds
    up to it, how many of them are after ``after``, and those games' ends, forfeits and bots), so a
    reader that keeps the earlier games' values reads only the new games' and sees a removal by the
    counts. Every part is read up to one row, so a game stored meanwhile is read next time, whole."""
    top, total = db.execute("SELECT COALESCE(MAX(rowid), 0), COUNT(*) FROM games").fetchone()
    new = db.execute("SELECT COUNT(*) FROM games WHERE rowid>? AND rowid<=?", (after, top)).fetchone()[0]
    reasons = {r[0] for r in db.execute("SELECT DISTINCT reason FROM games WHERE rowid>? AND rowid<=?", (after, top))}
    faults, bots = set(), set()
    for bot, forfeit in db.execute("SELECT DISTINCT s.bot, s.forfeit FROM games g JOIN game_seats s ON s.game=g.id "
                                   "WHERE g.rowid>? AND g.rowid<=?", (after, top)):
        bots.add(bot)
        if forfeit is not None:
            faults.add(forfeit)
    return top, total, new, reasons, faults, bots


# --------------------------------------------------------------------------- bots

def think_totals(db: sqlite3.Connection, label: str) -> tuple[float, int]:
    """The bot's (think ms, decisions) over every stored game (one indexed sum)."""
    ms, n = db.execute("SELECT SUM(think_ms), SUM(decisions) FROM game_seats WHERE bot=?", (label,)).fetchone()
    return (ms or 0.0, n or 0)


def bot_stamp(db: sqlite3.Connection, label: str) -> tuple:
    """What a bot's page shows moves this, one query over indexes and small tables: the seats of
    every version of its name (count, highest row), their rating snapshots, its statuses on each
    ladder, its name's registrations and owner. A game it did not play moves none of it."""
    name = label.split("@", 1)[0]
    return db.execute(
        f"SELECT (SELECT COUNT(*) FROM game_seats WHERE {_named('bot')}), "
        f"(SELECT COALESCE(MAX(rowid), 0) FROM game_seats WHERE {_named('bot')}), "
        f"(SELECT COUNT(*) FROM rating_snapshots WHERE {_named('bot')}), "
        f"(SELECT COALESCE(MAX(rowid), 0) FROM rating_snapshots WHERE {_named('bot')}), "
        f"(SELECT group_concat(ladder || ' ' || status || ' ' || since || ' ' || reason, '|') FROM "
        f"(SELECT * FROM ladder_bot_status WHERE {_named('label')} ORDER BY ladder, label)), "
        "(SELECT COUNT(*) || ' ' || COALESCE(MAX(registered), 0) FROM bots WHERE name=?), "
        "(SELECT a.id || ' ' || a.name FROM bot_owners b JOIN accounts a ON a.id=b.account WHERE b.name=?)",
        [*named_args(name) * 5, name, name]).fetchone()


def bot_labels(db: sqlite3.Connection) -> list[str]:
    known = {r[0] for r in db.execute("SELECT DISTINCT bot FROM game_seats")}
    known |= {r[0] for r in db.execute("SELECT label FROM bots")}
    return sorted(known)


def version_rows(db: sqlite3.Connection, name: str) -> tuple[list[tuple], list[tuple]]:
    """For every version of bot ``name``: (label, games, first, last) over its games, and
    (label, registered) for each version registered."""
    played = db.execute(
        "SELECT s.bot, COUNT(*), MIN(g.finished), MAX(g.finished) FROM game_seats s JOIN games g ON g.id=s.game "
        "WHERE s.bot=? OR substr(s.bot, 1, ?)=? GROUP BY s.bot", (name, len(name) + 1, name + "@")).fetchall()
    registered = db.execute("SELECT label, registered FROM bots WHERE name=?", (name,)).fetchall()
    return played, registered


def fault_counts(db: sqlite3.Connection, label: str) -> dict[str, int]:
    return dict(db.execute("SELECT forfeit, COUNT(*) FROM game_seats WHERE bot=? AND forfeit IS NOT NULL "
                           "GROUP BY forfeit", (label,)).fetchall())


def seats_of(db: sqlite3.Connection, label: str, limit: int, faulted: bool = False) -> list[tuple]:
    """The bot's latest seats, newest first: (game, seat, forfeit, finished); only forfeits if ``faulted``."""
    only = " AND s.forfeit IS NOT NULL" if faulted else ""
    return db.execute("SELECT s.game, s.seat, s.forfeit, g.finished FROM game_seats s JOIN games g ON g.id=s.game "
                      f"WHERE s.bot=?{only} ORDER BY g.finished DESC LIMIT ?", (label, limit)).fetchall()


def ladders_played(db: sqlite3.Connection, label: str) -> list[str]:
    """The ladders (by name) the bot has played a game on."""
    rows = db.execute("SELECT DISTINCT g.tournament FROM games g JOIN game_seats s ON s.game=g.id WHERE s.bot=? "
                      f"AND {_prefixed('g.tournament')}", (label, len(LADDER_PREFIX), LADDER_PREFIX))
    return [r[0][len(LADDER_PREFIX):].split(":", 1)[0] for r in rows]


def name_known(db: sqlite3.Connection, name: str) -> bool:
    """Whether bot ``name`` has been registered, joined a ladder or played a game here."""
    return db.execute("SELECT 1 FROM bots WHERE name=? UNION SELECT 1 FROM ladder_members WHERE name=? "
                      "UNION SELECT 1 FROM game_seats WHERE bot > ? AND bot < ?",  # name@...: '@' < 'A'
                      (name, name, name + "@", name + "A")).fetchone() is not None


# --------------------------------------------------------------------------- ladders

def ladder_names(db: sqlite3.Connection) -> list[str]:
    """Ladders with anything in this store: a recorded identity, a member, a snapshot, or games
    under ``ladder:NAME:``."""
    names = {r[0] for r in db.execute("SELECT name FROM ladders")}
    for (tid,) in db.execute(f"SELECT id FROM tournaments WHERE {_prefixed('id')}", (len(LADDER_PREFIX), LADDER_PREFIX)):
        names.add(tid[len(LADDER_PREFIX):].split(":", 1)[0])
    names |= {r[0] for r in db.execute("SELECT DISTINCT ladder FROM rating_snapshots")}
    return sorted(names)


def ladders_with_members(db: sqlite3.Connection) -> set[str]:
    """Ladders that have a recorded identity or a member (those an admin can pause)."""
    return {r[0] for r in db.execute("SELECT name FROM ladders UNION SELECT ladder FROM ladder_members")}


def bot_statuses(db: sqlite3.Connection, label: str) -> list[tuple[str, str, str]]:
    """(ladder, status, reason) of the bot on each ladder that records one."""
    return db.execute("SELECT ladder, status, reason FROM ladder_bot_status WHERE label=? ORDER BY ladder",
                      (label,)).fetchall()


def suspended_labels(db: sqlite3.Connection) -> set[str]:
    return {r[0] for r in db.execute("SELECT label FROM ladder_bot_status WHERE status='suspended'")}


def member_refs(db: sqlite3.Connection) -> list[tuple[str, str]]:
    """(label, ref) of every ladder member, by label."""
    return db.execute("SELECT label, ref FROM ladder_members ORDER BY label").fetchall()


def ladders_seating(db: sqlite3.Connection, labels: list[str]) -> list[str]:
    """The ladders any of ``labels`` is a member of, by name."""
    marks = ",".join("?" * len(labels))
    return [r[0] for r in db.execute(f"SELECT DISTINCT ladder FROM ladder_members WHERE label IN ({marks}) "
                                     "ORDER BY ladder", labels)]


def rating_history(db: sqlite3.Connection, ladder: str | None = None,
                   bot: str | None = None) -> list[tuple[str, str, float, int, float, float, float]]:
    """Rating snapshots, (ladder, bot, taken_at, games, elo, lo, hi), oldest first (bots in name
    order within one moment): the one reader of ``rating_snapshots``. ``bot`` is a label, or a
    name for all its versions."""
    sql, where, args = "SELECT ladder, bot, taken_at, games, elo, lo, hi FROM rating_snapshots", [], []
    if ladder is not None:
        where.append("ladder=?"); args.append(ladder)
    if bot is not None:
        where.append("(bot=? OR substr(bot, 1, ?)=?)"); args += [bot, len(bot) + 1, bot + "@"]
    if where:
        sql += " WHERE " + " AND ".join(where)
    return db.execute(sql + " ORDER BY taken_at, bot, games", args).fetchall()


def authors(db: sqlite3.Connection, labels: list[str]) -> dict[str, str]:
    """Label -> its author, for the labels the store has registered: the account that owns the
    bot's name where one does (a server's bots), else the ``author`` its manifest gave."""
    owners = dict(db.execute("SELECT b.name, a.name FROM bot_owners b JOIN accounts a ON a.id=b.account"))
    out: dict[str, str] = {}
    for i in range(0, len(labels), 500):
        part = labels[i:i + 500]
        for label, name, manifest in db.execute(f"SELECT label, name, manifest FROM bots WHERE label IN "
                                                f"({','.join('?' * len(part))})", part):
            author = owners.get(name) or str(json.loads(manifest).get("author") or "")
            if author:
                out[label] = author
    return out


def ladder_parts(db: sqlite3.Connection) -> dict[str, tuple]:
    """Each ladder's own version (by its name).

    A ladder's version is its games (count, highest row), its tournaments (count, last update),
    its rating snapshots, members, statuses, seasons and pause: what its pages show. The games and
    tournaments of no ladder are the part ``""``. Read with covering indexes and one pass over
    the tournaments, so a ladder storing a game a second costs a few milliseconds a change."""
    parts: dict[str, list] = {}

    def part(tid: str) -> list:
        name = tid[len(LADDER_PREFIX):].split(":", 1)[0] if tid.startswith(LADDER_PREFIX) else ""
        return parts.setdefault(name, [0, 0, 0, 0.0, 0, 0, 0, 0.0, 0, 0, 0, 0])

    for tid, n, top in db.execute("SELECT tournament, COUNT(*), MAX(rowid) FROM games GROUP BY tournament"):
        p = part(tid)
        p[0] += n
        p[1] = max(p[1], top)
    for tid, updated in db.execute("SELECT id, updated FROM tournaments"):
        p = part(tid)
        p[2] += 1
        p[3] = max(p[3], updated)
    for name, n in db.execute("SELECT ladder, COUNT(*) FROM rating_snapshots GROUP BY ladder"):
        part(LADDER_PREFIX + name)[4] = n
    for name, n in db.execute("SELECT ladder, COUNT(*) FROM ladder_members GROUP BY ladder"):
        part(LADDER_PREFIX + name)[5] = n
    for name, n, since, retired in db.execute("SELECT ladder, COUNT(*), COALESCE(MAX(since), 0), "
                                              "SUM(status='retired') FROM ladder_bot_status GROUP BY ladder"):
        p = part(LADDER_PREFIX + name)
        p[6], p[7], p[11] = n, since, retired
    for i, table in ((8, "seasons"), (9, "season_standings"), (10, "ladder_pauses")):
        for name, n in db.execute(f"SELECT ladder, COUNT(*) FROM {table} GROUP BY ladder"):
            part(LADDER_PREFIX + name)[i] = n
    return {k: tuple(v) for k, v in parts.items()}


def ladder_games_after(db: sqlite3.Connection, after: int, limit: int) -> list[tuple]:
    """The newest ``limit`` ladder games stored after row ``after``, newest first: (rowid, id,
    tournament, seats, result), seats and result as their stored JSON (the live events' news). Read
    back from the newest row, it stops at ``limit`` ladder games or at row ``after``: a thousand
    games stored between two looks cost ``limit`` parses, not a thousand."""
    return db.execute(f"SELECT rowid, id, tournament, seats, result FROM games WHERE rowid>? AND {_prefixed('tournament')} "
                      "ORDER BY rowid DESC LIMIT ?", (after, len(LADDER_PREFIX), LADDER_PREFIX, limit)).fetchall()


def think_after(db: sqlite3.Connection, prefix: str, after: int) -> tuple[list[tuple], int]:
    """The (bot, think ms, decisions) sums of the games under tournament-id ``prefix`` stored after
    row ``after`` (the games themselves: :func:`arena.store.games.games_after`), and how many games
    the prefix holds in all (so a reader that keeps the earlier ones sees a removal)."""
    n = len(prefix)
    think = db.execute("SELECT s.bot, SUM(s.think_ms), SUM(s.decisions) FROM games g JOIN game_seats s "
                       f"ON s.game=g.id WHERE g.rowid>? AND {_prefixed('g.tournament')} GROUP BY s.bot",
                       (after, n, prefix)).fetchall()
    total = db.execute(f"SELECT COUNT(*) FROM games g WHERE {_prefixed('g.tournament')}", (n, prefix)).fetchone()[0]
    return think, total


def bot_results_after(db: sqlite3.Connection, label: str, after: int) -> tuple[list[tuple], int]:
    """(rowid, id, finished, seats, result) of each game the bot played stored after row ``after``,
    and how many it played in all (for a reader that keeps the earlier ones)."""
    # IN over the seats' index, not a correlated EXISTS: SQLite scans every game for the latter
    # (1.8 s against 5 ms on a 10,000-game store)
    rows = db.execute("SELECT g.rowid, g.id, g.finished, g.seats, g.result FROM games g WHERE g.id IN "
                      "(SELECT game FROM game_seats WHERE bot=?) AND g.rowid>?", (label, after)).fetchall()
    total = db.execute("SELECT COUNT(DISTINCT game) FROM game_seats WHERE bot=?", (label,)).fetchone()[0]
    return rows, total
