"""A course's bench on ``arena serve --bench FILE``: each person sees only their own bots' rows,
games and logs; an organiser sees every member; the bench's games never reach a public page
(its store is its own, and one that is the server's is refused at start)."""

from __future__ import annotations

import datetime as dt
import re
import sqlite3
import time
from pathlib import Path

import pytest
import trio

pytest.importorskip("starlette", reason="arena serve needs the serve extra: pip install 'palace-arena[serve]'")
pytest.importorskip("argon2", reason="accounts need the serve extra: pip install 'palace-arena[serve]'")

from arena.store.people import Role, account_by_id, claim_bot, create_invitation
from arena.tournament.bench import load_bench, run_bench
from arena.tournament.store import Store
from tests.test_bench import bench_file, launcher
from tests.checks import arena_here
from tests.test_serve import ServerProc
from tests.test_serve_accounts import sign_up


def _invite(store: Path, role: Role) -> str:
    db = sqlite3.connect(store, isolation_level=None)
    try:
        return create_invitation(db, role, uses=1, hours=1.0, now=time.time(), by=None, origin="test")
    finally:
        db.close()


def _own(store: Path, bot: str, person: str) -> None:
    db = sqlite3.connect(store, isolation_level=None)
    try:
        (uid,) = db.execute("SELECT id FROM accounts WHERE name=?", (person,)).fetchone()
        assert claim_bot(db, bot, account_by_id(db, uid), taken=False, now=time.time(), origin="test")
    finally:
        db.close()


def test_each_member_sees_only_their_own_bench_games(tmp_path: Path) -> None:
    path = bench_file(tmp_path, deals=1)
    bench = load_bench(path)
    db = Store(bench.store)
    trio.run(lambda: run_bench(bench, db, now=dt.datetime.now(dt.timezone.utc), launcher=launcher()))
    game_of = {m: db.games(tournament=f"{bench.name}/{m}", limit=1)[0]["id"] for m in ("ann@1.0", "bob@1.0")}
    db.close()
    store = tmp_path / "data" / "arena.sqlite"
    store.parent.mkdir()
    Store(store).close()
    # refused in this process (a refused server as a real process: tests/test_club_default.py's)
    code, _, err = arena_here("serve", "--store", str(tmp_path / "s.sqlite"), "--port", "0", "--bench", str(path))
    assert code == 2 and "its store is the server's" in err and "Traceback" not in err
    server = ServerProc(store, "--bench", str(path))
    try:
        people = {}
        for person, role in (("ann", Role.MEMBER), ("bob", Role.MEMBER), ("teach", Role.ORGANISER)):
            people[person], status, _ = sign_up(server, _invite(store, role), person)
            assert status == 303
        _own(store, "ann", "ann")
        _own(store, "bob", "bob")
        page_url = f"/benches/{bench.name}"

        def games_url(m: str) -> str:
            return f"/benches/{bench.name}/games/{game_of[m]}"

        status, _, body = server.get(page_url)  # nobody signed in
        assert status == 403 and "ann@1.0" not in body.decode()
        assert server.get(games_url("ann@1.0"))[0] == 403
        for me, other in (("ann@1.0", "bob@1.0"), ("bob@1.0", "ann@1.0")):
            browser = people[me.split("@")[0]]
            status, _, page = browser.request("GET", page_url)
            assert status == 200 and me in page and other not in page, page
            assert re.search(rf"<td>{re.escape(me)}</td><td>6</td><td>[\d.]+</td>", page)  # 3 references x 2 seatings
            assert "2 members" in page and "strong@1.0" in page and "deadline" in page
            assert game_of[me] in page and game_of[other] not in page
            status, _, game = browser.request("GET", games_url(me))
            assert status == 200 and 'id="replay-data"' in game
            status, _, game = browser.request("GET", games_url(other))
            assert status == 404 and other not in game
        status, _, page = people["teach"].request("GET", page_url)
        assert status == 200 and "ann@1.0" in page and "bob@1.0" in page and game_of["bob@1.0"] in page
        assert people["teach"].request("GET", games_url("bob@1.0"))[0] == 200
        assert server.get(f"/games/{game_of['ann@1.0']}")[0] == 404  # never in the server's own store
        assert server.get("/benches/nothing")[0] == 404
        path.write_text(path.read_text().replace('"bots/ann"', '"bots/gone"'))  # the organiser breaks the file
        status, _, page = people["ann"].request("GET", page_url)
        assert status == 503 and "cannot be read now" in page and str(tmp_path) not in page and "gone" not in page
    finally:
        server.stop()
