"""How many bits two seats of different authors pass through the host's page cache.

    python bench/bench_cache_channel.py [--gvisor] [--view] [--evict] [deals] [bits] [cold_us]

``--view`` takes the units from the small system view a gVisor seat sees (32 KiB at every 256 KiB of
its files of 512 KiB or more) instead of all of ``/usr``; ``--evict`` drops the pool's files from the
page cache first (``POSIX_FADV_DONTNEED``, file by file: what memory pressure would do), so a run
starts on a fresh cold pool without dropping the whole machine's cache. To compare with main, run
the same command with ``--arena=/work/main``: the tournament then runs that checkout's code (the
pool is still computed here, so both runs read the same units).

Every contained mode binds the host's ``/usr`` read-only, and every mode, gVisor included, reads its
files through the host's page cache: the first read of a file nobody read since it left the cache
waits for the disk, the next one (in any sandbox) does not. A sender warms files to say its bits; a
receiver times its first read of each. Both bots ship the same list of units (32 KiB at each MiB of
the system's large files, made here from this machine's ``/usr``) cut into triples (marker, zero,
one), each game's from a place both seats compute from its id: for each bit the sender finds the
next triple whose marker is still cold, reads the marker and the unit its bit names; the receiver
reads triples in order, stops at a cold marker (the sender has not come so far), and takes the bit
from the data unit that reads at least twice as fast as the other, cold one (a triple with both warm
was spent by an earlier game and is skipped). No call the filter refuses is used, and nothing is
written anywhere.

The two bots (authors alice and bob) play a 2-seat ``arena tournament`` under
``one_seat_per_author`` and ``fixed_schedule`` (move_ms 200), as a ladder for strangers plays,
in the default mode or ``--gvisor``. The secret is 16 to 64 bits of a hash of the sender's hand
at its first decision; the bench reads that hand from the game's replay (``arena replay --as``)
and compares it with what the receiver wrote on its stderr. Rate: the bits received over the
decision slots both bots spent sending and receiving (each slot is move_ms under the fixed
schedule). The pool is spent as it is used: a unit read once stays warm until the kernel drops
it, so a run reports how many fresh triples it found.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ARENA = [sys.executable, "-P", "-m", "arena.cli"]
MOVE_MS = 200
ENV = dict(os.environ)

CHAN = r'''
import hashlib, os, sys, time
HERE = os.path.dirname(os.path.abspath(__file__))
COLD_US = float(os.environ["COLD_US"])
UNITS = [(p, int(o)) for p, o in (line.rsplit(" ", 1)
                                  for line in open(os.path.join(HERE, "units.txt")).read().split("\n"))]
TRIPLES = [UNITS[i:i + 3] for i in range(0, len(UNITS) - 2, 3)]

def first_read_us(unit):
    path, offset = unit
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return 0.0
    try:
        t = time.perf_counter_ns()
        os.pread(fd, 32768, offset)
        return (time.perf_counter_ns() - t) / 1000
    finally:
        os.close(fd)

def hand_bits(hand, n):
    h = int.from_bytes(hashlib.sha256(",".join(sorted(hand)).encode()).digest()[:8], "big")
    return [(h >> k) & 1 for k in range(n)]

def origin(game):
    """Where this game's triples start: both seats know the game's id from its start message, so
    units that an earlier game warmed and nobody read are not taken for this game's."""
    return int.from_bytes(hashlib.sha256(game.encode()).digest()[:4], "big") % len(TRIPLES)

def log(*a):
    print(*a, file=sys.stderr, flush=True)
