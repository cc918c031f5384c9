"""The numbered migrations of an arena store, and the function that applies them.

A step is a tuple of SQL statements. Steps are never edited once released: a change to the
schema is a new step at the end. The first two steps use ``IF NOT EXISTS`` because stores
written before this package (``user_version`` 0) may already hold their tables.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ..errors import ArenaError


class SchemaError(ArenaError, RuntimeError):
    """The store was written by a newer arena than this one, or a migration could not be applied."""


GAMES = (
    """CREATE TABLE IF NOT EXISTS tournaments (
    id TEXT PRIMARY KEY,
    config TEXT NOT NULL,
    planned INTEGER NOT NULL,
    status TEXT NOT NULL,
    created REAL NOT NULL,
    updated REAL NOT NULL
)""",
    """CREATE TABLE IF NOT EXISTS bots (
    label TEXT PRIMARY KEY,          -- name@version
    name TEXT NOT NULL,
    version TEXT NOT NULL,
    hash TEXT NOT NULL,
    manifest TEXT NOT NULL,
    path TEXT NOT NULL,
    registered REAL NOT NULL
)""",
    """CREATE TABLE IF NOT EXISTS games (
    id TEXT PRIMARY KEY,
    tournament TEXT NOT NULL REFERENCES tournaments(id),
    idx INTEGER NOT NULL,
    seed INTEGER NOT NULL,
    rules TEXT NOT NULL,
    seats TEXT NOT NULL,             -- JSON list of bot labels, seat order
    reason TEXT NOT NULL,
    draw INTEGER NOT NULL,
    complete INTEGER NOT NULL,
    result TEXT NOT NULL,            -- JSON result, with forfeits
    turns INTEGER NOT NULL,
    wall_ms REAL NOT NULL,
    faults INTEGER NOT NULL,
    finished REAL NOT NULL,
    UNIQUE (tournament, idx)
)""",
    """CREATE TABLE IF NOT EXISTS game_seats (
    game TEXT NOT NULL REFERENCES games(id),
    seat INTEGER NOT NULL,
    bot TEXT NOT NULL,
    place INTEGER NOT NULL,
    forfeit TEXT,
    think_ms REAL NOT NULL,
    decisions INTEGER NOT NULL,
    PRIMARY KEY (game, seat)
)""",
    "CREATE INDEX IF NOT EXISTS game_seats_bot ON game_seats(bot)",
    "CREATE INDEX IF NOT EXISTS games_tournament ON games(tournament)",
    """CREATE TABLE IF NOT EXISTS game_logs (
    game TEXT PRIMARY KEY REFERENCES games(id),
    log BLOB NOT NULL
)""",
)

LADDERS = (
    """CREATE TABLE IF NOT EXISTS ladders (
    name TEXT PRIMARY KEY,
    config TEXT NOT NULL,            -- JSON: what decides a game (rules, options, seats)
    created REAL NOT NULL
)""",
    """CREATE TABLE IF NOT EXISTS ladder_members (
    ladder TEXT NOT NULL,
    label TEXT NOT NULL,             -- name@version
    name TEXT NOT NULL,
    version TEXT NOT NULL,
    hash TEXT NOT NULL,              -- BotSpec.files_hash() when it joined
    ref TEXT NOT NULL,               -- how to load it again: bundled name, or a path (relative: to the store dir)
    origin TEXT NOT NULL,            -- 'initial' (from the ladder file) or 'submitted'
    placement TEXT NOT NULL,         -- the tournament that placed it
    registered REAL NOT NULL,
    PRIMARY KEY (ladder, label)
)""",
    """CREATE TABLE IF NOT EXISTS ladder_bot_status (
    ladder TEXT NOT NULL,
    label TEXT NOT NULL,
    status TEXT NOT NULL,            -- 'retired' or 'suspended'
    since REAL NOT NULL,
    reason TEXT NOT NULL,
    detail TEXT NOT NULL,            -- JSON: for a suspension, the faults and the last stderr lines
    PRIMARY KEY (ladder, label)
)""",
    """CREATE TABLE IF NOT EXISTS rating_snapshots (
    ladder TEXT NOT NULL,
    taken_at REAL NOT NULL,
    games INTEGER NOT NULL,
    bot TEXT NOT NULL,
    elo REAL NOT NULL,
    lo REAL NOT NULL,
    hi REAL NOT NULL
)""",
    "CREATE INDEX IF NOT EXISTS rating_snapshots_ladder ON rating_snapshots(ladder, taken_at)",
    """CREATE TABLE IF NOT EXISTS ladder_views (
    ladder TEXT PRIMARY KEY,
    viewed_at REAL NOT NULL,
    games INTEGER NOT NULL
)""",
)

# People on a club server: accounts, the invitations that let them sign up, the API tokens
# their machines use, which account owns which bot name, and who wrote what.
PEOPLE = (
    """CREATE TABLE accounts (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE COLLATE NOCASE,
    password TEXT NOT NULL,          -- an argon2 hash (PHC string); '' until a one-time link is used
    role TEXT NOT NULL CHECK (role IN ('admin', 'organiser', 'member')),
    status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'suspended')),
    created REAL NOT NULL
)""",
    """CREATE TABLE invitations (
    code_hash TEXT PRIMARY KEY,      -- sha256 of the code: the code itself is shown once
    role TEXT NOT NULL CHECK (role IN ('admin', 'organiser', 'member')),
    uses_left INTEGER NOT NULL CHECK (uses_left >= 0),
    expires REAL NOT NULL,
    created_by INTEGER REFERENCES accounts(id),   -- NULL: made at the server's terminal
    note TEXT NOT NULL DEFAULT '',
    created REAL NOT NULL
)""",
    """CREATE TABLE api_tokens (
    id INTEGER PRIMARY KEY,
    account INTEGER NOT NULL REFERENCES accounts(id),
    token_hash TEXT NOT NULL UNIQUE, -- sha256 of the token: the token itself is shown once
    name TEXT NOT NULL,
    scopes TEXT NOT NULL,            -- space-separated: submit, read-logs
    created REAL NOT NULL,
    last_used REAL,
    revoked REAL
)""",
    """CREATE TABLE bot_owners (
    name TEXT PRIMARY KEY,           -- a bot's name, every version of it, on every ladder of the server
    account INTEGER NOT NULL REFERENCES accounts(id),
    since REAL NOT NULL
)""",
    """CREATE TABLE audit (
    id INTEGER PRIMARY KEY,
    at REAL NOT NULL,
    account INTEGER REFERENCES accounts(id),      -- NULL: the server's terminal
    action TEXT NOT NULL,
    target TEXT NOT NULL,
    detail TEXT NOT NULL,            -- JSON
    origin TEXT NOT NULL             -- the client's address, or 'terminal'
)""",
    "CREATE INDEX audit_at ON audit(at)",
)

# The submission queue and what people are told.
QUEUE = (
    """CREATE TABLE jobs (
    id TEXT PRIMARY KEY,
    account INTEGER REFERENCES accounts(id),
    ladder TEXT NOT NULL,
    label TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('waiting', 'running', 'done', 'failed', 'refunded', 'withdrawn')),
    upload TEXT NOT NULL,            -- the unpacked folder, removed when the job ends
    bytes INTEGER NOT NULL,
    report TEXT NOT NULL DEFAULT '{}',
    created REAL NOT NULL,
    started REAL,
    ended REAL
)""",
    "CREATE INDEX jobs_state ON jobs(state, created)",
    """CREATE TABLE notifications (
    id INTEGER PRIMARY KEY,
    account INTEGER NOT NULL REFERENCES accounts(id),
    at REAL NOT NULL,
    kind TEXT NOT NULL,
    text TEXT NOT NULL,
    link TEXT NOT NULL DEFAULT '',
    seen INTEGER NOT NULL DEFAULT 0
)""",
)

# The queue's own shape (arena/store/jobs.py), webhook deliveries (arena/store/notes.py) and ladder
# pauses (arena/ladder/tables.py). The jobs table of the step before was never
# written by any arena, so it is replaced rather than altered.
JOBS = (
    "DROP TABLE jobs",
    """CREATE TABLE jobs (
    id TEXT PRIMARY KEY,
    submitter TEXT NOT NULL,         -- 'account:ID', or 'token' (the server's own token)
    ladder TEXT NOT NULL,
    label TEXT NOT NULL,
    filename TEXT NOT NULL,
    upload TEXT NOT NULL,            -- the unpacked folder, removed when the job ends
    state TEXT NOT NULL CHECK (state IN ('waiting', 'running', 'done')),
    outcome TEXT NOT NULL DEFAULT '' CHECK (outcome IN ('', 'placed', 'check failed', 'failed', 'refunded')),
    phase TEXT NOT NULL DEFAULT '',  -- while running: checking, placing
    passed_check INTEGER NOT NULL DEFAULT 0,   -- what the quota counts (never for a refunded job)
    attempts INTEGER NOT NULL DEFAULT 0,       -- runs started: a second one only after a server died
    lines TEXT NOT NULL DEFAULT '[]',          -- JSON: what the submitter is shown
    report TEXT NOT NULL DEFAULT 'null',       -- JSON: the arena check report
    row TEXT NOT NULL DEFAULT 'null',          -- JSON: the standings row once placed
    error TEXT NOT NULL DEFAULT '',
    created REAL NOT NULL,
    started REAL,
    ended REAL
)""",
    "CREATE INDEX jobs_state ON jobs(state, created)",
    "CREATE INDEX jobs_submitter ON jobs(submitter, created)",
    # a person's webhook: the secret signs each delivery (HMAC-SHA256), so it is kept as it is
    """CREATE TABLE webhooks (
    account INTEGER PRIMARY KEY REFERENCES accounts(id),
    url TEXT NOT NULL,
    secret TEXT NOT NULL,
    created REAL NOT NULL
)""",
    # deliveries still to make: written with the notification, retried with backoff until delivered
    """CREATE TABLE outbox (
    id INTEGER PRIMARY KEY,
    account INTEGER NOT NULL REFERENCES accounts(id),
    url TEXT NOT NULL,
    body TEXT NOT NULL,              -- the JSON posted, exactly the bytes signed
    attempts INTEGER NOT NULL DEFAULT 0,
    next_at REAL NOT NULL,
    delivered REAL,
    given_up REAL,
    last_error TEXT NOT NULL DEFAULT ''
)""",
    "CREATE INDEX outbox_due ON outbox(delivered, given_up, next_at)",
    # a ladder an admin or organiser paused: `arena ladder run` plays no batch while it is here
    """CREATE TABLE ladder_pauses (
    ladder TEXT PRIMARY KEY,
    since REAL NOT NULL,
    reason TEXT NOT NULL
)""",
)

# Seasons of a ladder: what each froze, its deal secret (committed to at the start, revealed at the
# end), the members it froze, and its archived standings.
SEASONS = (
    """CREATE TABLE deal_secrets (
    name TEXT PRIMARY KEY,           -- e.g. season:LADDER:N
    secret BLOB NOT NULL,            -- 32 random bytes; never shown before revealed is set
    commitment TEXT NOT NULL,        -- sha256 of the secret, published when it is made
    created REAL NOT NULL,
    revealed REAL                    -- NULL: still secret
)""",
    """CREATE TABLE seasons (
    ladder TEXT NOT NULL,
    number INTEGER NOT NULL CHECK (number >= 1),
    frozen TEXT NOT NULL,            -- JSON: rules, seats, time, suite digest, carry, the end condition
    secret TEXT NOT NULL REFERENCES deal_secrets(name),
    first_batch INTEGER NOT NULL,    -- the ladder run's batches from this one on are the season's
    last_batch INTEGER,              -- NULL while the season runs
    started REAL NOT NULL,
    ends_at REAL,                    -- a date (epoch seconds), or NULL
    end_games INTEGER,               -- a game count, or NULL
    ended REAL,
    PRIMARY KEY (ladder, number)
)""",
    """CREATE TABLE season_members (
    ladder TEXT NOT NULL,
    season INTEGER NOT NULL,
    label TEXT NOT NULL,             -- the member's active version when the season began
    PRIMARY KEY (ladder, season, label)
)""",
    """CREATE TABLE season_standings (
    ladder TEXT NOT NULL,
    season INTEGER NOT NULL,
    rank INTEGER NOT NULL,
    bot TEXT NOT NULL,
    games INTEGER NOT NULL,
    elo REAL,
    lo REAL,
    hi REAL,
    division INTEGER NOT NULL,
    PRIMARY KEY (ladder, season, bot)
)""",
)

# A running job's owner (the server that claimed it) and its heartbeat, so that a server starting
# beside a live one does not put back that one's job (arena/store/jobs.py). A job left running by
# an earlier arena has no owner; its heartbeat is its start, so the lease decides for it too.
LEASES = (
    "ALTER TABLE jobs ADD COLUMN owner TEXT NOT NULL DEFAULT ''",   # the claiming server's id (jobs.server_id)
    "ALTER TABLE jobs ADD COLUMN heartbeat REAL",                   # while running: its owner's last sign of life
    "UPDATE jobs SET heartbeat = started WHERE state = 'running'",
)

# A person's session generation: every session cookie carries the generation it was made in, and a
# request is a person's only while it is still theirs. Logging out, a suspension and "log out
# everywhere" move it on, so every copy of an older cookie ends at once (a signed cookie alone
# lived its 14 days after logout).
SESSIONS = (
    "ALTER TABLE accounts ADD COLUMN sessions INTEGER NOT NULL DEFAULT 0",
)

MIGRATIONS: tuple[tuple[str, ...], ...] = (GAMES, LADDERS, PEOPLE, QUEUE, JOBS, SEASONS, LEASES, SESSIONS)
LATEST = len(MIGRATIONS)


def schema_version(db: sqlite3.Connection) -> int:
    return db.execute("PRAGMA user_version").fetchone()[0]


def _known(version: int) -> int:
    """``version``, unless a newer arena wrote it."""
    if version > LATEST:
        raise SchemaError(f"this store has schema version {version}, newer than this arena knows "
                          f"({LATEST}): upgrade the arena to open it")
    return version


def connect(path: str | Path) -> sqlite3.Connection:
    """A writing connection (autocommit, foreign keys enforced) to a store whose schema is brought
    up to date; the file must exist already, made with the store's private mode."""
    db = sqlite3.connect(path, timeout=30, isolation_level=None)
    db.execute("PRAGMA foreign_keys=ON")
    migrate(db)
    return db


def migrate(db: sqlite3.Connection, upto: int = LATEST) -> int:
    """Apply the steps ``db`` lacks (up to ``upto``), each in its own transaction; the version reached.

    ``db`` must be in autocommit mode (``isolation_level=None``). The version that decides a step
    is read inside the write lock, so two processes opening one old store apply every step once.
    An up-to-date store takes no write lock at all (a full disk still opens it)."""
    if (now := _known(schema_version(db))) >= upto:
        return now
    while True:
        db.execute("BEGIN IMMEDIATE")
        try:
            if (now := _known(schema_version(db))) < upto:
                for statement in MIGRATIONS[now]:
                    db.execute(statement)
                db.execute(f"PRAGMA user_version = {now + 1}")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        if now >= upto:
            return now
