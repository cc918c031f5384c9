"""The game list's build on a club night's store: what a new game costs the game list page.

A ladder stores a game every second or so and a batch every dozen games; each stored game moves the
store's version, and the first request for ``/games`` after it reads the list's menus and builds the
page again. This bench builds (or reuses) bench_serve's club store (20 bots, 10,000 games in batches
of 12) with ``--old-batches`` more finished batches from earlier nights and three real tournaments,
then, in one process running the app as ``arena serve`` does, stores ``--versions`` games (a new
batch every 12, as the ladder does) and after each asks for ``/games`` once and for each menu read
once. It prints the CPU milliseconds of each (median and p90), the menus' sizes and the page's bytes.

Run it for two checkouts on copies of one store to compare (the figures are CPU time, so compare
them as ratios in the same run)::

    python bench/bench_game_list.py --store /tmp/gl/arena.sqlite --compare /tmp/base-checkout
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def prepare(path: Path, old_batches: int) -> None:
    """bench_serve's club store, plus earlier nights' batches and three real tournaments."""
    sys.path.insert(0, str(HERE))
    from bench_serve import LADDER, build_store
    from arena.tournament.store import Store
    build_store(path, 20, 10_000)
    db = Store(path)
    for k in range(old_batches):
        tid = f"ladder:{LADDER}:night-{k // 400:02d}-batch-{k:05d}"
        db.begin_tournament(tid, {"format": "ladder-batch", "rules": "classic", "seats": 2}, 12)
        db.finish_tournament(tid)
    for name in ("spring-cup", "autumn-cup", "club-championship"):
        db.begin_tournament(name, {"format": "round-robin"}, 10)
    db.close()


def measure(store: Path, versions: int) -> dict:
    """In this process: the app over ``store``; per stored game, the CPU ms of one /games build and
    of the menus' read alone."""
    import trio
    from arena.serve import data
    from arena.serve.app import Options, build_app
    from arena.serve.cache import tag
    from arena.tournament.store import Store

    db = Store(store)
    gid, seats_json = db.db.execute("SELECT id, seats FROM games ORDER BY rowid DESC LIMIT 1").fetchone()
    seats = json.loads(seats_json)
    template = db.game_record(gid)
    db.close()
    page_ms: list[float] = []
    menu_ms: list[float] = []
    sizes: dict = {}

    async def get(app, path: str, port: int) -> int:
        scope = {"type": "http", "method": "GET", "path": path, "query_string": b"", "client": ("127.0.0.1", port),
                 "headers": [(b"host", b"127.0.0.1")]}
        status = {}

        async def receive() -> dict:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            else:
                sizes["page bytes"] = sizes.get("page bytes", 0) + len(message.get("body", b""))

        sizes["page bytes"] = 0
        await app(scope, receive, send)
        return status["code"]

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            app = build_app(Options(store=store, settle_s=0.0, poll_s=60.0), nursery)
            writer = Store(store)
            reader = data.open_read(store)
            assert await get(app, "/games", 1) == 200
            data.filter_choices(reader)
            for k in range(versions):
                batch, idx = divmod(k, 12)
                tid = f"ladder:club:tonight-{batch:04d}"  # the club ladder playing on
                if idx == 0:
                    writer.begin_tournament(tid, {"format": "ladder-batch", "rules": "classic", "seats": 2}, 12)
                writer.save_game(tid, idx, seats, dict(template, game_id=f"bench-new-{k:05d}"))
                t0 = time.process_time()
                assert await get(app, "/games", 2 + k) == 200
                page_ms.append((time.process_time() - t0) * 1000)
                t0 = time.process_time()
                choices = data.filter_choices(reader)
                tag(choices)
                menu_ms.append((time.process_time() - t0) * 1000)
            sizes.update({f"{k} menu": len(v) for k, v in choices.items()})
            reader.db.close()
            writer.close()
            nursery.cancel_scope.cancel()

    trio.run(main)
    return {"page_ms": page_ms, "menu_ms": menu_ms, "menus": sizes}


def figures(ms: list[float]) -> str:
    ms = sorted(ms)
    return f"median {statistics.median(ms):.2f} ms, p90 {ms[int(len(ms) * 0.9)]:.2f} ms"


def run_in(checkout: Path, store: Path, versions: int) -> dict:
    """:func:`measure` in a fresh interpreter importing ``arena`` from ``checkout``."""
    env = dict(os.environ, PYTHONPATH=str(checkout))
    code = (f"import json, sys; sys.path.insert(0, {str(HERE)!r}); import bench_game_list as b; "
            f"print(json.dumps(b.measure(__import__('pathlib').Path({str(store)!r}), {versions})))")
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=tempfile.gettempdir(),
                          capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{checkout}: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", type=Path, required=True, help="reuse (or build once at) this store")
    ap.add_argument("--old-batches", type=int, default=3000)
    ap.add_argument("--versions", type=int, default=60, help="games stored, one game list build after each")
    ap.add_argument("--compare", type=Path, help="another checkout (say the previous main), run in turn with this one")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    if not args.store.exists():
        prepare(args.store, args.old_batches)
    checkouts = [("this code", ROOT)] + ([("compared", args.compare.resolve())] if args.compare else [])
    with tempfile.TemporaryDirectory() as tmp:
        for round_no in range(args.rounds):
            for name, checkout in (checkouts if round_no % 2 == 0 else checkouts[::-1]):
                copy = Path(tmp) / f"{round_no}-{len(name)}.sqlite"
                shutil.copy(args.store, copy)
                got = run_in(checkout, copy, args.versions)
                print(f"round {round_no + 1}, {name:9}: /games build {figures(got['page_ms'])}; "
                      f"menus read {figures(got['menu_ms'])}; {got['menus']}", flush=True)
                copy.unlink()


if __name__ == "__main__":
    main()