'''

BOT_OPENING = r'''
import os, random, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from arena.botkit import serve
from chan import TRIPLES, COLD_US, first_read_us, hand_bits, log, origin
N = int(os.environ["BITS"])
state = {}
game = {}
def choose(req):
'''


def bot_script(name: str, body: str) -> str:
    """A channel bot: the opening both share (imports, the chan module, per-game state), the body of
    its ``choose`` and the serve call, which clears the state at each game's start."""
    return (BOT_OPENING + body.strip("\n") + "\n    return random.choice(req.actions).id\n"
            f'serve(choose, "{name}", "1.0", on_start=lambda m: (state.clear(), game.update(id=m["game"])), typed=True)\n')


SEND = bot_script("cc-send", r'''
    until = time.monotonic() + 0.12
    if "bits" not in state:
        state.update(bits=hand_bits([str(c) for c in req.view.hand], N), i=0, k=0, slots=0)
        state["at"] = origin(game["id"])
        log("SENT", "".join(map(str, state["bits"])))
    if state["k"] < N:
        state["slots"] += 1
        while state["k"] < N and state["i"] < len(TRIPLES) and time.monotonic() < until:
            m, z, o = TRIPLES[(state["at"] + state["i"]) % len(TRIPLES)]
            state["i"] += 1
            if first_read_us(m) > COLD_US:
                first_read_us((z, o)[state["bits"][state["k"]]])
                state["k"] += 1
        if state["k"] >= N or state["i"] >= len(TRIPLES):
            log("SENDSLOTS", state["slots"], "triples", state["i"])
            state["k"] = N
''')

RECV = bot_script("cc-recv", r'''
    until = time.monotonic() + 0.12
    if not state:
        state.update(bits=[], i=0, slots=0, done=False, at=origin(game["id"]))
    if not state["done"]:
        state["slots"] += 1
        while len(state["bits"]) < N and state["i"] < len(TRIPLES) and time.monotonic() < until:
            m, z, o = TRIPLES[(state["at"] + state["i"]) % len(TRIPLES)]
            if first_read_us(m) > COLD_US:
                break  # the sender has not come so far (this marker is spent now)
            state["i"] += 1
            tz, to = first_read_us(z), first_read_us(o)
            if max(tz, to) > COLD_US and max(tz, to) > 2 * min(tz, to):
                state["bits"].append(0 if tz < to else 1)
        if len(state["bits"]) >= N:
            state["done"] = True
            log("GOT", "".join(map(str, state["bits"])), "slots", state["slots"])
