"""Live streams under a fake clock: a client that stops reading is dropped after the stall
deadline without holding back the others, and a disconnect ends its stream at once."""

from __future__ import annotations

import json
from types import SimpleNamespace

import trio
import trio.testing

from arena.serve.live import EventStream, StoreFollower


class Version:
    """A store version the test moves by hand."""

    def __init__(self) -> None:
        self.value: tuple = (1,)
        self.parts: dict = {}

    def current(self) -> tuple:
        return self.value

    def tags(self) -> dict:
        return {}

    def look(self, after: int | None, limit: int) -> None:
        return None  # no ladder news: every event here is a move of the version

    def close(self) -> None:
        pass


def test_a_stalled_stream_is_closed_and_the_others_get_every_event() -> None:
    version = Version()
    follower = StoreFollower(version, interval=0.1)
    scope = {"type": "http", "app": SimpleNamespace(state=SimpleNamespace(follower=follower))}
    stream = EventStream(stall_s=2.0, keepalive_s=15.0)
    got: dict[str, list[bytes]] = {"reader": [], "stalled": [], "gone": []}
    ended: dict[str, float] = {}
    gone = trio.Event()

    def sender(name: str, takes: int):
        async def send(message: dict) -> None:
            if message["type"] == "http.response.body":
                if len(got[name]) >= takes:
                    await trio.sleep_forever()  # its buffers are full: the send never returns
                got[name].append(message["body"])
        return send

    async def receive_until(event: trio.Event | None):
        async def receive() -> dict:
            if event is None:
                await trio.sleep_forever()
            await event.wait()
            return {"type": "http.disconnect"}
        return receive

    async def client(name: str, takes: int, event: trio.Event | None) -> None:
        await stream(scope, await receive_until(event), sender(name, takes))
        ended[name] = trio.current_time()

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(follower.run)
            await trio.sleep(0.05)
            nursery.start_soon(client, "reader", 1000, None)
            nursery.start_soon(client, "stalled", 2, None)  # takes the hello and one event, then stops
            nursery.start_soon(client, "gone", 1000, gone)
            start = trio.current_time()
            for k in range(2, 8):
                version.value = (k,)
                await trio.sleep(1.0)
                if k == 3:
                    gone.set()
            assert "reader" not in ended
            assert ended["stalled"] - start < 2 + 2.5  # dropped a stall deadline after its send stuck
            assert ended["gone"] - start < 3  # its disconnect, at once
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    events = [b for b in got["reader"] if b.startswith(b"event: store")]
    assert len(events) == 6 and got["reader"][0].startswith(b"retry:")  # every version, none held back
    assert [b'"serial": %d' % k in e for k, e in enumerate(events, 2)] == [True] * 6  # 1: before the streams
    assert len(got["stalled"]) == 2


# --------------------------------------------------------------------------- the news in each event

def _ladder_store(path):
    from arena.tournament.store import Store
    db = Store(path)
    db.begin_tournament("ladder:club:batch-1", {"format": "batch", "rules": "classic", "seats": 2}, 12)
    db.begin_tournament("ladder:other:batch-1", {"format": "batch", "rules": "classic", "seats": 2}, 12)
    return db


def _store(db, k: int, seats: list[str], tid: str = "ladder:club:batch-1") -> str:
    from .test_serve import fake_record
    gid = f"g-{k}"
    assert db.save_game(tid, k, seats, fake_record(gid, seats, [[1], [0]]))
    return gid


def _news(follower: StoreFollower) -> dict:
    head, data, *rest = follower.event.split("\n")
    assert head == "event: store" and rest == ["", ""], follower.event  # one data line: a label cannot end it
    return json.loads(data.removeprefix("data: "))


def test_a_ladder_game_is_in_the_next_event_while_the_pages_version_waits_for_its_settle(tmp_path) -> None:
    """The count and the result a ladder's page shows come with the next look (0.5 s), not when the
    pages' version next moves (here an hour's settle): a page shows them without its own fetch."""
    from arena.serve.cache import StoreVersion
    from .test_serve import HOSTILE
    db = _ladder_store(tmp_path / "arena.sqlite")
    _store(db, 0, ["a@1", "b@1"])
    version = StoreVersion(tmp_path / "arena.sqlite", settle=3600.0, clock=trio.current_time)
    follower = StoreFollower(version, interval=0.5)
    seen: list[dict] = []

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(follower.run)
            await trio.sleep(0.1)  # the first look: where the games stand, no news
            assert _news(follower)["ladders"] == {"club": 1, "other": 0} and _news(follower)["latest"] == {}
            seen.append(_news(follower))
            for k, seats in enumerate([["a@1", "b@1"], [HOSTILE, "a@1"], ["b@1", "a@1"]], 1):
                serial, start = follower.serial, trio.current_time()
                _store(db, k, seats)
                assert await follower.wait(serial, 10.0) == serial + 1
                assert trio.current_time() - start <= 0.5  # the next look, not the settle's hour
                seen.append(_news(follower))
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    db.close()
    first = seen.pop(0)
    assert [n["ladders"]["club"] for n in seen] == [2, 3, 4]
    assert [n["latest"] for n in seen] == [{"club": [{"game": f"g-{k}", "places": [[s[1]], [s[0]]], "draw": False,
                                                      "out": []}]} for k, s in
                                           enumerate([["a@1", "b@1"], [HOSTILE, "a@1"], ["b@1", "a@1"]], 1)]
    # the pages' version moved with the first game (after a quiet spell), then waits out the settle
    assert first["version"] != seen[0]["version"] == seen[1]["version"] == seen[2]["version"]


