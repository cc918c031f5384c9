"""Does a seat's work that outlasts its turn make the other seat forfeit? (docs/SANDBOX.md,
"CPU between seats".)

    python bench/bench_offturn.py GAMES WORK CHILDREN GIB [MOVE_MS] [--quiet|--populate] [--gvisor]

A worker does a fixed piece of work per decision (WORK iterations of a Python loop) and answers;
its opponent answers at once, and in ``populate`` games leaves CHILDREN processes that loop
``mmap(MAP_POPULATE)`` of GIB GiB of zero pages and ``munmap``: inside the kernel nearly all the
time, where a freezer cannot stop them. ``quiet`` games are the same opponent without them. Both
on a fixed schedule of MOVE_MS (the strangers' ladder's rule), games alternating; for each game the
worker's work time, the opponent's cgroup CPU per worker decision (0 for a seat that really is
frozen) and every fault. ``ARENA_CHECKOUT=DIR`` runs another checkout's arena (the previous main).
"""
from __future__ import annotations
import os, shutil, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, os.environ.get("ARENA_CHECKOUT") or str(Path(__file__).resolve().parents[1]))
from arena.bots.containment import Containment  # noqa: E402
from arena.bots.launch import Launcher  # noqa: E402
from arena.referee import TimeControl  # noqa: E402
from bench.channel import bot_folder, seat_lines  # noqa: E402

HONEST = r'''
import json, random, sys, time
n = int(sys.argv[1]); rng = random.Random(3)
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("type") == "hello":
        print(json.dumps({"type": "hello", "protocol": 1, "name": "worker", "version": "1"}), flush=True)
    elif msg.get("type") == "request":
        t, c = time.perf_counter(), time.process_time()
        x = 0
        for i in range(n):
            x += i * i
        print(f"WORK {msg['id']} {(time.perf_counter() - t) * 1000:.1f} {(time.process_time() - c) * 1000:.1f}", file=sys.stderr, flush=True)
        print(json.dumps({"type": "action", "request": msg["id"], "action": rng.randrange(len(msg["actions"]))}), flush=True)
    elif msg.get("type") == "shutdown":
        break
'''

HOSTILE = r'''
import ctypes, json, mmap, os, random, sys, time
mode, children, gb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(4)
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]

def populate_forever():
    # An anonymous read-only mapping, populated: every page maps the shared zero page, so it costs
    # page tables only, and the kernel fills them in one long call. A freezer stops a task only on
    # its way back to user space: this child is in the kernel nearly all the time, frozen or not.
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):  # (holding the bot's pipes, a child is one more reader of its requests)
        os.dup2(null, fd)
    while True:
        addr = libc.mmap(None, gb << 30, mmap.PROT_READ, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | mmap.MAP_POPULATE | 0x4000, -1, 0)
        if addr in (None, 2**64 - 1):
            print("mmap failed", ctypes.get_errno(), file=sys.stderr, flush=True)
            os._exit(3)
        libc.munmap(addr, gb << 30)

started = False
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("type") == "hello":
        print(json.dumps({"type": "hello", "protocol": 1, "name": "hostile", "version": "1"}), flush=True)
    elif msg.get("type") == "request":
        t = os.times()
        print(f"CPU {msg['id']} {(t.user + t.system + t.children_user + t.children_system) * 1000:.1f}", file=sys.stderr, flush=True)
        if mode == "populate":
            if not started:
                started = True
                for _ in range(children):
                    if os.fork() == 0:
                        populate_forever()
            time.sleep(0.05)  # thawed only for its turn: the children get into their long calls meanwhile
        print(json.dumps({"type": "action", "request": msg["id"], "action": rng.randrange(len(msg["actions"]))}), flush=True)
    elif msg.get("type") == "shutdown":
        break
'''


def main() -> None:
    from arena.bots.manifest import load_bot
    from arena.engine import PRESETS
    from arena.referee.blocking import BlockingLaunch, BlockingPlayer, play_game, settle
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    games, work, threads, gb = int(args[0]), int(args[1]), int(args[2]), int(args[3])
    move_ms = int(args[4]) if len(args) > 4 else 200
    modes = [m for m in ("quiet", "populate") if f"--{m}" in sys.argv] or ["quiet", "populate"]
    containment = Containment.GVISOR if "--gvisor" in sys.argv else Containment.AUTO
    clock = TimeControl(move_ms=move_ms, bank_ms=0, handshake_ms=30_000)
    base = Path(tempfile.mkdtemp(prefix="arena-offturn-")); base.chmod(0o755)
    launcher = Launcher(containment=containment)
    print(f"containment: {launcher.describe_now()}", flush=True)
    launch = BlockingLaunch(launcher)
    tally = {m: [0, 0, []] for m in modes}
    try:
        for g in range(games):
            for mode in modes:
                hw = bot_folder(base / f"w-{mode}-{g}", "bot.py", HONEST,
                                f'name = "worker-{mode}"\nversion = "1"\nauthor = "w"\ncommand = ["python3", "bot.py", "{work}"]\n')
                hh = bot_folder(base / f"h-{mode}-{g}", "bot.py", HOSTILE,
                                f'name = "hostile-{mode}"\nversion = "1"\nauthor = "h"\ncommand = ["python3", "bot.py", "{mode}", "{threads}", "{gb}"]\n')
                worker = BlockingPlayer(load_bot(hw), launch, clock)
                hostile = BlockingPlayer(load_bot(hh), launch, clock)
                seats = [worker, hostile] if g % 2 == 0 else [hostile, worker]
                ws = seats.index(worker)
                try:
                    rec = play_game(seats, PRESETS["classic"], 500 + g, game_id=f"off-{mode}-{g}", clock=clock,
                                    max_turns=60, fixed_schedule=True)
                    lines = seat_lines(rec, worker, ws)
                    said = [x for x in seat_lines(rec, hostile, 1 - ws) if not x.startswith("CPU")]
                    if said:
                        print("the opponent said:", said[:5])
                    hcpu = hostile.conn.game_cpu_seconds() * 1000 / max(1, rec.decisions[ws]) if hostile.conn is not None else float("nan")
                finally:
                    worker.shutdown(); hostile.shutdown(); settle()
                walls = sorted(float(x.split()[2]) for x in lines if x.startswith("WORK"))
                faults = [(f["seat"] == ws and "worker" or "hostile", f["reason"], f.get("message", "")[:150]) for f in rec.faults]
                tally[mode][0] += 1
                tally[mode][1] += any(f[0] == "worker" for f in faults)
                tally[mode][2] += walls
                med = walls[len(walls) // 2] if walls else float("nan")
                print(f"game {g} {mode}: worker decisions {len(walls)}, median work wall {med:.1f} ms, max {max(walls, default=0):.1f}; "
                      f"hostile cgroup CPU {hcpu:.1f} ms per worker decision; faults {faults}; load {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    for m, (n, lost, walls) in tally.items():
        walls.sort()
        print(f"{m}: worker forfeited {lost} of {n} games; work wall median {walls[len(walls)//2] if walls else 0:.1f} ms, "
              f"p90 {walls[int(len(walls)*0.9)] if walls else 0:.1f} ms")


if __name__ == "__main__":
    main()
