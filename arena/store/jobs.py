"""The submission queue of a club server, kept in the store so that a restart loses no upload and
runs none twice.

A job is ``waiting``, then ``running`` (claimed in one write transaction, so two claimers never
take the same job), then ``done`` with an outcome. Every bound is checked inside the transaction
that adds the job, so two uploads at once cannot both take the last place. The order is fair:
each submitter's first waiting job comes before anyone's second, and nobody has two running at
once. A running job has an owner (the server that claimed it, :func:`server_id`) and a heartbeat its
owner renews while the job runs; another server puts the job back only when the heartbeat is older
than the lease, or the owner is provably dead on this machine, so two servers on one store never run
one submission twice. A job put back runs once more; one that was running at two deaths is refunded
(it is the arena's failure, not the bot's).
"""

from __future__ import annotations

import functools
import json
import os
import secrets
import sqlite3
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Callable

from ..errors import ArenaError
from .people import _tx

MAX_ATTEMPTS = 2  # the first run, and the one rerun after a server died while it ran
QUOTA_WINDOW_S = 24 * 3600
MAX_LINES = 200
LEASE_S = 30.0      # a running job whose heartbeat is older than this has lost its owner
HEARTBEAT_S = 5.0   # how often a server renews the heartbeat of the job it runs


class State(StrEnum):
    WAITING = "waiting"
    RUNNING = "running"
    DONE = "done"


class Outcome(StrEnum):
    PLACED = "placed"
    CHECK_FAILED = "check failed"   # the bot's fault: the check found faults
    FAILED = "failed"               # refused on its merits (a version rule, a ladder rule)
    REFUNDED = "refunded"           # the arena failed, not the bot: counted against no quota


class QueueFull(ArenaError):
    """No room for another submission now (per person, in all, or the person's quota); says why."""


@dataclass(frozen=True)
class Limits:
    per_submitter: int = 2      # waiting or running, per person (or per server token)
    total: int = 20             # waiting or running, in all
    per_day: int = 20           # submissions that passed arena check, per person, in the last 24 hours


@dataclass
class Job:
    id: str
    submitter: str              # 'account:ID', or 'token' (the organiser's server token)
    ladder: str
    label: str
    filename: str
    upload: str                 # the unpacked folder; removed when the job ends
    state: State = State.WAITING
    outcome: str = ""
    phase: str = ""             # while running: 'checking', then 'placing'
    passed_check: bool = False
    attempts: int = 0
    lines: list[str] = field(default_factory=list)
    report: dict[str, Any] | None = None
    row: dict[str, Any] | None = None
    error: str = ""
    created: float = 0.0
    started: float | None = None
    ended: float | None = None
    owner: str = ""             # while running: the server that claimed it (server_id)
    heartbeat: float | None = None

    @property
    def done(self) -> bool:
        return self.state == State.DONE

    @property
    def status(self) -> str:
        """What the submission's page says: waiting, checking, placing, or the outcome."""
        return self.outcome if self.done else (self.phase or "running") if self.state == State.RUNNING else "waiting"

    @property
    def account(self) -> int | None:
        kind, _, rest = self.submitter.partition(":")
        return int(rest) if kind == "account" and rest.isdigit() else None

    def say(self, text: str) -> None:
        self.lines.append(text)
        del self.lines[:-MAX_LINES]


_WRITTEN = ("id, submitter, ladder, label, filename, upload, state, outcome, phase, passed_check, attempts, lines, "
            "report, row, error, created, started, ended")
COLUMNS = _WRITTEN + ", owner, heartbeat"


def _job(r: tuple) -> Job:
    return Job(r[0], r[1], r[2], r[3], r[4], r[5], State(r[6]), r[7], r[8], bool(r[9]), r[10], json.loads(r[11]),
               json.loads(r[12]), json.loads(r[13]), r[14], r[15], r[16], r[17], r[18], r[19])


def new_id() -> str:
    return secrets.token_urlsafe(9)


