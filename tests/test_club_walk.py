"""Issue #36's "done when", walked over HTTP against one real ``arena serve``: a class of 20 joins
by one invitation; its members upload from the browser form or (one of them, as a CI job would)
with ``arena submit --server`` and a token from ``ARENA_TOKEN``, read their own bot's lines and
nobody else's, cannot touch anyone else's bot, and are told when their bot is suspended and why;
the admin sees every write in the audit and undoes the suspension. (The store surviving a kill -9
mid-queue is tests/test_serve_queue.py's, each job run exactly once; every write route refusing
the wrong person is tests/test_serve_accounts.py's and tests/test_serve_admin.py's, from the
route table.)

Four of the class do all this over HTTP; the other sixteen join in the store, through the same
invitation (its 21st sign-up, over HTTP, is refused), and own their bots there, so that their games
are the four's neighbours'. What a fifth member would do repeats the four's path: each sign-up is
an argon2 hash (64 MiB, about a quarter of a CPU second) and each upload an unpacking worker and a
check."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import time
import zlib
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="arena serve needs the serve extra: pip install 'palace-arena[serve]'")
pytest.importorskip("argon2", reason="accounts need the serve extra: pip install 'palace-arena[serve]'")

from tests.test_serve import ROOT, ServerProc, arena_cmd, build_store
from tests.test_serve_accounts import (FIXTURE, MANY_WRITES, _make_token, _upload, club_ladders, first_admin_code,
                                       invite, sign_up)
from tests.test_serve_admin import _member, _rows

CLASS = 20
ONLINE = 4  # the members who sign up, upload and read over HTTP; the rest join in the store
# this one submits from a terminal (a CI job), the other three from the browser; it is the first in
# the queue, so the test waits for its check and not for the three queued after it. One terminal
# shows the path (test_serve_accounts.py's token test runs it with the token's other sources)
FROM_CI = ("s00",)


def _submit_from_ci(server: ServerProc, store: Path, folder: Path, token: str, bot: str) -> subprocess.Popen:
    """``arena submit BOT --server URL`` with the token in ``ARENA_TOKEN``, as examples/ci/ runs it;
    returns once the server has taken the upload (the bot's name is its submitter's)."""
    folder.mkdir()
    (folder / "bot.toml").write_text(f'name = "{bot}"\nversion = "1.0"\nauthor = "teacher"\ncommand = ["false"]\n')
    env = dict(os.environ, ARENA_TOKEN=token, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(arena_cmd("submit", str(folder), "--ladder", "classic-2p", "--server", server.url),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    deadline = time.monotonic() + 120  # a bound should it hang, not a timing
    while not _rows(store, "SELECT 1 FROM jobs WHERE label LIKE ?", f"{bot}@%"):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0] if proc.poll() else "slow"
        time.sleep(0.05)
    return proc


def _join_in_store(store: Path, code: str, person: str) -> None:
    """``person`` signs up with ``code`` and owns ``person-bot``: the store calls their sign-up and
    upload make, without a password hash (they never log in)."""
    from arena.store.people import claim_bot, sign_up as store_sign_up
    db = sqlite3.connect(store, isolation_level=None)
    try:
        who = store_sign_up(db, code, person, "-", now=time.time(), origin="127.0.0.1")
        assert claim_bot(db, f"{person}-bot", who, taken=False, now=time.time(), origin="127.0.0.1")
    finally:
        db.close()


def _games(store: Path, students: list[str]) -> list[str]:
    """One stored game between each student's bot and the next one's, each seat's lines marked
    with its student's name; the game ids, in order."""
    from arena.tournament.store import Store
    old = sqlite3.connect(FIXTURE)
    base = json.loads(zlib.decompress(old.execute("SELECT log FROM game_logs WHERE game='mini-000001'").fetchone()[0]))
    old.close()
    db = Store(store)
    ids = []
    try:
        db.begin_tournament("class", {"format": "round-robin"}, len(students))
        for i, me in enumerate(students):
            seats = [f"{me}-bot@1.0", f"{students[(i + 1) % len(students)]}-bot@1.0"]
            record = json.loads(json.dumps(base))
            record["game_id"] = f"class-{i:03}"
            record["players"] = seats
            for step in record["steps"]:
                if isinstance(step.get("seat"), int):
                    step["stderr"] = [f"LINE-OF-{seats[step['seat']].split('-')[0]}"]
            record["stderr"] = [[], []]
            db.save_game("class", i, seats, record)
            ids.append(record["game_id"])
    finally:
        db.close()
    return ids


