"""The submission queue in the store (arena/store/jobs.py): bounds checked in the transaction that
adds a job, a fair order with one running job per person, a job claimed once, a dead server's
running job put back once and refunded at the second death, and a quota that counts only
submissions that passed arena check and were not refunded.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from arena.store import migrate
from arena.store import jobs as q
from arena.store.jobs import Job, Limits, Outcome, QueueFull, State


@pytest.fixture
def db(tmp_path: Path):
    conn = sqlite3.connect(tmp_path / "s.sqlite", isolation_level=None)
    migrate(conn)
    yield conn
    conn.close()


ME = q.server_id()  # this process: a live server of this machine
ELSEWHERE = "another-boot/4026531836/1/1"  # a server of another machine: only its lease tells


def add(db: sqlite3.Connection, who: str, now: float, limits: Limits = Limits(per_submitter=9, total=99)) -> Job:
    job_id = q.new_id()
    return q.enqueue(db, Job(job_id, who, "classic-2p", f"{who}-bot@{now}", "b.zip", f"/up/{job_id}"), limits, now)


def test_bounds_per_person_and_in_all_are_checked_when_a_job_is_added(db: sqlite3.Connection) -> None:
    limits = Limits(per_submitter=2, total=3, per_day=99)
    add(db, "account:1", 1.0, limits)
    add(db, "account:1", 2.0, limits)
    with pytest.raises(QueueFull, match="2 submission\\(s\\) not finished"):
        add(db, "account:1", 3.0, limits)
    add(db, "account:2", 4.0, limits)
    with pytest.raises(QueueFull, match="3 submissions are waiting"):
        add(db, "account:3", 5.0, limits)
    assert db.execute("SELECT COUNT(*) FROM jobs").fetchone()[0] == 3  # a refusal wrote nothing
    done = q.claim(db, 6.0, owner=ME)
    assert done is not None
    q.finish(db, done, Outcome.PLACED, 7.0)
    add(db, "account:3", 8.0, limits)  # a finished job holds no place


def test_the_order_is_fair_and_nobody_runs_two_at_once(db: sqlite3.Connection) -> None:
    a1, a2, a3 = (add(db, "account:1", t) for t in (1.0, 2.0, 3.0))
    b1 = add(db, "account:2", 4.0)
    c1 = add(db, "account:3", 5.0)
    assert [q.ahead(db, j.id) for j in (a1, b1, c1, a2, a3)] == [0, 1, 2, 3, 4]
    first = q.claim(db, 10.0, owner=ME)
    assert first is not None and first.id == a1.id and first.state == State.RUNNING and first.attempts == 1
    assert q.claim(db, 10.5, owner=ME) is None  # one runs at a time by default
    assert q.ahead(db, b1.id) == 1 and q.ahead(db, a2.id) == 3  # the running one counts, then the order
    assert q.ahead(db, first.id) == 0
    second, third = q.claim(db, 11.0, max_running=3, owner=ME), q.claim(db, 12.0, max_running=3, owner=ME)
    assert (second.id, third.id) == (b1.id, c1.id)  # type: ignore[union-attr]
    assert q.claim(db, 13.0, max_running=9, owner=ME) is None  # a2 waits: its person has a job running
    q.finish(db, first, Outcome.CHECK_FAILED, 14.0)
    fourth = q.claim(db, 15.0, max_running=3, owner=ME)
    assert fourth is not None and fourth.id == a2.id


def test_a_claimed_job_is_claimed_once(tmp_path: Path) -> None:
    """Two connections (two servers on one store) take different jobs, never one twice."""
    path = tmp_path / "s.sqlite"
    a = sqlite3.connect(path, isolation_level=None)
    b = sqlite3.connect(path, isolation_level=None)
    migrate(a)
    for who in ("account:1", "account:2"):
        add(a, who, 1.0)
    taken = [q.claim(a, 2.0, 3, owner=ME), q.claim(b, 2.0, 3, owner=ME), q.claim(a, 2.0, 3, owner=ME)]
    assert taken[2] is None and taken[0] is not None and taken[1] is not None and taken[0].id != taken[1].id
    a.close()
    b.close()


def test_a_dead_servers_running_job_runs_again_once_then_is_refunded(db: sqlite3.Connection) -> None:
    job = add(db, "account:1", 1.0)
    other = add(db, "account:2", 2.0)
    assert q.claim(db, 3.0, owner=ELSEWHERE).id == job.id  # type: ignore[union-attr]
    assert q.recover(db, 4.0 + q.LEASE_S, ME) == []  # its server went silent; the lease passed: put back
    back = q.get(db, job.id)
    assert back is not None and back.state == State.WAITING and back.attempts == 1 and q.RERUN in back.lines
    assert back.owner == "" and back.heartbeat is None
    assert q.get(db, other.id).state == State.WAITING  # type: ignore[union-attr]
    assert q.claim(db, 50.0, owner=ELSEWHERE).id == job.id  # type: ignore[union-attr]  # it keeps its place
    refunded = q.recover(db, 51.0 + q.LEASE_S, ME)  # died again while running it
    assert [j.id for j in refunded] == [job.id]
    gone = q.get(db, job.id)
    assert gone is not None and gone.done and gone.outcome == Outcome.REFUNDED and "does not count" in gone.error
    assert q.open_uploads(db) == {other.upload}


def test_a_stopping_server_puts_its_job_back_as_it_was(db: sqlite3.Connection) -> None:
    job = add(db, "account:1", 1.0)
    running = q.claim(db, 2.0, owner=ME)
    assert running is not None
    running.say("checking")
    q.requeue(db, running)
    back = q.get(db, job.id)
    assert back is not None and back.state == State.WAITING and back.attempts == 0


def test_the_quota_counts_only_checks_passed_and_not_refunded(db: sqlite3.Connection) -> None:
    limits = Limits(per_submitter=5, total=50, per_day=2)
    day = 24 * 3600.0

    def run(now: float, outcome: Outcome, passed: bool) -> None:
        add(db, "account:1", now, limits)
        job = q.claim(db, now, owner=ME)
        assert job is not None
        job.passed_check = passed
        q.finish(db, job, outcome, now)

    run(1.0, Outcome.CHECK_FAILED, False)
    run(2.0, Outcome.CHECK_FAILED, False)
    run(3.0, Outcome.REFUNDED, True)      # the arena failed after the check: refunded
    run(4.0, Outcome.PLACED, True)
    run(6.0, Outcome.PLACED, True)
    with pytest.raises(QueueFull, match="2 of your submissions passed arena check"):
        add(db, "account:1", 7.0, limits)
    add(db, "account:2", 7.0, limits)     # another person's quota is their own
    add(db, "account:1", 4.0 + day + 1, limits)  # a day after the first placed one, a place again


def test_a_job_keeps_its_lines_report_and_row(db: sqlite3.Connection) -> None:
    add(db, "account:7", 1.0)
    job = q.claim(db, 2.0, owner=ME)
    assert job is not None and job.account == 7 and job.status == "running"
    job.phase = "checking"
    job.say("checking x@1")
    q.progress(db, job)
    assert q.get(db, job.id).status == "checking"  # type: ignore[union-attr]
    job.report, job.row, job.passed_check = {"ok": True}, {"rank": 1}, True
    done = q.finish(db, job, Outcome.PLACED, 3.0)
    assert (done.status, done.lines, done.report, done.row, done.passed_check) == \
        ("placed", ["checking x@1"], {"ok": True}, {"rank": 1}, True)
    assert [j.id for j in q.jobs_of(db, "account:7")] == [job.id]


def test_a_beat_after_its_own_finish_is_no_taking_back(db: sqlite3.Connection) -> None:
    """The job's heartbeat and its finish are written from different threads: a beat that lands
    just after the owner finished the job is not "another server took it" (that false alarm was
    logged at the end of jobs on a store no other server used), and writes nothing. A job another
    server took back, ran and finished, or refunded, is still not the late beat's."""
    job = add(db, "account:1", 1.0)
    running = q.claim(db, 10.0, owner=ME)
    assert running is not None
    q.finish(db, running, Outcome.PLACED, 20.0)
    assert q.heartbeat(db, running, 21.0)
    assert q.get(db, job.id).heartbeat == 10.0  # type: ignore[union-attr]

    other = add(db, "account:2", 31.0)
    mine = q.claim(db, 32.0, owner=ME)
    assert mine is not None and mine.id == other.id
    q.recover(db, 33.0 + q.LEASE_S, ELSEWHERE)  # this server stalled past the lease: put back
    theirs = q.claim(db, 34.0 + q.LEASE_S, owner=ELSEWHERE)
    assert theirs is not None and theirs.id == other.id
    assert not q.heartbeat(db, mine, 35.0 + q.LEASE_S)  # the other server's now: taken
    q.finish(db, theirs, Outcome.PLACED, 36.0 + q.LEASE_S)
    assert not q.heartbeat(db, mine, 37.0 + q.LEASE_S)  # finished there: still not this one's

    third = add(db, "account:3", 400.0)
    held = q.claim(db, 401.0, owner=ME)
    assert held is not None and held.id == third.id
    db.execute("UPDATE jobs SET attempts=? WHERE id=?", (q.MAX_ATTEMPTS, third.id))
    assert [j.id for j in q.recover(db, 402.0 + q.LEASE_S, ELSEWHERE)] == [third.id]  # refunded there
    assert q.get(db, third.id).state == State.DONE  # type: ignore[union-attr]
    assert not q.heartbeat(db, held, 999.0)  # ended by another server, not by its owner


