"""The referee on the blocking shell, the one every arena command plays on: real bots through a
match on one process each, the fixed schedule, a failed start's verdict, threads side by side, and
no event loop where none is needed."""

from __future__ import annotations

import trio

from arena.bots.launch import Launcher
from arena.bots.manifest import load_bot
from arena.engine import preset
from arena.referee import TimeControl
from arena.referee.blocking import BlockingPlayer, play_game, settle

CLOCK = TimeControl(move_ms=5000, bank_ms=5000, handshake_ms=20_000)


def _steps(rec):
    return [(s["seat"], s.get("action"), s.get("fault")) for s in rec.steps]


def test_the_blocking_referee_plays_a_match_on_one_process_per_bot() -> None:
    launcher = Launcher()
    specs = [load_bot("heuristic"), load_bot("random")]
    plans = {s.label: launcher.plan_now(s) for s in specs}

    def launch(spec):
        return plans[spec.label].start()

    blocking = [BlockingPlayer(s, launch, CLOCK) for s in specs]
    try:
        got = [play_game(blocking, preset("classic"), seed, game_id=f"b{seed}", clock=CLOCK) for seed in (1, 2)]
    finally:
        for p in blocking:
            p.shutdown()
        settle()
    assert all(not r.faults and r.result is not None for r in got) and sum(got[0].decisions) > 10
    assert _steps(got[0]) != _steps(got[1])  # two deals, two games
    assert [p.starts for p in blocking] == [1, 1]  # one process per bot served both games


def test_the_blocking_referee_keeps_the_fixed_schedule() -> None:
    """One move_ms slot per decision and no bank, so how long a bot thinks
    changes nothing another seat could time (the slots are slept out). The schedule runs on a fake
    timer, so the real bots' move time can be generous and the slots are counted exactly: a 25 ms
    slot on the wall clock once timed out a real bot on a busy machine."""
    from arena.referee.testing import FakeClock

    clock = TimeControl(move_ms=1000, bank_ms=5000, handshake_ms=20_000)
    launcher = Launcher()
    specs = [load_bot("lowest"), load_bot("random")]
    plans = {s.label: launcher.plan_now(s) for s in specs}
    players = [BlockingPlayer(s, lambda spec: plans[spec.label].start(), clock) for s in specs]
    timer = FakeClock()
    try:
        players[0]._ensure(), players[1]._ensure()  # started and greeted outside the timing
        rec = play_game(players, preset("classic"), 3, game_id="f", clock=clock, max_turns=60, fixed_schedule=True,
                        timer=timer)
    finally:
        for p in players:
            p.shutdown()
        settle()
    assert rec.clock["bank_ms"] == 0 and not rec.faults
    asked = sum(rec.decisions)
    assert asked > 5 and timer.now() == asked * 1.0  # one whole slot slept out per decision


HELLO_FAULTS = {  # a bot that fails before its first request -> its verdict
    "silent": ("import time\ntime.sleep(60)\n", {"timeout"}),
    "bad_hello": ("print('hello?', flush=True)\nimport time\ntime.sleep(60)\n", {"handshake"}),
    "exits": ("import sys\nsys.exit(3)\n", {"handshake"}),
    "no_command": (None, {"start_failed"}),
}


