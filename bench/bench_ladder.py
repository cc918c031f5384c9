"""Run a living ladder of real bot processes for a few minutes and print what it did.

    python bench/bench_ladder.py --minutes 5 [-j 2] [--bots random lowest highest heuristic]

A fresh two-seat classic ladder in a temporary store: the seeding round-robin (``--seed-deals``
deals per pair), then ``arena ladder run`` matchmaking until the time is up.  Prints games per
hour, the ladder's own overhead as a share of wall time, how each bot's 95% interval narrowed,
the final table, and the time of one refit from the run's aggregated outcomes.

``--compare`` then plays a plain round-robin tournament of the same bots, in the same process
and store settings, for about as many games, so the ladder's games per hour can be read against
the tournament runner's on the same machine under the same load (a ratio within one run).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from arena.ladder import LadderState, ladder_standings, load_ladder, open_store, run_ladder  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=5.0)
    ap.add_argument("-j", "--concurrency", type=int, default=0)
    ap.add_argument("--bots", nargs="+", default=["random", "lowest", "highest", "heuristic"])
    ap.add_argument("--seed-deals", type=int, default=2)
    ap.add_argument("--move-ms", type=int, default=1000)
    ap.add_argument("--json", action="store_true", help="also print the numbers as one JSON line")
    ap.add_argument("--compare", action="store_true", help="then time a round-robin of the same bots")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-ladder-"))
    tmp.chmod(0o755)  # bots may run under a private uid: they must reach the store's copies
    (tmp / "bench.toml").write_text(
        f'rules = "classic"\nseats = 2\ndeals = {args.seed_deals}\nmax_turns = 2000\n'
        f"bots = {json.dumps(args.bots)}\nconcurrency = {args.concurrency}\n"
        f'store = "{tmp / "s.sqlite"}"\n[time]\nmove_ms = {args.move_ms}\nbank_ms = 10000\n')
    ladder = load_ladder(tmp / "bench.toml")
    store = open_store(ladder)
    widths: list[tuple[float, int, dict[str, float]]] = []
    t0 = time.perf_counter()

    def on_batch(summary, table, number) -> None:
        state = LadderState(ladder)
        state.refresh(store)
        r = state.ratings() or {}
        widths.append((time.perf_counter() - t0, state.games,
                       {k: round((v.ci_high - v.ci_low) / 2, 1) for k, v in r.items()}))

    load = os.getloadavg()
    summary = trio.run(lambda: run_ladder(ladder, store, games=None, hours=args.minutes / 60, on_batch=on_batch))
    st = ladder_standings(ladder, store)
    state = LadderState(ladder)
    state.refresh(store)
    t = time.perf_counter()
    state.ratings()
    refit_ms = 1000 * (time.perf_counter() - t)
    print(f"load average at start {load[0]:.2f} (1 min) on {os.cpu_count()} cores")
    print(f"{summary.games} games in {summary.wall_s:.0f} s = {summary.games_per_hour:,.0f} games/h "
          f"({summary.batches} batches after the seeding round-robin); ladder overhead "
          f"{summary.overhead_s:.2f} s = {100 * summary.overhead_share:.2f}% of wall time; one refit over "
          f"{state.games} games: {refit_ms:.1f} ms")
    print("95% half-width (Elo) by wall time:")
    for at, games, w in widths[:: max(1, len(widths) // 8)] + widths[-1:]:
        print(f"  {at:6.0f} s {games:6d} games  " + "  ".join(f"{k} ±{v:.0f}" for k, v in sorted(w.items())))
    print("final table:")
    for r in st.rows:
        print(f"  {r.rank}. {r.label:18} {r.elo:7.0f} ± {r.margin:4.0f}  {r.games:5d} games  LOS↓ "
              f"{'-' if r.los_next is None else f'{100 * r.los_next:.1f}%'}")
    compare = None
    if args.compare:
        compare = _round_robin(ladder, tmp, summary.games)
        print(f"round-robin of the same bots right after: {compare['games']} games in {compare['wall_s']:.0f} s = "
              f"{compare['games_per_hour']:,.0f} games/h (load {compare['load']:.2f}); the ladder ran at "
              f"{summary.games_per_hour / compare['games_per_hour']:.2f}x that rate")
        print("round-robin order: " + ", ".join(f"{b} {e:.0f}" for b, e in compare["order"]))
    if args.json:
        print(json.dumps({"summary": summary.as_json(), "refit_ms": refit_ms, "load": load[0],
                          "table": [r.as_json() for r in st.rows], "round_robin": compare}))


def _round_robin(ladder, tmp: Path, games: int) -> dict:
    from arena.ratings import fit_elo
    from arena.tournament.standings import outcomes
    from arena.tournament.store import Store
    from arena.tournament.run import run_tournament
    pairs = len(ladder.bots) * (len(ladder.bots) - 1) // 2
    deals = max(1, round(games / (2 * pairs)))
    cfg = ladder.tournament("bench-rr", format="round-robin", bots=list(ladder.bots), deals=deals,
                            seed=ladder.seed + 1)
    cfg.store = str(tmp / "rr.sqlite")
    store = Store(cfg.store)
    load = os.getloadavg()[0]
    t = time.perf_counter()
    trio.run(lambda: run_tournament(cfg, store, collect=False))
    wall = time.perf_counter() - t
    n = len(store.done_indexes("bench-rr"))
    r = fit_elo(outcomes(store.results("bench-rr")))
    return {"games": n, "wall_s": wall, "games_per_hour": 3600 * n / wall, "load": load,
            "order": [(b, r[b].elo) for b in r.standings()]}


if __name__ == "__main__":
    main()
