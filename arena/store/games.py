"""Tournaments, bots and games: the game store's tables and every query over them.

One SQLite file (WAL) holds a store's tournaments, bots, games and their logs; its tables are
created and upgraded by :mod:`.schema`'s numbered migrations. Each finished game is written in one
transaction keyed by its game id, so a killed tournament loses at most the games that were still
being played, and a resumed one never stores a game twice. Logs are zlib-compressed JSON.

Callers get plain values and typed rows, never a cursor, so another database could stand behind
these functions.
"""

from __future__ import annotations

import errno
import json
import os
import sqlite3
import stat
import time
import urllib.parse
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from ..errors import ArenaError
from .people import _tx, has_accounts
from .reads import LADDER_PREFIX, game_filter, tournament_menu
from .schema import migrate

DATA_DIR_NAME = "arena-data"  # the default store's directory (arena.tournament.DEFAULT_STORE)

LOG_FIELDS = ("steps", "setup_events", "stderr")


def pack_log(record: dict[str, Any]) -> bytes:
    """A game's full record as stored: compressed JSON."""
    return zlib.compress(orjson.dumps(record), 6)


def summary(record: dict[str, Any]) -> dict[str, Any]:
    """The record without its step log (what standings and reporters need), with its length."""
    out = {k: v for k, v in record.items() if k not in LOG_FIELDS}
    out["turns"] = len(record["steps"])
    return out


STORE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


def private_store_dir(parent: Path) -> None:
    """The store's directory, 0700 from its first moment (mkdir's mode can only lose bits to the
    umask); an ``arena-data`` directory we own is tightened to 0700 (older versions made it 0755).
    It and every folder above it (as spelled and as resolved) must be root's or this user's, and
    not writable by others without the sticky bit (OpenSSH's rule for a key's folders), or
    :class:`StoreError`: a user who may rename entries in any of them could move the store's folder
    away and put one of her own in its place, between the arena's check of the folder and its
    next open of the store by path (each writing connection is one)."""
    if not parent.exists():
        # the folders above made 0755 whatever the umask (mkdir's parents=True gives them 0777 less
        # the umask: under umask 0 the arena made a folder every user could rename things in)
        for folder in reversed([parent, *(p for p in parent.parents if not p.exists())]):
            try:
                folder.mkdir(mode=STORE_DIR_MODE if folder == parent else 0o755)
            except FileExistsError:
                pass
        parent.chmod(STORE_DIR_MODE)
    _folders_not_swappable(parent)
    _nobody_else_writes(parent)
    if parent.name == DATA_DIR_NAME and parent.stat().st_uid == os.geteuid():
        parent.chmod(STORE_DIR_MODE)


def check_store_place(path: Path, *, read_only_media: bool = False) -> None:
    """The one rule for every open of the store at ``path``, reading or writing (:class:`StoreError`
    where it fails): its folder and every folder above it as :func:`private_store_dir` requires,
    and the store and its side files this user's own regular files (:func:`_own_store_files`). A
    reader checks as a writer does: below a folder others may write, another user could have put
    a store of hers in the arena's place, and ``arena games``, ``standings`` or the pages would show
    her games, standings and ladders as the arena's. A reader passes ``read_only_media``, and
    opens the store as :func:`reader_flags` says."""
    _folders_not_swappable(path.parent)
    _nobody_else_writes(path.parent, read_only_media=read_only_media)
    _own_store_files(path)


def _folders_not_swappable(parent: Path) -> None:
    """Every folder and every link that resolving ``parent`` passes through, as the kernel resolves
    it: a folder as :func:`_not_swappable` requires, a link root's or this user's. Judged by its
    target alone, a link another user made in a sticky folder passed, and stays hers to replace
    between the check and the next open."""
    for path, st in _on_the_way(parent):
        if not stat.S_ISLNK(st.st_mode):
            _not_swappable(Path(path), st)
        elif st.st_uid not in (os.geteuid(), 0):
            raise StoreError(f"the store's folder {parent} is reached through {path}, a link owned by uid {st.st_uid}: "
                             "its owner may point it elsewhere at any moment, at a store of their own; refused. "
                             "Name the store's folder by a path of your own")


