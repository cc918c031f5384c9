"""Load on ``arena serve``: a played club store, a real HTTP load generator, figures per client count.

    python bench/bench_serve.py                         # this checkout, 1/16/64/256 clients, 10 s each
    python bench/bench_serve.py --compare /tmp/prev     # and another checkout's arena, interleaved
    python bench/bench_serve.py --clients 64 --seconds 5 --streams 1000
    python bench/bench_serve.py --per-kind --compare /tmp/prev   # requests per CPU second, per page kind
    python bench/bench_serve.py --clients 64 --streams 0 --ladder --seconds 30   # and arena serve --ladder
    python bench/bench_serve.py --clients 64 --streams 0 --watch --compare /tmp/prev  # a phone and a laptop page see a new game

The store: 20 bots on one ladder (``club``), 10,000 games in batches of 12 (``ladder:club:batch-N``,
as ``arena ladder run`` names them) and a rating snapshot of every bot after each 120 games. The
games are real: a few dozen are played in-process by the referee with the bundled strategies as
mock bots (no bot processes), then relabelled onto the 20 bots' pairings and written through the
store's own writer (``Store.save_game``), so every game page replays a real game. Building it
takes about half a minute.

The load: ``wrk`` (Debian package ``wrk``) with a Lua script that picks each request from a
weighted mix of what people keep open: the ladder's standings, the overview, a bot page, a game
page (the replay), the game list, and static files. The live stream (``/events``) never ends, so
it is measured apart: ``--streams`` open event streams are held while the store gets a new game,
and the run prints how many streams saw it and how long the last one took.

Each server (this checkout's, and ``--compare``'s) runs on the same store in turn, started once
for all its client counts, so the figures of one run are comparable. Before its first row every
path of the mix is asked for four times (the first views; their time is printed as ``warm-up
s``), so a row measures a room whose pages have been opened, not the first visitor. ``req/cpu-s``
is the requests of a row per CPU second of the server's processes (read from /proc before and
after), which the machine's load moves much less than requests a second.
``--per-kind`` measures cost rather than speed: the server's own CPU seconds (all its processes,
from /proc) per request of each page kind, kept, answered ``304``, and built afresh (the last in
a separate process, on a read-only copy of the store, as a changed store makes the server do),
which the machine's load moves far less than requests a second. wrk shares the machine with the server: on a
2-core machine it takes part of the CPU it measures. Beside ``--ladder`` it runs inside the pages' own
CPU group (:func:`wrk_place`), so the ladder pays for the simulated clients no more than a club's
ladder pays for its visitors' machines; their CPU is still printed. Prints figures only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

LADDER = "club"
BATCH = 12

# path kind -> weight (of 100): what a room of spectators asks for
MIX = {"standings": 30, "overview": 10, "bot": 20, "game": 15, "games": 5, "static": 20}


# --------------------------------------------------------------------------- the store

def _played_records(n: int) -> list[dict]:
    """``n`` real two-seat games, played in-process by the referee with the bundled strategies."""
    import trio

    from arena import strategies
    from arena.referee.testing import MockBot, policy
    from arena.tournament.config import TournamentConfig
    from arena.tournament.run import run_tournament
    from arena.tournament.store import Store

    choose = {"random": strategies.random_policy(random.Random(1)), "lowest": strategies.lowest_first,
              "highest": strategies.highest_first, "heuristic": strategies.heuristic}

    def launch(spec):
        pick = choose[spec.name]
        return MockBot(policy(lambda msg: pick(msg), spec.name), name=spec.name)

    with tempfile.TemporaryDirectory() as tmp:
        cfg = TournamentConfig(name="templates", bots=list(choose), deals=max(1, n // 12), max_turns=600,
                               store=str(Path(tmp) / "t.sqlite"))
        store = Store(cfg.store)
        trio.run(lambda: run_tournament(cfg, store, launcher=launch))
        ids = [r[0] for r in store.db.execute("SELECT id FROM games ORDER BY idx")]
        records = [store.game_record(i) for i in ids]
        store.close()
    return [r for r in records if r]


def build_store(path: Path, bots: int, games: int) -> dict:
    """The club store (see the module's docstring); returns the paths the load asks for."""
    from arena.tournament.store import Store

    t0 = time.perf_counter()
    templates = _played_records(48)
    labels = [f"bot{i:02d}@1.0" for i in range(bots)]
    rng = random.Random(7)
    strength = {b: rng.random() for b in labels}
    store = Store(path)  # (the ladder tables come with the store's schema)
    now = time.time() - games * 3
    store.db.execute("INSERT INTO ladders VALUES (?,?,?)",
                     (LADDER, json.dumps({"rules": "classic", "options": {}, "seats": 2}), now))
    for b in labels:
        store.db.execute("INSERT INTO ladder_members VALUES (?,?,?,?,?,?,?,?,?)",
                         (LADDER, b, b.split("@")[0], "1.0", "0" * 16, "random", "initial",
                          f"ladder:{LADDER}:seed", now))
    ids, wins, played = [], {b: 0.0 for b in labels}, {b: 0 for b in labels}
    for k in range(games):
        batch, idx = divmod(k, BATCH)
        tid = f"ladder:{LADDER}:batch-{batch:04d}"
        if idx == 0:
            store.begin_tournament(tid, {"format": "ladder-batch", "rules": "classic", "seats": 2}, BATCH)
        a, b = rng.sample(labels, 2)
        rec = dict(templates[k % len(templates)])
        winner = a if rng.random() < 0.5 + (strength[a] - strength[b]) / 2 else b
        seats = [a, b]
        w = seats.index(winner)
        rec.update(game_id=f"{LADDER}-{k:05d}", players=seats,
                   result=dict(rec["result"], order=[[w], [1 - w]], forfeits={}), faults=[])
        store.save_game(tid, idx, seats, rec)
        ids.append(rec["game_id"])
        wins[winner] += 1
        played[a] += 1
        played[b] += 1
        if idx == BATCH - 1:
            store.finish_tournament(tid)
        if (k + 1) % 120 == 0:  # a rating snapshot, as the ladder takes them (a stand-in fit: win share)
            rows = []
            for bot in labels:
                share = (wins[bot] + 1) / (played[bot] + 2)
                elo = 1500 + 400 * (share - 0.5) * 2
                half = 800 / (played[bot] + 4) ** 0.5
                rows.append((LADDER, now + 3 * k, k + 1, bot, elo, elo - half, elo + half))
            with store.tx() as db:
                db.executemany("INSERT INTO rating_snapshots VALUES (?,?,?,?,?,?,?)", rows)
    store.close()
    print(f"store: {bots} bots, {games} games in {games // BATCH} batches, "
          f"{games // 120} rating snapshots ({len(templates)} real games relabelled), "
          f"{path.stat().st_size / 2**20:.0f} MB, built in {time.perf_counter() - t0:.0f} s")
    return {"bots": labels, "games": ids}


def mix_paths(paths: dict, seed: int = 1) -> list[str]:
    """The 100 paths the load picks from, each kind as often as its weight."""
    rng = random.Random(seed)
    picks = {
        "standings": lambda: f"/ladders/{LADDER}",
        "overview": lambda: "/",
        "bot": lambda: "/bots/" + rng.choice(paths["bots"]),
        "game": lambda: "/games/" + rng.choice(paths["games"][-500:]),  # the recent games people open
        "games": lambda: "/games?bot=" + rng.choice(paths["bots"]).split("@")[0],
        "static": lambda: rng.choice(paths["static"]),
    }
    return [picks[kind]() for kind, weight in MIX.items() for _ in range(weight)]


def lua_script(table: list[str]) -> str:
    """The wrk script: each request a uniform pick from ``table`` (the weighted mix)."""
    return ("local paths = {" + ",".join(json.dumps(p) for p in table) + "}\n"
            "local n = 0\n"
            "function setup(thread) n = n + 1; thread:set('seed', n) end\n"
            "function init(args) math.randomseed(seed * 7919) end\n"
            "function request() return wrk.format('GET', paths[math.random(#paths)]) end\n")


# --------------------------------------------------------------------------- the server

class Server:
    """``arena serve`` from the checkout at ``root`` on a free port."""

    def __init__(self, root: Path, store: Path, extra: list[str]):
        env = dict(os.environ, PYTHONPATH=str(root))
        self.log = tempfile.TemporaryFile("w+")
        if "class Connections" in (root / "arena" / "serve" / "limits.py").read_text():  # all clients share one address
            extra = ["--connections-per-address", "100000", *extra]
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from arena.cli.main import app; app()", "serve", "--store", str(store),
             "--port", "0", *extra], cwd=root, env=env, stdout=subprocess.PIPE, stderr=self.log, text=True,
            start_new_session=True)
        self.url = ""
        for line in self.proc.stdout:
            if m := re.match(r"arena serve: (http://\S+?)/?\s", line):
                self.url = m.group(1)
            if line.startswith("Ctrl-C"):
                break
        if not self.url:
            self.log.seek(0)
            raise SystemExit(f"arena serve did not start from {root}: {self.log.read()[-2000:]}")
        import threading  # a ladder beside the server prints here: keep the pipe from filling
        threading.Thread(target=lambda: [None for _ in self.proc.stdout], daemon=True).start()
        deadline = time.monotonic() + 30
        while not self.get("/static/site.css"):
            if time.monotonic() > deadline:
                raise SystemExit(f"arena serve from {root} did not answer")
            time.sleep(0.2)

    def get(self, path: str) -> bytes:
        import urllib.request
        try:
            with urllib.request.urlopen(self.url + path, timeout=60) as r:
                return r.read()
        except OSError:
            return b""

    def static_paths(self) -> list[str]:
        """The static files a page links to (names may carry a content hash)."""
        page = self.get("/").decode()
        found = re.findall(r'(?:href|src)="(/static/[^"]+)"', page)
        return sorted(set(found)) or ["/static/site.css"]

    def stop(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def warm_up(server: Server, paths: list[str], rounds: int = 4) -> float:
    """Every path of the mix asked ``rounds`` times by 4 clients at once (each serving process
    builds its own pages), outside the measurement; the seconds it took: the first views' cost."""
    from concurrent.futures import ThreadPoolExecutor
    t0 = time.perf_counter()
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(server.get, paths * rounds))
    return time.perf_counter() - t0


