"""Pages that cost nothing when nothing changed: the store's version in one query, pages kept per
version and per cookie, ETag and 304, gzip, hashed static names; on the middleware alone and on
a real ``arena serve``."""

from __future__ import annotations

import json
import os

import gzip
import re
import time
from pathlib import Path

import pytest
import trio

from arena.serve.cache import HttpCache, StoreVersion
from arena.tournament.store import Store

from .test_serve import ServerProc, build_store, fake_record


# --------------------------------------------------------------------------- the middleware alone

def call(app, path: str, headers: dict[str, str] | None = None, method: str = "GET",
         client: tuple[str, int] = ("127.0.0.1", 40000)) -> tuple[int, dict, bytes]:
    """One request through an ASGI app, on trio; the status, headers (lower-case) and body."""
    path, _, query = path.partition("?")
    scope = {"type": "http", "method": method, "path": path, "query_string": query.encode(), "client": client,
             "headers": [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]}
    out: dict = {"body": b""}

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        if message["type"] == "http.response.start":
            out["status"] = message["status"]
            out["headers"] = {k.decode(): v.decode() for k, v in message["headers"]}
        else:
            out["body"] += message.get("body", b"")

    trio.run(app, scope, receive, send)
    return out["status"], out["headers"], out["body"]


class Page:
    """A toy app: counts its renders; the body names the path, the cookie and a render number."""

    def __init__(self, size: int = 2000, set_cookie: bool = False, stable: bool = False):
        self.renders = 0
        self.stable = stable
        self.size = size
        self.set_cookie = set_cookie

    async def __call__(self, scope, receive, send) -> None:
        self.renders += 1
        cookie = dict(scope["headers"]).get(b"cookie", b"-")
        body = b"<p>%s %s %d</p>" % (scope["path"].encode(), cookie, 0 if self.stable else self.renders) + b"x" * self.size
        headers = [(b"content-type", b"text/html; charset=utf-8")]
        if self.set_cookie:
            headers.append((b"set-cookie", b"s=1"))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})


class FixedVersion:
    def __init__(self) -> None:
        self.value: tuple | None = (1,)

    def current(self) -> tuple | None:
        return self.value

    def of(self, path: str, query: bytes = b"") -> tuple | None:
        return self.value


def test_a_page_is_built_once_per_version_and_revalidates_with_304() -> None:
    page, version = Page(), FixedVersion()
    app = HttpCache(page, version)
    status, headers, body = call(app, "/ladders/x")
    assert status == 200 and headers["etag"] and headers["cache-control"] == "no-cache"
    assert call(app, "/ladders/x")[2] == body and page.renders == 1
    status, again, body304 = call(app, "/ladders/x", {"If-None-Match": headers["etag"]})
    assert (status, body304, again["etag"]) == (304, b"", headers["etag"])
    version.value = (2,)  # a game was stored
    status, fresh, _ = call(app, "/ladders/x", {"If-None-Match": headers["etag"]})
    assert status == 200 and page.renders == 2 and fresh["etag"] != headers["etag"]


def test_a_page_is_kept_per_cookie() -> None:
    page = Page()
    app = HttpCache(page, FixedVersion())
    mine = call(app, "/bots/a", {"Cookie": "session=alice"})[2]
    theirs = call(app, "/bots/a", {"Cookie": "session=bob"})[2]
    anonymous = call(app, "/bots/a")[2]
    assert b"alice" in mine and b"alice" not in theirs and b"alice" not in anonymous and page.renders == 3


def test_a_response_that_sets_a_cookie_passes_untouched_and_is_not_kept() -> None:
    page = Page(set_cookie=True)
    app = HttpCache(page, FixedVersion())
    status, headers, _ = call(app, "/")
    call(app, "/")
    assert status == 200 and "etag" not in headers and page.renders == 2


def test_gzip_when_asked_and_the_same_body() -> None:
    app = HttpCache(Page(), FixedVersion())
    _, plain_headers, plain = call(app, "/games")
    _, headers, packed = call(app, "/games", {"Accept-Encoding": "gzip, br"})
    assert headers["content-encoding"] == "gzip" and "content-encoding" not in plain_headers
    assert gzip.decompress(packed) == plain and int(headers["content-length"]) == len(packed) < len(plain)
    assert headers["etag"] == plain_headers["etag"] and headers["vary"] == "Accept-Encoding"


def test_other_gets_get_an_etag_but_are_rendered_each_time() -> None:
    page = Page(stable=True)
    app = HttpCache(page, FixedVersion())
    _, headers, _ = call(app, "/play/abc/state")
    assert call(app, "/play/abc/state", {"If-None-Match": headers["etag"]})[0] == 304
    assert page.renders == 2
    assert "etag" not in call(app, "/play", method="POST")[1]