def test_a_live_owners_job_is_left_alone_until_its_lease_passes(db: sqlite3.Connection) -> None:
    """A second server does not put back a job whose owner's heartbeat is fresh; once the lease
    passes it does, once, and the silent owner can then neither renew nor finish it."""
    job = add(db, "account:1", 1.0)
    running = q.claim(db, 100.0, owner=ELSEWHERE)
    assert running is not None and (running.owner, running.heartbeat) == (ELSEWHERE, 100.0)
    assert q.recover(db, 100.0 + q.LEASE_S, ME) == []
    assert q.get(db, job.id).state == State.RUNNING  # type: ignore[union-attr]
    assert q.heartbeat(db, running, 120.0)  # its owner is alive: the lease starts again
    assert q.recover(db, 149.0, ME) == [] and q.get(db, job.id).state == State.RUNNING  # type: ignore[union-attr]
    q.recover(db, 121.0 + q.LEASE_S, ME)  # silent past the lease: put back
    back = q.get(db, job.id)
    assert back is not None and back.state == State.WAITING and back.attempts == 1
    q.recover(db, 999.0, ME)
    assert q.get(db, job.id).lines.count(q.RERUN) == 1  # put back once
    assert not q.heartbeat(db, running, 160.0)  # the owner wakes up: the job is no longer its
    running.passed_check = True
    q.finish(db, running, Outcome.PLACED, 161.0)
    assert q.get(db, job.id).state == State.WAITING  # type: ignore[union-attr]
    assert db.execute("SELECT COUNT(*) FROM notifications").fetchone()[0] == 0
    assert q.claim(db, 200.0, owner=ME) is not None
    assert q.recover(db, 9999.0, ME) == []  # a server never takes back its own job, however late its beat
    assert q.get(db, job.id).state == State.RUNNING  # type: ignore[union-attr]


