"""The referee on the blocking shell plays the very games the trio referee plays, and faults a
hostile bot the same way."""

from __future__ import annotations

import trio

from arena.bots.start import start_bot_blocking
from arena.bots.launch import Launcher
from arena.bots.manifest import load_bot
from arena.engine import preset
from arena.referee import BotPlayer, TimeControl, run_game
from arena.referee.blocking import BlockingPlayer, play_game, settle

CLOCK = TimeControl(move_ms=5000, bank_ms=5000, handshake_ms=20_000)


def _steps(rec):
    return [(s["seat"], s.get("action"), s.get("fault")) for s in rec.steps]


def test_blocking_and_trio_referees_play_the_same_games() -> None:
    launcher = Launcher()
    specs = [load_bot("heuristic"), load_bot("random")]
    args = {s.label: trio.run(launcher.start_args, s) for s in specs}

    def launch(spec):
        command, workdir, kw = args[spec.label]
        return start_bot_blocking(command, workdir, **kw)

    blocking = [BlockingPlayer(s, launch, CLOCK) for s in specs]
    try:
        got = [play_game(blocking, preset("classic"), seed, game_id=f"b{seed}", clock=CLOCK) for seed in (1, 2)]
    finally:
        for p in blocking:
            p.shutdown()
        settle()

    async def trio_games():
        players = [BotPlayer(s, Launcher(), CLOCK) for s in specs]
        try:
            return [await run_game(players, preset("classic"), seed, game_id=f"t{seed}", clock=CLOCK)
                    for seed in (1, 2)]
        finally:
            for p in players:
                await p.shutdown()

    want = trio.run(trio_games)
    assert [_steps(r) for r in got] == [_steps(r) for r in want]
    assert [r.result for r in got] == [r.result for r in want]
    assert all(not r.faults for r in got) and sum(got[0].decisions) > 10
    assert blocking[0].starts == 1  # one process served both games


def test_the_blocking_referee_keeps_the_fixed_schedule() -> None:
    """As the trio referee: one move_ms slot per decision and no bank, so how long a bot thinks
    changes nothing another seat could time (the slots are slept out, a lower bound)."""
    import time

    clock = TimeControl(move_ms=25, bank_ms=5000, handshake_ms=20_000)
    launcher = Launcher()
    specs = [load_bot("lowest"), load_bot("random")]
    args = {s.label: trio.run(launcher.start_args, s) for s in specs}
    players = [BlockingPlayer(s, lambda spec: start_bot_blocking(args[spec.label][0], args[spec.label][1],
                                                                 **args[spec.label][2]), clock) for s in specs]
    try:
        players[0]._ensure(), players[1]._ensure()  # started and greeted outside the timing
        t0 = time.monotonic()
        rec = play_game(players, preset("classic"), 3, game_id="f", clock=clock, max_turns=60, fixed_schedule=True)
        took = time.monotonic() - t0
    finally:
        for p in players:
            p.shutdown()
        settle()
    assert rec.clock["bank_ms"] == 0 and not rec.faults
    asked = sum(rec.decisions)
    assert asked > 5 and took >= asked * 0.025