def test_a_failed_start_or_handshake_is_the_bots_forfeit_before_any_request(tmp_path) -> None:
    """The start and the handshake are decided once (arena.referee.seat): each failure costs the
    bot its fault, with a message, before the game's first request."""
    import tempfile
    from pathlib import Path
    from tests.checks import reachable

    root = reachable(Path(tempfile.mkdtemp(prefix="arena-hello-", dir=tmp_path)))
    root.chmod(0o755)
    clock = TimeControl(move_ms=2000, bank_ms=0, handshake_ms=1500)
    launcher = Launcher()
    for mode, (script, reasons) in HELLO_FAULTS.items():
        d = root / mode
        d.mkdir()
        d.chmod(0o755)
        command = '["./nothing"]' if script is None else '["python3", "bot.py"]'
        if script is not None:
            (d / "bot.py").write_text(script)
            (d / "bot.py").chmod(0o644)
        (d / "bot.toml").write_text(f'name = "{mode.replace("_", "-")}"\ncommand = {command}\n')
        specs = [load_bot(d), load_bot("lowest")]

        def launch(spec):
            return launcher.plan_now(spec).start()

        blocking = [BlockingPlayer(s, launch, clock) for s in specs]
        try:
            got = play_game(blocking, preset("classic"), 4, game_id="b", clock=clock, max_turns=50)
        finally:
            for p in blocking:
                p.shutdown()
            settle()

        verdicts = [(f["seat"], f["reason"], f["message"]) for f in got.faults]
        assert [(s, r) for s, r, _ in verdicts] in ([(0, r)] for r in reasons), (mode, verdicts)
        assert verdicts[0][2], mode  # the fault says what happened
        assert got.result["order"][0] == [1] and got.steps == [], mode


def test_the_blocking_launch_runs_no_event_loop_for_a_bot_without_a_build(monkeypatch) -> None:
    """Where the blocking shell serves there is no trio loop: how to start a bot with no build
    step is worked out synchronously, and gives what the async launcher gives."""
    import arena.referee.blocking as blocking_referee
    from arena.referee.blocking import BlockingLaunch

    spec = load_bot("random")
    assert spec.build is None
    launcher = Launcher()  # one launcher: its seats run from its own checked copy of the bot
    expected = trio.run(launcher.plan, spec)

    def no_loop(*args):
        raise AssertionError("an event loop was run to start a bot without a build")
    monkeypatch.setattr(blocking_referee, "run_async", no_loop)
    launch = BlockingLaunch(launcher)
    bot = launch(spec)
    try:
        assert launch.plans[spec.label] == expected
        bot.send_line('{"type":"hello","protocol":1}')
        assert '"hello"' in bot.receive_line(20)
    finally:
        bot.close()


