"""How long the writable server's trio loop goes without running, under each kind of load.

    python bench/bench_loop_stalls.py                    # 2,000 games, 8 clients, 8 s a kind
    python bench/bench_loop_stalls.py --games 10000 --clients 16 --seconds 15
    python bench/bench_loop_stalls.py --no-freeze       # without arena serve's gc.freeze() at its start

A loop that does not run for a while answers nobody meanwhile, and lets deadlines come due with
requests unread (docs/ARCHITECTURE.md, the writable server's deadlines). The server here is the
writable app (``--allow-submit --allow-play``) on hypercorn and trio, as ``arena serve`` runs it,
in a child process with two probes: a trio instrument that times every task step (a step is
synchronous work on the loop: nothing else runs until it ends; its CPU time, which the machine's
load does not lengthen), and a task that sleeps 5 ms over
and over and records how late it wakes (which also counts the loop waiting for the GIL while a
worker thread runs Python). The parent drives one kind of load at a time, from its own process:

* ``idle`` - nothing;
* ``pages`` - GETs over the standings, overview, bot pages, game pages and the game list;
* ``pages+games`` - the same while another process stores a game every 0.2 s, so that the pages
  are built again (a new store version) rather than served kept;
* ``logins`` - failed logins (argon2 in a worker thread), each from its own loopback address;
* ``uploads`` - a 300 kB multipart upload with the organiser's token (the form parsed; the zip
  unpacked and checked in a worker process, serve/unpacker.py; before it, in a thread of the
  server; past the queue's bound, 429).

For each it prints the longest task steps (the task, its CPU ms), the number over 20 ms, the
longest wall time a step spent off the CPU (blocked in a system call, or waiting for the GIL or a
core: a loaded machine lengthens these), and
the wake-up lateness (p50, p99, max; wall time, which a loaded machine lengthens too), the
serving process's CPU (all its threads, the ones that take the GIL from the loop; not its child
processes) per answer, which load moves little, and the CPU time of the longest full collection of Python's cyclic garbage collector (which runs inside
whatever step allocates, and visits every object it tracks: ``objects``). Figures only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


# --------------------------------------------------------------------------- the server (child)

def serve(store: Path, freeze: bool) -> None:
    import logging

    import hypercorn.trio.run
    import trio
    from hypercorn.config import Config
    from hypercorn.trio import serve as hypercorn_serve

    from arena.serve.app import Options, build_app, new_token
    from arena.serve.limits import IDLE_S, stall_proof_server

    class Steps(trio.abc.Instrument):
        def __init__(self) -> None:
            self.reset()

        def reset(self) -> None:
            self.longest: list[tuple[float, str]] = []
            self.held: list[tuple[float, str]] = []
            self.over = 0
            self.process = time.process_time()  # every thread of the serving process: what holds the GIL
            self.started = time.thread_time()
            self.wall = time.perf_counter()

        def before_task_step(self, task: trio.lowlevel.Task) -> None:
            self.started = time.thread_time()
            self.wall = time.perf_counter()

        def after_task_step(self, task: trio.lowlevel.Task) -> None:
            took = time.thread_time() - self.started  # the loop thread's CPU: not its waits for the GIL or a core
            held = time.perf_counter() - self.wall - took  # in the step, not on a CPU: blocked, or waiting for one
            if took > 0.02:
                self.over += 1
                self.longest = sorted(self.longest + [(took, task.name)], reverse=True)[:5]
            if held > 0.02:
                self.held = sorted(self.held + [(held, task.name)], reverse=True)[:5]

    steps = Steps()
    late: list[float] = []
    collections: list[float] = []  # the cyclic garbage collector's pauses (it runs inside some step)
    began = [0.0]

    def collecting(phase: str, info: dict) -> None:
        if phase == "start":
            began[0] = time.thread_time()
        elif info["generation"] == 2:  # a full collection: it visits every object the collector tracks
            collections.append(time.thread_time() - began[0])
    gc.callbacks.append(collecting)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    token = new_token()
    options = Options(store=store, allow_submit=True, allow_play=True, token=token, writes_per_s=10_000.0,
                      max_queued=10_000, max_queued_per_submitter=10_000, max_submissions_per_day=10_000)
    hypercorn.trio.run.TCPServer = stall_proof_server()
    config = Config()
    config.bind = [f"fd://{sock.fileno()}"]
    config.accesslog = None
    config.errorlog = logging.getLogger("hypercorn.error")
    config.keep_alive_timeout = IDLE_S
    logging.basicConfig(level=logging.ERROR)

    async def lag() -> None:
        while True:
            t0 = trio.current_time()
            await trio.sleep(0.005)
            late.append(trio.current_time() - t0 - 0.005)

    async def report() -> None:
        with trio.open_signal_receiver(signal.SIGUSR1) as signals:
            async for _ in signals:
                ordered = sorted(late) or [0.0]
                print(json.dumps({"longest": [(round(t * 1000, 1), name) for t, name in steps.longest],
                                  "held": [(round(t * 1000, 1), name) for t, name in steps.held],
                                  "over_20ms": steps.over, "p50": ordered[len(ordered) // 2] * 1000,
                                  "p99": ordered[int(len(ordered) * 0.99)] * 1000, "max": ordered[-1] * 1000,
                                  "gc_max": max(collections, default=0.0) * 1000, "gc_n": len(collections),
                                  "objects": len(gc.get_objects()),
                                  "cpu": time.process_time() - steps.process}),
                      flush=True)
                steps.reset()
                late.clear()
                collections.clear()

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            app = build_app(options, nursery)
            nursery.start_soon(lag)
            nursery.start_soon(report)
            print(json.dumps({"port": sock.getsockname()[1], "token": token}), flush=True)
            await hypercorn_serve(app, config)  # type: ignore[arg-type]

    if freeze:  # as arena serve does before it serves
        gc.freeze()
    trio.run(main, instruments=[steps])


# --------------------------------------------------------------------------- the load (parent)

def _get(port: int, path: str, method: str = "GET", body: bytes | None = None, headers: dict | None = None,
         source: str = "127.0.0.1") -> int:
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60, source_address=(source, 0))
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        r.read()
        return r.status
    finally:
        conn.close()


def _upload_body(token: str, unpacked_mb: float = 0.0) -> tuple[bytes, str]:
    """A bot's upload: 300 kB of random bytes, stored; or with ``unpacked_mb``, that many MB of
    tables in 150 deflated files (a twelfth of each random, the rest a table repeated), about a
    tenth of it on the wire, as a bot with data files near the upload limits sends."""
    buf = io.BytesIO()
    rng = random.Random(1)
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("bot.toml", 'name = "stall"\nversion = "1.0"\nauthor = "bench"\ncommand = ["python3", "bot.py"]\n')
        z.writestr("bot.py", "import sys\nfor line in sys.stdin:\n    pass\n")
        if not unpacked_mb:
            z.writestr("data.bin", rng.randbytes(300_000), compress_type=zipfile.ZIP_STORED)
        each = int(unpacked_mb * 2**20 / 150)
        rows = b"".join(b"%d,%d,%d\n" % (i, i * i % 9973, i * 7919 % 104729) for i in range(300))  # 4 kB, repeated
        for k in range(150 if unpacked_mb else 0):
            z.writestr(f"data/t{k:03d}.csv", rng.randbytes(each // 12) + (rows * (each // len(rows) + 1))[:each - each // 12])
    boundary = "benchstallsboundary"
    parts = [f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
             for k, v in (("token", token), ("ladder", "classic-2p"))]
    parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="bot"; filename="bot.zip"\r\n'
                 f"Content-Type: application/zip\r\n\r\n".encode() + buf.getvalue() + b"\r\n")
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


def drive(kind: str, port: int, token: str, paths: list[str], clients: int, seconds: float, store: Path,
          upload_mb: float = 0.0) -> int:
    """``clients`` threads sending ``kind`` requests for ``seconds``; the number answered."""
    stop = time.monotonic() + seconds
    done = [0]
    body, ctype = _upload_body(token, upload_mb)

    def client(i: int) -> None:
        rng = random.Random(i)
        n = 0
        while time.monotonic() < stop:
            n += 1
            if kind.startswith("pages"):
                _get(port, rng.choice(paths))
            elif kind == "logins":
                form = urllib.parse.urlencode({"name": f"nobody{i}", "password": "wrong"}).encode()
                _get(port, "/login", "POST", form, {"content-type": "application/x-www-form-urlencoded"},
                     source=f"127.1.{i}.{n % 250 + 1}")
            elif kind == "uploads":
                _get(port, "/submit", "POST", body, {"content-type": ctype}, source=f"127.2.{i}.{n % 250 + 1}")
            else:
                time.sleep(0.1)
                continue
            done[0] += 1

    writer = None
    if kind == "pages+games":
        writer = subprocess.Popen([sys.executable, __file__, "--store-games", str(store), "--seconds", str(seconds)])
    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if writer is not None:
        writer.wait()
    return done[0]


def store_games(store: Path, seconds: float) -> None:
    """A game stored every 0.2 s, as a ladder does (a real game relabelled, as bench_serve builds its store)."""
    from bench_serve import _played_records

    from arena.tournament.store import Store
    template = _played_records(1)[0]
    db = Store(store)
    seats = json.loads(db.db.execute("SELECT seats FROM games LIMIT 1").fetchone()[0])
    tid = "ladder:club:batch-stalls"
    db.begin_tournament(tid, {"format": "ladder-batch", "rules": "classic", "seats": 2}, 10_000)
    stop, k = time.monotonic() + seconds, 0
    while time.monotonic() < stop:
        rec = dict(template, game_id=f"stalls-{k:05d}", players=seats, faults=[],
                   result=dict(template["result"], order=[[0], [1]], forfeits={}))
        db.save_game(tid, k, seats, rec)
        k += 1
        time.sleep(0.2)
    db.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--games", type=int, default=2000)
    ap.add_argument("--bots", type=int, default=20)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--kinds", nargs="+", default=["idle", "pages", "pages+games", "logins", "uploads"])
    ap.add_argument("--upload-mb", type=float, default=0.0, help="uploads: a bot of this many MB unpacked "
                    "(150 deflated files) instead of 300 kB stored")
    ap.add_argument("--no-freeze", action="store_true", help="leave out arena serve's gc.freeze() at its start "
                    "(the code before it)")
    ap.add_argument("--serve", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--store-games", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        return serve(args.serve, not args.no_freeze)
    if args.store_games:
        return store_games(args.store_games, args.seconds)
    from bench_serve import build_store
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "arena.sqlite"
        made = build_store(store, args.bots, args.games)
        paths = ["/", "/ladders/club", "/games", "/static/site.css"] + [f"/bots/{urllib.parse.quote(b)}"
                                                                       for b in made["bots"][:5]]
        paths += [f"/games/{g}" for g in made["games"][-5:]]
        child = subprocess.Popen([sys.executable, __file__, "--serve", str(store)] + ["--no-freeze"] * args.no_freeze,
                                 stdout=subprocess.PIPE, text=True,
                                 cwd=tmp, env=dict(os.environ, PYTHONPATH=str(ROOT)))
        hello = json.loads(child.stdout.readline())
        try:
            for p in paths:
                _get(hello["port"], p)
            print(f"{'kind':12} {'answers':>8} {'steps>20ms':>10} {'late p50':>9} {'p99':>8} {'max':>8} {'gc max':>8} {'objects':>9}"
                  f" {'cpu ms/answer':>13}"
                  "  longest steps (CPU ms, task) | longest off-CPU in a step (ms, task)")
            for kind in args.kinds:
                child.send_signal(signal.SIGUSR1)  # reset
                child.stdout.readline()
                n = drive(kind, hello["port"], hello["token"], paths, args.clients, args.seconds, store,
                          args.upload_mb)
                child.send_signal(signal.SIGUSR1)
                got = json.loads(child.stdout.readline())
                longest = "; ".join(f"{ms} {name.rsplit('.', 1)[-1]}" for ms, name in got["longest"][:3])
                longest += " | " + "; ".join(f"{ms} {name.rsplit('.', 1)[-1]}" for ms, name in got["held"][:3])
                print(f"{kind:12} {n:8d} {got['over_20ms']:10d} {got['p50']:8.1f}ms {got['p99']:6.1f}ms "
                      f"{got['max']:6.0f}ms {got['gc_max']:6.0f}ms {got['objects']:9d} "
                      f"{1000 * got['cpu'] / n if n else float('nan'):13.1f}  {longest}", flush=True)
        finally:
            child.terminate()
            child.wait(timeout=30)


if __name__ == "__main__":
    main()
