"""The submission queue of a real ``arena serve``: killed with SIGKILL while a submission runs and
others wait, then started again, it finishes every submission exactly once; the place in the
queue is on the submission's page and in its JSON.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from functools import partial
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="arena serve needs the serve extra: pip install 'palace-arena[serve]'")
pytest.importorskip("argon2", reason="accounts need the serve extra: pip install 'palace-arena[serve]'")

from arena.serve.wake import Wake
from tests.checks import running, until
from tests.test_serve import ROOT, ServerProc, multipart, zip_bytes
from tests.test_serve_accounts import MANY_WRITES, Browser, invite, sign_up

# one_seat_per_author = false: the members' store is a club's, which would turn the rule on; these
# tests are of the queue, whose placements seat the starters as before. One deal a table: a
# placement's games are counted against its plan, whatever their number. The queue is what is
# tested, not the games: two players at most, so the entry check is one 2-seat game (not also a
# 4-seat one, four bots started), games end by 100 turns (random's went to a 400-turn stale draw),
# and a placement plays its games in the server's process (with a worker process per core, each
# of the three runs started two, each importing the arena)
MINI = ('rules = "powers"\nseats = 2\ndeals = 1\nbots = ["random", "lowest"]\ncheck_games = 1\n'
        'one_seat_per_author = false\nmax_turns = 100\nconcurrency = 1\n\n[options]\nmax_players = 2\n')


def starter_zip(name: str) -> bytes:
    """The Python starter under another name: a bot that passes the check and plays."""
    starter = ROOT / "examples" / "bots" / "python"
    files = {}
    for p in starter.rglob("*"):
        if p.is_file() and "__pycache__" not in p.parts:
            data = p.read_bytes()
            if p.name == "bot.toml":
                data = re.sub(rb'(?m)^name = "[^"]*"', f'name = "{name}"'.encode(), data)
            files[f"{name}/{p.relative_to(starter)}"] = data
    return zip_bytes(files)


def upload(b: Browser, name: str) -> str:
    body, ctype = multipart({"ladder": "mini", "csrf": b.csrf("/submit")}, (f"{name}.zip", starter_zip(name)))
    status, headers, page = b.request("POST", "/submit", body, {"Content-Type": ctype})
    assert status == 303, page[-2000:]
    return headers["location"]


def jobs(store: Path) -> list[tuple]:
    db = sqlite3.connect(store, timeout=30)
    try:
        return db.execute("SELECT id, label, state, outcome, phase, attempts FROM jobs ORDER BY created").fetchall()
    finally:
        db.close()


NAMES = ("ann", "ben")  # the people of the kill-mid-queue test, one submission each


def wait_for(what, timeout: float = 600, every: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := what():
            return found
        time.sleep(every)
    raise AssertionError("timed out")


def test_a_server_killed_mid_queue_finishes_every_submission_exactly_once(tmp_path: Path) -> None:
    (tmp_path / "ladders").mkdir()
    (tmp_path / "ladders" / "mini.toml").write_text(MINI)
    store = tmp_path / "data" / "arena.sqlite"
    store.parent.mkdir()
    args = ("--allow-submit", "--ladders", str(tmp_path / "ladders"), *MANY_WRITES)
    server = ServerProc(store, *args)
    try:
        assert b"No games yet" in server.get("/")[2]  # a fresh server, no store yet
        code = invite_after_start(server, store)
        # two submissions: the first runs (its check and placement take seconds of real bots' games)
        # while the second, uploaded at once behind it, waits; each more placement plays every member
        people = [sign_up(server, code, name)[0] for name in NAMES]
        locations = [upload(b, f"{name}-bot") for b, name in zip(people, NAMES)]
        # the queue's place, on the page and in the JSON, while the first runs
        status, _, page = people[1].request("GET", locations[1])
        assert status == 200
        ahead = json.loads(people[1].request("GET", locations[1] + "?format=json")[2])
        assert ahead["status"] in ("waiting", "checking", "placing", "placed")
        if ahead["status"] == "waiting":
            assert ahead["ahead"] >= 1 and f'id="job-ahead">' in page
        # kill it while a submission runs and another waits
        wait_for(lambda: any(j[2] == "running" for j in jobs(store)) and any(j[2] == "waiting" for j in jobs(store)),
                 every=0.05)
        server.proc.kill()
        server.proc.wait()
    finally:
        server.stop()
    before = jobs(store)
    killed = [j for j in before if j[2] == "running"]
    assert len(killed) == 1 and any(j[2] == "waiting" for j in before), before

    again = ServerProc(store, *args)
    try:
        done = wait_for(lambda: (rows := jobs(store)) and all(j[2] == "done" for j in rows) and rows, every=0.2)
        assert [j[3] for j in done] == ["placed"] * 2, (done, again.stderr()[-3000:])
        attempts = {j[1]: j[5] for j in done}
        assert attempts == {j[1]: 2 if j[0] == killed[0][0] else 1 for j in done}  # only the killed one ran twice
        people[0].server = again  # a new port; the session key (and so the login) outlives the restart
        page = people[0].request("GET", f"/submit/{killed[0][0]}")[2]
        assert page.count("runs again from where it stopped") == 1 and 'data-status="placed"' in page
        # the report of a submission that ran once, start to end (upload, check, placement)
        once = next(j for j in done if j[0] != killed[0][0])
        owner = next(b for b, name in zip(people, NAMES) if once[1].startswith(f"{name}-bot@"))
        owner.server = again
        page = owner.request("GET", f"/submit/{once[0]}")[2]
        assert 'data-status="placed"' in page and "no faults" in page and "Placed: rank" in page, page[-3000:]
        assert page.count(f"checking {once[1]}") == 1  # announced once, not by the page and submit
        assert str(tmp_path) not in page and str(ROOT) not in page
        assert f'data-bot="{once[1]}"'.encode() in again.get("/ladders/mini")[2]
    finally:
        again.stop()
    db = sqlite3.connect(store)
    try:
        members = db.execute("SELECT label FROM ladder_members WHERE origin='submitted' ORDER BY label").fetchall()
        assert members == [("ann-bot@1.0.0",), ("ben-bot@1.0.0",)]
        told = db.execute("SELECT a.name, n.kind, n.link FROM notifications n JOIN accounts a ON a.id=n.account "
                          "ORDER BY a.name").fetchall()
        assert [(name, kind) for name, kind, _ in told] == [("ann", "placed"), ("ben", "placed")]
        assert {link for _, _, link in told} == {f"/submit/{j[0]}" for j in done}
        for (label,) in members:  # each placement played its planned games once
            planned, played = db.execute(
                "SELECT t.planned, COUNT(g.id) FROM tournaments t LEFT JOIN games g ON g.tournament=t.id "
                "WHERE t.id=? GROUP BY t.id", (f"ladder:mini:placement:{label}",)).fetchone()
            assert played == planned
    finally:
        db.close()
    assert [p for p in (store.parent / "uploads").iterdir() if p.is_dir()] == []


def invite_after_start(server: ServerProc, store: Path) -> str:
    """An invitation for the test's people, made once the fresh server's store exists."""
    server.get("/")
    if not store.exists():
        from arena.tournament.store import Store
        Store(store).close()
    return invite(store, uses=len(NAMES))


def test_the_queue_runner_outlives_an_error_of_the_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A locked or broken store while claiming is logged and tried again; it does not end the server."""
    import sqlite3 as sq
    from types import SimpleNamespace

    import trio

    from arena.serve import submit
    from arena.store import jobs as q
    from arena.tournament.store import Store

    class Stop(BaseException):
        pass

    store = tmp_path / "data" / "arena.sqlite"
    Store(store).close()
    calls: list[float] = []

    def claim(db, now, max_running=1, *, owner):  # type: ignore[no-untyped-def]
        calls.append(now)
        if len(calls) == 1:
            raise sq.OperationalError("database is locked")
        raise Stop()

    monkeypatch.setattr(q, "claim", claim)
    monkeypatch.setattr(submit, "QUEUE_RETRY_S", 0.0)
    app = SimpleNamespace(state=SimpleNamespace(options=SimpleNamespace(store=store, queue_look_s=5.0), queue_wake=None, running={},
                                                outbox_wake=Wake()))

    async def main() -> None:
        app.state.queue_wake = Wake()
        await submit.run_queue(app)  # type: ignore[arg-type]

    with pytest.raises(Stop):
        trio.run(main)
    assert len(calls) == 2  # claimed again after the error


