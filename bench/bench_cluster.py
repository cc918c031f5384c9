"""Games per second on a Dask LocalCluster versus the local runner, and what Dask adds per game.

    python bench/bench_cluster.py [--deals 8] [--workers 2] [--tasks 400]

The same tournament (bundled random, lowest and heuristic bots as real processes, two seats,
``--deals`` deals per pair, each in both seat orders) is played

* by the local runner with ``concurrency = --workers``;
* on a ``LocalCluster(n_workers=--workers, threads_per_worker=1, processes=True)``, twice: cold
  (the workers' first games: bot bundles unpacked and bot processes started)
  and warm (a second tournament on the same workers).

Rates are games stored per second from the runner's start to its last game (the cluster's own
start-up is timed separately). The per-game overhead of Dask itself is measured with trivial
tasks: one at a time (submit, wait, fetch: the latency a game pays) and many at once (the
scheduler's throughput). Needs ``pip install 'palace-arena[dask]'``.
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

from arena.tournament.config import TournamentConfig  # noqa: E402
from arena.tournament.run import Reporter, run_tournament  # noqa: E402
from arena.tournament.store import Store  # noqa: E402


class Clock(Reporter):
    def started(self, cfg, total, done) -> None:
        self.t0 = time.perf_counter()
        self.n = 0
        self.wall: list[float] = []

    def game_done(self, game, record) -> None:
        self.n += 1
        self.wall.append(record.wall_ms)
        self.t1 = time.perf_counter()

    @property
    def rate(self) -> float:
        return self.n / (self.t1 - self.t0)


def play(cfg: TournamentConfig) -> tuple[Clock, float]:
    clock = Clock()
    db = Store(cfg.store)
    t = time.perf_counter()
    trio.run(run_tournament, cfg, db, clock)
    total = time.perf_counter() - t
    db.close()
    return clock, total


def results(path: str, name: str) -> list:
    db = Store(path, readonly=True)
    out = [(g["index"], g["seed"], g["seats"], g["result"], [(s["seat"], s.get("action")) for s in
                                                              db.game_record(g["id"])["steps"]])
           for g in db.games(tournament=name, limit=10**6)]
    db.close()
    return out


def noop(x: int) -> int:
    return x


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--deals", type=int, default=8, help="deals per pair of bots (games = 6 x deals)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--tasks", type=int, default=400, help="trivial tasks for the overhead figures")
    args = ap.parse_args()
    try:
        import distributed
    except ImportError:
        sys.exit("needs Dask: pip install 'palace-arena[dask]'")

    tmp = Path(tempfile.mkdtemp(prefix="bench-cluster-"))

    def cfg(name: str, cluster: str = "") -> TournamentConfig:
        return TournamentConfig(name=name, bots=["random", "lowest", "heuristic"], deals=args.deals, seed=3,
                                concurrency=args.workers, store=str(tmp / f"{name}.sqlite"), cluster=cluster)

    local, local_total = play(cfg("local"))
    print(f"local runner ({args.workers} at a time): {local.n} games, {local.rate:.1f} games/s "
          f"(median game {statistics.median(local.wall):.0f} ms; {local_total:.2f} s in all)")

    t = time.perf_counter()
    lc = distributed.LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                                  dashboard_address=None, silence_logs=40)
    client = distributed.Client(lc, set_as_default=False)
    client.wait_for_workers(args.workers)
    print(f"LocalCluster with {args.workers} worker processes up in {time.perf_counter() - t:.2f} s")
    try:
        for label in ("cold", "warm"):
            name = f"cluster-{label}"
            c, total = play(cfg(name, lc.scheduler_address))
            same = results(str(tmp / f"{name}.sqlite"), name) == results(str(tmp / "local.sqlite"), "local")
            print(f"cluster, {label}: {c.n} games, {c.rate:.1f} games/s = {c.rate / local.rate:.2f}x local "
                  f"(median game {statistics.median(c.wall):.0f} ms; {total:.2f} s with connect/close; "
                  f"same games as local: {'yes' if same else 'NO'})")

        lat = []
        for i in range(50):
            t = time.perf_counter()
            client.submit(noop, i, pure=False).result()
            lat.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        client.gather(client.map(noop, range(args.tasks), pure=False))
        many = time.perf_counter() - t
        print(f"Dask overhead, trivial task: {statistics.median(lat):.2f} ms round trip one at a time "
              f"(p90 {statistics.quantiles(lat, n=10)[-1]:.2f} ms); {args.tasks} at once: "
              f"{1000 * many / args.tasks:.2f} ms each, {args.tasks / many:.0f} tasks/s")
    finally:
        client.close()
        lc.close()


if __name__ == "__main__":
    main()