def refusal(db: sqlite3.Connection, submitter: str, limits: Limits, now: float) -> str | None:
    """Why ``submitter`` may not queue another submission now, or None."""
    mine, everyone = db.execute(
        "SELECT COALESCE(SUM(submitter=?), 0), COUNT(*) FROM jobs WHERE state IN ('waiting', 'running')",
        (submitter,)).fetchone()
    if mine >= limits.per_submitter:
        return (f"refused: you have {mine} submission(s) not finished yet (at most {limits.per_submitter}); "
                "wait for one to end")
    if everyone >= limits.total:
        return f"refused: {everyone} submissions are waiting already; try again later"
    counted = db.execute("SELECT COUNT(*) FROM jobs WHERE submitter=? AND passed_check=1 AND outcome!='refunded' "
                         "AND created > ?", (submitter, now - QUOTA_WINDOW_S)).fetchone()[0]
    if counted >= limits.per_day:
        return (f"refused: {counted} of your submissions passed arena check in the last 24 hours (at most "
                f"{limits.per_day}); submissions that failed the check or that the arena failed do not count")
    return None


def enqueue(db: sqlite3.Connection, job: Job, limits: Limits, now: float) -> Job:
    """Add ``job`` as waiting, unless a bound refuses it (:class:`QueueFull`; nothing written)."""
    with _tx(db):
        why = refusal(db, job.submitter, limits, now)
        if why is not None:
            raise QueueFull(why)
        db.execute(f"INSERT INTO jobs ({_WRITTEN}) VALUES ({','.join('?' * 18)})",
                   (job.id, job.submitter, job.ladder, job.label, job.filename, job.upload, State.WAITING.value,
                    "", "", 0, 0, json.dumps(job.lines), "null", "null", "", now, None, None))
    found = get(db, job.id)
    assert found is not None
    return found


def get(db: sqlite3.Connection, job_id: str) -> Job | None:
    row = db.execute(f"SELECT {COLUMNS} FROM jobs WHERE id=?", (job_id,)).fetchone()
    return None if row is None else _job(row)


# the waiting jobs in the order they will run: each submitter's first before anyone's second (a
# running job is its submitter's first)
_ORDER = ("SELECT id, submitter, turn, created FROM (SELECT id, submitter, state, created, ROW_NUMBER() OVER "
          "(PARTITION BY submitter ORDER BY state='waiting', created, id) AS turn FROM jobs "
          "WHERE state IN ('waiting', 'running')) WHERE state='waiting'")


def claim(db: sqlite3.Connection, now: float, max_running: int = 1, *, owner: str) -> Job | None:
    """Take the next waiting job whose submitter has none running, and mark it running, owned by
    ``owner`` with a fresh heartbeat; none while ``max_running`` jobs run already (on this store, by
    any server)."""
    with _tx(db):
        if db.execute("SELECT COUNT(*) FROM jobs WHERE state='running'").fetchone()[0] >= max_running:
            return None
        row = db.execute(f"SELECT w.id FROM ({_ORDER}) w WHERE w.submitter NOT IN "
                         "(SELECT submitter FROM jobs WHERE state='running') "
                         "ORDER BY w.turn, w.created, w.id LIMIT 1").fetchone()
        if row is None:
            return None
        db.execute("UPDATE jobs SET state='running', attempts=attempts+1, started=?, phase='', owner=?, heartbeat=? "
                   "WHERE id=?", (now, owner, now, row[0]))
    return get(db, row[0])


def ahead(db: sqlite3.Connection, job_id: str) -> int:
    """How many submissions run before this waiting one: those running, and those waiting that come
    first in the fair order (0 once it runs)."""
    order = {r[0]: (r[2], r[3], r[0]) for r in db.execute(_ORDER)}
    if job_id not in order:
        return 0
    running = db.execute("SELECT COUNT(*) FROM jobs WHERE state='running'").fetchone()[0]
    return running + sum(key < order[job_id] for key in order.values())


