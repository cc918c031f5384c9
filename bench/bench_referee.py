"""Referee overhead per decision, as a ratio to a bare pipe round trip to the same bot program.

Two trivial bots (a few lines of Python that answer every request with its first action)
play ``--games`` games through the referee over stdio: real processes, the process
layer, JSON schemas, the engine, views and the clock. Then the very same request lines
are sent to one copy of the same bot program over a plain blocking pipe (subprocess,
write a line, readline), one round trip per decision. The difference is what the arena
adds per decision; the ratio says how far it is from the floor a pipe allows.

    python bench/bench_referee.py                     # 20 games of classic, 2 players, 3 runs
    python bench/bench_referee.py --games 50 --rules shithead --players 4

Each run also plays the same games through the blocking shell (``arena.referee.blocking``, what
a worker process plays with), compared with (raw round trip + RefereeCore alone): the least any
referee spends. Each run is done twice, interleaved: unpinned, and pinned with ``taskset`` (the
referee on one CPU, the bots on another; ``--cpus``), each against its own raw
baseline measured right after it. Beside them, ``core+pipe``: ``RefereeCore`` and bare blocking
pipes interleaved in one process, the raw loop and the core as any referee must alternate them;
its CPU against (raw CPU + core) says what the alternation itself costs on this machine
(``bench_instructions.py`` counts the instructions of each instead). Prints figures only; nothing
is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import trio  # noqa: E402

from arena.bots.launch import Launcher  # noqa: E402
from arena.bots.manifest import BotSpec  # noqa: E402
from arena.bots.spawn import BASE_ENV  # noqa: E402
from arena.engine import preset  # noqa: E402
from arena.referee import BotPlayer, TimeControl, protocol, run_game  # noqa: E402
from arena.referee.core import RefereeCore  # noqa: E402

ALL_CPUS = set(os.sched_getaffinity(0))
# The environment the launcher gives a bot, not this shell's: PYTHONUNBUFFERED=1 inherited by
# the raw bot split each reply into two writes and slowed the denominator.
BOT_ENV = BASE_ENV
TRIVIAL_BOT = (Path(__file__).resolve().parent / "trivial_bot.py").read_text()  # copied next to each bot
CLOCK = TimeControl(move_ms=10_000, bank_ms=10_000, handshake_ms=30_000)  # every run's: no bot comes near it


class Recording:
    """A launcher that keeps every line the referee writes to bot 0 (to replay them raw)."""

    def __init__(self) -> None:
        self.launcher = Launcher()
        self.lines: list[str] = []
        self.first = True

    async def __call__(self, spec: BotSpec):
        proc = await self.launcher(spec)
        if self.first:
            self.first = False
            self.argv = list(proc.command)  # the interpreter the launcher chose, for the raw baseline
            lines = self.lines
            send = proc.send_line

            async def send_line(text: str, **kw):
                lines.append(text)
                return await send(text, **kw)
            proc.send_line = send_line  # type: ignore[method-assign]
        return proc


def pin(cpus: set[int] | None) -> None:
    """Move this process (the referee, or the raw loop) to ``cpus``; None: all the machine's."""
    os.sched_setaffinity(0, cpus if cpus is not None else ALL_CPUS)


async def referee_run(spec: BotSpec, rules: str, players: int, games: int, max_turns: int,
                      cpus: tuple[int, int] | None):
    launcher = Recording()
    seats = [BotPlayer(spec, launcher, CLOCK) for _ in range(players)]
    r = preset(rules)
    try:
        pin({cpus[1]} if cpus else None)  # the bots start here and inherit this CPU...
        await run_game(seats, r, 10_000, game_id="warm-up", clock=CLOCK, max_turns=max_turns)  # starts the bots
        pin({cpus[0]} if cpus else None)  # ...and the referee moves to the other one
        launcher.lines.clear()
        decisions = steps = 0
        c0 = time.process_time()
        t0 = time.perf_counter()
        for seed in range(games):
            rec = await run_game(seats, r, seed, game_id=f"g{seed}", clock=CLOCK, max_turns=max_turns)
            assert not rec.faults, rec.faults
            decisions += sum(rec.decisions)
            steps += len(rec.steps)
        elapsed = time.perf_counter() - t0
        cpu = time.process_time() - c0
    finally:
        for p in seats:
            await p.shutdown()
        pin(None)
    return elapsed, cpu, decisions, steps, launcher.lines, launcher.argv


