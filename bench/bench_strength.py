"""Measure the reference-bot ladder: duplicate-deal head-to-heads, in-process.

    python bench/bench_strength.py                          # default pairs, 2 and 4 players
    python bench/bench_strength.py --games 2000 --search-games 300 --budget-ms 50 --jobs 2
    python bench/bench_strength.py --pairs lowest:random --games 4000 --players 2
    python bench/bench_strength.py --round-robin --games 400 --budget-ms 20

Agents get exactly the messages the referee would send (:mod:`arena.ai.match` builds
them with ``protocol.start/request``, ``seat_view`` and per-seat censored events) and
nothing else, so the numbers are the bots' real strength, minus process overhead.

Duplicate deals: every seed is played twice with the seats swapped (2 players), or
four times with the tested bot rotated through the seats against three copies of the
opponent (4 players), so a lucky deal helps both sides equally. Win rates count a
draw as half. The 95% interval is over deals (each deal's games averaged), the honest
unit when games come in correlated pairs.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from arena import strategies  # noqa: E402
from arena.ai.agents import HeuristicAgent, ISMCTSAgent, MonteCarloAgent, PolicyAgent  # noqa: E402
from arena.ai.budget import Budget  # noqa: E402
from arena.ai.match import MatchClock, play  # noqa: E402
from arena.ai.setup_table import fallback_table  # noqa: E402
from arena.engine import preset  # noqa: E402

LADDER = ["random", "lowest", "heuristic", "heuristic-setup", "learned", "montecarlo", "ismcts"]
SEARCH = {"montecarlo", "ismcts", "montecarlo-uniform", "ismcts-uniform"}  # and every ismcts-VARIANT
DEFAULT_PAIRS = [("lowest", "random"), ("heuristic", "lowest"), ("heuristic-setup", "lowest"),
                 ("heuristic-setup", "heuristic"), ("montecarlo", "heuristic-setup"),
                 ("ismcts", "heuristic-setup")]
DEFAULT_FOUR = [("heuristic-setup", "heuristic"), ("montecarlo", "heuristic-setup"),
                ("ismcts", "heuristic-setup")]


def make_agent(name: str, seed: int, opts) -> object:
    budget = Budget(opts.budget_ms, opts.iterations)
    if name == "random":
        return PolicyAgent(strategies.random_policy(random.Random(seed)), name)
    if name == "lowest":
        return PolicyAgent(strategies.lowest_first, name)
    if name == "heuristic":
        return PolicyAgent(strategies.heuristic, name)
    if name == "heuristic-setup":
        return HeuristicAgent(seed=seed)
    if name == "heuristic-nosetup":  # the engine heuristic with the untrained 'high cards up' setup
        return HeuristicAgent(table=fallback_table(), seed=seed)
    if name == "learned" or name.startswith("learned@"):  # learned@PATH: other weights (an untrained net)
        from arena.ai.learned import LearnedAgent
        return LearnedAgent(name.partition("@")[2] or None, seed=seed)
    kw = {"horizon": opts.horizon} if getattr(opts, "horizon", None) else {}
    base, _, variant = name.partition("-")
    if base in ("montecarlo", "ismcts") and variant in ("", "uniform"):
        agent = (MonteCarloAgent if base == "montecarlo" else ISMCTSAgent)(budget, seed=seed, **kw)
        agent.infer = variant != "uniform"  # -uniform: hidden cards dealt without the resampler's inferences
        return agent
    if base == "ismcts" and set(variant.split("+")) <= set(ISMCTS_VARIANTS):
        # ismcts-reuse (the variants measured are in docs/BOTS.md; several join with '+')
        for v in variant.split("+"):
            kw.update(ISMCTS_VARIANTS[v])
        return ISMCTSAgent(budget, seed=seed, **kw)
    raise SystemExit(f"unknown bot {name!r}; known: {', '.join(LADDER + ['heuristic-nosetup', 'learned@WEIGHTS'])}, "
                     f"montecarlo-uniform, ismcts-uniform, ismcts-{'/'.join(ISMCTS_VARIANTS)} (joined by '+')")


ISMCTS_VARIANTS = {"reuse": {"reuse": True}, "pickups": {"widen_pick_ups": True}}


def run_deal(task) -> dict:
    """All games of one deal for bot ``a`` against ``b``; returns a's per-game outcomes."""
    a, b, rules_name, players, seed, opts = task
    rules = preset(rules_name)
    clock = MatchClock(move_ms=opts.move_ms)
    out = {"score": [], "win": [], "last": [], "draw": [], "think": 0.0, "decisions": 0, "turns": 0}
    for rot in range(players):
        seat = rot  # the seat bot a sits in
        names = [b] * players
        names[seat] = a
        agents = [make_agent(nm, seed * 31 + i, opts) for i, nm in enumerate(names)]
        g = play(agents, rules, seed, clock=clock)
        res = g.result
        out["turns"] += g.turns
        out["draw"].append(1.0 if res.draw else 0.0)
        if res.draw:
            out["win"].append(0.5 if players == 2 else 1.0 / players)
            out["last"].append(0.5 if players == 2 else 1.0 / players)
            out["score"].append(0.5)
        else:
            out["win"].append(1.0 if res.winner == seat else 0.0)
            # last is only known when the order is complete (play-on games, or 2 players)
            out["last"].append(float(res.loser == seat) if res.complete else math.nan)
            place = res.place_of(seat)
            out["score"].append((players - place) / (players - 1) if res.complete or place == 1 else 0.0)
        out["think"] += g.think_s[seat]
        out["decisions"] += g.decisions[seat]
    return out


