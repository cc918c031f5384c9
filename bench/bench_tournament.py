"""Tournament throughput and the referee's memory over a long run.

A round-robin of two trivial bots (real processes, a few lines of Python that answer
every request with its first action), through the real runner, store and launcher:

1. games/s at concurrency 1 and at concurrency = cores (``--quick`` games each);
2. one long run of ``--games`` games at concurrency = cores: games/s over its first and
   last tenth, the referee's RSS after the first tenth and at the end, and its peak RSS
   (``resource.getrusage``); above concurrency 1 the games are played by referee worker
   processes (``arena.tournament.worker``), whose RSS and peak (``/proc``) are printed too;
3. a shorter run under ``tracemalloc`` (``--traced-games``): the Python heap retained per
   game between the first tenth and the end, and the heap's peak. A runner that holds on
   to finished games shows here: the heap grows with the game count. (tracemalloc slows
   this allocation-heavy code several times over, hence its own, shorter run.)

    python bench/bench_tournament.py                       # 2000 games in the long run
    python bench/bench_tournament.py --games 10000         # the long run proper (minutes)
    python bench/bench_tournament.py --games 500 --quick 100 --traced-games 200   # a quick look

Each run also prints the referee's CPU per game: this process's CPU time plus its referee
workers' (``/proc``), from the first tenth of the run to its last game. On a machine shared with other jobs,
wall-clock rates move with the load while CPU per game barely does, so compare those.

Prints figures only; nothing is asserted.
"""

from __future__ import annotations

import argparse
from functools import partial
import os
import resource
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import trio  # noqa: E402

from arena.tournament.config import load_config  # noqa: E402
from arena.tournament.run import Reporter, run_tournament  # noqa: E402
from arena.tournament.store import Store  # noqa: E402

TRIVIAL_BOT = (Path(__file__).resolve().parent / "trivial_bot.py").read_text()  # copied next to each bot


def make_bots(root: Path) -> list[str]:
    paths = []
    for name in ("trivial-a", "trivial-b"):
        d = root / name
        d.mkdir()
        (d / "bot.py").write_text(TRIVIAL_BOT)
        (d / "bot.toml").write_text(f'name = "{name}"\nversion = "1"\ncommand = ["python3", "bot.py", "{name}"]\n')
        paths.append(str(d))
    return paths


def rss_mb() -> float:
    """Resident set size now (Linux /proc), in MB."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 1e6
    except (OSError, ValueError):
        return float("nan")


def peak_rss_mb() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return peak * 1024 / 1e6 if sys.platform != "darwin" else peak / 1e6


class Timing(Reporter):
    def __init__(self, total: int, trace: bool):
        self.total = total
        self.trace = trace
        self.times: list[float] = []
        self.faults = 0
        self.mark: dict[str, float] | None = None  # memory after the first tenth
        self.last: dict[str, float] | None = None  # memory as the last game finished

    def started(self, cfg, total, done) -> None:
        self.t0 = time.perf_counter()

    def game_done(self, game, record) -> None:
        self.times.append(time.perf_counter())
        self.faults += len(record.faults)
        if self.mark is None and len(self.times) >= max(1, self.total // 10):
            self.mark = snapshot(self.trace)
        if len(self.times) == self.total:  # the workers still run: their memory at the last game
            self.last = snapshot(self.trace)


def worker_memory_mb() -> tuple[float, float]:
    """(RSS now, peak RSS) summed over this process's referee workers (``arena.tournament.worker``),
    which play the games once concurrency is above 1; (0, 0) when none is running."""
    rss = peak = 0.0
    me = str(os.getpid())
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            status = (proc / "status").read_text()
            if b"arena.tournament.worker" not in (proc / "cmdline").read_bytes():
                continue
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if fields.get("PPid", "").strip() != me:
            continue
        rss += int(fields.get("VmRSS", "0 kB").split()[0]) / 1e3
        peak += int(fields.get("VmHWM", "0 kB").split()[0]) / 1e3
    return rss, peak


def worker_cpu_s() -> float:
    """CPU seconds (user + system) used so far by this process's referee workers."""
    total = 0.0
    me = str(os.getpid())
    tick = os.sysconf("SC_CLK_TCK")
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if b"arena.tournament.worker" not in (proc / "cmdline").read_bytes():
                continue
            stat = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if stat[1] == me:  # fields after the command: state, ppid, ...; utime and stime are 12 and 13
            total += (int(stat[11]) + int(stat[12])) / tick
    return total


def own_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def snapshot(trace: bool) -> dict[str, float]:
    out = {"rss": rss_mb(), "peak_rss": peak_rss_mb(), "cpu": own_cpu_s(), "worker_cpu": worker_cpu_s()}
    out["worker_rss"], out["worker_peak"] = worker_memory_mb()
    if trace:
        cur, peak = tracemalloc.get_traced_memory()
        out.update(heap=cur / 1e6, heap_peak=peak / 1e6)
    return out