def blocking_run(spec: BotSpec, rules: str, players: int, games: int, max_turns: int,
                 cpus: tuple[int, int] | None) -> tuple[float, float, int]:
    """The same games through the blocking shell (what a referee worker runs): wall and CPU
    seconds, decisions."""
    from arena.referee.blocking import BlockingPlayer, play_game, settle
    plan = trio.run(Launcher().plan, spec)
    seats = [BlockingPlayer(spec, lambda s: plan.start_blocking(), CLOCK)
             for _ in range(players)]
    r = preset(rules)
    try:
        pin({cpus[1]} if cpus else None)
        play_game(seats, r, 10_000, game_id="warm-up", clock=CLOCK, max_turns=max_turns)
        pin({cpus[0]} if cpus else None)
        decisions = 0
        c0 = time.process_time()
        t0 = time.perf_counter()
        for seed in range(games):
            rec = play_game(seats, r, seed, game_id=f"g{seed}", clock=CLOCK, max_turns=max_turns)
            assert not rec.faults, rec.faults
            decisions += sum(rec.decisions)
        elapsed = time.perf_counter() - t0
        cpu = time.process_time() - c0
    finally:
        for p in seats:
            p.shutdown()
        settle()
        pin(None)
    return elapsed, cpu, decisions


def raw_run(spec: BotSpec, argv: list[str], requests: list[str], round_trips: int,
            cpus: tuple[int, int] | None) -> tuple[float, float]:
    """Blocking pipe: write a request line, read the answer; ``round_trips`` times."""
    if cpus:
        argv = ["taskset", "-c", str(cpus[1]), *argv]
        pin({cpus[0]})
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=spec.workdir,
                            text=True, bufsize=1, env=BOT_ENV)
    assert proc.stdin and proc.stdout
    try:
        proc.stdin.write('{"type":"hello","protocol":1}\n')
        proc.stdin.flush()
        proc.stdout.readline()
        c0 = time.process_time()
        t0 = time.perf_counter()
        for i in range(round_trips):
            proc.stdin.write(requests[i % len(requests)] + "\n")
            proc.stdin.flush()
            if not proc.stdout.readline():
                raise RuntimeError("the bot died")
        elapsed = time.perf_counter() - t0
        cpu = time.process_time() - c0
        proc.stdin.write('{"type":"shutdown"}\n')
        proc.stdin.close()
        proc.wait(timeout=10)
    finally:
        pin(None)
    return elapsed, cpu


def core_pipe_games(procs: list[subprocess.Popen], rules: str, players: int, seeds: range,
                    max_turns: int = 2000) -> int:
    """``RefereeCore`` and a bare blocking pipe per seat (``procs``, greeted), interleaved: each
    request written and its reply read with ``readline``; no clock, caps, stderr or checks beyond
    the protocol's reply parser. The games of ``seeds``; the decisions played."""
    from arena.referee.core import Answered
    r = preset(rules)
    decisions = 0
    for seed in seeds:
        core = RefereeCore(r, ["trivial"] * players, seed, game_id=f"g{seed}", clock=CLOCK, max_turns=max_turns)
        for seat, p in enumerate(procs):
            p.stdin.write(protocol.encode(core.start_message(seat)).encode() + b"\n")
            p.stdin.flush()
        while (req := core.next_request()) is not None:
            p = procs[req.seat]
            p.stdin.write(req.line.encode() + b"\n")
            p.stdin.flush()
            choice, note = protocol.read_reply(p.stdout.readline().decode().rstrip("\n"), req.id, req.n_actions)
            core.settle(Answered(choice, 0.00005, [], note))
            decisions += 1
        for seat, message in core.end_messages():
            procs[seat].stdin.write(protocol.encode(message).encode() + b"\n")
            procs[seat].stdin.flush()
    return decisions


