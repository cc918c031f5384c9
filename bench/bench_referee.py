"""Referee overhead per decision, as a ratio to a bare pipe round trip to the same bot program.

Two trivial bots (a few lines of Python that answer every request with its first action)
play ``--games`` games through the referee over stdio: real processes, the process
layer, JSON schemas, the engine, views and the clock. Then the very same request lines
are sent to one copy of the same bot program over a plain blocking pipe (subprocess,
write a line, readline), one round trip per decision. The difference is what the arena
adds per decision; the ratio says how far it is from the floor a pipe allows.

    python bench/bench_referee.py                     # 20 games of classic, 2 players
    python bench/bench_referee.py --games 50 --rules shithead --players 4

Prints figures only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import trio  # noqa: E402

from arena.engine import preset  # noqa: E402
from arena.launch import Launcher  # noqa: E402
from arena.manifest import BotSpec  # noqa: E402
from arena.referee import BotPlayer, TimeControl, run_game  # noqa: E402

TRIVIAL_BOT = (Path(__file__).resolve().parent / "trivial_bot.py").read_text()  # copied next to each bot


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


async def referee_run(spec: BotSpec, rules: str, players: int, games: int, max_turns: int):
    launcher = Recording()
    clock = TimeControl(move_ms=10_000, bank_ms=10_000, handshake_ms=30_000)
    seats = [BotPlayer(spec, launcher, clock) for _ in range(players)]
    r = preset(rules)
    try:
        await run_game(seats, r, 10_000, game_id="warm-up", clock=clock, max_turns=max_turns)  # starts the bots
        launcher.lines.clear()
        decisions = steps = 0
        c0 = time.process_time()
        t0 = time.perf_counter()
        for seed in range(games):
            rec = await run_game(seats, r, seed, game_id=f"g{seed}", clock=clock, max_turns=max_turns)
            assert not rec.faults, rec.faults
            decisions += sum(rec.decisions)
            steps += len(rec.steps)
        elapsed = time.perf_counter() - t0
        cpu = time.process_time() - c0
    finally:
        for p in seats:
            await p.shutdown()
    return elapsed, cpu, decisions, steps, launcher.lines, launcher.argv


def raw_run(spec: BotSpec, argv: list[str], requests: list[str], round_trips: int) -> tuple[float, float]:
    """Blocking pipe: write a request line, read the answer; ``round_trips`` times."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=spec.workdir,
                            text=True, bufsize=1)
    assert proc.stdin and proc.stdout
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
    return elapsed, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--games", type=int, default=20)
    ap.add_argument("--rules", default="classic")
    ap.add_argument("--players", type=int, default=2)
    ap.add_argument("--max-turns", type=int, default=2000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-referee-") as tmp:
        Path(tmp).chmod(0o755)  # a root referee runs bots under private uids, which must reach bot.py
        (Path(tmp) / "bot.py").write_text(TRIVIAL_BOT)
        spec = BotSpec("trivial", "1", ("python3", "bot.py"), Path(tmp), Path(tmp))
        ref_s, ref_cpu, decisions, steps, lines, argv = trio.run(referee_run, spec, args.rules, args.players,
                                                           args.games, args.max_turns)
        requests = [line for line in lines if json.loads(line)["type"] == "request"]
        raw_s, raw_cpu = raw_run(spec, argv, requests, decisions)
    us = 1e6 / decisions
    avg_req = sum(map(len, requests)) / max(1, len(requests))
    print(f"referee benchmark: {args.games} games of {args.rules}, {args.players} trivial Python bots over stdio")
    print(f"  decisions (requests answered): {decisions}   steps incl. forced: {steps}   "
          f"average request: {avg_req:.0f} bytes")
    print(f"  {'':9} {'wall us/decision':>17} {'decisions/s':>12} {'own CPU us/decision':>20}")
    print(f"  {'referee':9} {ref_s * us:17.1f} {decisions / ref_s:12.0f} {ref_cpu * us:20.1f}")
    print(f"  {'raw pipe':9} {raw_s * us:17.1f} {decisions / raw_s:12.0f} {raw_cpu * us:20.1f}")
    print(f"  ratio referee/raw: {ref_s / raw_s:.2f}x wall, {ref_cpu / max(raw_cpu, 1e-9):.2f}x own CPU; "
          f"overhead {(ref_s - raw_s) * us:.1f} us wall per decision")
    print(f"  (the referee's side: engine, views, JSON, reply checks, clock, trio, logging; "
          f"{steps / decisions:.2f} steps per decision, forced ones included)")


if __name__ == "__main__":
    main()
