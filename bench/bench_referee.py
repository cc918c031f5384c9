"""Referee overhead per decision, as a ratio to a bare pipe round trip to the same bot program.

Two trivial bots (a few lines of Python that answer every request with its first action)
play ``--games`` games through the referee over stdio: real processes, the process
layer, JSON schemas, the engine, views and the clock. Then the very same request lines
are sent to one copy of the same bot program over a plain blocking pipe (subprocess,
write a line, readline), one round trip per decision. The difference is what the arena
adds per decision; the ratio says how far it is from the floor a pipe allows.

    python bench/bench_referee.py                     # 20 games of classic, 2 players, 3 runs
    python bench/bench_referee.py --games 50 --rules shithead --players 4

The referee is the one every arena command plays on (``arena.referee.blocking``, the blocking
shell). Each run is done twice, interleaved: unpinned, and pinned with ``taskset`` (the referee on
one CPU, the bots on another; ``--cpus``), each against its own raw baseline measured right after
it. Beside them, ``core``: the same games through ``RefereeCore`` with no I/O, and ``core+pipe``:
``RefereeCore`` and bare blocking pipes interleaved in one process, the raw loop and the core as
any referee must alternate them, the least a referee of any design spends
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

from arena.bots.launch import Launcher  # noqa: E402
from arena.bots.manifest import BotSpec  # noqa: E402
from arena.bots.spawn import BASE_ENV  # noqa: E402
from arena.engine import preset  # noqa: E402
from arena.referee import TimeControl, protocol  # noqa: E402
from arena.referee.blocking import BlockingLaunch, BlockingPlayer, play_game, settle  # noqa: E402
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
        self.launch = BlockingLaunch(Launcher())
        self.lines: list[str] = []
        self.first = True

    def __call__(self, spec: BotSpec):
        proc = self.launch(spec)
        if self.first:
            self.first = False
            self.argv = list(proc.command)  # the interpreter the launcher chose, for the raw baseline
            lines = self.lines
            send = proc.send_line

            ask = proc.ask

            def send_line(text, **kw):
                lines.append(text if isinstance(text, str) else text.decode().rstrip("\n"))
                return send(text, **kw)

            def ask_(text, timeout):  # a decision's request goes out here, not through send_line
                lines.append(text if isinstance(text, str) else text.decode().rstrip("\n"))
                return ask(text, timeout)
            proc.send_line = send_line  # type: ignore[method-assign]
            proc.ask = ask_  # type: ignore[method-assign]
        return proc


def pin(cpus: set[int] | None) -> None:
    """Move this process (the referee, or the raw loop) to ``cpus``; None: all the machine's."""
    os.sched_setaffinity(0, cpus if cpus is not None else ALL_CPUS)


def referee_run(spec: BotSpec, rules: str, players: int, games: int, max_turns: int,
                cpus: tuple[int, int] | None):
    """The games through the referee (the blocking shell, as a worker plays them): wall and CPU
    seconds, decisions, steps, the lines written to bot 0 and its argv."""
    launcher = Recording()
    seats = [BlockingPlayer(spec, launcher, CLOCK) for _ in range(players)]
    r = preset(rules)
    try:
        pin({cpus[1]} if cpus else None)  # the bots start here and inherit this CPU...
        play_game(seats, r, 10_000, game_id="warm-up", clock=CLOCK, max_turns=max_turns)  # starts the bots
        pin({cpus[0]} if cpus else None)  # ...and the referee moves to the other one
        launcher.lines.clear()
        decisions = steps = 0
        c0 = time.process_time()
        t0 = time.perf_counter()
        for seed in range(games):
            rec = play_game(seats, r, seed, game_id=f"g{seed}", clock=CLOCK, max_turns=max_turns)
            assert not rec.faults, rec.faults
            decisions += sum(rec.decisions)
            steps += len(rec.steps)
        elapsed = time.perf_counter() - t0
        cpu = time.process_time() - c0
    finally:
        for p in seats:
            p.shutdown()
        settle()
        pin(None)
    return elapsed, cpu, decisions, steps, launcher.lines, launcher.argv


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
            p.stdin.write(req.line + b"\n")
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
          f"{'ref CPU us':>10} {'raw CPU us':>10} {'CPU x':>6} {'core us':>7} {'c+p CPU us':>10} {'floor x':>7} "
          f"{'ref/c+p':>7}")
    results: dict[str, list[tuple[float, float, float, float]]] = {name: [] for name, _ in modes}
    with tempfile.TemporaryDirectory(prefix="bench-referee-") as tmp:
        Path(tmp).chmod(0o755)  # a root referee runs bots under private uids, which must reach bot.py
        (Path(tmp) / "bot.py").write_text(TRIVIAL_BOT)
        spec = BotSpec("trivial", "1", ("python3", "bot.py"), Path(tmp), Path(tmp))
        for run in range(1, args.runs + 1):
            for name, cpus in modes:
                ref_s, ref_cpu, decisions, steps, lines, argv = referee_run(
                    spec, args.rules, args.players, args.games, args.max_turns, cpus)
                requests = [line for line in lines if json.loads(line)["type"] == "request"]
                raw_s, raw_cpu = raw_run(spec, argv, requests, decisions, cpus)
                if cpus:
                    pin({cpus[0]})
                core_cpu, core_decisions = core_run(args.rules, args.players, args.games, args.max_turns)
                pin(None)
                cp_s, cp_cpu, cp_decisions = core_pipe_run(argv, spec.workdir, args.rules, args.players, args.games,
                                                           args.max_turns, cpus)
                us = 1e6 / decisions
                raw_cpu = max(raw_cpu, 1e-9)
                cp_cpu_us = cp_cpu / cp_decisions * 1e6
                row = (ref_s / raw_s, ref_cpu / raw_cpu, cp_cpu_us / (raw_cpu * us), ref_cpu * us / cp_cpu_us)
                results[name].append(row)
                print(f"  {name:14} {run:3d} {decisions:9d} {ref_s * us:11.1f} {raw_s * us:11.1f} "
                      f"{row[0]:6.2f} {ref_cpu * us:10.1f} {raw_cpu * us:10.1f} {row[1]:6.2f} "
                      f"{core_cpu / core_decisions * 1e6:7.1f} {cp_cpu_us:10.1f} {row[2]:7.2f} {row[3]:7.2f}",
                      flush=True)
    avg_req = sum(map(len, requests)) / max(1, len(requests))
    print(f"  per decision: {steps / decisions:.2f} steps (forced ones included), average request {avg_req:.0f} bytes")
    print("  denominators: raw wall = one blocking write+readline round trip to the same bot program with the")
    print("  same request lines; raw CPU = this process's CPU in that loop. The referee's side adds the engine,")
    print("  views, JSON, reply checks, clock, the shell's poll loop and the record.")
    print("  core = CPU of the same games through RefereeCore with no I/O; c+p = core+pipe, RefereeCore and a")
    print("  bare blocking pipe per seat interleaved in one process (the same bot program as the raw loop);")
    print("  floor x = c+p CPU / raw CPU, what a referee spends with nothing else at all; ref/c+p = the")
    print("  referee's CPU over that floor.")
    for name, rows in results.items():
        cols = [sorted(col) for col in zip(*rows)]
        label = ("wall x", "own CPU x", "floor x", "ref/c+p")
        print(f"  {name:14} " + ", ".join(f"{lab} {c[0]:.2f}-{c[-1]:.2f} (median {c[len(c) // 2]:.2f})"
                                          for lab, c in zip(label, cols)))

if __name__ == "__main__":
    main()