def test_a_class_of_twenty_on_one_server(tmp_path: Path) -> None:
    store = tmp_path / "data" / "arena.sqlite"
    build_store(store)
    admin_code = first_admin_code(store)
    # a class's ladder seats strangers: the club's store turns one_seat_per_author on, outside gVisor
    # with the kernel channels accepted by name
    server = ServerProc(store, "--allow-submit", *club_ladders(tmp_path / "ladders", "accept_kernel_channels = true"),
                        *MANY_WRITES)
    terminals: dict[str, subprocess.Popen] = {}
    try:
        root, status, _ = sign_up(server, admin_code, "teacher")
        assert status == 303
        code = invite(store, uses=CLASS)
        students = [f"s{i:02}" for i in range(CLASS)]
        people = {}
        for name in students[:ONLINE]:
            people[name], status, where = sign_up(server, code, name)
            assert status == 303, (name, where)
        for name in students[ONLINE:]:
            _join_in_store(store, code, name)
        _, status, page = sign_up(server, code, "one-too-many")
        assert status != 303 and "one-too-many" not in str(_rows(store, "SELECT name FROM accounts"))

        for i, (name, b) in enumerate(people.items()):
            if i == 1:  # a new version of the bot the terminal uploaded just before, by someone else (one
                # refusal shows it: test_serve_accounts.py's owner test holds the manifest's author and a ladder bot)
                status, _, page = _upload(b, f"{students[i - 1]}-bot", "1.1", name)
                assert status == 403 and "belongs to another account" in page, page[-1500:]
            if name in FROM_CI:
                terminals[name] = _submit_from_ci(server, store, tmp_path / name, _make_token(b, "ci", "submit"),
                                                  f"{name}-bot")
                continue
            status, headers, page = _upload(b, f"{name}-bot", "1.0", "teacher")  # the manifest's author is ignored
            assert status == 303 and headers["location"].startswith("/submit/"), (name, page[-1500:])
        uploaded = _rows(store, "SELECT a.name FROM jobs j JOIN accounts a ON 'account:' || a.id = j.submitter")
        assert sorted(uploaded) == [(n,) for n in students[:ONLINE]]
        owners = dict(_rows(store, "SELECT b.name, a.name FROM bot_owners b JOIN accounts a ON a.id=b.account"))
        assert owners == {f"{n}-bot": n for n in students}

        games = _games(store, students)  # each member's bot against the next one's
        for i, name in enumerate(students[:ONLINE]):
            b, mine, theirs = people[name], f"LINE-OF-{name}", f"LINE-OF-{students[(i + 1) % CLASS]}"
            text = "".join(b.request("GET", path)[2] for path in (f"/games/{games[i]}", f"/games/{games[i]}?as=0",
                                                                 f"/games/{games[i - 1]}", f"/bots/{name}-bot@1.0"))
            assert mine in text and theirs not in text and f"LINE-OF-{students[i - 1]}" not in text, name
            other = f"{students[(i + 1) % CLASS]}-bot"
            status, _, _ = b.post("/admin/bots", {"csrf": b.csrf("/account"), "ladder": "test-ladder",
                                                  "label": f"{other}@1.0", "act": "retire", "reason": "mine now"})
            assert status == 403
        assert _rows(store, "SELECT COUNT(*) FROM ladder_bot_status") == [(0,)]
        assert dict(_rows(store, "SELECT b.name, a.name FROM bot_owners b JOIN accounts a ON a.id=b.account")) == owners

        _member(store, "test-ladder", "s02-bot@1.0")
        status, _, _ = root.post("/admin/bots", {"csrf": root.csrf("/admin"), "ladder": "test-ladder",
                                                 "label": "s02-bot@1.0", "act": "suspend", "reason": "reads the deck"})
        assert status == 303
        told = people["s02"].request("GET", "/notifications")[2]
        assert "s02-bot@1.0 was suspended on ladder test-ladder: reads the deck" in told
        assert all("s02-bot" not in people[n].request("GET", "/notifications")[2] for n in ("s01", "s03"))
        admin_page = root.request("GET", "/admin")[2]
        assert "bot:test-ladder/s02-bot@1.0" in admin_page and "reads the deck" in admin_page
        status, _, _ = root.post("/admin/bots", {"csrf": root.csrf("/admin"), "ladder": "test-ladder",
                                                 "label": "s02-bot@1.0", "act": "reinstate"})
        assert status == 303 and _rows(store, "SELECT COUNT(*) FROM ladder_bot_status") == [(0,)]
        assert "s02-bot@1.0 is back in play on ladder test-ladder" in people["s02"].request("GET", "/notifications")[2]
        audit = _rows(store, "SELECT p.name, a.action, a.target FROM audit a JOIN accounts p ON p.id=a.account")
        assert {(n, "claim", f"bot:{n}-bot") for n in students} <= set(audit)
        assert [a for a in audit if a[0] == "teacher" and a[2].startswith("bot:")] == [
            ("teacher", "suspend", "bot:test-ladder/s02-bot@1.0"), ("teacher", "reinstate", "bot:test-ladder/s02-bot@1.0")]
        for name, proc in terminals.items():  # each prints the server's check report, as the web page shows it
            out = proc.communicate(timeout=600)[0]
            assert proc.returncode == 1 and "failed arena check on the server" in out, (name, out[-2000:])
        ran = _rows(store, "SELECT a.name, j.state FROM jobs j JOIN accounts a ON 'account:' || a.id = j.submitter "
                           f"WHERE a.name IN ({','.join('?' * len(FROM_CI))})", *FROM_CI)
        assert sorted(ran) == [(n, "done") for n in FROM_CI]
    finally:
        for proc in terminals.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        server.stop()