def run_wrk(url: str, script: Path, clients: int, seconds: float, placed: "WrkPlace | None" = None) -> dict:
    """wrk's figures for one row; ``placed``: where wrk runs for the scheduler (:func:`wrk_place`),
    else wherever this process runs."""
    threads = max(1, min(clients, 2))
    cmd = ["wrk", "-t", str(threads), "-c", str(clients), "-d", f"{seconds:g}s", "--latency",
           "--timeout", "10s", "-s", str(script), url]
    if placed is not None and placed.enter:  # the shell moves itself, then becomes wrk: it never runs elsewhere
        cmd = ["sh", "-c", f'{placed.enter} || exit {WRK_UNPLACED}; exec "$@"', "wrk", *cmd]
    out = subprocess.run(cmd, capture_output=True, text=True, start_new_session=placed is not None and placed.session)
    if out.returncode == WRK_UNPLACED:
        raise SystemExit(f"wrk could not be placed {placed.said}: {out.stderr.strip()[-300:]}")
    text = out.stdout

    def ms(label: str) -> float:
        m = re.search(rf"^\s+{label}%\s+([\d.]+)(us|ms|s)\s*$", text, re.M)
        if not m:
            return float("nan")
        return float(m.group(1)) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[m.group(2)]

    rps = re.search(r"Requests/sec:\s+([\d.]+)", text)
    total = re.search(r"(\d+) requests in", text)
    errors = sum(int(x) for x in re.findall(r"(?:connect|read|write|timeout) (\d+)", text))
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    return {"rps": float(rps.group(1)) if rps else 0.0, "p50": ms("50"), "p99": ms("99"),
            "requests": int(total.group(1)) if total else 0,
            "errors": errors + (int(non2xx.group(1)) if non2xx else 0)}