MAX_LINKS = 40  # as the kernel's own bound on the links one resolution follows (ELOOP)


def _on_the_way(path: Path) -> Iterator[tuple[str, os.stat_result]]:
    """``(path, lstat)`` of every folder and link the kernel passes through to resolve ``path``: from
    ``/``, each name in turn, a link's target read and resolved from where it lies (or from ``/``),
    and ``..`` taken from the folder reached so far (not from the name as spelled)."""
    spelled = os.path.join(os.getcwd(), path)  # joined, not normalised: "link/.." is not "."
    pending = [p for p in spelled.split("/") if p not in ("", ".")][::-1]
    here = "/"
    yield here, os.lstat(here)
    links = 0
    while pending:
        name = pending.pop()
        if name == "..":
            here = os.path.dirname(here)
            continue
        there = os.path.join(here, name)
        st = os.lstat(there)
        yield there, st
        if not stat.S_ISLNK(st.st_mode):
            here = there
            continue
        links += 1
        if links > MAX_LINKS:
            raise StoreError(f"the store's folder {path} is reached through more than {MAX_LINKS} links; refused")
        target = os.readlink(there)
        if target.startswith("/"):
            here = "/"
        pending += [p for p in target.split("/") if p not in ("", ".")][::-1]


def _nobody_else_writes(folder: Path, *, read_only_media: bool = False) -> None:
    """The store's own folder writable by nobody else, sticky or not: SQLite makes its ``-wal`` and
    ``-shm`` there by name at each open and removes them at the last close, so in a folder others
    may write (``/tmp``) another user places one of hers between the arena's check and SQLite's
    open, and a descriptor she keeps reads (or writes) everything the arena stores. A reader
    (``read_only_media``) takes such a folder on a file system mounted read-only (a store read
    from read-only media), and opens the store there as :func:`reader_flags` says: the same file
    system may be written through another mount of it (a read-only bind of ``/srv/share``, an
    NFS export) by users the read-only flag never stops."""
    if _others_may_write(folder) and not (read_only_media and os.statvfs(folder).f_flag & os.ST_RDONLY):
        raise StoreError(f"the store's folder {folder} is writable by others (sticky or not): another user could "
                         "place SQLite's -wal or -shm file there before the arena opens the store, and read or "
                         "write every game, account and session through it; refused. Choose a folder of your own")


def _others_may_write(folder: Path) -> bool:
    return bool(_others_write(folder.stat(), folder))


READ_FLAGS = ("?mode=ro", "?mode=ro&immutable=1")
"""A reader's SQLite URI flags, tried in turn: beside a writer, through the WAL; on read-only media,
where no ``-shm`` can be made, ``immutable`` (nobody can be writing it)."""


def reader_flags(path: Path) -> tuple[str, ...]:
    """The store's place checked for a reader (:func:`check_store_place`), and the SQLite URI flags it
    opens the store with, tried in turn (:data:`READ_FLAGS`). In a folder others may write on a
    read-only mount, ``immutable`` alone: SQLite then opens no side file. With ``mode=ro`` it used
    a ``-wal`` and ``-shm`` another user placed between the check and the open through a writable
    mount of the same folder, and showed her tournaments as the arena's."""
    check_store_place(path, read_only_media=True)
    return READ_FLAGS[1:] if _others_may_write(path.parent) else READ_FLAGS


def _not_swappable(folder: Path, st: os.stat_result) -> None:
    shared = _others_write(st, folder) and not st.st_mode & stat.S_ISVTX  # others may rename what is in it
    if st.st_uid not in (os.geteuid(), 0) or shared:
        raise StoreError(f"the store's folder {folder} is {'writable by others' if shared else f'owned by uid {st.st_uid}'}"
                         ": another user could swap the store's files for their own and read every game, account "
                         "and session; refused. Choose a folder of your own, whose "
                         "folders above are root's or yours and not writable by others (a sticky one such as /tmp "
                         "may be above it)")