def test_two_threads_play_blocking_games_at_once() -> None:
    """Each thread waits on a hub of its own: two games played side by side in two threads give
    the games played one after the other, and each thread's bots are its hub's alone."""
    import threading

    from arena.bots.blocking import hub

    launcher = Launcher()
    specs = [load_bot("heuristic"), load_bot("random")]
    plans = {s.label: launcher.plan_now(s) for s in specs}

    def launch(spec):
        return plans[spec.label].start()

    def games(seeds, out):
        players = [BlockingPlayer(s, launch, CLOCK) for s in specs]
        try:
            out["hub"] = hub()
            out["games"] = [play_game(players, preset("classic"), seed, game_id=f"g{seed}", clock=CLOCK)
                            for seed in seeds]
            out["mine"] = {p.conn._hub is out["hub"] for p in players}
        finally:
            for p in players:
                p.shutdown()
            settle()
            out["left"] = hub().closing

    alone: dict = {}
    games((1, 2, 3, 4), alone)
    outs: list[dict] = [{}, {}]
    threads = [threading.Thread(target=games, args=(seeds, out)) for seeds, out in zip(((1, 2), (3, 4)), outs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    together = outs[0]["games"] + outs[1]["games"]
    assert [_steps(r) for r in together] == [_steps(r) for r in alone["games"]]
    assert all(not r.faults for r in together)
    assert outs[0]["hub"] is not outs[1]["hub"] and outs[0]["hub"] is not alone["hub"]
    assert outs[0]["mine"] == outs[1]["mine"] == {True}
    assert outs[0]["left"] == outs[1]["left"] == 0


def test_a_check_from_an_event_loop_runs_whole_in_one_worker_thread() -> None:
    """Ladder placement and web submit await ``run_check``: the check plays on the blocking shell in
    one worker thread (its progress can call back into the loop, which only a worker thread may),
    and its bots are finished before it returns."""
    import threading

    from arena.bots.blocking import hub
    from arena.engine import PRESETS
    from arena.tournament.check import run_check

    seen: list[tuple[str, str]] = []
    threads: set[int] = set()
    hubs: set = set()

    def progress(text: str) -> None:
        threads.add(threading.get_ident())
        hubs.add(hub())
        trio.from_thread.run_sync(seen.append, (text, threading.current_thread().name))

    async def main():
        report = await run_check(load_bot("random"), 2, rules=PRESETS["classic"], progress=progress)
        return report, threading.get_ident()

    report, loop_thread = trio.run(main)
    assert report["ok"] and report["played"] == 4 and len(seen) == 4
    assert len(threads) == 1 and loop_thread not in threads
    assert len(hubs) == 1 and hubs.pop().closing == 0  # the worker's bots, shut down and finished


def test_a_bot_with_a_build_is_built_and_started_with_no_event_loop(tmp_path, monkeypatch) -> None:
    """The contained build runs on the blocking shell too: the blocking launch builds a bot (its
    output collected to the end, its copy used for every start) without ever running trio."""
    from arena.referee.blocking import BlockingLaunch
    from tests.checks import reachable

    bot = tmp_path / "bot"
    bot.mkdir()
    (bot / "build.py").write_text("import sys\nprint('compiling', flush=True)\n"
                                  "open('built.py', 'w').write(open('src.py').read())\n")
    (bot / "src.py").write_text("import sys\nfor line in sys.stdin:\n    print(line.strip(), flush=True)\n")
    (bot / "bot.toml").write_text('name = "echo"\ncommand = ["python3", "built.py"]\nbuild = ["python3", "build.py"]\n')
    spec = load_bot(reachable(bot))

    def no_loop(*args, **kw):
        raise AssertionError("an event loop was run")
    monkeypatch.setattr(trio, "run", no_loop)
    launch = BlockingLaunch(Launcher())
    bot_process = launch(spec)
    try:
        assert launch.plans[spec.label].workdir != spec.workdir  # the built copy, not the author's folder
        bot_process.send_line("ping")
        assert bot_process.receive_line(20) == "ping"
    finally:
        bot_process.close()
    assert not (bot / "built.py").exists()


def test_a_cancelled_caller_interrupts_the_games_thread() -> None:
    """in_thread: trio cancels its caller while the thread waits on its hub (as a bot's wait
    does): the wait raises Interrupted at once, the thread's cleanup runs, the caller sees Cancelled."""
    import threading

    from arena.bots.blocking import Interrupted, hub
    from arena.referee.blocking import in_thread
    waiting, seen = threading.Event(), []

    def game() -> None:
        waiting.set()
        try:
            hub().wait(None, 0, 20)  # no bot here: waited out only if the interrupt never comes
        except Interrupted:
            seen.append("interrupted")
            raise
        seen.append("waited out")

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            async def call() -> None:
                await in_thread(game)
                seen.append("returned to a cancelled caller")
            nursery.start_soon(call)
            await trio.to_thread.run_sync(waiting.wait)
            nursery.cancel_scope.cancel()
    trio.run(main)
    assert seen == ["interrupted"]


def test_a_thread_that_returned_leaves_no_hub_or_interrupt_behind() -> None:
    """in_thread on a normal return: its hub is not interrupted and not left on the thread, which
    trio's thread cache hands the next job (a submission's check once raised Interrupted at once
    there, on the hub of the web game before it, and ended the server)."""
    import select
    import threading

    from arena.bots.blocking import hub
    from arena.referee.blocking import in_thread

    def game() -> tuple[int, object]:
        return threading.get_ident(), hub()

    def next_job() -> tuple[int, object]:
        hub().wait(None, 0, 0)  # raises Interrupted if an interrupt was left pending on this hub
        return threading.get_ident(), hub()

    async def main() -> tuple[tuple[int, object], tuple[int, object]]:
        first = await in_thread(game)
        return first, await trio.to_thread.run_sync(next_job)
    (thread, games_hub), (next_thread, next_hub) = trio.run(main)
    assert thread == next_thread  # the cached thread took the next job: the case that failed
    assert next_hub is not games_hub
    assert select.select([games_hub._wake_r], [], [], 0)[0] == []  # type: ignore[attr-defined]
