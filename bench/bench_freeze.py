"""What freezing a seat off its turn costs per decision (docs/SANDBOX.md, "CPU between seats").

Two figures, each over ``--runs`` interleaved runs:

- the freezer writes alone: a trivial bot started as a tournament starts it (``Launcher``, its
  cgroup), frozen and thawed ``--pairs`` times: microseconds per freeze + thaw, wall and the
  referee's CPU, with another bot frozen meanwhile (as in a game) and alone;
- whole decisions: the same ``--games`` games of two trivial bots on the blocking shell
  (``play_game``), by default (each seat thawed for its request, frozen after) and with
  ``ponder`` (never frozen): wall and referee CPU per decision, and the difference.

    python bench/bench_freeze.py                 # 10 games of classic, 3 runs
    python bench/bench_freeze.py --games 30 --runs 5

Needs a cgroup freezer (root; see ``arena.bots.cgroups``). Prints figures only.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import trio  # noqa: E402

from arena.bots.cgroups import detect_cgroups  # noqa: E402
from arena.bots.launch import Launcher  # noqa: E402
from arena.bots.manifest import BotSpec  # noqa: E402
from arena.engine import preset  # noqa: E402
from arena.referee import TimeControl  # noqa: E402
from arena.referee.blocking import BlockingPlayer, play_game, settle  # noqa: E402

CLOCK = TimeControl(move_ms=5000, bank_ms=10_000, handshake_ms=30_000)
TRIVIAL_BOT = (Path(__file__).resolve().parent / "trivial_bot.py").read_text()


def hold_pairs(launch, spec: BotSpec, pairs: int, other_frozen: bool) -> tuple[float, float]:
    """(wall us, CPU us) per freeze + thaw of one live bot, with a second bot frozen meanwhile (as
    in a game: the seats off turn) or not. (In v1 the kernel turns its freezer on and off as a
    whole, patching its own code, whenever the first group freezes or the last thaws.)"""
    bot, other = launch(spec), launch(spec)
    try:
        assert bot.hold(True) and bot.hold(False), "no freezer for this bot"
        other.hold(other_frozen)
        c0, t0 = time.process_time(), time.perf_counter()
        for _ in range(pairs):
            bot.hold(True)
            bot.hold(False)
        return (time.perf_counter() - t0) / pairs * 1e6, (time.process_time() - c0) / pairs * 1e6
    finally:
        bot.close()
        other.close()


def games(launch, spec: BotSpec, rules: str, n: int, ponder: bool) -> tuple[float, float]:
    """(wall us, referee CPU us) per decision over ``n`` games (after one game of warm-up)."""
    seats = [BlockingPlayer(spec, launch, CLOCK) for _ in range(2)]
    r = preset(rules)
    try:
        play_game(seats, r, 10_000, game_id="warm-up", clock=CLOCK, ponder=ponder)
        decisions = 0
        c0, t0 = time.process_time(), time.perf_counter()
        for seed in range(n):
            rec = play_game(seats, r, seed, game_id=f"g{seed}", clock=CLOCK, ponder=ponder)
            assert not rec.faults, rec.faults
            decisions += sum(rec.decisions)
        return (time.perf_counter() - t0) / decisions * 1e6, (time.process_time() - c0) / decisions * 1e6
    finally:
        for p in seats:
            p.shutdown()
        settle()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--games", type=int, default=10)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--pairs", type=int, default=2000)
    ap.add_argument("--rules", default="classic")
    args = ap.parse_args()
    root, note = detect_cgroups()
    if root is None or not root.freezes:
        sys.exit(f"no cgroup freezer here: {note or 'cgroups without a freezer'}")
    print(f"freeze/thaw benchmark: cgroup {root.kind}, {args.pairs} freeze+thaw pairs, {args.games} games of "
          f"{args.rules} (2 trivial Python bots) frozen and pondering, {args.runs} runs interleaved")
    with tempfile.TemporaryDirectory(prefix="bench-freeze-") as tmp:
        Path(tmp).chmod(0o755)  # a root referee runs bots under private uids, which must reach bot.py
        (Path(tmp) / "bot.py").write_text(TRIVIAL_BOT)
        spec = BotSpec("trivial", "1", ("python3", "bot.py"), Path(tmp), Path(tmp))
        plan = trio.run(Launcher().plan, spec)

        def launch(_spec: BotSpec):
            return plan.start()

        print("  per freeze+thaw pair (us): with another seat frozen (game) / alone; per decision (us): "
              "frozen seats / ponder, and the CPU difference")
        print(f"  {'run':>3} {'game wall':>9} {'game CPU':>8} {'alone wall':>10} {'alone CPU':>9} "
              f"{'frozen wall':>11} {'ponder wall':>11} {'frozen CPU':>10} {'ponder CPU':>10} {'CPU +':>6}")
        rows = []
        for run in range(1, args.runs + 1):
            pair = hold_pairs(launch, spec, args.pairs, other_frozen=True)
            alone = hold_pairs(launch, spec, args.pairs, other_frozen=False)
            frozen = games(launch, spec, args.rules, args.games, ponder=False)
            ponder = games(launch, spec, args.rules, args.games, ponder=True)
            rows.append((*pair, *alone, frozen[0], ponder[0], frozen[1], ponder[1], frozen[1] - ponder[1]))
            print(f"  {run:>3} " + " ".join(f"{v:>{w}.1f}" for v, w in zip(rows[-1], (9, 8, 10, 9, 11, 11, 10, 10, 6))))
        med = [statistics.median(col) for col in zip(*rows)]
        print("  med " + " ".join(f"{v:>{w}.1f}" for v, w in zip(med, (9, 8, 10, 9, 11, 11, 10, 10, 6))))


if __name__ == "__main__":
    main()