def test_kept_pages_are_bounded_in_bytes() -> None:
    page = Page(size=10_000)
    app = HttpCache(page, FixedVersion(), max_bytes=100_000)
    for i in range(200):  # a client asking for endless distinct queries
        call(app, f"/games?bot=b{i}")
    assert app.bytes <= 100_000 and len(app.pages) < 20


def test_the_store_version_is_one_query_until_a_write(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    build_store(path)
    version = StoreVersion(path)
    first = version.current()
    statements: list[str] = []
    version._db.db.set_trace_callback(statements.append)
    assert [version.current() for _ in range(5)] == [first] * 5
    assert statements == ["PRAGMA data_version"] * 5
    db = Store(path)
    db.save_game(db.tournaments()[0]["id"], 999, ["alpha@1.0", "beta@2.0"],
                 fake_record("new-game", ["alpha@1.0", "beta@2.0"], [[0], [1]]))
    db.close()
    assert version.current() != first
    version.close()


def test_the_pages_version_moves_at_most_once_a_settle_and_then_catches_up(tmp_path: Path) -> None:
    """A ladder storing a game a second must not have every page built again for each: the
    version pages are kept by moves at most once every ``settle`` seconds, and a change held back
    is taken on the first look after that, with no further write."""
    path = tmp_path / "s.sqlite"
    build_store(path)
    now = [100.0]
    version = StoreVersion(path, settle=1.0, clock=lambda: now[0])
    first = version.current()
    tid = Store(path).tournaments()[0]["id"]

    def store_game(i: int) -> None:
        db = Store(path)
        db.save_game(tid, 900 + i, ["alpha@1.0", "beta@2.0"], fake_record(f"new-{i}", ["alpha@1.0", "beta@2.0"], [[0], [1]]))
        db.close()

    store_game(0)
    second = version.current()
    assert second != first  # the first change after a quiet spell: at once
    store_game(1)
    now[0] += 0.5
    assert version.current() == second  # held back: within a settle of the last move
    now[0] += 0.5
    third = version.current()  # a settle later: taken, though nothing was written meanwhile
    assert third not in (first, second) and third[0] == second[0] + 1
    now[0] += 5
    assert version.current() == third
    version.close()


def _two_ladders(path: Path) -> None:
    """The test ladder (alpha..delta), and a second ladder "other" whose members are epsilon and zeta."""
    build_store(path)
    db = Store(path)
    db.begin_tournament("ladder:other:b1", {"format": "round-robin", "rules": "classic", "seats": 2}, 100)
    for label, ladder in (("alpha@1.0", "test-ladder"), ("epsilon@1.0", "other"), ("zeta@1.0", "other")):
        db.db.execute("INSERT INTO ladder_members VALUES (?,?,?,?,'h','ref','initial','seed',0)",
                      (ladder, label, *label.split("@")))
    db.db.commit()
    db.close()


def _store_game(path: Path, tid: str, idx: int, seats: list[str]) -> None:
    db = Store(path)
    db.save_game(tid, idx, seats, fake_record(f"g-{tid}-{idx}", seats, [[0], [1]]))
    db.close()


def test_a_process_warms_the_rooms_first_pages_at_its_start_uncounted_and_kept(tmp_path: Path) -> None:
    """At its start a serving process builds the overview, each ladder's standings and each
    member's page once (``warm``), through the cache, so their first visitors are answered from
    kept pages; those builds are counted against no client (here one build a client, ever)."""
    from arena.serve import data
    from arena.serve.cache import warm, warm_paths
    from arena.serve.limits import BuildLimit, Rate
    path = tmp_path / "s.sqlite"
    _two_ladders(path)
    db = data.open_read(path)
    paths = warm_paths(db)
    db.db.close()
    assert {"/", "/ladders/test-ladder", "/ladders/other", "/bots/alpha@1.0", "/bots/epsilon@1.0",
            "/bots/zeta@1.0"} <= set(paths) and "/bots/beta@2.0" not in paths  # beta is no member
    page, once = Page(), Rate(per_s=1e-9, burst=1)
    app = HttpCache(page, StoreVersion(path, settle=0.0), builds=BuildLimit(once, once))
    assert trio.run(warm, app, path) == len(paths) == page.renders
    for visited in paths:
        assert call(app, visited)[0] == 200
    assert page.renders == len(paths)  # every first visitor answered from a kept page
    assert call(app, "/bots/beta@2.0")[0] == 200 and page.renders == len(paths) + 1  # the client's own build
    assert trio.run(warm, HttpCache(Page(), StoreVersion(tmp_path / "none.sqlite")), tmp_path / "none.sqlite") == 0


def test_a_game_of_one_ladder_keeps_every_other_ladders_pages(tmp_path: Path) -> None:
    """Each ladder's pages are kept by that ladder's own version and a bot's page by what it
    played: a game of ladder "other" builds none of the test ladder's pages again, nor the page of
    a bot that did not play it, and the reverse."""
    path = tmp_path / "s.sqlite"
    _two_ladders(path)
    version = StoreVersion(path, settle=0.0)
    page = Page()
    app = HttpCache(page, version)
    mine = ["/ladders/test-ladder", "/ladders/test-ladder/balance", "/bots/alpha@1.0", "/bots/alpha",
            "/bots/beta@2.0"]  # beta is no member of a ladder, and did not play
    theirs = ["/ladders/other", "/bots/epsilon@1.0", "/bots/zeta"]
    everything = ["/", "/games"]
    first = {p: call(app, p)[2] for p in mine + theirs + everything}
    assert page.renders == 10

    _store_game(path, "ladder:other:b1", 0, ["epsilon@1.0", "zeta@1.0"])
    assert {p: call(app, p)[2] for p in mine} == {p: first[p] for p in mine} and page.renders == 10
    for p in theirs + everything:
        assert call(app, p)[2] != first[p], p
    assert page.renders == 10 + len(theirs + everything)

    renders = page.renders
    _store_game(path, "ladder:test-ladder:seed", 700, ["alpha@1.0", "beta@2.0"])
    assert call(app, "/ladders/other")[2] == call(app, "/ladders/other")[2] and page.renders == renders
    assert call(app, "/ladders/test-ladder")[2] != first["/ladders/test-ladder"]
    assert call(app, "/bots/alpha@1.0")[2] != first["/bots/alpha@1.0"]
    assert call(app, "/bots/beta@2.0")[2] != first["/bots/beta@2.0"]
    assert call(app, "/bots/epsilon@1.0")[2] == call(app, "/bots/epsilon@1.0")[2] and page.renders == renders + 3
    version.close()


def test_a_game_and_the_game_list_are_kept_by_the_games_they_show(tmp_path: Path) -> None:
    """A stored game's page never changes and a game list moves with the games its filters match
    (any page of it) and its menus' values only: a stored game builds again the lists that match
    it, and no game's page; a game in a new tournament (a new menu value) builds every list again."""
    path = tmp_path / "s.sqlite"
    _two_ladders(path)
    version = StoreVersion(path, settle=0.0)
    page = Page()
    app = HttpCache(page, version)
    alphas = ["/games?bot=alpha", "/games?bot=alpha&page=2", "/games?bot=alpha&max_turns=5000"]
    others = ["/games?bot=gamma", "/games", "/games?page=2", "/games?ladder=test-ladder"]
    game = ["/games/test-ladder-0001"]
    first = {p: call(app, p)[1]["etag"] for p in alphas + others + game}
    assert page.renders == 8

    _store_game(path, "ladder:test-ladder:seed", 700, ["gamma@1.0", "beta@2.0"])
    now = {p: call(app, p)[1]["etag"] for p in alphas + others + game}
    assert [p for p in first if now[p] != first[p]] == others
    assert page.renders == 8 + len(others)

    _store_game(path, "ladder:test-ladder:seed", 701, ["beta@2.0", "alpha@1.0"])
    later = {p: call(app, p)[1]["etag"] for p in alphas + others + game}
    assert [p for p in now if later[p] != now[p]] == alphas + ["/games", "/games?page=2", "/games?ladder=test-ladder"]

    _store_game(path, "ladder:other:b1", 0, ["epsilon@1.0", "zeta@1.0"])  # no alpha, but new bots in the menu
    last = {p: call(app, p)[1]["etag"] for p in alphas + others + game}
    assert [p for p in later if last[p] != later[p]] == alphas + others

    db = Store(path)  # a ladder's next batch (hundreds an hour) is no new menu value: its ladder is listed
    db.begin_tournament("ladder:test-ladder:batch-0002", {"format": "batch"}, 12)
    db.close()
    _store_game(path, "ladder:test-ladder:batch-0002", 0, ["gamma@1.0", "beta@2.0"])
    batch = {p: call(app, p)[1]["etag"] for p in alphas + others + game}
    assert [p for p in last if batch[p] != last[p]] == others
    version.close()


def test_the_game_lists_menus_list_each_ladder_once_beside_the_real_tournaments(tmp_path: Path) -> None:
    """A club night stores a batch every dozen games: the game list's menus name each ladder once
    (choosing it lists all its batches' games) and the real tournaments, never a batch, and keep a
    batch named in the address (a link from its tournament's page) chosen."""
    from arena.serve import data
    path = tmp_path / "data" / "arena.sqlite"
    _two_ladders(path)
    db = Store(path)
    db.begin_tournament("ladder:other:b2", {"format": "batch"}, 12)
    db.begin_tournament("ladder:other-night:b1", {"format": "batch"}, 12)  # a ladder whose name extends another's
    db.begin_tournament("spring-cup", {"format": "rr"}, 1)
    db.save_game("spring-cup", 0, ["alpha@1.0", "beta@2.0"], fake_record("cup-0", ["alpha@1.0", "beta@2.0"], [[0], [1]]))
    db.save_game("ladder:other:b1", 0, ["zeta@1.0", "epsilon@1.0"], fake_record("b1-0", ["zeta@1.0", "epsilon@1.0"], [[0], [1]]))
    db.save_game("ladder:other:b2", 0, ["epsilon@1.0", "zeta@1.0"], fake_record("b2-0", ["epsilon@1.0", "zeta@1.0"], [[0], [1]]))
    db.save_game("ladder:other-night:b1", 0, ["zeta@1.0", "epsilon@1.0"], fake_record("n-0", ["zeta@1.0", "epsilon@1.0"], [[0], [1]]))
    db.close()
    read = data.open_read(path)
    try:
        choices = data.filter_choices(read)
    finally:
        read.db.close()
    assert choices["ladders"] == ["other", "other-night", "test-ladder"]
    assert choices["tournaments"] == ["spring-cup"]

    server = ServerProc(path)
    try:
        def menu(body: bytes, name: str) -> list[str]:
            select = re.search(rf'<select name="{name}">(.*?)</select>'.encode(), body, re.S)
            assert select, body
            return [m.decode() for m in re.findall(rb"<option[^>]*>([^<]*)</option>", select.group(1))]

        _, _, body = server.get("/games")
        assert menu(body, "ladder") == ["any", "other", "other-night", "test-ladder"]
        assert menu(body, "tournament") == ["any", "spring-cup"]
        _, _, body = server.get("/games?ladder=other")  # both its batches, not the ladder named after it
        assert b"2 game(s) match" in body and b"b1-0" in body and b"b2-0" in body and b"n-0" not in body
        assert b'<option selected>other</option>' in body
        _, _, body = server.get("/games?tournament=ladder:other:b2")
        assert b"1 game(s) match" in body and b'<option selected>ladder:other:b2</option>' in body
    finally:
        server.stop()


def test_a_ladder_version_moves_with_what_its_pages_show(tmp_path: Path) -> None:
    """Members, statuses, snapshots, seasons and pauses move their ladder's version only."""
    path = tmp_path / "s.sqlite"
    _two_ladders(path)
    version = StoreVersion(path, settle=0.0)
    version.current()
    before = dict(version.parts)
    writes = [
        "INSERT INTO ladder_members VALUES ('other','eta@1.0','eta','1.0','h','ref','submitted','p',1)",
        "INSERT INTO ladder_bot_status VALUES ('other','zeta@1.0','suspended',5,'faults','{}')",
        "UPDATE ladder_bot_status SET status='retired', since=6 WHERE label='zeta@1.0'",
        "INSERT INTO rating_snapshots (ladder, taken_at, games, bot, elo, lo, hi) VALUES ('other',1,1,'zeta@1.0',1,0,2)",
        "INSERT INTO ladder_pauses VALUES ('other', 1, 'night')",
    ]
    for sql in writes:
        db = Store(path)
        db.db.execute(sql)
        db.db.commit()
        db.close()
        version.current()
        assert version.parts["test-ladder"] == before["test-ladder"], sql
        assert version.parts["other"] != before["other"], sql
        before = dict(version.parts)
    assert version.of("/bots/zeta@1.0") != version.of("/bots/epsilon@1.0")
    assert set(version.tags()) == {"test-ladder", "other"}
    version.close()


def test_a_bots_page_moves_with_its_own_status_snapshots_and_owner_only(tmp_path: Path) -> None:
    """A bot's page is kept by what it shows of that bot: its status on a ladder, its rating
    snapshots, its name's registration and owner move its version and no other bot's."""
    path = tmp_path / "s.sqlite"
    _two_ladders(path)
    version = StoreVersion(path, settle=0.0)
    writes = [
        "INSERT INTO ladder_bot_status VALUES ('other','zeta@1.0','suspended',5,'faults','{}')",
        "UPDATE ladder_bot_status SET status='retired' WHERE label='zeta@1.0'",
        "INSERT INTO rating_snapshots (ladder, taken_at, games, bot, elo, lo, hi) VALUES ('other',1,1,'zeta@1.0',1,0,2)",
        "INSERT INTO bots VALUES ('zeta@2.0','zeta','2.0','h','{}','p',1)",
        "INSERT INTO bot_owners VALUES ('zeta', 1, 0)",
    ]
    db = Store(path)
    db.db.execute("INSERT INTO accounts (id, name, password, role, status, created) VALUES (1,'zed','','member','active',0)")
    db.db.commit()
    db.close()
    version.current()
    for sql in writes:
        zeta, epsilon = version.of("/bots/zeta@1.0"), version.of("/bots/epsilon@1.0")
        db = Store(path)
        db.db.execute(sql)
        db.db.commit()
        db.close()
        version.current()
        assert version.of("/bots/zeta@1.0") != zeta, sql
        assert version.of("/bots/epsilon@1.0") == epsilon, sql
    version.close()


def test_a_ladders_games_are_read_once_and_then_only_the_new_ones(tmp_path: Path, monkeypatch) -> None:
    """The standings' games kept in the process equal a full read after every change, and a build
    after a stored game reads that game alone (a removed game reads them all again)."""
    from arena.serve import data
    from arena.tournament.standings import read_games
    path = tmp_path / "s.sqlite"
    _two_ladders(path)
    prefix = "ladder:test-ladder:"
    read: list[tuple[int, int]] = []
    real = data.games_after

    def counted(db, prefix, after):
        rows = real(db, prefix, after)
        read.append((after, len(rows)))
        return rows

    monkeypatch.setattr(data, "games_after", counted)

    def check() -> None:
        db = data.open_read(path)
        try:
            assert data.ladder_games(db, prefix) == read_games(db, prefix=prefix)
        finally:
            db.db.close()

    check()
    assert read == [(0, 48)]
    _store_game(path, "ladder:test-ladder:seed", 700, ["alpha@1.0", "beta@2.0"])
    _store_game(path, "ladder:other:b1", 0, ["epsilon@1.0", "zeta@1.0"])
    check()
    assert read[1][0] >= 48 and read[1][1] == 1
    check()
    assert read[2][1] == 0
    db = Store(path)
    db.db.execute("DELETE FROM game_seats WHERE game='test-ladder-0003'")
    db.db.execute("DELETE FROM game_logs WHERE game='test-ladder-0003'")
    db.db.execute("DELETE FROM games WHERE id='test-ladder-0003'")
    db.db.commit()
    db.close()
    check()
    assert read[-1] == (0, 48)


def test_the_game_lists_menus_are_read_once_and_then_only_the_new_games(tmp_path: Path) -> None:
    """The menus' values kept in the process equal a full read after every change: a new game's
    bot and forfeit join them, and a removed game's unique bot leaves them (all read again)."""
    from arena.serve import data
    path = tmp_path / "s.sqlite"
    _two_ladders(path)

    def full(db) -> dict:
        q = lambda sql: [r[0] for r in db.db.execute(sql)]  # noqa: E731
        return {"ladders": sorted({t.split(":")[1] for t in q("SELECT id FROM tournaments WHERE id LIKE 'ladder:%'")}),
                "tournaments": q("SELECT id FROM tournaments WHERE id NOT LIKE 'ladder:%' ORDER BY created DESC"),
                "reasons": q("SELECT DISTINCT reason FROM games ORDER BY reason"),
                "faults": q("SELECT DISTINCT forfeit FROM game_seats WHERE forfeit IS NOT NULL ORDER BY forfeit"),
                "bots": q("SELECT DISTINCT bot FROM game_seats ORDER BY bot")}

    def check() -> dict:
        db = data.open_read(path)
        try:
            got = data.filter_choices(db)
            assert got == full(db)
            return got
        finally:
            db.db.close()

    assert "newbie@1.0" not in check()["bots"]
    db = Store(path)
    db.save_game("ladder:other:b1", 5, ["newbie@1.0", "zeta@1.0"],
                 fake_record("newbie-game", ["newbie@1.0", "zeta@1.0"], [[1], [0]], {"0": "crash"}))
    db.close()
    got = check()
    assert "newbie@1.0" in got["bots"] and "crash" in got["faults"] and "forfeit" in got["reasons"]
    db = Store(path)
    for table, column in (("game_seats", "game"), ("game_logs", "game"), ("games", "id")):
        db.db.execute(f"DELETE FROM {table} WHERE {column}='newbie-game'")
    db.db.commit()
    db.close()
    assert "newbie@1.0" not in check()["bots"]


def test_a_bots_games_are_read_once_and_then_only_the_new_ones(tmp_path: Path, monkeypatch) -> None:
    from arena.serve import data
    from arena.store import reads
    path = tmp_path / "s.sqlite"
    _two_ladders(path)
    read: list[int] = []
    real = reads.bot_results_after

    def counted(db, label, after):
        rows, total = real(db, label, after)
        read.append(len(rows))
        return rows, total

    monkeypatch.setattr(reads, "bot_results_after", counted)

    def check() -> None:
        db = data.open_read(path)
        try:
            full = [(json.loads(a), json.loads(b)) for a, b in db.db.execute(
                "SELECT seats, result FROM games WHERE id IN (SELECT game FROM game_seats WHERE bot='alpha@1.0') "
                "ORDER BY finished, id")]
            assert data.bot_results(db, "alpha@1.0") == full and full
        finally:
            db.db.close()

    check()
    first = read[-1]
    _store_game(path, "ladder:test-ladder:seed", 700, ["alpha@1.0", "beta@2.0"])
    _store_game(path, "ladder:other:b1", 0, ["epsilon@1.0", "zeta@1.0"])
    check()
    assert read[-1] == 1
    db = Store(path)
    gone = db.db.execute("SELECT game FROM game_seats WHERE bot='alpha@1.0' LIMIT 1").fetchone()[0]
    for table, column in (("game_seats", "game"), ("game_logs", "game"), ("games", "id")):
        db.db.execute(f"DELETE FROM {table} WHERE {column}=?", (gone,))
    db.db.commit()
    db.close()
    check()
    assert read[-1] == first  # read all again


# --------------------------------------------------------------------------- a real server

@pytest.fixture(scope="module")
def served(tmp_path_factory):
    store = tmp_path_factory.mktemp("cache") / "data" / "arena.sqlite"
    build_store(store)
    server = ServerProc(store)
    yield server, store
    server.stop()


PAGES = ["/", "/ladders/test-ladder", "/bots/alpha@1.0", "/games", "/games/test-ladder-0001",
         "/tournaments/ladder:test-ladder:seed"]


@pytest.mark.parametrize("path", PAGES)
def test_every_page_answers_304_when_nothing_changed(served, path: str) -> None:
    server, _ = served
    status, headers, body = server.get(path)
    assert status == 200 and headers["etag"]
    status, again, body = server.get(path, headers={"If-None-Match": headers["etag"]})
    assert (status, body) == (304, b"")
    assert again["content-security-policy"]  # the security headers ride on a 304 too


def test_pages_link_static_files_by_content_hash(served) -> None:
    server, _ = served
    page = server.get("/games/test-ladder-0001")[2].decode()
    links = re.findall(r'(?:href|src)="(/static/[^"]+)"', page)
    assert len(links) >= 4 and all(re.search(r"\.[0-9a-f]{10}\.(css|js)$", u) for u in links), links
    for url in links:
        status, headers, body = server.get(url)
        assert status == 200 and "immutable" in headers["cache-control"] and body
    assert server.get("/static/site.css")[1]["cache-control"] == "no-cache"
    assert server.get("/static/site.0000000000.css")[0] == 404


def test_a_stored_game_shows_at_once_and_changes_the_etag(served) -> None:
    server, store = served
    _, before, body = server.get("/games?bot=alpha")
    assert b"fresh-game" not in body
    db = Store(store)
    db.save_game("ladder:test-ladder:seed", 500, ["alpha@1.0", "gamma@1.0"],
                 fake_record("fresh-game", ["alpha@1.0", "gamma@1.0"], [[0], [1]]))
    db.close()
    status, after, body = server.get("/games?bot=alpha", headers={"If-None-Match": before["etag"]})
    assert status == 200 and b"fresh-game" in body and after["etag"] != before["etag"]


def test_a_game_list_shows_what_it_is_kept_by(served) -> None:
    """The list kept by its matching games and menus: a game of another bot in a new tournament
    leaves alpha's rows alone, but its menu of tournaments gains the new one at once."""
    server, store = served
    _, before, body = server.get("/games?bot=alpha")
    assert b"fresh-tour" not in body
    seen = json.loads(server.get("/health")[2])["store"]
    db = Store(store)
    db.begin_tournament("fresh-tour", {"format": "round-robin", "rules": "classic", "seats": 2}, 1)
    db.save_game("fresh-tour", 0, ["beta@2.0", "gamma@1.0"], fake_record("fresh-tour-0", ["beta@2.0", "gamma@1.0"], [[0], [1]]))
    db.close()
    deadline = time.monotonic() + 30  # a change within a settle of the last waits for the next look
    while json.loads(server.get("/health")[2])["store"] == seen:
        assert time.monotonic() < deadline, "the store's version never moved"
        time.sleep(0.2)
    status, after, body = server.get("/games?bot=alpha", headers={"If-None-Match": before["etag"]})
    assert status == 200 and b"<option>fresh-tour</option>" in body and b"fresh-tour-0" not in body


# --------------------------------------------------------------------------- several processes

def _children(pid: int) -> set[int]:
    out = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        out |= {int(c) for c in (task / "children").read_text().split()}
    return out


def test_several_processes_serve_one_store_and_all_stop(tmp_path: Path) -> None:
    store = tmp_path / "data" / "arena.sqlite"
    build_store(store)
    server = ServerProc(store, "--workers", "3")
    try:
        workers = _children(server.proc.pid)
        assert len(workers) == 3 and "3 processes" in "".join(server.banner)
        status, headers, body = server.get("/health")
        assert status == 200 and b'"status":"ok"' in body and headers["cache-control"] == "no-store"
        etags = {server.get("/ladders/test-ladder")[1]["etag"] for _ in range(12)}
        assert len(etags) == 1  # every process builds the same page for one version
    finally:
        server.stop()
    assert server.proc.returncode == 0
    assert not [p for p in workers if Path(f"/proc/{p}").exists()]


def test_several_processes_refuse_play_and_uploads(tmp_path: Path) -> None:
    import subprocess

    from .test_serve import arena_cmd
    out = subprocess.run(arena_cmd("serve", "--store", str(tmp_path / "s.sqlite"), "--port", "0", "--workers", "2",
                                   "--allow-play"), capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and out.stderr.startswith("error:") and "read-only" in out.stderr
    assert "Traceback" not in out.stderr


# --------------------------------------------------------------------------- fair under load

def test_buckets_refill_at_their_rate_per_client() -> None:
    from arena.serve.limits import Buckets, Rate
    now = [0.0]
    buckets = Buckets(Rate(per_s=2.0, burst=3), clock=lambda: now[0])
    assert [buckets.take("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert buckets.take("a") == pytest.approx(0.5) and buckets.take("b") == 0.0  # b has its own
    now[0] += 0.5
    assert buckets.take("a") == 0.0 and buckets.take("a") > 0


def test_buckets_forget_old_clients_past_their_bound() -> None:
    from arena.serve.limits import Buckets, Rate
    buckets = Buckets(Rate(per_s=1.0, burst=1), clock=lambda: 0.0, clients=100)
    for i in range(1000):  # a client from many addresses
        buckets.take(f"10.0.{i // 250}.{i % 250}")
    assert len(buckets.tokens) == 100


def test_page_builds_are_counted_before_they_run_and_kept_pages_are_free() -> None:
    """Per connection (a load generator's clients share one address), and per address above that."""
    from arena.serve.limits import BuildLimit, Rate
    page = Page()
    app = HttpCache(page, FixedVersion(), builds=BuildLimit(Rate(per_s=1.0, burst=2), Rate(per_s=1.0, burst=5),
                                                            clock=lambda: 0.0))
    assert [call(app, f"/games?page={i}")[0] for i in range(3)] == [200, 200, 429]
    assert page.renders == 2  # the refused build never ran
    assert [call(app, "/games?page=0")[0] for _ in range(20)] == [200] * 20  # kept: not counted
    other = ("127.0.0.1", 40001)  # another connection from the same address builds on its own count
    assert [call(app, f"/games?page={i}", client=other)[0] for i in range(3, 6)] == [200, 200, 429]
    third = ("127.0.0.1", 40002)  # ... until the address's own bound
    assert [call(app, f"/games?page={i}", client=third)[0] for i in range(6, 8)] == [200, 429]
    assert call(app, "/games?page=9", client=("10.0.0.2", 40000))[0] == 200  # another address: its own
    assert page.renders == 6


def test_writes_are_limited_per_client_but_moves_in_a_game_are_not() -> None:
    from arena.serve.limits import Buckets, Rate, WriteLimit
    page = Page()
    app = WriteLimit(page, Buckets(Rate(per_s=1.0, burst=2), clock=lambda: 0.0))
    statuses = [call(app, "/submit", method="POST")[0] for _ in range(3)]
    assert statuses == [200, 200, 429] and page.renders == 2
    status, headers, _ = call(app, "/submit", method="POST")
    assert status == 429 and int(headers["retry-after"]) >= 1
    assert [call(app, "/play/s1/act", method="POST")[0] for _ in range(5)] == [200] * 5
    assert call(app, "/games")[0] == 200  # reads are not writes


def test_serving_processes_stop_when_their_parent_is_killed(tmp_path: Path) -> None:
    import signal
    import time
    store = tmp_path / "data" / "arena.sqlite"
    build_store(store)
    server = ServerProc(store, "--workers", "2")
    workers = _children(server.proc.pid)
    server.proc.send_signal(signal.SIGKILL)
    server.proc.wait()
    def running(pid: int) -> bool:
        """Alive and not a zombie. Orphans go to the nearest subreaper: init, or this test process
        when an earlier test's tournament made it one; then it reaps them here."""
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False

    deadline = time.monotonic() + 30
    while [p for p in workers if running(p)] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(workers) == 2 and not [p for p in workers if running(p)]
    server.stop()


def test_a_serving_process_whose_parent_died_before_it_asked_to_die_with_it_leaves() -> None:
    """The death signal is asked for in the child, after the fork; a parent killed before that
    (a loaded machine may run the child late) sends none, and the child served on for good."""
    from arena.cli.serve import _die_with_parent
    for parent, expected in ((os.getpid(), 7), (os.getpid() + 1_000_000, 0)):  # the second: "not my parent"
        pid = os.fork()
        if pid == 0:
            try:
                _die_with_parent(parent)
            finally:
                os._exit(7)
        assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == expected


def test_a_stored_games_replay_is_made_once_across_store_versions(tmp_path: Path) -> None:
    """A stored game never changes: its replay is kept by game and finish time, so a store that
    moves every second does not replay every open game again; a missing log is looked for again."""
    from arena.serve import data
    build_store(tmp_path / "s.sqlite")
    db = data.open_read(tmp_path / "s.sqlite")
    made = []

    def make(value):
        return lambda: made.append(value) or value

    game = {"id": "test-ladder-0001", "finished": 100.0}
    try:
        assert data.replay_once(db, game, make("a")) == "a"
        Store(tmp_path / "s.sqlite").close()  # any write: the store's version is no part of the key
        assert data.replay_once(db, game, make("b")) == "a"
        assert data.replay_once(db, dict(game, finished=101.0), make("c")) == "c"  # stored again: made again
        other = {"id": "no-log-yet", "finished": 100.0}
        assert data.replay_once(db, other, make(None)) is None
        assert data.replay_once(db, other, make("d")) == "d"
        assert made == ["a", "c", None, "d"]
    finally:
        db.db.close()


def test_a_page_model_is_replaced_by_its_next_version_and_not_pushed_out_by_another_pages_versions() -> None:
    """The overview's model of each stored game takes one place, not one per version, so a bot
    page's model (built once, 0.1-0.35 s) stays kept while a ladder plays."""
    from arena.serve.app import PageCache
    cache, built = PageCache(size=4), []

    def make(key, version):
        return lambda: built.append((key, version)) or (key, version)

    assert cache.get(("bot", "a"), 1, make(("bot", "a"), 1)) == (("bot", "a"), 1)
    for version in range(1, 50):  # the overview, once per stored game
        assert cache.get(("home", 1), version, make(("home", 1), version)) == (("home", 1), version)
    assert cache.get(("bot", "a"), 1, make(("bot", "a"), 1)) == (("bot", "a"), 1)
    assert built.count((("bot", "a"), 1)) == 1 and len(cache.items) == 2
    assert cache.get(("bot", "a"), 2, make(("bot", "a"), 2)) == (("bot", "a"), 2)
    for n in range(4):
        cache.get(("game", n), 0, make(("game", n), 0))
    assert len(cache.items) == 4 and ("bot", "a") not in cache.items  # the least recently asked goes


def test_page_models_are_built_at_most_two_at_a_time(tmp_path: Path) -> None:
    """After a change of the store every open page is built again: two threads at a time, not one
    per request (forty threads share one interpreter and all finish late)."""
    import threading
    from types import SimpleNamespace

    from arena.serve.app import QUERY_THREADS, PageCache, query
    build_store(tmp_path / "s.sqlite")
    state = SimpleNamespace(options=SimpleNamespace(store=tmp_path / "s.sqlite"), cache=PageCache(),
                            version=SimpleNamespace(current=lambda: None))
    request = SimpleNamespace(app=SimpleNamespace(state=state))
    lock = threading.Condition()
    running, most = 0, 0

    def build(db) -> int:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
            lock.notify_all()
            lock.wait_for(lambda: running > QUERY_THREADS, timeout=0.5)  # a third would arrive now
            running -= 1
        return 1

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            for _ in range(6):
                nursery.start_soon(query, request, build)

    trio.run(main)
    assert QUERY_THREADS == 2 and 1 <= most <= QUERY_THREADS


def test_the_app_warms_its_store_at_its_start(tmp_path: Path, monkeypatch) -> None:
    """``build_app`` starts :func:`warm` on the store it serves, through the app itself, so a
    serving process built the room's first pages before its first visitor (the warm-up's own test
    above calls it directly; this one holds that the app starts it)."""
    import arena.serve.app
    from arena.serve.app import Options, build_app
    from arena.serve.cache import warm
    path = tmp_path / "s.sqlite"
    _two_ladders(path)
    started: list[tuple] = []

    async def spy(app, store):
        started.append((app, store, await warm(app, store)))

    monkeypatch.setattr(arena.serve.app, "warm", spy)

    async def main() -> None:
        with trio.fail_after(30):  # about 1 s; the bound only ends a failing run
            async with trio.open_nursery() as nursery:
                app = build_app(Options(store=path), nursery)
                while not started:
                    await trio.sleep(0.01)
                nursery.cancel_scope.cancel()
        assert started[0][0] is app and started[0][1] == path
        assert started[0][2] >= 6  # the overview, two ladders, three members: each built

    trio.run(main)