def heartbeat(db: sqlite3.Connection, job: Job, now: float) -> bool:
    """Renew the heartbeat of a job its owner runs; False only when the job is no longer its (another
    server put it back after the lease passed), and then nothing is written. A job its owner has
    finished is still its own: the beat and the finish are written from different threads, and a
    beat that lands just after the finish is no sign of another server."""
    with _tx(db):
        if db.execute("UPDATE jobs SET heartbeat=? WHERE id=? AND state='running' AND owner=?",
                      (now, job.id, job.owner)).rowcount == 1:
            return True
        return db.execute("SELECT 1 FROM jobs WHERE id=? AND state='done' AND owner=?",
                          (job.id, job.owner)).fetchone() is not None


def progress(db: sqlite3.Connection, job: Job) -> None:
    """Keep a running job's phase, check verdict (the quota counts a passed check) and lines so far
    (only while its claimer still owns it)."""
    with _tx(db):
        db.execute("UPDATE jobs SET phase=?, passed_check=?, lines=? WHERE id=? AND state='running' AND owner=?",
                   (job.phase, int(job.passed_check), json.dumps(job.lines[-MAX_LINES:]), job.id, job.owner))


KEEP_UNCOUNTED = 50
"""Finished submissions that the daily quota does not count (a failed check, a refusal, a refund)
kept per submitter, the newest: no quota bounds how many a person makes, and each kept its report
(65.7 kB for a bot that wrote its stderr's cap in long lines and exited, before a report's lines
were cut), so one member's failing uploads grew the store without end. Those the quota counts
are all kept (at most its number a day)."""
_UNCOUNTED = "submitter=? AND state='done' AND NOT (passed_check=1 AND outcome!='refunded')"


def finish(db: sqlite3.Connection, job: Job, outcome: Outcome, now: float) -> Job:
    """Mark a running job done with ``outcome``, keeping its lines, report, row and error; its
    submitter is told in the same transaction, and their finished jobs the quota does not count
    are cut to the newest :data:`KEEP_UNCOUNTED`. A job its claimer no longer owns (put back after
    its lease passed) is left to its new run: nothing is written, nobody is told."""
    with _tx(db):
        if db.execute("UPDATE jobs SET state='done', outcome=?, phase='', passed_check=?, lines=?, report=?, row=?, "
                      "error=?, ended=? WHERE id=? AND state='running' AND owner=?",
                      (Outcome(outcome).value, int(job.passed_check and outcome != Outcome.REFUNDED),
                       json.dumps(job.lines[-MAX_LINES:]), json.dumps(job.report), json.dumps(job.row), job.error,
                       now, job.id, job.owner)).rowcount == 1:
            _tell(db, job, outcome, now)
            db.execute(f"DELETE FROM jobs WHERE {_UNCOUNTED} AND id NOT IN (SELECT id FROM jobs WHERE {_UNCOUNTED} "
                       "ORDER BY ended DESC, created DESC LIMIT ?)", (job.submitter, job.submitter, KEEP_UNCOUNTED))
    done = get(db, job.id)
    assert done is not None
    return done


def _tell(db: sqlite3.Connection, job: Job, outcome: Outcome, now: float) -> None:
    from .notes import Kind, notify
    if job.account is None:
        return
    if outcome == Outcome.PLACED:
        row = job.row or {}
        text = f"{job.label} was placed on {job.ladder}: rank {row.get('rank')} after {row.get('games')} games"
    elif outcome == Outcome.CHECK_FAILED:
        text = f"{job.label} failed arena check: not placed on {job.ladder}"
    elif outcome == Outcome.REFUNDED:
        text = f"{job.label}: the arena failed, not your bot; the submission is refunded (submit it again)"
    else:
        text = f"{job.label} was not placed on {job.ladder}: {job.error}"
    kind = {Outcome.PLACED: Kind.PLACED, Outcome.REFUNDED: Kind.REFUNDED, Outcome.CHECK_FAILED: Kind.CHECK_FAILED,
            Outcome.FAILED: Kind.NOT_PLACED}[outcome]
    notify(db, job.account, kind, text, f"/submit/{job.id}", now)


def requeue(db: sqlite3.Connection, job: Job) -> None:
    """Put a running job back as it was before its claim (its server is stopping, not dying)."""
    with _tx(db):
        db.execute("UPDATE jobs SET state='waiting', phase='', attempts=MAX(attempts-1, 0), lines=?, owner='', "
                   "heartbeat=NULL WHERE id=? AND state='running' AND owner=?",
                   (json.dumps(job.lines[-MAX_LINES:]), job.id, job.owner))


