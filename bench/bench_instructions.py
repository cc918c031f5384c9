"""Instructions per decision, counted by callgrind: what the referee's own code costs, free of
the machine's noise.

On a shared machine the referee's CPU per decision moves by half between runs
(``bench_referee.py`` prints it); an instruction count does not. Each scenario runs in a
Python process under ``valgrind --tool=callgrind`` twice, with ``--games`` and three times as
many games; the difference of the two totals over the difference of decisions is the cost of
one decision, start-up and warm-up cancelled out. Only the games are counted: the child says
when they begin (after its warm-up) and end, and the counters are zeroed and dumped then
(``callgrind_control``), so a bot's teardown is not (its scans of /proc cost some 11M
instructions each, more with more processes on the machine, and a kill round more or less
moved the shell's figure by up to 11k a decision between identical runs). Bots run natively (valgrind does not
follow ``exec``): only the referee's side is counted.

* ``core``: ``RefereeCore`` alone, no I/O (each reply read by the protocol parser);
* ``raw``: a bare blocking loop (write a request line, ``readline``) to the trivial bot, 500
  round trips per game asked, over the requests of two games of the same rules (their making
  is not counted);
* ``core+pipe``: the two interleaved, to real bots: ``RefereeCore`` and a bare blocking pipe per
  seat, nothing else (no clock, no caps, no stderr): the least a referee of any design runs;
* ``blocking``: the games through the referee (``arena.referee.blocking``, the one shell), as a
  referee worker plays them.

    python bench/bench_instructions.py                  # classic, 2 players; about 5 minutes
    python bench/bench_instructions.py --games 2 --rules shithead --skip raw

The shell's bots run as this process's user, uncontained, and start without the arena's pre-exec
setup (rlimits, filter: under valgrind it fails) except joining their cgroup, whose reads are
then as cheap as in a worker; and the per-decision checks that run on a timer (the
game's CPU every 0.2 s, a contained bot's pipes every 0.25 s) are switched off: natively they
come once per hundreds of decisions, but valgrind runs the referee some 50 times slower, so
they would be counted far more often than they run. Prints figures only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

SCENARIOS = ("core", "raw", "core+pipe", "blocking")


def _bot_dir() -> Path:
    d = Path(tempfile.mkdtemp(prefix="bench-instr-"))
    d.chmod(0o755)
    (d / "bot.py").write_text((HERE / "trivial_bot.py").read_text())
    return d


def _quiet_timers() -> None:
    """Switch off the checks that run on a wall-clock timer (see the module's docstring)."""
    from arena.bots import process, spawn
    process.CPU_CHECK_S = process.WATCH_S = 1e9
    def setup(uid, join_fds, *rest, **kw):  # valgrind cannot run the whole of it; see the docstring
        return lambda: [os.write(fd, b"0") for fd in join_fds]  # (the cgroup, as natively: its reads are cheap)
    spawn._child_setup = setup


def mark() -> None:
    """Tell the parent the counted part begins or ends here, and wait until it has zeroed or
    dumped the counters."""
    print("mark", flush=True)
    sys.stdin.readline()


def child(scenario: str, rules_name: str, players: int, games: int) -> int:
    """Play ``games`` games of ``scenario`` (after one warm-up game) between two marks; the
    decisions played."""
    from arena.engine import preset
    from arena.referee.core import RefereeCore
    from bench_referee import CLOCK as clock, core_pipe_games, core_run, greeted
    rules = preset(rules_name)
    if scenario == "core":
        core_run(rules_name, players, 1, 2000)
        mark()
        played = core_run(rules_name, players, games, 2000)[1]
        mark()
        return played
    bot = _bot_dir()
    argv = [sys.executable, "bot.py"]
    if scenario == "raw":  # the requests of two games, however many are played (their making is not counted)
        lines = []
        for seed in range(2):
            core = RefereeCore(rules, ["t"] * players, seed, game_id=f"g{seed}", clock=clock)
            while (req := core.next_request()) is not None:
                lines.append(req.line + b"\n")
                core.answer(0, 0.00005)
        p = greeted(argv, bot, 1)[0]
        write, flush, readline = p.stdin.write, p.stdin.flush, p.stdout.readline
        trips = 500 * games
        for i in range(len(lines) + trips):  # the first pass over the lines is the warm-up
            if i == len(lines):
                mark()
            write(lines[i % len(lines)])
            flush()
            readline()
        mark()
        return trips
    if scenario == "core+pipe":
        procs = greeted(argv, bot, players)
        core_pipe_games(procs, rules_name, players, range(-1, 0))  # warm-up
        mark()
        played = core_pipe_games(procs, rules_name, players, range(games))
        mark()
        return played
    _quiet_timers()
    from arena.bots.manifest import BotSpec
    from arena.bots.containment import RunAs
    from arena.bots.start import start_bot
    from arena.referee.blocking import BlockingPlayer, play_game, settle
    spec = BotSpec("trivial", "1", tuple(argv), bot, bot)
    seats = [BlockingPlayer(spec, lambda s: start_bot(argv, bot, run_as=RunAs.REFEREE), clock)
             for _ in range(players)]
    decisions = 0
    for seed in range(-1, games):
        if seed == 0:  # after the warm-up
            mark()
        rec = play_game(seats, rules, seed, game_id=f"g{seed}", clock=clock)
        decisions += sum(rec.decisions) if seed >= 0 else 0
    mark()
    for s in seats:
        s.shutdown()
    settle()
    return decisions


def count(scenario: str, rules: str, players: int, games: int) -> tuple[int, int]:
    """(instructions, decisions) of the games of one child run under callgrind: the counters are
    zeroed at the child's first mark and dumped at its second."""
    with tempfile.TemporaryDirectory(prefix="bench-instr-cg-") as tmp:
        out_file = Path(tmp) / "callgrind.out"
        proc = subprocess.Popen(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_file}",
                                 sys.executable, __file__, "--child", scenario, "--rules", rules,
                                 "--players", str(players), "--games", str(games)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert proc.stdin is not None and proc.stdout is not None
        for command in (["--zero"], ["--dump=games"]):
            if proc.stdout.readline().strip() != "mark":
                break
            subprocess.run(["callgrind_control", *command, str(proc.pid)], check=True, capture_output=True)
            proc.stdin.write("\n")
            proc.stdin.flush()
        out, err = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(f"{scenario} failed under valgrind:\n{err[-2000:]}")
        dumped = Path(f"{out_file}.1")
        total = re.search(r"^totals: (\d+)", dumped.read_text(), re.M) if dumped.exists() else None
        if total is None:
            raise SystemExit(f"{scenario}: no dump of the games' instructions:\n{err[-2000:]}")
        return int(total.group(1)), int(out.split()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--games", type=int, default=3, help="games in the small run (the large one plays 3x)")
    ap.add_argument("--rules", default="classic")
    ap.add_argument("--players", type=int, default=2)
    ap.add_argument("--skip", nargs="*", default=[], choices=SCENARIOS)
    ap.add_argument("--child", choices=SCENARIOS, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        sys.path.insert(0, str(HERE))
        print(child(args.child, args.rules, args.players, args.games), flush=True)
        return
    if subprocess.run(["valgrind", "--version"], capture_output=True).returncode != 0:
        raise SystemExit("valgrind is needed (Debian: apt install valgrind)")
    print(f"instructions per decision (callgrind): {args.rules}, {args.players} trivial Python bots, "
          f"{args.games} and {3 * args.games} games each")
    per: dict[str, float] = {}
    for scenario in SCENARIOS:
        if scenario in args.skip:
            continue
        small, d_small = count(scenario, args.rules, args.players, args.games)
        large, d_large = count(scenario, args.rules, args.players, 3 * args.games)
        per[scenario] = (large - small) / (d_large - d_small)
        print(f"  {scenario:10} {per[scenario] / 1000:8.1f}k   ({d_large - d_small} decisions)", flush=True)
    if {"core", "raw"} <= per.keys():
        floor = per["core"] + per["raw"]
        print(f"  raw + core {floor / 1000:8.1f}k   (what bench_referee.py's targets divide by)")
        for scenario in ("core+pipe", "blocking"):
            if scenario in per:
                print(f"  {scenario} / (raw + core): {per[scenario] / floor:.2f}x")
    if {"core+pipe", "blocking"} <= per.keys():
        print(f"  blocking shell beyond core+pipe: {(per['blocking'] - per['core+pipe']) / 1000:.1f}k per decision")


if __name__ == "__main__":
    main()
