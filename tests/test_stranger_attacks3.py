"""A third attacker's walk, with the docs and the code but not the tests: each test is an attack
that got through before its fix, written from the bot's (or the uploader's) side, with what must be
refused written here rather than read from the code."""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path
from typing import Any

import pytest

from arena.bots.manifest import BUNDLED_DIR
from arena.engine import PRESETS
from arena.referee import TimeControl
from arena.referee.core import RefereeCore
from arena.referee.testing import FakeClock, MockBot, Sleep, action_line, hello_line
from arena.tournament.executors import BlockingExecutor, BotSetup, GameTask

from .fakes import play_mocks

# ---------------------------------------------------------------------------------------------
# Think time at the edge of the slot (fixed_schedule, the strangers' ladder's table rule)
# ---------------------------------------------------------------------------------------------

SCHEDULE = TimeControl(move_ms=200, bank_ms=5000, handshake_ms=1000)  # as ladders/strangers-2p.toml
SLOT = SCHEDULE.move_ms / 1000
REFEREE_WORK = 0.002
"""What the referee spends on a decision besides the bot's think time (sending the request, reading
and applying the answer, freezing the seat): measured at 0.2-1.5 ms a decision under gVisor."""


def _edge_sender(bits: list[int]):
    """Answers at once for a 0, and for a 1 half a millisecond before the move time its request
    gives it: an answer in time, which the referee's own work then carried past the slot."""
    spelled = itertools.cycle(bits)

    def respond(msg: dict[str, Any]):
        if msg["type"] == "hello":
            return [hello_line("sender")]
        if msg["type"] == "request":
            told = msg["clock"]["move_ms"] / 1000
            return [Sleep(told - 0.0005 if next(spelled) else 0.0), action_line(msg, 0)]
        return []
    return respond


def _receiver(seen: list[float], clock: FakeClock):
    def respond(msg: dict[str, Any]):
        if msg["type"] == "hello":
            return [hello_line("receiver")]
        if msg["type"] == "request":
            seen.append(clock.now())
            return [action_line(msg, 0)]
        return []
    return respond


def _receiver_times(bits: list[int], monkeypatch: pytest.MonkeyPatch, work: float = REFEREE_WORK) -> list[float]:
    """When (from its first) the receiver was asked, on a fixed schedule, against a sender spelling
    ``bits`` at the edge of its move time; the referee's own work per decision is ``work``."""
    timer = FakeClock()
    settle = RefereeCore.settle

    def working_settle(core: RefereeCore, outcome: Any) -> None:
        timer.sleep_until(timer.now() + work)
        settle(core, outcome)

    monkeypatch.setattr(RefereeCore, "settle", working_settle)
    seen: list[float] = []
    rec = play_mocks([MockBot(_receiver(seen, timer)), MockBot(_edge_sender(bits))], PRESETS["classic"], 11,
                     clock=SCHEDULE, timer=timer, names=["receiver", "sender"], game_id="g", max_turns=120,
                     fixed_schedule=True, shutdown=False)
    assert not rec.faults, rec.faults  # every answer was in time
    return [round(t - seen[0], 6) for t in seen]


def test_an_answer_at_the_edge_of_the_move_time_never_takes_a_second_slot(monkeypatch: pytest.MonkeyPatch) -> None:
    """Measured through `arena tournament` under gVisor (fixed_schedule, one seat per author, move_ms
    200): a sender answering 199 ms after its request for a 1 and at once for a 0 passed 36 of 36
    bits in 26 s of games (1.4 bits/s), read by the receiver from the gaps between its own requests:
    the referee's own work after an answer given in time pushed the decision past its slot, and the
    schedule rounded it up to two. A bot's move time must end early enough in its slot for the
    referee's work, so an answer in time is one slot to every other seat, whatever it spells."""
    a = _receiver_times([1, 0, 0, 1, 0, 1, 1, 1], monkeypatch)
    b = _receiver_times([0, 1, 1, 0, 1, 0, 0, 0], monkeypatch)
    quiet = _receiver_times([0], monkeypatch)
    assert len(a) > 10
    assert a == b == quiet


def test_a_referee_running_over_the_slot_shifts_the_schedule_by_its_overrun_not_a_slot(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the referee's own work outlasts what the slot keeps for it (a 1 MiB answer line to
    parse on a loaded machine), the next request goes when that work ends, never a whole slot
    later: what a sender could move is then the overrun, not 200 ms."""
    over = 0.05  # far more than any slot keeps for the referee
    a = _receiver_times([1, 0, 0, 1, 0, 1, 1, 1], monkeypatch, work=over)
    b = _receiver_times([0, 1, 1, 0, 1, 0, 0, 0], monkeypatch, work=over)
    assert len(a) == len(b) > 10
    gaps = [[y - x for x, y in zip(t, t[1:])] for t in (a, b)]
    assert max(abs(x - y) for x, y in zip(*gaps)) < SLOT / 2


# ---------------------------------------------------------------------------------------------
# A bot folder changed under a run: the bot's fault, never the run's end
# ---------------------------------------------------------------------------------------------

def _author_bot(root: Path) -> Path:
    root.mkdir()
    (root / "bot.toml").write_text('name = "flip"\nversion = "1"\nauthor = "fred"\ncommand = ["python3", "bot.py"]\n')
    (root / "bot.py").write_text((BUNDLED_DIR / "random" / "bot.py").read_text())
    root.chmod(0o755)
    return root


@pytest.mark.parametrize("change", ["a file edited", "bot.toml broken", "bot.toml renamed the bot", "folder gone"])
def test_a_folder_changed_after_the_run_read_it_forfeits_its_games_and_the_run_goes_on(
        tmp_path: Path, change: str) -> None:
    """A local author appended one line to their bot.py 4 s into `arena tournament -j 2`: every
    referee worker died loading the run's setup (FolderError in BotSetup.from_wire), the run
    stopped with a Python traceback in its error line and 0 of 36 games stored, the honest bots'
    games too; at every rerun the author can do it again. A worker must refuse only that bot: its
    starts fail as its own fault, naming the change, and every game still ends with a result."""
    d = _author_bot(tmp_path / "flip")
    setup = BotSetup.of([str(d), "random"], rules=PRESETS["classic"])
    wire = setup.wire()
    if change == "a file edited":
        (d / "bot.py").write_text((d / "bot.py").read_text() + "\n# edited mid-run\n")
    elif change == "bot.toml broken":
        (d / "bot.toml").write_text("name = [[[\n")
    elif change == "bot.toml renamed the bot":
        (d / "bot.toml").write_text((d / "bot.toml").read_text().replace('"flip"', '"flop"'))
    else:
        shutil.rmtree(d)
    worker = BotSetup.from_wire(wire)  # what a referee worker process does first
    assert set(worker.specs) == {"flip@1", "random@1.0"}
    ex = BlockingExecutor(worker)
    try:
        played = ex.play(GameTask("g1", 5, ("flip@1", "random@1.0"), 200))
    finally:
        ex.close()
    record = played.record
    faults = [(f["seat"], f["reason"], f["message"]) for f in record.faults]
    assert [(seat, reason) for seat, reason, _ in faults] == [(0, "start_failed")], faults
    assert "changed since the run read them" in faults[0][2], faults
    assert record.result["complete"] or record.result["reason"] == "forfeit"