# --------------------------------------------------------------------------- where wrk's CPU is charged

WRK_UNPLACED = 97  # the wrapper's exit status when wrk could not be moved where it was to run


@dataclass(frozen=True)
class WrkPlace:
    """Where wrk runs beside a ladder: ``enter``, a shell command that moves the shell (then wrk)
    there ("" for nowhere special); ``session``: in a session of its own; ``said``: the bench's
    line about it."""

    enter: str
    session: bool
    said: str


def wrk_place(server_pid: int) -> WrkPlace:
    """The load generator's CPU charged to the pages, as a club's is (its clients' machines are
    not the server's): wrk in the serving processes' own cpu cgroup (v1 or v2), so the pages and
    wrk together weigh what the pages weigh alone. Where the server bounded its pages with a niced
    autogroup instead, wrk gets an autogroup of its own at the same nice (a second group at the
    pages' weight: the ladder then faces twice the pages' weight, which the line says); where the
    server set no share, wrk runs as this process does. Never silent: the line is printed."""
    from arena.bots.procs import cgroup_dir, cgroup_mounts
    from arena.serve.cpushare import PAGES_CGROUP
    try:
        lines = Path(f"/proc/{server_pid}/cgroup").read_text().splitlines()
    except OSError as exc:
        return WrkPlace("", False, f"as the bench runs (the server's groups unreadable: {exc.strerror})")
    groups = {}
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for c in controllers.split(",") if controllers else [""]:
            groups[c] = path
    path = groups.get("cpu") or groups.get("")
    if path and Path(path).name.startswith(PAGES_CGROUP):
        for fstype, mnt, root, opts in cgroup_mounts():
            kind = ("v1" if fstype == "cgroup" and "cpu" in opts and "cpu" in groups else
                    "v2" if fstype == "cgroup2" and "cpu" not in groups else "")
            where = cgroup_dir(mnt, root, path) if kind else None
            if where and os.access(Path(where) / "cgroup.procs", os.W_OK):
                return WrkPlace(f"echo $$ > '{where}/cgroup.procs'", False,
                                f"in the pages' own cgroup {kind} {where} (wrk and the pages share their weight)")
    try:
        words = Path(f"/proc/{server_pid}/autogroup").read_text().split()
        nice = int(words[2]) if len(words) == 3 and words[1] == "nice" else 0
    except (OSError, ValueError):
        nice = 0
    if nice > 0:
        return WrkPlace(f"echo {nice} > /proc/self/autogroup", True,
                        f"in an autogroup of its own at the pages' nice {nice} (no pages cgroup: the ladder "
                        "faces the pages' weight twice)")
    return WrkPlace("", False, "as the bench runs, at the default weight (the server set no pages' share "
                    "this bench can join)")


