"""The store's versioned schema (arena/store): a store from every earlier arena opens and upgrades
with nothing lost, each step applies once and whole, and a store from a newer arena is refused.

``fixtures/store_v0.sqlite`` was written by the arena before the store package (``user_version``
0): a two-bot tournament and a ladder with a placed member, a retired bot and rating snapshots,
made by ``fixtures/make_store_v0.sh`` run in a checkout of that commit.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from arena import store as schema
from arena.store import LATEST, SchemaError, migrate, schema_version
from arena.tournament.store import Store

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "store_v0.sqlite"

NEW_TABLES = {"accounts", "invitations", "api_tokens", "bot_owners", "audit", "jobs", "notifications", "webhooks",
              "outbox", "ladder_pauses", "deal_secrets", "seasons", "season_members", "season_standings"}
FIXTURE_V4 = Path(__file__).resolve().parent / "fixtures" / "store_v4.sqlite"  # main before seasons (make_store_v4.sh)


def _dump(path: Path) -> dict[str, list[tuple]]:
    """Every row of every table, sorted, read without any arena code."""
    db = sqlite3.connect(path)
    try:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {t: sorted(db.execute(f'SELECT * FROM "{t}"').fetchall(), key=repr) for t in tables}
    finally:
        db.close()


def _columns(path: Path) -> dict[str, list[str]]:
    db = sqlite3.connect(path)
    try:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {t: [c[1] for c in db.execute(f'PRAGMA table_info("{t}")')] for t in tables}
    finally:
        db.close()


def test_the_fixture_is_what_the_earlier_arena_wrote() -> None:
    db = sqlite3.connect(FIXTURE)
    try:
        assert schema_version(db) == 0
        assert db.execute("SELECT COUNT(*) FROM games").fetchone()[0] > 0
        assert db.execute("SELECT COUNT(*) FROM ladder_members").fetchone()[0] > 0
    finally:
        db.close()


def test_a_store_written_before_the_schema_was_versioned_upgrades_with_nothing_lost(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    shutil.copy(FIXTURE, path)
    before, columns = _dump(path), _columns(path)
    store = Store(path)
    try:
        assert schema_version(store.db) == LATEST
        some_game = next(iter(before["games"]))[0]
        record = store.game_record(some_game)
        assert record is not None and record["game_id"] == some_game and record["steps"]
    finally:
        store.close()
    after = _dump(path)
    for table, rows in before.items():
        assert after[table] == rows, f"{table} changed in the upgrade"
        assert _columns(path)[table] == columns[table]
    assert set(after) - set(before) == NEW_TABLES
    assert all(after[t] == [] for t in NEW_TABLES)


def test_a_store_from_the_arena_before_seasons_upgrades_and_a_season_runs_on_it(tmp_path: Path) -> None:
    """Version 4 (before the queue and the seasons), written by the previous main's own code (a ladder after one run batch): every row
    is kept, the season tables arrive empty, and its ladder can start a season at once."""
    from arena.ladder.config import Ladder
    from arena.ladder.seasons import current, start_season
    path = tmp_path / "v4.sqlite"
    shutil.copy(FIXTURE_V4, path)
    db = sqlite3.connect(path)
    assert schema_version(db) == 4
    db.close()
    before = _dump(path)
    store = Store(path)
    try:
        assert schema_version(store.db) == LATEST
        s = start_season(store, Ladder(name="club", bots=["random", "lowest"]))
        assert current(store, "club") == s and s.members == ("lowest@1.0", "random@1.0") and s.first_batch == 1
    finally:
        store.close()
    after = _dump(path)
    for table, rows in before.items():
        assert after[table] == rows, f"{table} changed in the upgrade"
    assert {"deal_secrets", "seasons", "season_members", "season_standings",  # seasons (step 6)
            "webhooks", "outbox", "ladder_pauses"} == set(after) - set(before)  # the queue's step 5


# tables a later step replaces rather than keeps: the jobs table of step 4 (QUEUE), which no arena
# ever wrote; step 5 (JOBS) drops it for the queue's own shape
REPLACED = {(4, "jobs")}
# values a row may hold where a column's CHECK allows only some
_ALLOWED = {"role": "member", "status": "active", "state": "waiting", "outcome": "", "uses_left": 1, "number": 1}


def _one_row_each(db: sqlite3.Connection, mark: int) -> None:
    """A row in every table the store has, each column given a value of its declared type."""
    for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'").fetchall():
        cols = db.execute(f'PRAGMA table_info("{table}")').fetchall()
        values = [_ALLOWED.get(c[1], {"INTEGER": mark, "REAL": mark + 0.5, "BLOB": bytes([mark])}.get(c[2], f"{{}}{mark}"))
                  for c in cols]
        db.execute(f'INSERT INTO "{table}" ({", ".join(c[1] for c in cols)}) VALUES ({", ".join("?" * len(cols))})',
                   values)


@pytest.mark.parametrize("start", range(LATEST + 1))
def test_a_store_at_every_version_reaches_the_latest_and_keeps_its_rows(tmp_path: Path, start: int) -> None:
    """A store left at each earlier step, with a row in every table it has then, upgrades to the
    latest with every row and column it had (a later step's new columns take their defaults)."""
    path = tmp_path / "s.sqlite"
    db = sqlite3.connect(path, isolation_level=None)  # foreign keys off, as any earlier arena may have left rows
    assert migrate(db, upto=start) == start
    _one_row_each(db, start + 1)
    db.close()
    before, columns = _dump(path), _columns(path)
    assert all(len(rows) == 1 for rows in before.values()) and (start == 0 or before)
    store = Store(path)
    try:
        assert schema_version(store.db) == LATEST
        names = {r[0] for r in store.db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert NEW_TABLES <= names and "ladder_members" in names
    finally:
        store.close()
    db = sqlite3.connect(path)
    try:
        for table, rows in before.items():
            if (start, table) in REPLACED:
                continue
            kept = db.execute(f'SELECT {", ".join(columns[table])} FROM "{table}"').fetchall()
            assert kept == rows, f"{table} lost or changed rows in the upgrade from version {start}"
    finally:
        db.close()
    again = Store(path)  # opening an up-to-date store changes nothing
    try:
        assert schema_version(again.db) == LATEST
    finally:
        again.close()
    assert _dump(path).keys() >= before.keys()


def test_a_store_from_a_newer_arena_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "new.sqlite"
    shutil.copy(FIXTURE, path)
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {LATEST + 1}")
    db.commit()
    db.close()
    before = _dump(path)
    with pytest.raises(SchemaError, match="newer than this arena"):
        Store(path)
    assert _dump(path) == before


def test_a_step_that_fails_is_undone_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.sqlite"
    db = sqlite3.connect(path, isolation_level=None)
    migrate(db, upto=2)
    broken = (*schema.MIGRATIONS[:2], (schema.MIGRATIONS[2][0], "CREATE TABLE oops (")) + schema.MIGRATIONS[3:]
    monkeypatch.setattr("arena.store.schema.MIGRATIONS", broken)
    with pytest.raises(sqlite3.OperationalError):
        migrate(db)
    assert schema_version(db) == 2
    assert db.execute("SELECT 1 FROM sqlite_master WHERE name='accounts'").fetchone() is None
    monkeypatch.undo()
    assert migrate(db) == LATEST
    db.close()


class _StaleUntilLocked:
    """A connection whose reads of the schema version, until it first takes the write lock, give
    the version it had before another process upgraded the store (what a second opener racing
    the first sees)."""

    def __init__(self, db: sqlite3.Connection, version: int):
        self.db, self.version, self.locked = db, version, False
        self.stale = True

    def execute(self, sql: str, *args: Any) -> Any:
        if sql.startswith("BEGIN"):
            self.locked, self.stale = True, False
        elif sql.startswith(("COMMIT", "ROLLBACK")):
            self.locked = False
        elif sql == "PRAGMA user_version" and not self.locked and self.stale:
            return self.db.execute("SELECT ?", (self.version,))
        return self.db.execute(sql, *args)


def test_two_openers_of_one_old_store_apply_each_step_once(tmp_path: Path) -> None:
    """The second opener reads the version again inside its write lock and applies nothing twice
    (a step run twice fails: the new tables have no IF NOT EXISTS)."""
    path = tmp_path / "old.sqlite"
    shutil.copy(FIXTURE, path)
    a = sqlite3.connect(path, isolation_level=None)
    b = sqlite3.connect(path, isolation_level=None)
    migrate(a)
    assert migrate(_StaleUntilLocked(b, 0)) == LATEST  # type: ignore[arg-type]
    a.close()
    b.close()


def test_a_queue_from_before_leases_upgrades_and_its_running_job_waits_for_the_lease(tmp_path: Path) -> None:
    """Version 6 (main before leases): every job keeps its columns; the running one has no owner and
    its start as its heartbeat, so a server puts it back only once the lease has passed since then."""
    from arena.store import jobs as q
    path = tmp_path / "v6.sqlite"
    db = sqlite3.connect(path, isolation_level=None)
    assert migrate(db, upto=6) == 6
    for job_id, state, started in (("w", "waiting", None), ("r", "running", 100.0), ("d", "done", 50.0)):
        db.execute("INSERT INTO jobs (id, submitter, ladder, label, filename, upload, state, attempts, lines, "
                   "created, started) VALUES (?, 'account:1', 'club', 'b@1', 'b.zip', ?, ?, 1, '[\"x\"]', 1.0, ?)",
                   (job_id, f"/up/{job_id}", state, started))
    db.close()
    before = _dump(path)["jobs"]
    store = Store(path)
    try:
        assert schema_version(store.db) == LATEST
        after = store.db.execute("SELECT * FROM jobs ORDER BY id").fetchall()
        assert sorted(row[:-2] for row in after) == sorted(before)  # every old column as it was
        assert {row[0]: row[-2:] for row in after} == {"d": ("", None), "r": ("", 100.0), "w": ("", None)}
        me = q.server_id()
        assert q.recover(store.db, 100.0 + q.LEASE_S, me) == []
        assert q.get(store.db, "r").state == q.State.RUNNING  # type: ignore[union-attr]
        q.recover(store.db, 101.0 + q.LEASE_S, me)
        assert q.get(store.db, "r").state == q.State.WAITING  # type: ignore[union-attr]
    finally:
        store.close()


def test_a_new_store_appears_whole_so_no_opener_meets_it_half_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What must hold: while a new store's tables are being made, nothing is at its path; once it is
    there it is in WAL mode at the latest schema. (A server's reader that opened the empty file
    while the writer switched it to WAL made one side fail with "database is locked", since
    SQLite's switch waits for no lock: 16 in 3,000 brand-new stores opened by a writer and a
    reader at once.)"""
    import arena.store.games as games
    path = tmp_path / "data" / "arena.sqlite"
    during: list[bool] = []
    real = games.migrate

    def watched(db: sqlite3.Connection, *a: Any) -> int:
        during.append(path.exists())
        return real(db, *a)
    monkeypatch.setattr(games, "migrate", watched)
    Store(path).close()
    assert during and not during[0]  # made under another name
    db = sqlite3.connect(path)
    try:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert schema_version(db) == LATEST
    finally:
        db.close()
    assert sorted(p.name for p in path.parent.iterdir()) == ["arena.sqlite"]  # no temporary left
    assert path.stat().st_mode & 0o777 == 0o600
