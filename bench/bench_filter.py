"""What the system-call filter costs a bot per call: the same loop of cheap calls under the
arena's bubblewrap command line, with the arena's filter, with the same machinery allowing every
call by number (a tree as large), and with a one-rule filter that allows everything.

    python bench/bench_filter.py [rounds] [calls]

The loop (in the contained Python) times ``calls`` rounds of getppid (a call the kernel answers
at once, so the filter's share is largest) and of a 1-byte read from /dev/zero; filters alternate
round by round. Prints the median ns per call for each.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from arena.bots import seccomp  # noqa: E402
from arena.bots.bwrap import bwrap_argv  # noqa: E402
from arena.bots.spawn import BASE_ENV, HOST_ENV  # noqa: E402

LOOP = r'''
import os, sys, time
n = int(sys.argv[1])
fd = os.open("/dev/zero", os.O_RDONLY)
t = time.perf_counter_ns()
for _ in range(n):
    os.getppid()
a = (time.perf_counter_ns() - t) / n
t = time.perf_counter_ns()
for _ in range(n):
    os.read(fd, 1)
print(a, (time.perf_counter_ns() - t) / n)
'''


def sample(program: bytes, calls: int, d: Path) -> tuple[float, float]:
    fd = os.memfd_create("filter")
    try:
        os.write(fd, program)
        os.lseek(fd, 0, os.SEEK_SET)
        argv = bwrap_argv(shutil.which("bwrap"), ["/usr/bin/python3", "loop.py", str(calls)], d,
                          tmp_bytes=16 << 20, env={**BASE_ENV, "HOME": "/tmp"}, seccomp_fd=fd)
        out = subprocess.run(argv, capture_output=True, text=True, env=HOST_ENV, pass_fds=(fd,), timeout=300,
                             check=True).stdout
    finally:
        os.close(fd)
    a, b = out.split()
    return float(a), float(b)


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 200_000
    arena = seccomp.bpf()
    seccomp.bpf.cache_clear()
    rules = seccomp._rules
    seccomp._rules = lambda sc: [(sc.ALLOW, nr, ()) for nr in range(seccomp.MAX_NR)]
    allow_all = seccomp.bpf()
    seccomp._rules = rules
    seccomp.bpf.cache_clear()
    import pyseccomp as sc
    f = sc.SyscallFilter(sc.ALLOW)
    with tempfile.TemporaryFile() as out:
        f.export_bpf(out)
        out.seek(0)
        bare = out.read()
    d = Path(os.path.realpath(tempfile.mkdtemp(prefix="arena-filter-bench-")))
    d.chmod(0o755)
    (d / "loop.py").write_text(LOOP)
    (d / "loop.py").chmod(0o644)
    got: dict[str, list[tuple[float, float]]] = {"arena filter": [], "allow-all tree": [], "allow, no rules": []}
    try:
        for _ in range(rounds):
            got["arena filter"].append(sample(arena, calls, d))
            got["allow-all tree"].append(sample(allow_all, calls, d))
            got["allow, no rules"].append(sample(bare, calls, d))
    finally:
        shutil.rmtree(d, ignore_errors=True)
    print(f"{rounds} rounds of {calls} calls; arena filter {len(arena) // 8} BPF instructions; "
          f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    for name, rows in got.items():
        print(f"{name:18} getppid {statistics.median(r[0] for r in rows):7.0f} ns   "
              f"read(/dev/zero, 1) {statistics.median(r[1] for r in rows):7.0f} ns  (median per call, "
              f"Python loop included)")


if __name__ == "__main__":
    main()