def greeted(argv: list[str], workdir: Path, players: int) -> list[subprocess.Popen]:
    """``players`` copies of the bot program on bare pipes, each past its hello."""
    procs = [subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=workdir, env=BOT_ENV)
             for _ in range(players)]
    for p in procs:
        p.stdin.write(b'{"type":"hello","protocol":1}\n')
        p.stdin.flush()
        p.stdout.readline()
    return procs


def core_pipe_run(argv: list[str], workdir: Path, rules: str, players: int, games: int, max_turns: int,
                  cpus: tuple[int, int] | None) -> tuple[float, float, int]:
    """:func:`core_pipe_games` to the same bot program as the raw loop: what the raw loop and the
    core alone cost when one process does both, one after the other, as any referee must.
    (wall, CPU, decisions)"""
    if cpus:
        argv = ["taskset", "-c", str(cpus[1]), *argv]
        pin({cpus[0]})
    try:
        procs = greeted(argv, workdir, players)
        core_pipe_games(procs, rules, players, range(10_000, 10_001), max_turns)  # warm-up
        c0 = time.process_time()
        t0 = time.perf_counter()
        decisions = core_pipe_games(procs, rules, players, range(games), max_turns)
        elapsed = time.perf_counter() - t0
        cpu = time.process_time() - c0
        for p in procs:
            p.stdin.close()
            p.wait(timeout=10)
    finally:
        pin(None)
    return elapsed, cpu, decisions


def trio_floor_run(argv: list[str], workdir: Path, requests: list[str], round_trips: int,
                   cpus: tuple[int, int] | None) -> float:
    """The least a trio referee pays for I/O: the same lines to the same bot program, each a
    non-blocking write, one ``wait_readable`` and a read; no timeout, no checks. CPU seconds."""
    async def loop() -> float:
        proc = subprocess.Popen(["taskset", "-c", str(cpus[1]), *argv] if cpus else argv, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, cwd=workdir, env=BOT_ENV)
        assert proc.stdin and proc.stdout
        w, r = proc.stdin.fileno(), proc.stdout.fileno()
        os.set_blocking(w, False)
        os.set_blocking(r, False)
        buf = b""

        async def round_trip(line: bytes) -> None:
            nonlocal buf
            os.write(w, line)
            while b"\n" not in buf:
                await trio.lowlevel.wait_readable(r)
                buf += os.read(r, 65536)
            buf = buf.partition(b"\n")[2]
        try:
            await round_trip(b'{"type":"hello","protocol":1}\n')
            lines = [line.encode() + b"\n" for line in requests]
            c0 = time.process_time()
            for i in range(round_trips):
                await round_trip(lines[i % len(lines)])
            return time.process_time() - c0
        finally:
            proc.stdin.close()
            proc.wait(timeout=10)
    if cpus:
        pin({cpus[0]})
    try:
        return trio.run(loop)
    finally:
        pin(None)