CLAIMER = """
import sqlite3, sys
from arena.store import jobs as q
db = sqlite3.connect(sys.argv[1], isolation_level=None)
job = q.claim(db, 1000.0, owner=q.server_id())
print(job.id, job.owner, flush=True)
sys.stdin.read()
"""


def test_a_second_server_puts_back_a_killed_servers_job_once(tmp_path: Path) -> None:
    """Two servers on one store: a job claimed by a live process (the first server) stays its own
    while it lives, however often the second recovers; killed -9, it is provably dead on this
    machine, and its job is put back once, before the lease has passed."""
    import os
    import signal
    import subprocess
    import sys
    path = tmp_path / "s.sqlite"
    db = sqlite3.connect(path, isolation_level=None)
    migrate(db)
    job = add(db, "account:1", 1.0)
    root = Path(__file__).resolve().parent.parent
    first = subprocess.Popen([sys.executable, "-c", CLAIMER, str(path)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=str(root)))
    try:
        claimed, owner = first.stdout.readline().split()  # type: ignore[union-attr]
        assert claimed == job.id and owner != ME and str(first.pid) in owner.split("/")
        for now in (1001.0, 1002.0):
            assert q.recover(db, now, ME) == []
            live = q.get(db, job.id)
            assert live is not None and live.state == State.RUNNING and live.owner == owner
        assert q.claim(db, 1002.0, max_running=9, owner=ME) is None  # and not taken twice
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    q.recover(db, 1003.0, ME)
    q.recover(db, 1004.0, ME)
    back = q.get(db, job.id)
    assert back is not None and back.state == State.WAITING and back.lines.count(q.RERUN) == 1
    again = q.claim(db, 1005.0, owner=ME)
    assert again is not None and again.id == job.id and again.attempts == 2 and again.owner == ME
    db.close()