# --------------------------------------------------------------------------- cost per page kind

def group_cpu(pgid: int) -> float:
    """CPU seconds (user + system) of every live process in the process group ``pgid``."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def kind_paths(paths: dict, static: list[str]) -> dict[str, str]:
    """One path of each kind of the mix."""
    bot = paths["bots"][3]
    return {"standings": f"/ladders/{LADDER}", "overview": "/", "bot": f"/bots/{bot}",
            "game": "/games/" + paths["games"][-3], "games": "/games?bot=" + bot.split("@")[0],
            "static": next((p for p in static if p.endswith(".css")), static[0])}


BUILD_COST = """
import json, sys, time
from pathlib import Path
from arena.serve import data, views
import arena.ladder.standings, arena.replay.simulate, arena.replay.view
from arena.replay.simulate import simulate
from arena.replay.view import replay_data
db = data.open_read(Path(sys.argv[1])); kinds = json.loads(sys.argv[2]); bot = kinds["bot"].split("/bots/", 1)[1]
gid = kinds["game"].split("/games/", 1)[1]
build = {"standings": lambda: views.ladder_page(db, "club", None), "overview": lambda: views.home(db, 1),
         "bot": lambda: views.bot_page(db, bot), "games": lambda: data.search_games(db, bot=bot.split("@")[0], limit=100),
         "game": lambda: (data.game_row(db, gid), replay_data(simulate(db.game_record(gid))))}
out = {}
for kind, fn in build.items():
    fn()  # the first build reads what a process keeps (a stored game's log, say): a store change keeps it
    t0 = time.process_time()
    for _ in range(3):
        fn()
    out[kind] = (time.process_time() - t0) / 3
print(json.dumps(out))
"""


def per_kind(servers: list, store: Path, paths: dict, seconds: float, tmp: Path) -> None:
    """Requests per server CPU second of each page kind: kept (gzip, as browsers ask), ``304``,
    and the page model's build after a change of the store."""
    import urllib.request
    print(f"{'server':<8} {'kind':<10} {'kept req/CPU-s':>14} {'304 req/CPU-s':>13} {'build CPU ms':>12} {'load':>5}")
    for name, root, extra in servers:
        server = Server(root, store, extra)
        try:
            kinds = kind_paths(paths, server.static_paths())
            costs = {}
            for kind, path in kinds.items():
                server.get(path)
                with urllib.request.urlopen(server.url + path, timeout=60) as r:
                    etag = r.headers.get("ETag")
                row = []
                for headers in ([], ["-H", f"If-None-Match: {etag}"] if etag else None):
                    if headers is None:
                        row.append(float("nan"))
                        continue
                    cpu0 = group_cpu(server.proc.pid)
                    out = subprocess.run(["wrk", "-t", "1", "-c", "8", "-d", f"{seconds:g}s", "-H",
                                          "Accept-Encoding: gzip", *headers, server.url + path],
                                         capture_output=True, text=True).stdout
                    cpu = group_cpu(server.proc.pid) - cpu0
                    n = re.search(r"(\d+) requests in", out)
                    row.append(int(n.group(1)) / cpu if n and cpu > 0 else float("nan"))
                costs[kind] = row
        finally:
            server.stop()
        built = subprocess.run([sys.executable, "-c", BUILD_COST, str(store), json.dumps(kinds)], cwd=root,
                               env=dict(os.environ, PYTHONPATH=str(root)), capture_output=True, text=True)
        builds = json.loads(built.stdout) if built.returncode == 0 else {}
        for kind, (kept, not_modified) in costs.items():
            b = builds.get(kind)
            print(f"{name:<8} {kind:<10} {kept:>14.0f} {not_modified:>13.0f} "
                  f"{'-' if b is None else f'{b * 1000:.1f}':>12} {os.getloadavg()[0]:>5.1f}", flush=True)


