"""Does a CPU quota stop a process inside a long system call, where the freezer does not?
(Why the referee waits for a seat to stop after its answer rather than throttling it.)

    python bench/bench_throttle.py [GIB] [SECONDS]      # as root, where a cpu controller is

A child loops ``mmap(MAP_POPULATE)`` of GIB GiB of zero pages and ``munmap`` (one call takes
about 0.14 s a GiB here: in the kernel nearly all the time). It is put in a cgroup of the cpu
controller (v2 ``cpu.max``, else v1 ``cpu.cfs_quota_us``) and, for SECONDS each, run free, under a
quota of 1 ms per 100 ms, then frozen too; the CPU it used in each is printed (from
``/proc/PID/stat``), with the group's throttle counters. Before Linux 6.18 a throttled group's
tasks were taken off the CPU wherever they were; from 6.18 a task is throttled on its way back to
user space, like the freezer. Prints figures only.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from arena.bots.cgroups import detect_cgroups, write  # noqa: E402


def sit(gib: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    size = gib << 30
    while True:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | mmap.MAP_POPULATE
                         | 0x4000, -1, 0)  # MAP_NORESERVE
        if addr in (None, 2**64 - 1):
            os._exit(3)
        libc.munmap(addr, size)


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    gib = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 3.0
    root, why = detect_cgroups()
    if root is None or not root.shares_cpu or not root.freezes:
        raise SystemExit(f"needs the cpu controller and a freezer: {why}")
    name = f"throttle-{os.getpid()}"
    groups = {ctrl: root.make_group(ctrl, name) for ctrl in root.parents}
    v2 = root.kind == "v2"
    cpu, freezer = (groups["unified"], groups["unified"]) if v2 else (groups["cpu"], groups["freezer"])
    pid = os.fork()
    if pid == 0:
        sit(gib)
    try:
        for d in {cpu, freezer}:
            write(d / "cgroup.procs", str(pid))
        time.sleep(0.5)
        print(f"kernel {os.uname().release}, cgroup {root.kind}, {gib} GiB a call, {seconds:.0f} s each")

        def phase(label: str) -> None:
            before = cpu_s(pid)
            time.sleep(seconds)
            print(f"  {label:22} {cpu_s(pid) - before:6.2f} s of CPU")

        phase("free")
        write(cpu / "cpu.max", "1000 100000") if v2 else (write(cpu / "cpu.cfs_period_us", "100000"),
                                                          write(cpu / "cpu.cfs_quota_us", "1000"))
        phase("quota 1 ms / 100 ms")
        stat = (cpu / "cpu.stat").read_text().split()
        print("  ", " ".join(f"{k}={v}" for k, v in zip(stat[::2], stat[1::2]) if "throttled" in k))
        write(freezer / ("cgroup.freeze" if v2 else "freezer.state"), "1" if v2 else "FROZEN")
        phase("quota and frozen")
    finally:
        os.kill(pid, signal.SIGKILL)
        write(freezer / ("cgroup.freeze" if v2 else "freezer.state"), "0" if v2 else "THAWED")
        os.waitpid(pid, 0)
        for d in groups.values():
            for _ in range(100):
                try:
                    d.rmdir()
                    break
                except OSError:
                    time.sleep(0.01)


if __name__ == "__main__":
    main()
