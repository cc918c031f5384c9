"""A club server in a real browser (Chromium): the first admin signs up with the link printed at the
terminal, a member signs up with an invitation, logs out and in, uploads a version of their bot,
and reads their own bot's lines in a game's replay but not their opponent's; the admin suspends
the member, who can no longer log in. Writes only to temporary directories."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("selenium", reason="browser tests need selenium: pip install -r requirements/test.txt")
pytest.importorskip("argon2", reason="accounts need the serve extra: pip install 'palace-arena[serve]'")

from selenium.webdriver.common.by import By

from tests.checks import arena_here
from tests.test_serve import ServerProc
from tests.test_serve_accounts import _private_store, club_ladders
from tests.test_serve_browser import chrome, log_in_as_first_admin, wait  # noqa: F401 - chrome: the shared browser

PASSWORD = "correct horse battery"


@pytest.fixture(scope="module")
def club(tmp_path_factory):
    """The module's one club server: a store with a game of alice-bot's, the club's ladder file, and a
    queue looked at every 0.2 s (a held submission ends outside the server in the second test). Each
    test's people are its own; the first admin is whoever's test signs up first (the other logs in)."""
    base = tmp_path_factory.mktemp("club-browser")
    store = base / "data" / "arena.sqlite"
    gid = _private_store(store)
    server = ServerProc(store, "--allow-submit", *club_ladders(base / "ladders"), "--queue-look", "0.2")
    server.store, server.base, server.gid = store, base, gid  # type: ignore[attr-defined]
    yield server
    server.stop()


def _cli(*args: str) -> str:
    code, out, err = arena_here(*args)
    assert code == 0, err
    return out


def _give(store: Path, bot: str, person: str) -> None:
    import sqlite3
    import time

    from arena.store.people import account, claim_bot
    db = sqlite3.connect(store, isolation_level=None)
    try:
        who = account(db, person)
        assert who is not None
        claim_bot(db, bot, who, taken=False, now=time.time(), origin="test")
    finally:
        db.close()


def _fill(chrome: Any, **fields: str) -> None:
    for key, value in fields.items():
        box = chrome.find_element(By.ID, key)
        box.clear()
        box.send_keys(value)


def test_sign_up_log_in_upload_and_read_only_ones_own_lines(chrome: Any, club: ServerProc) -> None:
    store: Path = club.store  # type: ignore[attr-defined]
    log_in_as_first_admin(chrome, club)
    _log_out(chrome, club.url)

    invite = _cli("accounts", "invite", "--store", str(store), "--url", club.url, "--uses", "2")
    chrome.get(invite.split(": ", 1)[1].strip())
    _fill(chrome, name="root", password=PASSWORD)  # a taken name: refused, said so
    chrome.find_element(By.ID, "signup").click()
    assert "is taken" in wait(chrome, lambda d: d.find_element(By.ID, "error")).text
    _fill(chrome, name="alice", password=PASSWORD)
    chrome.find_element(By.ID, "signup").click()
    wait(chrome, lambda d: "alice" in d.find_element(By.ID, "who").text and "(member)" in d.find_element(By.ID, "who").text)
    _give(store, "alice-bot", "alice")  # the bot she played with before accounts: an admin's act
    chrome.find_element(By.ID, "logout").click()
    wait(chrome, lambda d: d.current_url.rstrip("/") == club.url)

    chrome.get(f"{club.url}/login")
    _fill(chrome, name="alice", password="not her password")
    chrome.find_element(By.ID, "login").click()
    assert "Wrong name or password" in wait(chrome, lambda d: d.find_element(By.ID, "error")).text
    _fill(chrome, name="alice", password=PASSWORD)
    chrome.find_element(By.ID, "login").click()
    wait(chrome, lambda d: "alice" in d.find_element(By.ID, "who").text)

    # the upload is what this test reads, not its check (the next test waits for one): a submission
    # running on another live server holds the queue, so no check (under gVisor where runsc works)
    # runs beside the rest of this test
    _hold_the_queue(store)
    archive = club.base / "alice-bot.zip"  # type: ignore[attr-defined]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("bot.toml", 'name = "alice-bot"\nversion = "1.1"\ncommand = ["false"]\n')
    archive.write_bytes(buf.getvalue())
    chrome.get(f"{club.url}/submit")
    assert not chrome.find_elements(By.NAME, "token")  # a person needs no server token
    chrome.find_element(By.NAME, "bot").send_keys(str(archive))
    chrome.find_element(By.ID, "submit-upload").click()
    wait(chrome, lambda d: "/submit/" in d.current_url, what="the submission's page")

    chrome.get(f"{club.url}/games/{club.gid}")  # type: ignore[attr-defined]
    page = chrome.page_source
    assert "SECRET-ERR-0" in page and "SECRET-INFO-0" in page  # her seat's lines (alice-bot is seat 0)
    assert "SECRET-ERR-1" not in page and "SECRET-INFO-1" not in page
    chrome.get(f"{club.url}/account")
    chrome.find_element(By.ID, "logout").click()
    wait(chrome, lambda d: d.current_url.rstrip("/") == club.url)
    chrome.get(f"{club.url}/games/{club.gid}")  # type: ignore[attr-defined]
    assert "SECRET-ERR-0" not in chrome.page_source

    chrome.get(f"{club.url}/login")  # the admin suspends alice, with a reason the audit keeps
    _fill(chrome, name="root", password=PASSWORD)
    chrome.find_element(By.ID, "login").click()
    wait(chrome, lambda d: "(admin)" in d.find_element(By.ID, "who").text)
    chrome.get(f"{club.url}/admin")
    row = chrome.find_element(By.CSS_SELECTOR, "tr[data-person='alice']")
    row.find_element(By.CSS_SELECTOR, "input.reason").send_keys("copied code")
    row.find_element(By.CSS_SELECTOR, "button.act").click()
    wait(chrome, lambda d: d.find_element(By.CSS_SELECTOR, "tr[data-person='alice'] .status").text == "suspended",
         what="alice suspended")
    assert "copied code" in chrome.find_element(By.ID, "audit").text
    chrome.get(f"{club.url}/account")
    chrome.find_element(By.ID, "logout").click()
    wait(chrome, lambda d: d.current_url.rstrip("/") == club.url)
    chrome.get(f"{club.url}/login")
    _fill(chrome, name="alice", password=PASSWORD)
    chrome.find_element(By.ID, "login").click()
    assert "suspended" in wait(chrome, lambda d: d.find_element(By.ID, "error")).text
    # the held submission and alice's behind it end together (one write: the queue never runs hers),
    # leaving the queue empty for the next test
    _mark(store, "UPDATE jobs SET state='done', outcome='refunded' WHERE state != 'done'")


def _mark(store: Path, sql: str, *args: object) -> None:
    import sqlite3
    db = sqlite3.connect(store, isolation_level=None, timeout=30)
    try:
        db.execute(sql, args)
    finally:
        db.close()


def _hold_the_queue(store: Path, job: str = "other") -> None:
    """Another person's submission running on a live server (this test's process, its heartbeat an
    hour ahead so no lease passes however slow the machine): the server leaves it alone, and the
    submissions after it wait (one runs at a time) until it is marked ended."""
    import time

    from arena.store.jobs import server_id
    _mark(store, "INSERT INTO jobs (id, submitter, ladder, label, filename, upload, state, attempts, created, "
                 "started, owner, heartbeat) VALUES (?, 'account:99', 'classic-2p', 'other@1', 'o.zip', "
                 "'/none', 'running', 1, ?, ?, ?, ?)", job, time.time(), time.time(), server_id(), time.time() + 3600)


def _log_in(chrome: Any, url: str, name: str) -> None:
    chrome.get(f"{url}/login")
    _fill(chrome, name=name, password=PASSWORD)
    chrome.find_element(By.ID, "login").click()
    wait(chrome, lambda d: name in d.find_element(By.ID, "who").text, what=f"{name} logged in")


def _log_out(chrome: Any, url: str) -> None:
    chrome.get(f"{url}/account")
    chrome.find_element(By.ID, "logout").click()
    wait(chrome, lambda d: d.current_url.rstrip("/") == url)


def test_the_queue_place_and_an_admins_suspension_reach_the_owner(chrome: Any, club: ServerProc, tmp_path: Path) -> None:
    """A member's upload waits behind a running submission and its page says so; once it has run,
    an admin suspends the member's bot on /admin and the member reads why on /notifications."""
    import time

    store: Path = club.store  # type: ignore[attr-defined]
    url = club.url
    log_in_as_first_admin(chrome, club)
    _log_out(chrome, url)
    chrome.get(_cli("accounts", "invite", "--store", str(store), "--url", url).split(": ", 1)[1].strip())
    _fill(chrome, name="carol", password=PASSWORD)
    chrome.find_element(By.ID, "signup").click()
    wait(chrome, lambda d: "carol" in d.find_element(By.ID, "who").text)

    _hold_the_queue(store, "held-for-carol")  # another person's submission is running: carol's waits behind it
    archive = tmp_path / "carol-bot.zip"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("bot.toml", 'name = "carol-bot"\nversion = "1.0"\ncommand = ["false"]\n')
    archive.write_bytes(buf.getvalue())
    chrome.get(f"{url}/submit")
    chrome.find_element(By.NAME, "bot").send_keys(str(archive))
    chrome.find_element(By.ID, "submit-upload").click()
    wait(chrome, lambda d: "/submit/" in d.current_url, what="the submission's page")
    # read in one script: the page redraws its live parts, so an element found then read in two
    # round trips can be replaced between them (a stale element, seen under the parallel suite)
    shown = chrome.execute_script("return ['job-status', 'job-ahead'].map("
                                  "i => document.getElementById(i).innerText.trim())")
    assert shown == ["waiting", "1"]
    _mark(store, "UPDATE jobs SET state='done', outcome='placed' WHERE id='held-for-carol'")  # it ended

    # the page polls its own live part (data-poll): read it, never reload it (a reload every
    # tenth of a second while the queue's idle loop came round cost the server and the browser
    # a page each)
    wait(chrome, lambda d: d.find_element(By.ID, "job-status").text == "check failed", timeout=300,
         what="carol's submission ran")

    # carol-bot on the ladder (as a placement leaves it), suspended by the admin with a reason
    _mark(store, "INSERT INTO ladder_members VALUES ('classic-2p', 'carol-bot@1.0', 'carol-bot', '1.0', 'h', "
                 "'/none', 'submitted', 'p', ?)", time.time())
    _log_out(chrome, url)
    _log_in(chrome, url, "root")
    chrome.get(f"{url}/admin")
    row = chrome.find_element(By.CSS_SELECTOR, "#bots tr[data-bot='carol-bot@1.0']")
    assert "carol" in row.text
    row.find_element(By.CSS_SELECTOR, "input.reason").send_keys("plays far too slowly")
    row.find_element(By.CSS_SELECTOR, "button.suspend").click()
    wait(chrome, lambda d: "suspended" in d.find_element(By.CSS_SELECTOR, "#bots tr[data-bot='carol-bot@1.0'] .status").text)
    _log_out(chrome, url)
    _log_in(chrome, url, "carol")
    chrome.find_element(By.ID, "notifications-link").click()
    notes = wait(chrome, lambda d: d.find_element(By.ID, "notes")).text
    assert "carol-bot@1.0 was suspended on ladder classic-2p: plays far too slowly" in notes
    assert "carol-bot@1.0 failed arena check" in notes  # her submission's end, told too
    _log_out(chrome, url)