def run(bots: list[str], games: int, concurrency: int, rules: str, store: Path, name: str,
        trace: bool = False) -> tuple[Timing, float, int]:
    cfg = load_config(None, {"name": name, "bots": bots, "seats": 2, "deals": max(1, games // 2),
                             "rules": rules, "concurrency": concurrency, "store": str(store),
                             "move_ms": 10_000, "handshake_ms": 30_000})
    db = Store(cfg.store)
    rep = Timing(games, trace)
    t0 = time.perf_counter()
    trio.run(partial(run_tournament, collect=False), cfg, db, rep)  # as `arena tournament` runs it
    elapsed = time.perf_counter() - t0
    db.close()
    return rep, elapsed, rep.faults


def cpu_ms_per_game(rep: Timing) -> str:
    """The referee's CPU per game between the first tenth of the run and its last game: this
    process and its workers (from the first tenth on, so the workers' start-up is left out)."""
    first, last = rep.mark, rep.last
    n = len(rep.times) - max(1, rep.total // 10)
    if first is None or last is None or n <= 0:
        return "n/a"
    own = (last["cpu"] - first["cpu"]) * 1e3 / n
    workers = (last["worker_cpu"] - first["worker_cpu"]) * 1e3 / n
    return f"{own + workers:.2f} ms (this process {own:.2f}, referee workers {workers:.2f})"


def rate(times: list[float], lo: int, hi: int) -> float:
    """Games/s between finished game ``lo`` and ``hi`` (indexes into the finish times)."""
    return (hi - lo) / (times[hi] - times[lo]) if times[hi] > times[lo] else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--games", type=int, default=2000, help="games in the long run (10000+ for a real soak)")
    ap.add_argument("--quick", type=int, default=200, help="games per concurrency measurement")
    ap.add_argument("--rules", default="powers", help="preset (powers: first-action games stay short)")
    ap.add_argument("--traced-games", type=int, default=400,
                    help="games in the tracemalloc run (0: skip it)")
    args = ap.parse_args()
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory(prefix="bench-tournament-") as tmp:
        root = Path(tmp)
        root.chmod(0o755)  # a root referee runs bots under private uids, which must reach their files
        bots = make_bots(root)
        print(f"tournament benchmark: round-robin of two trivial Python bots, rules {args.rules}, {cores} cores")
        quick = {}
        for conc in sorted({1, cores}):
            rep, elapsed, faults = run(bots, args.quick, conc, args.rules, root / f"q{conc}.sqlite", f"quick-{conc}")
            n = len(rep.times)
            quick[conc] = n / elapsed
            print(f"  concurrency {conc:2}: {n} games in {elapsed:6.2f} s = {n / elapsed:7.1f} games/s"
                  f"  (faults: {faults}); referee CPU per game {cpu_ms_per_game(rep)}", flush=True)
        if cores > 1:
            print(f"  speed-up at concurrency {cores}: {quick[cores] / quick[1]:.2f}x")

        # the long run, untraced: throughput at its start and end, RSS
        before = snapshot(False)
        rep, elapsed, faults = run(bots, args.games, cores, args.rules, root / "long.sqlite", "long")
        end = snapshot(False)
        n = len(rep.times)
        tenth = max(1, n // 10)
        first, last = rate(rep.times, 0, tenth), rate(rep.times, n - 1 - tenth, n - 1)
        print(f"  long run: {n} games at concurrency {cores} in {elapsed:.1f} s = {n / elapsed:.1f} games/s"
              f"  (faults: {faults})")
        print(f"    referee CPU per game: {cpu_ms_per_game(rep)}")
        print(f"    games/s, first tenth: {first:7.1f}   last tenth: {last:7.1f}   end/start: {last / first:.2f}x")
        mark = rep.mark or before
        print(f"    RSS MB: before {before['rss']:.1f}, after 1/10 {mark['rss']:.1f}, end {end['rss']:.1f} "
              f"({(end['rss'] - mark['rss']) / max(1, n - tenth) * 1e3:.1f} kB/game); "
              f"peak RSS (ru_maxrss) {end['peak_rss']:.1f}")
        last = rep.last or end
        if mark["worker_rss"] or last["worker_rss"]:
            print(f"    referee workers' RSS MB (all {cores}): after 1/10 {mark['worker_rss']:.1f}, "
                  f"at the last game {last['worker_rss']:.1f} "
                  f"({(last['worker_rss'] - mark['worker_rss']) / max(1, n - tenth) * 1e3:.1f} kB/game); "
                  f"peak {last['worker_peak']:.1f}")
        if args.traced_games <= 0:
            return
        # a traced run: the Python heap (tracemalloc slows allocation-heavy code several times over)
        tracemalloc.start()
        before = snapshot(True)
        rep, elapsed, faults = run(bots, args.traced_games, cores, args.rules, root / "traced.sqlite", "traced",
                                   trace=True)
        end = snapshot(True)
        tracemalloc.stop()
        n = len(rep.times)
        tenth = max(1, n // 10)
        mark = rep.mark or before
        print(f"  traced run (tracemalloc): {n} games in {elapsed:.1f} s = {n / elapsed:.1f} games/s")
        print(f"    Python heap MB: after 1/10 {mark['heap']:.1f}, end {end['heap']:.1f} "
              f"({(end['heap'] - mark['heap']) / max(1, n - tenth) * 1e3:.1f} kB/game retained); "
              f"tracemalloc peak {end['heap_peak']:.1f}; peak RSS (ru_maxrss) {end['peak_rss']:.1f}")

if __name__ == "__main__":
    main()