def cpu_split(server_pid: int) -> dict[str, float]:
    """CPU seconds so far of the server's serving processes, the ladder's runner (the referee) and
    its bots (every process below it, live or reaped), this process's reaped children (wrk), the
    machine's interrupt time (no cgroup weighs it) and the whole machine, from /proc: where the CPU goes while the ladder plays beside the load. A tree's
    total is each live member's own and reaped children's time, so a bot that exits between two
    readings still counts."""
    procs = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            f = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        procs[int(stat.parent.name)] = (int(f[1]), int(f[3]), *(int(x) for x in f[11:15]))
    kids: dict[int, list[int]] = {}
    for pid, (ppid, *_) in procs.items():
        kids.setdefault(ppid, []).append(pid)

    def tree(pid: int) -> list[int]:
        out, todo = [], [pid]
        while todo:
            out.append(q := todo.pop())
            todo += kids.get(q, [])
        return out

    tick = os.sysconf("SC_CLK_TCK")
    session = procs.get(server_pid, (0, -1))[1]
    runners = [p for p in tree(server_pid) if procs[p][1] != session and procs[procs[p][0]][1] == session]
    ladder = {p for r in runners for p in tree(r)}
    out = {"server": sum(sum(procs[p][2:]) for p in tree(server_pid) if p not in ladder) / tick,
           "referee": sum(sum(procs[r][2:4]) for r in runners) / tick}
    out["bots"] = sum(sum(procs[p][2:]) for p in ladder) / tick - out["referee"]
    out["referee wait"] = {tid: w for r in runners for tid, w in _runnable_wait(r).items()}
    t = os.times()
    out["wrk"] = t.children_user + t.children_system
    with open("/proc/stat") as f:
        busy = [int(x) for x in f.readline().split()[1:]]
    out["machine"] = (sum(busy) - busy[3] - busy[4]) / tick  # all but idle and iowait
    out["irq"] = (busy[5] + busy[6]) / tick  # interrupts (loopback traffic's softirq): no process's
    return out


def _runnable_wait(pid: int) -> dict[int, float]:
    """Seconds each thread of ``pid`` has spent runnable but waiting for a CPU (schedstat's second
    field), by thread id: a ladder bound by latency loses its games here, not in its CPU time. A
    thread that ends between two readings takes its part with it (an undercount, never negative)."""
    waits = {}
    for task in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        try:
            waits[int(task.parent.name)] = int(task.read_text().split()[1]) / 1e9
        except (OSError, IndexError, ValueError):
            continue
    return waits


def shares(before: dict, after: dict, seconds: float) -> str:
    """Each part's CPU between two :func:`cpu_split` readings, as a share of the machine's CPUs."""
    d = {k: after[k] - before[k] for k in before if k != "referee wait"}
    d["other"] = d["machine"] - sum(v for k, v in d.items() if k != "machine")
    return " ".join(f"{k} {100 * d[k] / (seconds * os.cpu_count()):.0f}%"
                    for k in ("server", "wrk", "referee", "bots", "irq", "other"))


def per_game(before: dict, after: dict, games: int) -> str:
    """The ladder's CPU a game between two :func:`cpu_split` readings: the referee's (its runner,
    the store's writes included) and the bots'. Beside the load a rise in these is work the games
    themselves lost (a busier writer, colder caches), not CPU the scheduler gave away; a rise in
    the referee's wait for a CPU (runnable, not running) is the scheduler's part."""
    if not games:
        return "no game stored"
    ms = {k: 1000 * (after[k] - before[k]) / games for k in ("referee", "bots")}
    waited = after["referee wait"]
    ms["referee wait"] = 1000 * sum(w - before["referee wait"].get(tid, 0.0) for tid, w in waited.items()) / games
    return (f"a game: referee {ms['referee']:.0f} ms, bots {ms['bots']:.0f} ms, "
            f"the referee's wait for a CPU {ms['referee wait']:.0f} ms")


# --------------------------------------------------------------------------- the ladder beside the load

