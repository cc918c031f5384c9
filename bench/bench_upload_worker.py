"""One upload's unpacking in a worker of its own (``serve.unpacker.unpack_apart``): wall time and
the CPU of this process and its reaped children, medians over ``--uploads`` uploads of a small bot
(the first, which pays the once-a-process tries, not counted).

``--view none`` runs the worker as a server does where bubblewrap cannot start (a root server's
worker then runs as a private uid in a root and namespaces of its own: docs/SANDBOX.md, "Its uid");
``--view bubblewrap`` as it does by default (a root server's bubblewrap started as a private uid). Compare two checkouts by running this file with each
one's Python from its folder, alternating; under bubblewrap the worker's CPU is counted only in
part (its pid namespace's init reaps it).

    python bench/bench_upload_worker.py --view none --uploads 10
"""

from __future__ import annotations

import argparse
import io
import resource
import shutil
import statistics
import tempfile
import time
import zipfile
from pathlib import Path

import trio

from arena.serve import unpacker


def _cpu() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--view", choices=["none", "bubblewrap"], default="none")
    ap.add_argument("--uploads", type=int, default=10)
    args = ap.parse_args()
    if args.view == "none":
        unpacker.confined = lambda argv, *_: argv
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("bot.toml", 'name = "upl"\nversion = "1.0"\ncommand = ["python3", "bot.py"]\n')
        zf.writestr("bot.py", "print('x')\n" * 100)
    data = buf.getvalue()
    top = Path(tempfile.mkdtemp(prefix="bench-upload-worker-"))
    try:
        (top / "uploads").mkdir(mode=0o700)
        walls, cpus = [], []
        for i in range(args.uploads + 1):
            t0, c0 = time.perf_counter(), _cpu()
            got = trio.run(lambda: unpacker.unpack_apart(data, top / "uploads" / f"j{i}", max_files=50,
                                                         max_bytes=1 << 20))
            if i:
                walls.append(time.perf_counter() - t0)
                cpus.append(_cpu() - c0)
            assert (got.root / "bot.py").is_file()
    finally:
        shutil.rmtree(top)
    bwrapped_as_uid = any(isinstance(k, tuple) and k[1] and v for k, v in getattr(unpacker, "_bwrap_runs", {}).items())
    private = getattr(unpacker, "_uid_tried", None) == [True] or (args.view == "bubblewrap" and bwrapped_as_uid)
    as_uid = "a private uid" if private else "the server's uid"
    print(f"view {args.view}: median wall {statistics.median(walls) * 1000:.1f} ms, median CPU "
          f"{statistics.median(cpus) * 1000:.1f} ms over {args.uploads} uploads (worker as {as_uid})")


if __name__ == "__main__":
    main()