RERUN = "the server stopped while this submission ran: it runs again from where it stopped"
TWICE = ("the server stopped twice while this submission ran; the arena failed, not your bot: it does not count "
         "against your quota. Submit it again")


def recover(db: sqlite3.Connection, now: float, owner: str, lease_s: float = LEASE_S,
            dead: Callable[[str], bool] | None = None, *, idle: bool = False) -> list[Job]:
    """Put back each job another server left running whose heartbeat is older than ``lease_s`` or
    whose owner is ``dead`` (:func:`owner_dead` by default), once; refund one left running twice. A
    job with a live owner is left alone, but for ``idle``: ``owner`` runs no job now, so one it
    still holds as running is one whose end it could not write (a full disk), taken back the same
    way (one job runs at a time on a store: kept, it stopped every submission until a restart).
    Returns the refunded jobs (their uploads are to be removed)."""
    dead = dead or owner_dead
    with _tx(db):
        rows = db.execute(f"SELECT {COLUMNS} FROM jobs WHERE state='running' AND (owner!=? OR ?)",
                          (owner, idle)).fetchall()
        refunded = []
        for job in map(_job, rows):
            left = idle and job.owner == owner
            if not left and job.heartbeat is not None and now - job.heartbeat <= lease_s and not dead(job.owner):
                continue
            if job.attempts >= MAX_ATTEMPTS:
                job.say(TWICE)
                job.error = TWICE
                db.execute("UPDATE jobs SET state='done', outcome='refunded', passed_check=0, phase='', lines=?, "
                           "error=?, ended=?, owner='', heartbeat=NULL WHERE id=?", (json.dumps(job.lines), job.error, now, job.id))
                _tell(db, job, Outcome.REFUNDED, now)
                refunded.append(job)
            else:
                job.say(RERUN)
                db.execute("UPDATE jobs SET state='waiting', phase='', lines=?, owner='', heartbeat=NULL WHERE id=?",
                           (json.dumps(job.lines), job.id))
    return refunded


def _start_time(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot, /proc/PID/stat field 22), or None if none runs."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[19]
    except (OSError, IndexError):
        return None


def _machine() -> str | None:
    """This boot of this machine and this pid namespace: where a pid names one process."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f"{f.read().strip()}/{os.readlink('/proc/self/ns/pid')[len('pid:['):-1]}"
    except OSError:
        return None


@functools.cache
def _server_id(pid: int) -> str:
    machine, start = _machine(), _start_time(pid)
    return f"{machine}/{pid}/{start}" if machine and start else f"random/{secrets.token_hex(12)}"


def server_id() -> str:
    """This process as the owner of a running job: boot id, pid namespace, pid and the pid's start
    time (a reused pid is another owner), so another server here can tell it died; a random id
    where /proc cannot say, and then only the lease decides."""
    return _server_id(os.getpid())


def owner_dead(owner: str) -> bool:
    """Whether ``owner`` (a :func:`server_id`) is provably dead: of this boot and pid namespace, and its
    pid gone or now another process. Anything else (another machine, a random id, no owner) is not
    known dead: the lease decides."""
    parts = owner.split("/")
    if len(parts) != 4 or not parts[2].isdigit() or f"{parts[0]}/{parts[1]}" != _machine():
        return False
    return _start_time(int(parts[2])) != parts[3]


def open_uploads(db: sqlite3.Connection) -> set[str]:
    """The upload folders of jobs not yet done (any other folder of the uploads is a leftover)."""
    return {r[0] for r in db.execute("SELECT upload FROM jobs WHERE state IN ('waiting', 'running')")}


def jobs_of(db: sqlite3.Connection, submitter: str, limit: int = 50) -> list[Job]:
    """A person's submissions, newest first."""
    rows = db.execute(f"SELECT {COLUMNS} FROM jobs WHERE submitter=? ORDER BY created DESC LIMIT ?", (submitter, limit))
    return [_job(r) for r in rows]