def ladder_beside(servers: list, store: Path, paths: dict, clients: int, seconds: float, tmp: Path,
                  rounds: int = 2) -> None:
    """``arena serve --ladder`` of each server in turn on a fresh copy of the club store (the four
    bundled bots, two seats): the ladder's games a second with the pages idle, then beside ``clients``
    wrk clients on the mix, ``rounds`` times in turn (the machine's other load moves both alike);
    one row per round and the median ratio. The mix's pages are mostly the club ladder's: a game the
    night ladder stores moves the store's version (the overview and the game list are built again)
    and the night ladder's, not the club's. ``req/cpu-s``: requests per CPU second of the serving
    processes (the ladder's runner and bots not counted); under each row, the share of the machine's
    CPUs the server, wrk, the ladder's referee, its bots and everything else took alone and beside,
    the ladder's CPU a game and the store's write-ahead log's size. wrk runs where :func:`wrk_place`
    puts it (charged to the pages, as a club's clients are not the server's), which a line says."""
    import sqlite3
    import statistics
    print(f"{'server':<8} {'round':>5} {'alone g/s':>9} {'beside g/s':>10} {'ratio':>6} {'req/s':>7} "
          f"{'p50 ms':>7} {'p99 ms':>8} {'errors':>6} {'load':>5} {'req/cpu-s':>9}")
    for name, root, extra in servers:
        work = tmp / f"beside-{name}"
        work.mkdir()
        work.chmod(0o755)  # bots run under a private uid when the referee is root
        copy = work / "club.sqlite"
        shutil.copy(store, copy)
        toml = work / "night.toml"
        toml.write_text('rules = "classic"\nseats = 2\ndeals = 4\nmax_turns = 2000\nconcurrency = 2\n'
                        'bots = ["random", "lowest", "highest", "heuristic"]\n')

        def played() -> int:
            db = sqlite3.connect(f"file:{copy}?mode=ro", uri=True, timeout=30)
            try:
                return db.execute("SELECT COUNT(*) FROM games WHERE substr(tournament, 1, 17)='ladder:night:run:'"
                                  ).fetchone()[0]
            finally:
                db.close()

        def rate(during) -> tuple:
            g0, t0 = played(), time.monotonic()
            got = during()
            games = played() - g0
            return games / (time.monotonic() - t0), got, games

        def wal_mb() -> float:
            try:
                return copy.with_name(copy.name + "-wal").stat().st_size / 2**20
            except OSError:
                return 0.0

        server = Server(root, copy, ["--ladder", str(toml), *extra])
        ratios = []
        try:
            deadline = time.monotonic() + 600
            while played() < 1:  # past the seed round
                if time.monotonic() > deadline:
                    raise SystemExit("the ladder played no batch game in 600 s")
                time.sleep(0.5)
            placed = wrk_place(server.proc.pid)
            print(f"{name:<8} wrk runs {placed.said}", flush=True)
            table = mix_paths({**paths, "static": server.static_paths()})
            script = tmp / f"beside-{name}.lua"
            script.write_text(lua_script(table))
            warm_up(server, sorted(set(table)), rounds=1)
            for n in range(1, rounds + 1):
                split0 = cpu_split(server.proc.pid)
                wal0 = wal_mb()
                alone, _, n_alone = rate(lambda: time.sleep(seconds))
                split1, wal1 = cpu_split(server.proc.pid), wal_mb()
                beside, r, n_beside = rate(lambda: run_wrk(server.url, script, clients, seconds, placed))
                split2, wal2 = cpu_split(server.proc.pid), wal_mb()
                per_cpu = r["requests"] / max(split2["server"] - split1["server"], 0.01)  # the serving processes
                ratios.append(beside / alone if alone else float("nan"))
                print(f"{name:<8} {n:>5} {alone:>9.2f} {beside:>10.2f} {100 * ratios[-1]:>5.0f}% {r['rps']:>7.0f} "
                      f"{r['p50']:>7.1f} {r['p99']:>8.1f} {r['errors']:>6} {os.getloadavg()[0]:>5.1f} {per_cpu:>9.0f}",
                      flush=True)
                print(f"{'':<8} cpu alone:  {shares(split0, split1, seconds)}; "
                      f"{per_game(split0, split1, n_alone)}; WAL {wal0:.1f} -> {wal1:.1f} MB\n"
                      f"{'':<8} cpu beside: {shares(split1, split2, seconds)}; "
                      f"{per_game(split1, split2, n_beside)}; WAL {wal1:.1f} -> {wal2:.1f} MB", flush=True)
        finally:
            server.stop()
        print(f"{name:<8} median ratio {100 * statistics.median(ratios):.0f}% beside {clients} clients", flush=True)


# --------------------------------------------------------------------------- open live streams