def interval(values: list[float]) -> tuple[float, float]:
    """Mean and 95% half-width (normal approximation) of per-deal values."""
    vals = [v for v in values if not math.isnan(v)]
    n = len(vals)
    if n == 0:
        return math.nan, math.nan
    m = sum(vals) / n
    if n < 2:
        return m, math.nan
    var = sum((v - m) ** 2 for v in vals) / (n - 1)
    return m, 1.96 * math.sqrt(var / n)


def measure(pool, a: str, b: str, rules_name: str, players: int, games: int, opts, seed0: int) -> dict:
    deals = max(1, games // players)
    tasks = [(a, b, rules_name, players, seed0 + d, opts) for d in range(deals)]
    t0 = time.perf_counter()
    outs = pool.map(run_deal, tasks, chunksize=max(1, min(8, deals // (4 * opts.jobs) or 1))) if pool else \
        [run_deal(t) for t in tasks]
    wall = time.perf_counter() - t0

    def per_deal(key):
        res = []
        for o in outs:
            v = [x for x in o[key] if not math.isnan(x)]
            res.append(sum(v) / len(v) if v else math.nan)
        return res

    n_games = sum(len(o["win"]) for o in outs)
    think = sum(o["think"] for o in outs)
    dec = sum(o["decisions"] for o in outs)
    return {"a": a, "b": b, "rules": rules_name, "players": players, "games": n_games,
            "win": interval(per_deal("win")), "last": interval(per_deal("last")),
            "score": interval(per_deal("score")),
            "draws": sum(sum(o["draw"]) for o in outs) / n_games,
            "ms_per_decision": 1000 * think / dec if dec else 0.0,
            "turns": sum(o["turns"] for o in outs) / n_games, "wall_s": wall}


def fmt(r: dict) -> str:
    w, wh = r["win"]
    line = (f"| {r['rules']} | {r['players']} | {r['a']} vs {r['b']} | {r['games']} | "
            f"{100 * w:.1f}% ± {100 * wh:.1f} | ")
    if r["players"] > 2:
        lm, lh = r["last"]
        line += "n/a | " if math.isnan(lm) else f"{100 * lm:.1f}% ± {100 * lh:.1f} | "
    else:
        line += "- | "
    line += f"{100 * r['draws']:.2f}% | {r['ms_per_decision']:.1f} | {r['wall_s']:.0f} |"
    return line


HEADER = ("| rules | players | bot vs opponent(s) | games | win rate (95%) | last | draws | "
          "ms/decision | wall s |\n|---|---|---|---|---|---|---|---|---|")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--games", type=int, default=2000, help="games per pair without search bots")
    p.add_argument("--search-games", type=int, default=200, help="games per pair with a search bot")
    p.add_argument("--budget-ms", type=float, default=None, help="search time per decision (ms)")
    p.add_argument("--iterations", type=int, default=None,
                   help="search iterations per decision (MC: rounds over all actions; ISMCTS: iterations)")
    p.add_argument("--horizon", type=int, default=None,
                   help="playout turns before the evaluator scores the position (default: the bots')")
    p.add_argument("--move-ms", type=int, default=1000, help="the clock the requests announce")
    p.add_argument("--presets", default="classic,shithead")
    p.add_argument("--players", default="2,4")
    p.add_argument("--pairs", default=None, help="a:b,... (bot a against bot b)")
    p.add_argument("--four", default=None, help="a:b,... for 4 players (a against three b)")
    p.add_argument("--round-robin", action="store_true", help="every pair of the ladder (2 players)")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    opts = p.parse_args(argv)
    if opts.budget_ms is None and opts.iterations is None:
        opts.budget_ms = 50.0

    def pairs_of(text):
        return [tuple(x.split(":")) for x in text.split(",") if x]

    two = pairs_of(opts.pairs) if opts.pairs else DEFAULT_PAIRS
    if opts.round_robin:
        two = [(LADDER[j], LADDER[i]) for i in range(len(LADDER)) for j in range(i + 1, len(LADDER))]
    four = pairs_of(opts.four) if opts.four else DEFAULT_FOUR
    player_counts = [int(x) for x in opts.players.split(",")]
    budget = f"{opts.budget_ms:g} ms" if opts.budget_ms else ""
    if opts.iterations:
        budget += (" / " if budget else "") + f"{opts.iterations} iterations"
    print(f"search budget per decision: {budget}; move_ms announced: {opts.move_ms}; jobs: {opts.jobs}")
    print(HEADER, flush=True)
    pool = mp.get_context("fork").Pool(opts.jobs) if opts.jobs > 1 else None
    try:
        for rules_name in opts.presets.split(","):
            for players in player_counts:
                for a, b in (two if players == 2 else four):
                    games = opts.search_games if {a, b} & SEARCH or any(x.startswith("ismcts-") for x in (a, b)) else opts.games
                    r = measure(pool, a, b, rules_name, players, games, opts, opts.seed)
                    print(fmt(r), flush=True)
    finally:
        if pool:
            pool.close()
            pool.join()


if __name__ == "__main__":
    main()