''')


def view_pool() -> list[str]:
    """Units of the gVisor seat's system view: 32 KiB at every 256 KiB past the first of each file of
    512 KiB or more (a 32 KiB first read reads ahead 128 KiB at most, so units stay apart)."""
    from arena.bots.filesystem import stranger_system
    from arena.bots.pagecache import files_under
    out = []
    for p in sorted(files_under(stranger_system()[1])):
        size = os.path.getsize(p)
        if size >= 512 << 10:
            out += [f"{p} {o << 18}" for o in range(1, (size >> 18) - 1)]
    return out


def pool() -> list[str]:
    """Units of the system's large files: 32 KiB at every MiB past the first of each file of /usr of
    2 MiB or more, in a fixed order (both bots get the same list). A first read of 32 KiB makes the
    kernel read ahead 128 KiB at most, so a unit warms none of its neighbours (a 128 KiB read here
    read ahead several MiB: read_ahead_kb is 8192)."""
    out = []
    for top in ("/usr",):
        for d, dirs, files in os.walk(top):
            dirs.sort()
            for f in sorted(files):
                p = os.path.join(d, f)
                try:
                    st = os.lstat(p)
                except OSError:
                    continue
                if st.st_size >= 2 << 20 and (st.st_mode & 0o170000) == 0o100000 and st.st_mode & 0o004:
                    out += [f"{p} {o << 20}" for o in range(1, (st.st_size >> 20) - 1)]
    return out


def hand_bits(hand: list[str], n: int) -> list[int]:
    h = int.from_bytes(hashlib.sha256(",".join(sorted(hand)).encode()).digest()[:8], "big")
    return [(h >> k) & 1 for k in range(n)]


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    gvisor = "--gvisor" in sys.argv
    other = [a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--arena=")]
    if other:
        ENV["PYTHONPATH"] = other[0]
    deals = int(args[0]) if args else 2
    bits = int(args[1]) if len(args) > 1 else 32
    cold_us = float(args[2]) if len(args) > 2 else (200.0 if gvisor else 50.0)
    work = Path(tempfile.mkdtemp(prefix="cache-channel-"))
    work.chmod(0o755)
    files = view_pool() if "--view" in sys.argv else pool()
    if "--evict" in sys.argv:
        from arena.bots.pagecache import evict
        for path in sorted({line.rsplit(" ", 1)[0] for line in files}):
            evict(path)
    for name, code, author in (("send", SEND, "alice"), ("recv", RECV, "bob")):
        d = work / name
        d.mkdir()
        (d / "chan.py").write_text(CHAN)
        (d / "bot.py").write_text(code)
        (d / "units.txt").write_text("\n".join(files))
        (d / "bot.toml").write_text(f'name = "cc-{name}"\nversion = "1.0"\nauthor = "{author}"\n'
                                    f'command = ["python3", "bot.py"]\n[env]\nCOLD_US = "{cold_us}"\nBITS = "{bits}"\n')
        for p in [d, *d.iterdir()]:
            p.chmod(0o755 if p.is_dir() else 0o644)
    (work / "t.toml").write_text(
        f'name = "cc"\nrules = "classic"\nseats = 2\ndeals = {deals}\nseed = 5\n'
        f'bots = ["{work / "send"}", "{work / "recv"}"]\ngvisor = {str(gvisor).lower()}\n'
        f'accept_kernel_channels = {str(not gvisor).lower()}\n'  # the channel measured, accepted by name
        f'one_seat_per_author = true\nfixed_schedule = true\nmax_turns = 60\n[time]\nmove_ms = {MOVE_MS}\n')
    try:
        report(work, gvisor, bits, cold_us, len(files) // 3)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def report(work: Path, gvisor: bool, bits: int, cold_us: float, triples: int) -> None:
    """Play the tournament in WORK and print, per game, what the receiver got against the replay."""
    store = work / "s.sqlite"
    run = subprocess.run([*ARENA, "tournament", str(work / "t.toml"), "--store", str(store), "--plain", "-j", "1"],
                         cwd=work, env=ENV, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(run.stdout[-2000:] + run.stderr[-2000:])
    games = json.loads(subprocess.run([*ARENA, "games", "--store", str(store), "--json", "--limit", "1000"],
                                      cwd=work, env=ENV, capture_output=True, text=True, check=True).stdout)
    total = wrong = slots = 0
    print(f"mode {'gVisor' if gvisor else 'default'}, {triples} triples in the pool, "
          f"{bits} bits a game, cold above {cold_us:g} us, move_ms {MOVE_MS}")
    for g in games:
        seat = g["seats"].index("cc-send@1.0")
        first = next(json.loads(line) for line in subprocess.run(
            [*ARENA, "replay", g["id"], "--store", str(store), "--as", str(seat), "--json"],
            cwd=work, env=ENV, capture_output=True, text=True, check=True).stdout.splitlines()
            if json.loads(line).get("type") == "request")
        truth = "".join(map(str, hand_bits(first["view"]["hand"], bits)))
        text = subprocess.run([*ARENA, "replay", g["id"], "--store", str(store), "--plain"], cwd=work,
                              env=ENV, capture_output=True, text=True).stdout
        got = re.search(r"GOT ([01]+) slots (\d+)", text)
        sent = re.search(r"SENDSLOTS (\d+) triples (\d+)", text)
        if not got or not sent:  # the faults and the sender's first line tell a closed channel from a bot that failed
            print(f"{g['id']}: hand {first['view']['hand']} -> nothing received"
                  f"{'' if sent else ' (the sender ran out of fresh files)'}; {g.get('faults', '?')} fault(s), "
                  f"the sender {'ran' if 'SENT ' in text else 'wrote nothing'}")
            continue
        errors = sum(a != b for a, b in zip(got.group(1), truth))
        used = int(got.group(2)) + int(sent.group(1))
        total, wrong, slots = total + bits, wrong + errors, slots + used
        print(f"{g['id']}: hand {' '.join(first['view']['hand'])}: {bits} bits, {errors} wrong, "
              f"in {used} decision slots ({used * MOVE_MS} ms), sender used {sent.group(2)} triples")
    if total:
        print(f"total {total} bits, error {wrong / total:.3f}, {total / (slots * MOVE_MS / 1000):.1f} raw bits/s "
              f"over the slots used")


if __name__ == "__main__":
    main()