def create_private_store(path: Path) -> None:
    """Create the store's directory (0700) and, where there is no store yet, the store itself, whole.

    SQLite gives its -wal, -shm and -journal files the mode of the database file, so a file
    that is 0600 from its first byte keeps every game log (finished or being written) away
    from bots, which run under other uids. A directory named ``arena-data`` that we own is
    tightened to 0700 too (older versions made it 0755); any other existing directory is left as
    it is, but it may be written by nobody else (a sticky ``/tmp`` included: :func:`_nobody_else_writes`),
    a store or side file there that is a link or another user's is refused (:func:`_own_store_files`),
    as is a folder above another user owns or may rename things in (:func:`private_store_dir`).

    A new store is made under a private temporary name (WAL mode, every table) and hard-linked
    into place, so no other process ever opens one half made: SQLite's switch to WAL waits for no
    lock, and a server's reader that opened the empty file in between made the switch, or its own
    upgrade, fail at once with "database is locked". Where two processes both make one, the first
    link wins and the other's copy is dropped.
    """
    private_store_dir(path.parent)
    if _own_store_files(path):  # (its folders checked just above: check_store_place's rule)
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}")
    try:
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, PRIVATE_FILE_MODE))
        db = sqlite3.connect(tmp, timeout=30, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            migrate(db)
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # every table in the file that is linked
        finally:
            db.close()
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another process made it meanwhile: theirs is the store
    except sqlite3.DatabaseError as e:
        raise StoreError(f"cannot create the store {path}: {e}") from None
    finally:
        for p in (tmp, *(tmp.with_name(tmp.name + s) for s in ("-wal", "-shm", "-journal"))):
            p.unlink(missing_ok=True)


def _own_store_files(path: Path) -> bool:
    """Whether the store at ``path`` exists; :class:`StoreError` if it, or one of SQLite's side files
    beside it, is a link or not this user's own regular file. SQLite follows a link and uses a side
    file it finds: another local user who planted ``x.sqlite`` (or its ``-wal``) as a link to a file
    of their own, or as their own file, read every game, account and session the arena wrote there.
    (A store's folder others may write is refused first, :func:`_nobody_else_writes`; this is the
    second layer.)"""
    exists = False
    for p in (path, *(path.with_name(path.name + s) for s in ("-wal", "-shm", "-journal"))):
        try:
            st = os.lstat(p)
        except FileNotFoundError:
            continue
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            what = "a link" if stat.S_ISLNK(st.st_mode) else "not a regular file" if not stat.S_ISREG(st.st_mode) \
                else f"owned by uid {st.st_uid}"
            raise StoreError(f"{p} is {what}, not a file of this user (uid {os.geteuid()}): refused, since another "
                             "user could read or write what the arena stores there; remove it, or choose a store "
                             "in a folder only you can write")
        exists = exists or p == path
    return exists


def close_store_files(path: Path) -> None:
    """Make the store and its SQLite side files 0600 (a store created by an older version
    may have a 0644 -wal). Quietly skips files that are missing or not ours."""
    for p in (path, *(path.with_name(path.name + s) for s in ("-wal", "-shm", "-journal"))):
        try:
            if p.stat().st_mode & 0o077:
                p.chmod(PRIVATE_FILE_MODE)
        except OSError:
            pass


def _others_write(st: os.stat_result, folder: Path) -> int:
    """The write bits of the folder's mode that let users other than its owner write it: the group's
    and the others', or the others' alone where the group is its owner's own (:func:`_private_group`)."""
    return st.st_mode & (0o002 if st.st_mode & 0o020 and _private_group(st, folder) else 0o022)


def _private_group(st: os.stat_result, folder: Path) -> bool:
    """Whether the folder's group is its owner's own: named as the owner, no other member, listed
    or by a primary group (a user whose passwd entry names the group is in it, unlisted), and its
    bits the group's, not an access ACL's mask (``setfacl -m u:eve:rwx`` shows as the group's
    ``w``: users named in an ACL write as far as the mask lets them). Where users get such groups
    (Debian's ``USERGROUPS_ENAB``, umask 002), every folder they make is group-writable, and
    nobody else is in the group (as Debian's OpenSSH allows for a key's folders)."""
    import grp
    import pwd
    try:
        owner, group = pwd.getpwuid(st.st_uid).pw_name, grp.getgrgid(st.st_gid)
    except KeyError:
        return False
    if group.gr_name != owner or not set(group.gr_mem) <= {owner}:
        return False
    if any(p.pw_gid == st.st_gid and p.pw_uid != st.st_uid for p in pwd.getpwall()):
        return False
    try:
        os.getxattr(folder, "system.posix_acl_access")
    except OSError as e:
        return e.errno in (errno.ENODATA, errno.ENOTSUP)
    return False


class StoreError(ArenaError, RuntimeError):
    """The store file is missing, unreadable, or not an arena store."""


class Store:
    def __init__(self, path: str | Path, *, readonly: bool = False):
        self.path = Path(path)
        if readonly and not self.path.exists():
            raise StoreError(f"no store at {self.path}: run a tournament first, or pass --store")
        if readonly:
            self.db = _open_readonly(self.path)
            return
        create_private_store(self.path)
        try:
            self.db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.execute("PRAGMA foreign_keys=ON")
            migrate(self.db)  # every table, old stores upgraded in place (arena/store)
        except sqlite3.DatabaseError as e:
            raise StoreError(f"{self.path} is not a usable arena store: {e}") from None
        if not readonly:
            close_store_files(self.path)

    def close(self) -> None:
        self.db.close()

    @contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    # ------------------------------------------------------------ tournaments

    def begin_tournament(self, tid: str, config: dict[str, Any], planned: int) -> bool:
        """Create the tournament, or check a resumed one has the same config. True if new."""
        row = self.db.execute("SELECT config FROM tournaments WHERE id=?", (tid,)).fetchone()
        now = time.time()
        text = json.dumps(config, sort_keys=True)
        if row is None:
            with self.tx() as db:
                db.execute("INSERT INTO tournaments VALUES (?,?,?,?,?,?)", (tid, text, planned, "running", now, now))
            return True
        if row[0] != text:
            raise StoreError(f"tournament {tid!r} already exists with a different configuration; "
                             "give it a new name to start afresh")
        self.db.execute("UPDATE tournaments SET status='running', updated=? WHERE id=?", (now, tid))
        return False

    def finish_tournament(self, tid: str, status: str = "done") -> None:
        self.db.execute("UPDATE tournaments SET status=?, updated=? WHERE id=?", (status, time.time(), tid))

    def tournament(self, tid: str) -> dict[str, Any] | None:
        row = self.db.execute("SELECT id, config, planned, status, created, updated FROM tournaments WHERE id=?",
                              (tid,)).fetchone()
        if row is None:
            return None
        played = self.db.execute("SELECT COUNT(*) FROM games WHERE tournament=?", (tid,)).fetchone()[0]
        return {"id": row[0], "config": json.loads(row[1]), "planned": row[2], "status": row[3],
                "created": row[4], "updated": row[5], "played": played}

    def known_tournaments(self) -> str:
        """The tournaments an error names as known: the others by id, newest first, then each
        ladder once (its batches, ``ladder:NAME:...``, come hundreds an hour); "none" if none."""
        ladders, others = tournament_menu(self.db)
        return ", ".join(others + [f"{LADDER_PREFIX}{name}:... (its batches)" for name in ladders]) or "none"

    def tournaments(self) -> list[dict[str, Any]]:
        ids = [r[0] for r in self.db.execute("SELECT id FROM tournaments ORDER BY created")]
        return [t for t in (self.tournament(i) for i in ids) if t]

    # ------------------------------------------------------------ bots

    def register_bot(self, label: str, name: str, version: str, digest: str, manifest: dict[str, Any],
                     path: str) -> None:
        row = self.db.execute("SELECT hash FROM bots WHERE label=?", (label,)).fetchone()
        if row is None:
            with self.tx() as db:
                db.execute("INSERT INTO bots VALUES (?,?,?,?,?,?,?)",
                           (label, name, version, digest, json.dumps(manifest), path, time.time()))
        elif row[0] != digest:
            with self.tx() as db:
                db.execute("UPDATE bots SET hash=?, manifest=?, path=? WHERE label=?",
                           (digest, json.dumps(manifest), path, label))

    def bot(self, label: str) -> dict[str, Any] | None:
        row = self.db.execute("SELECT label, name, version, hash, manifest, path FROM bots WHERE label=?",
                              (label,)).fetchone()
        if row is None:
            return None
        return {"label": row[0], "name": row[1], "version": row[2], "hash": row[3],
                "manifest": json.loads(row[4]), "path": row[5]}

    # ------------------------------------------------------------ games

    def dealt_elsewhere(self, tid: str, seeds: set[int]) -> tuple[int, str] | None:
        """One of ``seeds`` that a game of another tournament than ``tid`` was dealt, with that
        tournament; None if none was (one pass over the games, most of a second per million)."""
        if not seeds:
            return None
        found = self.db.execute(
            "SELECT seed, tournament FROM games WHERE seed IN (SELECT value FROM json_each(?)) AND tournament != ? "
            "LIMIT 1", (json.dumps(sorted(seeds)), tid)).fetchone()
        return None if found is None else (int(found[0]), str(found[1]))

    def done_indexes(self, tid: str) -> set[int]:
        return {r[0] for r in self.db.execute("SELECT idx FROM games WHERE tournament=?", (tid,))}

    def save_game(self, tid: str, idx: int, seats: list[str], record: dict[str, Any],
                  log: bytes | None = None) -> bool:
        """Store a finished game and its log atomically. False if it was already stored.

        ``record`` is a full game record, or its :func:`summary` with the log already
        packed by :func:`pack_log` (as worker processes send them)."""
        result = record["result"]
        places = {}
        for rank, group in enumerate(result["order"]):
            best = 1 + sum(len(g) for g in result["order"][:rank])
            for s in group:
                places[s] = best
        forfeits = result.get("forfeits", {})
        turns = record["turns"] if "turns" in record else len(record["steps"])
        if log is None:
            log = pack_log(record)
        try:
            with self.tx() as db:
                db.execute("INSERT INTO games VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)", (
                    record["game_id"], tid, idx, record["seed"], json.dumps(record["rules"]),
                    json.dumps(seats), result["reason"], int(result["draw"]), int(result["complete"]),
                    json.dumps(result), turns, record["wall_ms"], len(record["faults"]), time.time()))
                db.executemany("INSERT INTO game_seats VALUES (?,?,?,?,?,?,?)", [
                    (record["game_id"], s, seats[s], places[s], forfeits.get(str(s)),
                     round(record["think_ms"][s], 3), record["decisions"][s]) for s in range(len(seats))])
                db.execute("INSERT INTO game_logs VALUES (?,?)", (record["game_id"], log))
        except sqlite3.IntegrityError:
            return False
        return True

    def game_record(self, game_id: str) -> dict[str, Any] | None:
        row = self.db.execute("SELECT log FROM game_logs WHERE game=?", (game_id,)).fetchone()
        if row is None:
            return None
        return json.loads(zlib.decompress(row[0]))

    def games(self, *, tournament: str | None = None, bot: str | None = None, reason: str | None = None,
              min_turns: int | None = None, max_turns: int | None = None, fault: str | None = None,
              lost_by: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        sql = "SELECT id, tournament, idx, seed, seats, reason, draw, result, turns, wall_ms, faults FROM games g"
        where, args = game_filter(tournament=tournament, bot=bot, reason=reason, fault=fault,
                                  min_turns=min_turns, max_turns=max_turns, lost_by=lost_by)
        sql += where + " ORDER BY tournament, idx LIMIT ?"
        args.append(limit)
        out = []
        for r in self.db.execute(sql, args):
            out.append({"id": r[0], "tournament": r[1], "index": r[2], "seed": r[3], "seats": json.loads(r[4]),
                        "reason": r[5], "draw": bool(r[6]), "result": json.loads(r[7]), "turns": r[8],
                        "wall_ms": r[9], "faults": r[10]})
        return out

    def count_games(self, *, tournament: str | None = None, bot: str | None = None, reason: str | None = None,
                    min_turns: int | None = None, max_turns: int | None = None, fault: str | None = None,
                    lost_by: str | None = None) -> int:
        """How many games :meth:`games` would list without its limit."""
        where, args = game_filter(tournament=tournament, bot=bot, reason=reason, fault=fault,
                                  min_turns=min_turns, max_turns=max_turns, lost_by=lost_by)
        return self.db.execute("SELECT COUNT(*) FROM games g" + where, args).fetchone()[0]

    def results(self, tournament: str | None = None) -> list[tuple[list[str], dict[str, Any]]]:
        """(seats, result) of one tournament's games, or of all, in stored order."""
        return [(g.seats, g.result) for g in game_results(self.db, tournament=tournament or None)]

    def set_config(self, tid: str, config: dict[str, Any]) -> None:
        """Replace a tournament's recorded config (its bots' paths after the store was moved)."""
        with self.tx() as db:
            db.execute("UPDATE tournaments SET config=? WHERE id=?", (json.dumps(config, sort_keys=True), tid))

    def game_seats(self, game_id: str) -> list[str] | None:
        """The labels of a stored game's seats, in seat order (None: no such game)."""
        row = self.db.execute("SELECT seats FROM games WHERE id=?", (game_id,)).fetchone()
        return None if row is None else json.loads(row[0])


def club_store(path: str | Path) -> bool:
    """Whether the store at ``path`` is a club's: anyone has an account in it (docs/CLUB.md). Read
    without writing; no file there yet is one person's store. An unreadable file is a StoreError."""
    path = Path(path)
    if not path.exists():
        return False
    db = _open_readonly(path)
    try:
        return has_accounts(db)
    except sqlite3.DatabaseError as e:
        raise StoreError(f"{path} is not a readable arena store: {e}") from None
    finally:
        db.close()


def _open_readonly(path: Path) -> sqlite3.Connection:
    """A connection that never writes, so reading works on read-only media and beside a running writer.

    ``mode=ro`` still needs the WAL index (``-shm``), which SQLite cannot create where nothing may be
    written; then the file is opened ``immutable``, which is right for a store nobody can be writing.
    Its place is checked first, as a writer's is (:func:`reader_flags`)."""
    tried = reader_flags(path)
    uri = "file:" + urllib.parse.quote(str(path.resolve()))
    last: Exception | None = None
    for flags in tried:
        try:
            db = sqlite3.connect(uri + flags, uri=True, timeout=30, isolation_level=None)
            db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
            return db
        except sqlite3.DatabaseError as e:
            last = e
    raise StoreError(f"{path} is not a readable arena store: {last}")


# --------------------------------------------------------------------------- games under a tournament-id prefix
# A ladder's games are those of the tournaments named ``ladder:NAME:...``; these read them by that prefix.
# Their JSON is parsed by orjson: a ladder's state and standings read every game's seats and result.

class GameResult(NamedTuple):
    tournament: str
    seed: int
    seats: list[str]
    result: dict[str, Any]


class NewGame(NamedTuple):
    """A game read by row (a ladder's running state, the pages' kept standings): ``rowid`` orders
    games as they were stored."""

    rowid: int
    id: str
    tournament: str
    idx: int
    seed: int
    seats: list[str]
    result: dict[str, Any]


def _where(tournament: str | None, prefix: str | None, first: str | None = None,
           last: str | None = None) -> tuple[str, list[Any]]:
    """The WHERE clause over ``games g`` for one tournament, or a prefix (between two ids, inclusive)."""
    where: list[str] = []
    args: list[Any] = []
    if tournament is not None:
        where.append("g.tournament=?"); args.append(tournament)
    if prefix is not None:
        where.append("substr(g.tournament, 1, ?)=?"); args += [len(prefix), prefix]
    if first is not None:
        where.append("g.tournament>=?"); args.append(first)
    if last is not None:
        where.append("g.tournament<=?"); args.append(last)
    return (" WHERE " + " AND ".join(where) if where else ""), args


def game_results(db: sqlite3.Connection, *, tournament: str | None = None, prefix: str | None = None,
                 first: str | None = None, last: str | None = None) -> list[GameResult]:
    """Every game of one tournament, or under a tournament-id prefix (and between two tournament ids,
    inclusive), or of the whole store, in stored order (tournament, index)."""
    where, args = _where(tournament, prefix, first, last)
    rows = db.execute(f"SELECT g.tournament, g.seed, g.seats, g.result FROM games g{where} "
                      "ORDER BY g.tournament, g.idx", args)
    return [GameResult(t, seed, orjson.loads(seats), orjson.loads(result)) for t, seed, seats, result in rows]


def think_by_bot(db: sqlite3.Connection, *, tournament: str | None = None,
                 prefix: str | None = None) -> dict[str, tuple[float, int]]:
    """Per bot label: (thinking ms, decisions) over the same games as :func:`game_results`."""
    where, args = _where(tournament, prefix)
    rows = db.execute(f"SELECT s.bot, SUM(s.think_ms), SUM(s.decisions) FROM game_seats s "
                      f"JOIN games g ON g.id=s.game{where} GROUP BY s.bot", args)
    return {bot: (ms or 0.0, n or 0) for bot, ms, n in rows}


def games_after(db: sqlite3.Connection, prefix: str, rowid: int) -> list[NewGame]:
    """The games under ``prefix`` stored after the game row ``rowid``, in the order they were stored:
    the one reader of "a prefix's games after row N" (the ladder's run and the pages' standings)."""
    rows = db.execute("SELECT rowid, id, tournament, idx, seed, seats, result FROM games "
                      "WHERE rowid>? AND substr(tournament,1,?)=? ORDER BY rowid", (rowid, len(prefix), prefix))
    return [NewGame(r, gid, t, idx, seed, orjson.loads(seats), orjson.loads(result))
            for r, gid, t, idx, seed, seats, result in rows]


def recent_seats(db: sqlite3.Connection, prefix: str, *, since: float | None = None,
                 last: int = 0) -> list[list[str]]:
    """The seats of the games under ``prefix``, newest first: those finished at or after ``since``,
    or the ``last`` stored (0: all)."""
    sql, args = "SELECT seats FROM games WHERE substr(tournament, 1, ?)=?", [len(prefix), prefix]
    if since is not None:
        sql += " AND finished>=?"; args.append(since)
    sql += " ORDER BY rowid DESC"
    if last > 0:
        sql += " LIMIT ?"; args.append(last)
    return [orjson.loads(seats) for (seats,) in db.execute(sql, args)]


def count_after_tournament(db: sqlite3.Connection, prefix: str, tournament: str) -> int | None:
    """The games under ``prefix`` stored after the last game of ``tournament`` (None: it has none),
    counted as ``recent_seats(last=N)`` counts them."""
    row = db.execute("SELECT MAX(rowid) FROM games WHERE tournament=?", (tournament,)).fetchone()
    if row[0] is None:
        return None
    return int(db.execute("SELECT COUNT(*) FROM games WHERE substr(tournament, 1, ?)=? AND rowid>?",
                          (len(prefix), prefix, row[0])).fetchone()[0])


def largest_batch(db: sqlite3.Connection, prefix: str) -> int:
    """The most games any one tournament under ``prefix`` holds (0: none): a ladder's biggest run
    batch, every game of which its focus played."""
    row = db.execute("SELECT MAX(n) FROM (SELECT COUNT(*) AS n FROM games WHERE substr(tournament, 1, ?)=? "
                     "GROUP BY tournament)", (len(prefix), prefix)).fetchone()
    return int(row[0] or 0)


def tournament_statuses(db: sqlite3.Connection, prefix: str) -> list[tuple[str, str]]:
    """(id, status) of every tournament whose id starts with ``prefix``, by id."""
    return db.execute("SELECT id, status FROM tournaments WHERE substr(id,1,?)=? ORDER BY id",
                      (len(prefix), prefix)).fetchall()


# --------------------------------------------------------------------------- named deal secrets

def add_secret(db: sqlite3.Connection, name: str, secret: bytes, commitment: str, now: float) -> None:
    """Keep a named deal secret (a season's) with its published commitment; revealed later."""
    with _tx(db):
        db.execute("INSERT INTO deal_secrets VALUES (?,?,?,?,NULL)", (name, secret, commitment, now))


def deal_secret(db: sqlite3.Connection, name: str) -> bytes | None:
    row = db.execute("SELECT secret FROM deal_secrets WHERE name=?", (name,)).fetchone()
    return None if row is None else bytes(row[0])
