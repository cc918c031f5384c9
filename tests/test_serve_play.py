"""The web game's idle forfeit: a person who stops moving forfeits like a bot that timed out, the
bots finish the game, the session ends "over" and the game is stored."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import trio

pytest.importorskip("starlette", reason="arena serve needs the serve extra: pip install 'palace-arena[serve]'")

from arena.bots.manifest import HUMAN, load_bot
from arena.engine import PRESETS
from arena.referee import TimeControl
from arena.serve import play
from arena.tournament.store import Store


def test_a_person_who_leaves_forfeits_and_the_game_is_stored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(play, "IDLE_S", 0.3)
    store = tmp_path / "arena-data" / "arena.sqlite"
    app = SimpleNamespace(state=SimpleNamespace(options=SimpleNamespace(store=store)))
    session = play.Session("s1", 0, ["you", "random"])
    specs = [HUMAN, load_bot("random")]

    async def main() -> None:
        with trio.fail_after(60):
            await play.play_game(app, session, specs, PRESETS["classic"], 7,  # type: ignore[arg-type]
                                 TimeControl(move_ms=1000, bank_ms=5000), 2000)
    trio.run(main)
    assert session.status == "over" and session.error == "" and session.stored
    said = [m for m in session.messages if m.get("type") == "error"]
    assert said and said[0]["reason"] == "timeout" and "no move within 0.3 s" in said[0]["message"]
    db = Store(store, readonly=True)
    record = db.game_record(session.game_id)
    assert record is not None and record["result"]["forfeits"] == {"0": "timeout"}
    db.close()
    assert session.final is not None and session.final["seat"] == 0 and session.final["phase"] == "over"


class _Form(dict):
    def getlist(self, key: str) -> list[str]:
        value = self.get(key, [])
        return value if isinstance(value, list) else [value]


def test_opponents_are_bundled_bots_or_ladder_members_only(tmp_path: Path) -> None:
    """A ladder member is chosen by its label and played from the store's copy; anything else
    (a path, an unknown label, a member whose files are no longer that version) is refused."""
    members = {"lowest@1.0": "lowest", "starter-python@1.0.0": str(Path("examples/bots/python").resolve())}
    rules, specs, seat, *_ = play._parse(_Form(rules="classic", opponent=["starter-python@1.0.0"], seat="1"), members)
    assert seat == 1 and specs[0].label == "starter-python@1.0.0" and specs[1].human
    for bad in ("/etc", "examples/bots/python", "nobody@1.0"):
        with pytest.raises(ValueError, match="bundled bots or ladder members"):
            play._parse(_Form(rules="classic", opponent=[bad]), members)
    with pytest.raises(ValueError, match="no longer that version"):
        play._parse(_Form(rules="classic", opponent=["starter-python@1.0.0"]),
                    {"starter-python@1.0.0": "lowest"})  # the label's files are another bot now


def test_a_chosen_seed_does_not_reveal_the_bots_cards(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A person who picks the deal seed (or reads a tournament's) cannot deal the cards themself:
    the seed names a deal through the store's secret, and the same seed names the same deal."""
    from arena.engine import new_game
    from arena.tournament.seeds import deal_seed, load_secret
    monkeypatch.setattr(play, "IDLE_S", 0.2)
    store = tmp_path / "arena-data" / "arena.sqlite"
    app = SimpleNamespace(state=SimpleNamespace(options=SimpleNamespace(store=store)))
    chosen = 7
    rules = PRESETS["classic"]
    records = []
    for n in range(2):
        session = play.Session(f"s{n}", 0, ["you", "random"])

        async def main() -> None:
            with trio.fail_after(60):
                await play.play_game(app, session, [HUMAN, load_bot("random")], rules, chosen,  # type: ignore[arg-type]
                                     TimeControl(move_ms=1000, bank_ms=5000), 2000)
        trio.run(main)
        assert session.status == "over", session.error
        db = Store(store, readonly=True)
        records.append(db.game_record(session.game_id))
        db.close()
    dealt = records[0]["seed"]
    assert records[1]["seed"] == dealt  # the chosen seed names one deal
    assert dealt != chosen and dealt == deal_seed(load_secret(store.parent), chosen, play.PLAY_TABLE, 0)
    # what the person can compute from the seed is not the bot's hand, nor any tournament's deal 0
    assert new_game(rules, 2, chosen).seats[1].hand != new_game(rules, 2, dealt).seats[1].hand
    assert dealt != deal_seed(load_secret(store.parent), chosen, 0, 0)


def test_a_server_that_stops_mid_game_stops_its_bots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server's loop is cancelled while the game's thread waits for the person: the wait is
    called off (no forfeit, nothing stored), the bots are shut down and gone before play_game
    ends, and the cancellation reaches the caller."""
    store = tmp_path / "arena-data" / "arena.sqlite"
    app = SimpleNamespace(state=SimpleNamespace(options=SimpleNamespace(store=store)))
    session = play.Session("s1", 0, ["you", "random"])
    seated: list = []

    class Seen(play.BlockingPlayer):
        def begin(self, message):
            super().begin(message)
            seated.append(self.conn)

    monkeypatch.setattr(play, "BlockingPlayer", Seen)

    async def main() -> None:
        with trio.fail_after(60):  # a hang guard only: the cancellation below ends it
            async with trio.open_nursery() as nursery:
                nursery.start_soon(play.play_game, app, session, [HUMAN, load_bot("random")], PRESETS["classic"],
                                   7, TimeControl(move_ms=1000, bank_ms=5000), 2000)
                while not any(m.get("type") == "request" for m in session.messages):
                    await session.changed.wait()
                nursery.cancel_scope.cancel()
    trio.run(main)
    assert session.status == "playing" and not session.stored and not store.exists()
    assert [m for m in session.messages if m.get("type") == "error"] == []  # the person was not faulted
    assert len(seated) == 1 and seated[0].pid and not Path(f"/proc/{seated[0].pid}").exists()
