"""What reading a bot folder costs, and what a hostile one costs the referee, in one run.

    python bench/bench_folder.py [--mb 64] [--runs 5]

Prints, for the one reader (``arena.bots.folder.read_folder``) against the reading it replaced
(each file read whole, links followed): the median time to hash every bundled bot, the time and
the peak of memory the hash allocates for one folder holding a ``--mb`` MiB file, and how long a
folder holding a 3 GiB sparse file takes to be refused (the old reading is not run on that one:
it allocates the 3 GiB). Memory is tracemalloc's peak, which sees the bytes objects both allocate.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from arena.bots.folder import SKIP_DIRS, SKIP_SUFFIXES, FolderError, read_folder  # noqa: E402
from arena.bots.manifest import BUNDLED_DIR, bundled_bots  # noqa: E402


def old_hash(root: Path) -> str:
    """The reading before the one reader: every file read whole, links followed."""
    def walk(d: Path):
        for p in d.iterdir():
            if p.is_dir():
                if p.name not in SKIP_DIRS:
                    yield from walk(p)
            elif p.is_file() and not p.name.endswith(SKIP_SUFFIXES):
                yield p
    h = hashlib.sha256()
    for path in sorted(walk(root)):
        h.update(str(path.relative_to(root)).encode() + b"\0")
        h.update(path.read_bytes())
    return h.hexdigest()


def timed(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def peak(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=64)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    bots = [BUNDLED_DIR / name for name in bundled_bots()]
    new_all = timed(lambda: [read_folder(b) for b in bots], args.runs)
    old_all = timed(lambda: [old_hash(b) for b in bots], args.runs)
    print(f"{len(bots)} bundled bots: reader {new_all * 1e3:.2f} ms, old reading {old_all * 1e3:.2f} ms (median of {args.runs})")
    work = Path(tempfile.mkdtemp(prefix="bench-folder-"))
    try:
        big = work / "big"
        big.mkdir()
        with open(big / "weights.bin", "wb") as fh:
            chunk = bytes(range(256)) * 4096
            for _ in range(args.mb):
                fh.write(chunk)
        assert read_folder(big).digest_v1 == old_hash(big)  # the unframed hash, still computed beside v2
        print(f"one {args.mb} MiB file: reader {timed(lambda: read_folder(big), args.runs) * 1e3:.0f} ms, "
              f"peak {peak(lambda: read_folder(big)) / 2**20:.1f} MiB; old reading "
              f"{timed(lambda: old_hash(big), args.runs) * 1e3:.0f} ms, peak {peak(lambda: old_hash(big)) / 2**20:.1f} MiB")
        sparse = work / "sparse"
        sparse.mkdir()
        with open(sparse / "huge", "wb") as fh:
            fh.truncate(3 << 30)

        def refused() -> None:
            try:
                read_folder(sparse)
            except FolderError:
                return
            raise AssertionError("a 3 GiB sparse file was not refused")
        print(f"3 GiB sparse file: refused in {timed(refused, args.runs) * 1e3:.2f} ms, peak "
              f"{peak(refused) / 2**10:.0f} KiB")
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