def hold_streams(url: str, store: Path, n: int, templates: dict) -> dict:
    """Open ``n`` event streams, store one game, and time each stream's event for it."""
    import selectors

    host, port = url.removeprefix("http://").rsplit(":", 1)
    sel = selectors.DefaultSelector()
    socks: list[socket.socket] = []
    opened = 0
    for _ in range(n):
        s = socket.socket()
        try:
            s.connect((host, int(port)))
            s.sendall(f"GET /events HTTP/1.1\r\nHost: {host}:{port}\r\nAccept: text/event-stream\r\n\r\n".encode())
        except OSError:
            s.close()
            continue
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, bytearray())
        socks.append(s)
        opened += 1
    hello, _ = _count_events(sel, b"event: hello", opened, time.monotonic(), 30)  # each stream's hello first
    for s in socks:
        sel.modify(s, selectors.EVENT_READ, bytearray())
    from arena.tournament.store import Store
    db = Store(store)
    rec = dict(db.game_record(templates["games"][0]), game_id=f"stream-{time.time_ns()}")
    tid = f"ladder:{LADDER}:streams"
    db.begin_tournament(tid, {"format": "ladder-batch", "rules": "classic", "seats": 2}, 1)
    t0 = time.monotonic()
    stored = db.save_game(tid, time.time_ns() % 10**9, rec["players"], rec)
    if not stored:
        raise SystemExit("the stream bench could not store its game")
    db.close()
    got, last = _count_events(sel, b"event: store", opened, t0, 10)
    for s in socks:
        s.close()
    return {"opened": opened, "hello": hello, "got": got, "last_s": last}


def _count_events(sel, marker: bytes, want: int, t0: float, seconds: float) -> tuple[int, float]:
    """Read the streams until ``want`` of them have sent ``marker`` or ``seconds`` from ``t0`` have
    passed: (how many did, seconds from ``t0`` to the last). A stream is counted once: its buffer
    then starts with ``#`` and is read no further."""
    got, last = 0, 0.0
    while got < want and time.monotonic() < t0 + seconds:
        for key, _ in sel.select(timeout=0.5):
            try:
                chunk = key.fileobj.recv(65536)
            except OSError:
                chunk = b""
            if key.data.startswith(b"#"):
                continue
            key.data.extend(chunk)
            if marker in key.data:
                got += 1
                last = time.monotonic() - t0
                key.data[:0] = b"#"
    return got, last


# --------------------------------------------------------------------------- two people watching

WATCH = """
const [want, done] = [arguments[0], arguments[arguments.length - 1]];
window.__seen = 0;
const look = () => { const el = document.getElementById('ladder-games');
  if (!window.__seen && el && el.textContent.trim().startsWith(want + ' ')) window.__seen = Date.now(); };
new MutationObserver(look).observe(document.body, {subtree: true, childList: true, characterData: true});
done(true);
"""


def watch_under_load(url: str, store: Path, script: Path, clients: int, templates: dict) -> list[tuple[str, float]]:
    """The done-when of a club night: a phone-sized and a laptop-sized Chromium page on the club
    ladder, ``clients`` wrk clients on the mix, and one game stored: the seconds from its storing
    (the commit's wall clock) to each page showing the ladder's new game count (the page's own
    clock, stamped by a MutationObserver, so a slow look from here adds nothing)."""
    import threading
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from arena.tournament.store import Store

    drivers = {}
    try:
        for who, (w, h, mobile) in {"phone 390 px": (390, 844, True), "laptop 1366 px": (1366, 768, False)}.items():
            options = webdriver.ChromeOptions()
            options.binary_location = shutil.which("chromium") or shutil.which("chromium-browser") or ""
            for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
                options.add_argument(arg)
            d = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
            d.set_page_load_timeout(120)
            d.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                              {"width": w, "height": h, "deviceScaleFactor": 1, "mobile": mobile})
            d.get(f"{url}/ladders/{LADDER}")
            drivers[who] = d
        load = threading.Thread(target=run_wrk, args=(url, script, clients, 30))
        load.start()
        time.sleep(8)  # the load under way
        db = Store(store)
        games = db.db.execute("SELECT COUNT(*) FROM games WHERE substr(tournament, 1, ?)=?",
                              (len(LADDER) + 8, f"ladder:{LADDER}:")).fetchone()[0]
        for d in drivers.values():
            d.execute_async_script(WATCH, games + 1)
        rec = dict(db.game_record(templates["games"][0]), game_id=f"watch-{time.time_ns()}")
        tid = f"ladder:{LADDER}:watch"
        db.begin_tournament(tid, {"format": "ladder-batch", "rules": "classic", "seats": 2}, 1)
        if not db.save_game(tid, time.time_ns() % 10**9, rec["players"], rec):
            raise SystemExit("the watch bench could not store its game")
        stored_ms = time.time() * 1000
        db.close()
        seen = {}
        deadline = time.monotonic() + 15
        while len(seen) < len(drivers) and time.monotonic() < deadline:
            for who, d in drivers.items():
                t = d.execute_script("return window.__seen")
                if t and who not in seen:
                    seen[who] = (t - stored_ms) / 1000
            time.sleep(0.2)
        load.join()
        return [(who, seen.get(who, float("inf"))) for who in drivers]
    finally:
        for d in drivers.values():
            d.quit()