def test_one_jobs_failure_ends_that_job_and_the_queue_runs_the_next(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A job whose submitter's account was removed by hand (the sqlite3 shell leaves foreign keys
    off) ends, with nobody told, instead of ending the server on ``FOREIGN KEY constraint failed``;
    a job whose run raises an error of the arena is refunded and its owner told; the job behind
    each still runs, and every job ends once."""
    from types import SimpleNamespace

    import trio

    from arena.serve import submit
    from arena.store import jobs as q
    from arena.store import notes, people
    from arena.store.jobs import Job, Limits
    from arena.tournament.store import Store

    store = tmp_path / "data" / "arena.sqlite"
    Store(store).close()
    db = sqlite3.connect(store, isolation_level=None, timeout=30)
    now = time.time()
    code = people.create_invitation(db, people.Role.MEMBER, uses=2, hours=1, now=now, by=None, origin="test")
    gone = people.sign_up(db, code, "gone", "-", now=now, origin="test")
    kept = people.sign_up(db, code, "kept", "-", now=now, origin="test")
    for i, (jid, who) in enumerate((("a", gone), ("b", kept), ("c", kept))):
        q.enqueue(db, Job(jid, f"account:{who.id}", "club", f"{jid}@1", f"{jid}.zip", f"/none/{jid}"), Limits(),
                  now + i)
    db.execute("DELETE FROM accounts WHERE id=?", (gone.id,))  # by hand: foreign keys are off here
    ran: list[str] = []

    async def run(app: object, job: q.Job, *_: object) -> q.Outcome:
        ran.append(job.id)
        if job.id == "b":
            raise RuntimeError("the arena broke")  # not the bot's fault, and not caught by the run itself
        return q.Outcome.PLACED

    monkeypatch.setattr(submit, "_run_job", run)
    app = SimpleNamespace(state=SimpleNamespace(options=SimpleNamespace(store=store, queue_look_s=5.0), queue_wake=None, running={},
                                                outbox_wake=Wake()))

    def ended() -> bool:  # jobs run one at a time, in order: the last one's end is the queue's
        return (job := q.get(db, "c")) is not None and job.done

    async def main() -> None:
        app.state.queue_wake = Wake()
        with trio.fail_after(120):  # a bound should it hang, not a timing
            async with trio.open_nursery() as nursery:
                nursery.start_soon(submit.run_queue, app)
                while not ended():
                    await trio.sleep(0.01)
                nursery.cancel_scope.cancel()

    trio.run(main)
    assert ran == ["a", "b", "c"]
    outcomes = {j: q.get(db, j).outcome for j in "abc"}  # type: ignore[union-attr]
    assert outcomes == {"a": q.Outcome.PLACED, "b": q.Outcome.REFUNDED, "c": q.Outcome.PLACED}
    told = sorted((n.kind, n.link) for n in notes.notes(db, kept.id))
    assert told == [(notes.Kind.PLACED, "/submit/c"), (notes.Kind.REFUNDED, "/submit/b")]
    assert db.execute("SELECT COUNT(*) FROM notifications WHERE account=?", (gone.id,)).fetchone()[0] == 0
    db.close()


def test_an_idle_server_starts_a_queued_job_and_posts_its_notice_at_once(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """What an upload does once unpacked (:func:`submit.queue_job`) starts its check on an idle
    server at once, and the job's end posts its owner's webhook at once: both workers' own looks
    are an hour apart here, so neither is what woke them."""
    from types import SimpleNamespace

    import trio

    from arena.serve import notify, submit
    from arena.store import jobs as q
    from arena.store.jobs import Job, Limits
    from arena.tournament.store import Store
    from tests.test_serve_notify import Receiver

    store = tmp_path / "data" / "arena.sqlite"
    receiver = Receiver()
    s = Store(store)
    s.db.execute("INSERT INTO accounts (name, password, role, created) VALUES ('ann', 'x', 'member', 0)")
    s.db.execute("INSERT INTO webhooks VALUES (1, ?, 'k', 0)", (receiver.url,))
    s.close()
    ran: list[str] = []

    async def record(app: object, job: q.Job, *_: object) -> q.Outcome:
        ran.append(job.id)
        return q.Outcome.PLACED

    monkeypatch.setattr(submit, "_run_job", record)
    options = SimpleNamespace(store=store, local_webhooks=True, webhook_timeout_s=10.0, queue_look_s=3600.0)
    app = SimpleNamespace(state=SimpleNamespace(options=options, running={}, queue_wake=Wake(), outbox_wake=Wake()))

    async def main() -> None:
        async with running(partial(submit.run_queue, app), partial(notify.deliverer, app, 3600.0)):  # an hour's looks
            await until(lambda: app.state.queue_wake.sleeping and app.state.outbox_wake.sleeping)  # both idle
            await submit.queue_job(app, Job("j", "account:1", "club", "b@1", "b.zip", "/none/j"), Limits())
            await until(lambda: receiver.got)

    try:
        trio.run(main)
    finally:
        receiver.close()
    assert ran == ["j"]
    sent = json.loads(receiver.got[0][1])
    assert (sent["kind"], sent["link"]) == ("placed", "/submit/j")


def test_a_running_jobs_heartbeat_is_renewed_until_another_server_took_it(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """While a job runs its server renews the heartbeat (so the lease never passes on a live server);
    a server stopped mid-job puts it back; a server whose job another server took back (it stalled
    past the lease) stops it and writes nothing. On trio's fake clock: no real waiting."""
    from types import SimpleNamespace

    import trio
    import trio.testing

    from arena.serve import submit
    from arena.store import jobs as q
    from arena.store.jobs import Job, Limits
    from arena.tournament.store import Store

    store = tmp_path / "data" / "arena.sqlite"
    Store(store).close()
    db = sqlite3.connect(store, isolation_level=None, timeout=30)
    q.enqueue(db, Job("j", "token", "club", "b@1", "b.zip", "/up/j"), Limits(), 0.0)
    job = q.claim(db, 0.0, owner=q.server_id())
    assert job is not None and job.heartbeat == 0.0
    app = SimpleNamespace(state=SimpleNamespace(options=SimpleNamespace(store=store), running={}, outbox_wake=Wake()))

    def run(work: object, stop_after: float | None = None) -> None:
        """run_job with ``work`` as the check and placement, stopped after ``stop_after`` fake seconds;
        with none, on the real clock and beats 10 ms apart, it must end by itself."""
        async def main() -> None:
            if stop_after is None:
                with trio.fail_after(60):  # a bound should it hang, not a timing
                    await submit.run_job(app, job)  # type: ignore[arg-type]
            else:
                with trio.move_on_after(stop_after):
                    await submit.run_job(app, job)  # type: ignore[arg-type]
        monkeypatch.setattr(submit, "_run_job", work)
        trio.run(main, clock=None if stop_after is None else trio.testing.MockClock(autojump_threshold=0))

    def renewed() -> float:
        """The job's heartbeat in the store, once renewed (waited for on the real clock: the
        renewal is written from a thread, which the fake clock does not wait for)."""
        with sqlite3.connect(store, timeout=30) as own:
            for _ in range(6000):
                beat = own.execute("SELECT heartbeat FROM jobs WHERE id='j'").fetchone()[0]
                if beat > 0.0:
                    return beat
                time.sleep(0.01)
        return 0.0

    async def slow_job(*_: object) -> q.Outcome:  # a check and placement that last beyond a beat
        await trio.sleep(q.HEARTBEAT_S + 1)
        assert await trio.to_thread.run_sync(renewed) > 0.0, "no heartbeat while the job ran"
        return q.Outcome.PLACED

    async def endless(*_: object) -> q.Outcome:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    run(slow_job, stop_after=1000.0)
    done = q.get(db, "j")
    assert done is not None and done.outcome == q.Outcome.PLACED and done.heartbeat > 0.0  # type: ignore[operator]

    db.execute("UPDATE jobs SET state='running', outcome='', heartbeat=0.0 WHERE id='j'")
    run(endless, stop_after=2 * q.HEARTBEAT_S)  # the server is stopped (Ctrl-C) while the job runs
    back = q.get(db, "j")
    assert back is not None and back.state == q.State.WAITING and back.owner == ""  # put back as it was

    db.execute("UPDATE jobs SET state='running', owner='another', heartbeat=1.0 WHERE id='j'")  # taken back
    monkeypatch.setattr(q, "HEARTBEAT_S", 0.01)
    run(endless)  # ends by itself at its next beat
    taken = q.get(db, "j")
    assert taken is not None and (taken.state, taken.owner, taken.heartbeat) == (q.State.RUNNING, "another", 1.0)
    db.close()


