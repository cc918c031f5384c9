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