def core_run(rules: str, players: int, games: int, max_turns: int) -> tuple[float, int]:
    """The referee's work without any I/O: the same games through RefereeCore, each reply read
    by the protocol parser as a bot's line would be. (CPU seconds, decisions)."""
    r = preset(rules)
    decisions = 0
    c0 = time.process_time()
    for seed in range(games):
        core = RefereeCore(r, ["trivial"] * players, seed, game_id=f"g{seed}", clock=CLOCK, max_turns=max_turns)
        for seat in range(players):
            protocol.encode(core.start_message(seat))
        while (req := core.next_request()) is not None:
            reply = '{"type":"action","request":%d,"action":0}' % req.id
            core.answer(protocol.read_action(reply, req.id, req.n_actions), 0.00005)
            decisions += 1
        for _, message in core.end_messages():
            protocol.encode(message)
    return time.process_time() - c0, decisions


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--games", type=int, default=20)
    ap.add_argument("--rules", default="classic")
    ap.add_argument("--players", type=int, default=2)
    ap.add_argument("--max-turns", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=3, help="runs of each mode (default 3)")
    ap.add_argument("--cpus", default="0,1", help="referee CPU,bot CPU for the pinned runs (default 0,1)")
    args = ap.parse_args()
    pinned = tuple(int(c) for c in args.cpus.split(","))
    modes: list[tuple[str, tuple[int, int] | None]] = [("unpinned", None)]
    if len(ALL_CPUS) >= 2 and set(pinned) <= ALL_CPUS and len(set(pinned)) == 2:
        modes.append((f"pinned {pinned[0]}/{pinned[1]}", pinned))  # type: ignore[arg-type]
    else:
        print(f"(pinned runs skipped: CPUs {sorted(ALL_CPUS)} cannot hold referee and bot apart as {args.cpus})")
    print(f"referee benchmark: {args.games} games of {args.rules}, {args.players} trivial Python bots over stdio, "
          f"{args.runs} runs per mode, modes interleaved")
    print(f"  {'mode':14} {'run':>3} {'decisions':>9} {'ref wall us':>11} {'raw wall us':>11} {'wall x':>6} "
          f"{'ref CPU us':>10} {'raw CPU us':>10} {'CPU x':>6} {'trio io us':>10} {'core us':>7} {'floor x':>7}")
    results: dict[str, list[tuple[float, float, float]]] = {name: [] for name, _ in modes}
    blocking: dict[str, list[tuple[float, float, float, float]]] = {name: [] for name, _ in modes}
    with tempfile.TemporaryDirectory(prefix="bench-referee-") as tmp:
        Path(tmp).chmod(0o755)  # a root referee runs bots under private uids, which must reach bot.py
        (Path(tmp) / "bot.py").write_text(TRIVIAL_BOT)
        spec = BotSpec("trivial", "1", ("python3", "bot.py"), Path(tmp), Path(tmp))
        for run in range(1, args.runs + 1):
            for name, cpus in modes:
                ref_s, ref_cpu, decisions, steps, lines, argv = trio.run(
                    referee_run, spec, args.rules, args.players, args.games, args.max_turns, cpus)
                requests = [line for line in lines if json.loads(line)["type"] == "request"]
                raw_s, raw_cpu = raw_run(spec, argv, requests, decisions, cpus)
                io_cpu = trio_floor_run(argv, spec.workdir, requests, decisions, cpus)
                if cpus:
                    pin({cpus[0]})
                core_cpu, core_decisions = core_run(args.rules, args.players, args.games, args.max_turns)
                pin(None)
                blk_s, blk_cpu, blk_decisions = blocking_run(spec, args.rules, args.players, args.games,
                                                             args.max_turns, cpus)
                cp_s, cp_cpu, cp_decisions = core_pipe_run(argv, spec.workdir, args.rules, args.players, args.games,
                                                           args.max_turns, cpus)
                core_us = core_cpu / core_decisions * 1e6
                blk_cpu_us, blk_wall_us = blk_cpu / blk_decisions * 1e6, blk_s / blk_decisions * 1e6
                cp_cpu_us, cp_wall_us = cp_cpu / cp_decisions * 1e6, cp_s / cp_decisions * 1e6
                floor_cpu_us, floor_wall_us = raw_cpu * 1e6 / decisions + core_us, raw_s * 1e6 / decisions + core_us
                blocking[name].append((blk_cpu_us / floor_cpu_us, blk_wall_us / floor_wall_us,
                                       cp_cpu_us / floor_cpu_us, blk_cpu_us / cp_cpu_us))
                print(f"  {name:14} {run:3d} blocking shell: {blk_decisions} decisions, own CPU "
                      f"{blk_cpu_us:.1f} us, wall {blk_wall_us:.1f} us; "
                      f"raw CPU + core {floor_cpu_us:.1f} us "
                      f"({raw_cpu / decisions * 1e6:.1f} + {core_us:.1f}), raw wall + core "
                      f"{floor_wall_us:.1f} us; CPU x {blocking[name][-1][0]:.2f}, "
                      f"wall x {blocking[name][-1][1]:.2f}", flush=True)
                print(f"  {name:14} {run:3d} core+pipe (core and bare pipes, interleaved): CPU {cp_cpu_us:.1f} us, "
                      f"wall {cp_wall_us:.1f} us; its CPU / (raw CPU + core) {blocking[name][-1][2]:.2f}x; "
                      f"blocking shell CPU / core+pipe CPU {blocking[name][-1][3]:.2f}x", flush=True)
                us = 1e6 / decisions
                floor = io_cpu / decisions + core_cpu / core_decisions  # seconds per decision
                raw_cpu = max(raw_cpu, 1e-9)
                results[name].append((ref_s / raw_s, ref_cpu / raw_cpu, floor * decisions / raw_cpu))
                print(f"  {name:14} {run:3d} {decisions:9d} {ref_s * us:11.1f} {raw_s * us:11.1f} "
                      f"{ref_s / raw_s:6.2f} {ref_cpu * us:10.1f} {raw_cpu * us:10.1f} "
                      f"{ref_cpu / raw_cpu:6.2f} {io_cpu * us:10.1f} {core_cpu / core_decisions * 1e6:7.1f} "
                      f"{floor * decisions / raw_cpu:7.2f}", flush=True)
    avg_req = sum(map(len, requests)) / max(1, len(requests))
    print(f"  per decision: {steps / decisions:.2f} steps (forced ones included), average request {avg_req:.0f} bytes")
    print("  denominators: raw wall = one blocking write+readline round trip to the same bot program with the")
    print("  same request lines; raw CPU = this process's CPU in that loop. The referee's side adds the engine,")
    print("  views, JSON, reply checks, clock, trio and the record.")
    print("  the floor of this design, measured in the same run: trio io = CPU of the same round trips with")
    print("  a bare trio wait (write, wait_readable, read; no timeout, no checks); core = CPU of the same")
    print("  games through RefereeCore with no I/O; floor x = (trio io + core) / raw CPU, what a referee")
    print("  of this shape spends with nothing else at all.")
    print("  core+pipe = RefereeCore and a bare blocking pipe per seat, interleaved in one process (the same")
    print("  bot program as the raw loop): the raw loop and the core as one referee must run them, one after")
    print("  the other, sleeping in between. Its CPU above (raw CPU + core) is what that alternation costs.")
    for name, rows in results.items():
        walls = sorted(w for w, _, _ in rows)
        cpus_ = sorted(c for _, c, _ in rows)
        floors = sorted(f for _, _, f in rows)
        print(f"  {name:14} ratio wall {walls[0]:.2f}-{walls[-1]:.2f}x (median {walls[len(walls) // 2]:.2f}), "
              f"own CPU {cpus_[0]:.2f}-{cpus_[-1]:.2f}x (median {cpus_[len(cpus_) // 2]:.2f}), "
              f"floor {floors[0]:.2f}-{floors[-1]:.2f}x (median {floors[len(floors) // 2]:.2f})")
        b_cpu, b_wall, cp_floor, b_cp = (sorted(col) for col in zip(*blocking[name]))
        print(f"  {name:14} blocking shell: own CPU / (raw CPU + core) {b_cpu[0]:.2f}-{b_cpu[-1]:.2f}x, "
              f"wall / (raw wall + core) {b_wall[0]:.2f}-{b_wall[-1]:.2f}x")
        print(f"  {name:14} core+pipe: CPU / (raw CPU + core) {cp_floor[0]:.2f}-{cp_floor[-1]:.2f}x; "
              f"blocking shell CPU / core+pipe CPU {b_cp[0]:.2f}-{b_cp[-1]:.2f}x")


if __name__ == "__main__":
    main()