def test_an_idle_server_takes_back_the_job_of_a_server_that_died_beside_it(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A server that started while another ran a job does not wait for its own restart: once that
    job's lease has passed, its idle runner puts it back and runs it (the second attempt)."""
    from types import SimpleNamespace

    import trio
    import trio.testing

    from arena.serve import submit
    from arena.store import jobs as q
    from arena.tournament.store import Store

    store = tmp_path / "data" / "arena.sqlite"
    Store(store).close()
    ran: list[tuple[str, int]] = []

    async def record(app: object, job: q.Job, *_: object) -> q.Outcome:
        ran.append((job.id, job.attempts))
        return q.Outcome.PLACED

    monkeypatch.setattr(submit, "_run_job", record)
    app = SimpleNamespace(state=SimpleNamespace(options=SimpleNamespace(store=store, queue_look_s=5.0), queue_wake=None, running={},
                                                outbox_wake=Wake()))

    async def main() -> None:
        app.state.queue_wake = Wake()
        with trio.fail_after(120):  # a bound should it hang, not a timing
            async with trio.open_nursery() as nursery:
                nursery.start_soon(submit.run_queue, app)
                while not app.state.queue_wake.sleeping:  # started and idle; then the other server's
                    await trio.sleep(0.01)                # job goes silent
                db = sqlite3.connect(store, isolation_level=None, timeout=30)
                db.execute("INSERT INTO jobs (id, submitter, ladder, label, filename, upload, state, attempts, "
                           "created, started, owner, heartbeat) VALUES ('j', 'token', 'club', 'b@1', 'b.zip', "
                           "'/none', 'running', 1, 0, 0, 'another-boot/1/1/1', ?)", (time.time() - q.LEASE_S - 1,))
                db.close()
                app.state.queue_wake.set()  # the idle runner's next look (every queue_look_s, or at once here)
                while not ran or not app.state.queue_wake.sleeping:
                    await trio.sleep(0.01)  # until it ran the job and is idle again
                nursery.cancel_scope.cancel()

    trio.run(main)
    assert ran == [("j", 2)]


def test_a_starting_server_removes_old_leftover_uploads_but_not_one_being_received(tmp_path: Path) -> None:
    """At start, an upload folder no job holds is a leftover, unless it is younger than the lease:
    then another server on the store may be unpacking it, its job not added yet."""
    import os

    from arena.serve import submit
    from arena.store import jobs as q
    from arena.store.jobs import Job, Limits
    from arena.tournament.store import Store

    store = tmp_path / "data" / "arena.sqlite"
    Store(store).close()
    uploads = submit.private_copy_dir(store)
    old, fresh, held = (uploads / name for name in ("old", "fresh", "held"))
    for folder in (old, fresh, held):
        (folder / "bot").mkdir(parents=True)
    long_ago = time.time() - 2 * q.LEASE_S
    os.utime(old, (long_ago, long_ago))
    os.utime(held, (long_ago, long_ago))
    db = sqlite3.connect(store, isolation_level=None, timeout=30)
    q.enqueue(db, Job("held", "token", "club", "b@1", "b.zip", str(held / "bot")), Limits(), 0.0)
    submit._recover(db, uploads, q.server_id())
    db.close()
    assert sorted(p.name for p in uploads.iterdir() if p.is_dir()) == ["fresh", "held"]


def test_arena_submit_to_a_server_says_its_place_in_the_queue(tmp_path: Path) -> None:
    """`arena submit --server` prints how many submissions are ahead while it waits."""
    import os
    import subprocess

    from tests.test_serve import arena_cmd, build_store
    from tests.test_serve_accounts import _make_token, club_ladders
    store = tmp_path / "data" / "arena.sqlite"
    build_store(store)
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "bot.toml").write_text('name = "queued-bot"\nversion = "1.0"\ncommand = ["false"]\n')
    # the other submission ends outside the server: its queue's next look (--queue-look) sees it
    server = ServerProc(store, "--allow-submit", *club_ladders(tmp_path / "ladders"), *MANY_WRITES,
                        "--queue-look", "0.2")
    try:
        alice, _, _ = sign_up(server, invite(store), "alice")
        token = _make_token(alice, "terminal", "submit")
        from arena.store.jobs import server_id
        db = sqlite3.connect(store, isolation_level=None, timeout=30)  # another person's submission runs, on a
        db.execute("INSERT INTO jobs (id, submitter, ladder, label, filename, upload, state, attempts, created, "
                   "owner, heartbeat) VALUES ('other', 'account:99', 'classic-2p', 'other@1', 'o.zip', '/none', "
                   "'running', 1, 0, ?, ?)", (server_id(), time.time() + 3600))  # live server (this process),
        # its heartbeat an hour ahead: no lease passes at the queue's looks, however slow the machine
        env = dict(os.environ, ARENA_TOKEN=token, PYTHONPATH=str(ROOT))
        proc = subprocess.Popen(arena_cmd("submit", str(folder), "--ladder", "classic-2p", "--server", server.url),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)

        def release() -> None:  # should the line never come, the submission still ends and the test fails
            other = sqlite3.connect(store, timeout=30)
            other.execute("UPDATE jobs SET state='done', outcome='placed' WHERE id='other'")
            other.commit()
            other.close()
        import threading
        watchdog = threading.Timer(300, release)
        watchdog.start()
        try:
            lines = []
            for line in proc.stdout:  # type: ignore[union-attr]
                lines.append(line)
                if "in the queue" in line:
                    break
            assert lines and lines[-1].strip() == "waiting: 1 submission(s) ahead in the queue", lines
            db.execute("UPDATE jobs SET state='done', outcome='placed' WHERE id='other'")
            rest = proc.stdout.read()  # type: ignore[union-attr]
            assert proc.wait(timeout=600) == 1 and "failed arena check on the server" in rest, rest
        finally:
            watchdog.cancel()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            db.close()
    finally:
        server.stop()