# --------------------------------------------------------------------------- main

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, nargs="+", default=[1, 16, 64, 256])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--bots", type=int, default=20)
    ap.add_argument("--games", type=int, default=10_000)
    ap.add_argument("--streams", type=int, default=1000, help="open live streams to hold (0: skip)")
    ap.add_argument("--store", type=Path, help="reuse (or build once at) this store")
    ap.add_argument("--compare", type=Path, help="another checkout (say the previous main) served in the same run")
    ap.add_argument("--ladder", action="store_true", help="also: arena serve --ladder, the ladder's games a second "
                    "alone and beside the load of the largest --clients, each server in turn")
    ap.add_argument("--watch", action="store_true", help="a phone and a laptop Chromium page on the ladder "
                    "beside --watch-clients wrk clients: seconds until each shows a newly stored game")
    ap.add_argument("--watch-clients", type=int, default=256, help="--watch: wrk clients beside the two pages")
    ap.add_argument("--rounds", type=int, default=2, help="--ladder: alone/beside rounds per server")
    ap.add_argument("--per-kind", action="store_true", help="requests per server CPU second of each page kind "
                    "(kept, 304, built), instead of the load rows")
    ap.add_argument("--args", default="", help="extra `arena serve` options for both checkouts (say '--workers 2')")
    args = ap.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("bench_serve needs wrk: apt-get install -y wrk")
    tmp = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    store = args.store or tmp / "club.sqlite"
    paths_file = store.with_suffix(".paths.json")
    if store.exists() and paths_file.exists():
        paths = json.loads(paths_file.read_text())
    else:
        paths = build_store(store, args.bots, args.games)
        paths_file.write_text(json.dumps(paths))
    servers = [("this", ROOT, args.args.split())]
    if args.compare:
        servers.insert(0, ("compare", args.compare.resolve(), args.args.split()))
    load = os.getloadavg()
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {os.cpu_count()} cores; "
          f"load before {load[0]:.1f}; wrk {args.seconds:g} s per row; mix {MIX}")
    if args.per_kind:
        per_kind(servers, store, paths, args.seconds, tmp)
        servers, args.streams = [], 0
    else:
        print(f"{'server':<8} {'clients':>7} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7} {'load':>5} "
              f"{'req/cpu-s':>9} {'warm-up s':>9}")
    for name, root, extra in servers:  # one server at a time, warmed once, then each client count
        server = Server(root, store, extra)
        try:
            script = tmp / f"{name}.lua"
            table = mix_paths({**paths, "static": server.static_paths()})
            script.write_text(lua_script(table))
            warm = warm_up(server, sorted(set(table)))
            for clients in args.clients:
                cpu = group_cpu(server.proc.pid)
                r = run_wrk(server.url, script, clients, args.seconds)
                per_cpu = r["requests"] / max(group_cpu(server.proc.pid) - cpu, 0.01)
                print(f"{name:<8} {clients:>7} {r['rps']:>8.0f} {r['p50']:>8.1f} {r['p99']:>8.1f} {r['errors']:>7} "
                      f"{os.getloadavg()[0]:>5.1f} {per_cpu:>9.0f} {warm:>9.1f}", flush=True)
        finally:
            server.stop()
    if args.streams:
        for name, root, extra in servers:
            server = Server(root, store, extra)
            try:
                s = hold_streams(server.url, store, args.streams, paths)
            finally:
                server.stop()
            print(f"{name:<8} streams: {s['opened']} opened, {s['hello']} greeted, {s['got']} got the new game's "
                  f"event, the last after {s['last_s']:.2f} s", flush=True)
    if args.watch:
        for name, root, extra in servers:
            server = Server(root, store, extra)
            try:
                script = tmp / f"watch-{name}.lua"
                table = mix_paths({**paths, "static": server.static_paths()})
                script.write_text(lua_script(table))
                warm_up(server, sorted(set(table)), rounds=1)
                seen = watch_under_load(server.url, store, script, args.watch_clients, paths)
            finally:
                server.stop()
            print(f"{name:<8} a new game seen beside {args.watch_clients} clients: "
                  + ", ".join(f"{who} after {s:.2f} s" for who, s in seen), flush=True)
    if args.ladder:
        ladder_beside(servers, store, paths, max(args.clients), args.seconds, tmp, args.rounds)
    if not args.store:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