def test_each_game_is_told_once_even_when_stored_between_the_counts_and_the_results(tmp_path, monkeypatch) -> None:
    """A look reads the ladders' counts, then the newest games: a game stored between the two reads
    is in the results before it is counted, and must not be told again at the next look."""
    from arena.serve.cache import StoreVersion
    from arena.store import reads
    db = _ladder_store(tmp_path / "arena.sqlite")
    _store(db, 0, ["a@1", "b@1"])
    read = reads.ladder_games_after
    between = [1000, 1001]  # games of another ladder, each stored inside one look

    def store_then_read(conn, after, limit):
        if between:
            _store(db, between.pop(0), ["b@1", "a@1"], "ladder:other:batch-1")
        return read(conn, after, limit)

    monkeypatch.setattr(reads, "ladder_games_after", store_then_read)
    version = StoreVersion(tmp_path / "arena.sqlite", settle=0.0, clock=trio.current_time)
    follower = StoreFollower(version, interval=0.5)
    told: list[str] = []

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(follower.run)
            await trio.sleep(0.1)
            serial = follower.serial
            for k in range(1, 4):
                _store(db, k, ["a@1", "b@1"])
                for _ in range(4):  # every event until the looks go quiet
                    new = await follower.wait(serial, 2.0)
                    if new != serial:
                        told.extend(g["game"] for games in _news(follower)["latest"].values() for g in games)
                    serial = new
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    db.close()
    assert sorted(told) == ["g-1", "g-1000", "g-1001", "g-2", "g-3"], told  # each once


def test_a_look_reads_only_the_rows_stored_since_the_last_one(tmp_path, monkeypatch) -> None:
    """Games of no ladder are never news, but each look starts past them too: a tournament storing
    thousands of games beside a quiet ladder must not make every look read them all again. The
    first look reads no rows at all (it only learns where the games stand)."""
    from arena.serve.cache import StoreVersion
    from arena.store import reads
    db = _ladder_store(tmp_path / "arena.sqlite")
    db.begin_tournament("friendly", {"format": "rr", "rules": "classic", "seats": 2}, 12)
    _store(db, 0, ["a@1", "b@1"])
    read, afters = reads.ladder_games_after, []
    monkeypatch.setattr(reads, "ladder_games_after", lambda conn, after, limit: afters.append(after) or read(conn, after, limit))
    version = StoreVersion(tmp_path / "arena.sqlite", settle=0.0, clock=trio.current_time)
    follower = StoreFollower(version, interval=0.5)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(follower.run)
            await trio.sleep(0.1)
            for k in range(1, 4):
                _store(db, k, ["a@1", "b@1"], "friendly")
                await trio.sleep(0.5)
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    rows = [r for (r,) in db.db.execute("SELECT rowid FROM games ORDER BY rowid")]
    db.close()
    assert afters == rows[:3]  # each look after the newest row the last one saw, the friendly games' too


def test_a_result_this_arena_did_not_write_leaves_the_news_but_not_the_follower(tmp_path) -> None:
    """A row whose result names a seat the game has not (a store written by hand, or damaged) is
    left out of the results; its count is still news, and the follower, which every stream of the
    process waits on, goes on."""
    from arena.serve.cache import StoreVersion
    db = _ladder_store(tmp_path / "arena.sqlite")
    _store(db, 0, ["a@1", "b@1"])
    version = StoreVersion(tmp_path / "arena.sqlite", settle=0.0, clock=trio.current_time)
    follower = StoreFollower(version, interval=0.5)
    seen: list[dict] = []

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(follower.run)
            await trio.sleep(0.1)
            _store(db, 1, ["a@1", "b@1"])
            db.db.execute("UPDATE games SET result=? WHERE id='g-1'", ('{"order": [[7], [0]], "forfeits": {"x": 1}}',))
            db.db.commit()
            await trio.sleep(0.5)
            seen.append(_news(follower))
            _store(db, 2, ["b@1", "a@1"])
            await trio.sleep(0.5)
            seen.append(_news(follower))
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    db.close()
    assert [(n["ladders"]["club"], [g["game"] for g in n["latest"].get("club", [])]) for n in seen] == \
        [(2, []), (3, ["g-2"])]
