"""Resource limits applied to one bot process (and everything it spawns).

The numbers are per bot process, except ``cpu_seconds``, which is per game (a
process may serve several games).  Where each limit is enforced (cgroup, rlimit,
the referee's own checks) is described in docs/SANDBOX.md.

Plain data at the top of ``arena/``: the config files' ``[limits]`` table (:mod:`arena.config`)
is built from its fields and the bot process layer (:mod:`arena.bots`) applies it, so it sits
below both.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass

MiB = 1 << 20

CPU_BASE_S = 5.0
"""CPU seconds every game may use whatever its length (imports warm up, a JIT compiles)."""
CPU_THREADS = 2
"""A derived allowance counts each decision's ``move_ms`` this many times: a bot may think
with a helper thread, or ponder while the others move."""


@dataclass(frozen=True)
class Limits:
    """Caps for one bot.  All fields must be positive.

    cpu_seconds: CPU seconds the whole bot (every process) may use in one
        game, measured from the game's start (cgroup usage, else /proc).  None
        (the default) derives it from the time control: see
        :meth:`game_cpu_allowance`.  Checked by the referee at every reply and
        every quarter second while it waits for one; over it: ``cpu_limit``.
        Per-turn wall-clock limits are the clock's job; this stops a bot that
        answers in time but burns CPU in the background.
    process_cpu_seconds: RLIMIT_CPU of every process (SIGXCPU at the soft
        limit, SIGKILL one second later): a backstop over a process's whole
        life.  The referee starts a fresh process before a game once one has
        used half of it.
    memory_mb: memory cgroup limit for the whole bot (all its processes).
        Without a memory cgroup it falls back to RLIMIT_AS per process, which is
        a much cruder proxy (see ``address_space_mb``).
    max_processes: pids cgroup limit (processes *and threads*).  When the bot
        runs under its own uid it is also RLIMIT_NPROC, so a fork bomb stays
        bounded even without cgroups.  Leave room for runtimes that start
        threads (a JVM wants ~30).
    open_files: RLIMIT_NOFILE.
    file_size_mb: RLIMIT_FSIZE, the largest file the bot may write.
    max_line_bytes: longest protocol line accepted from the bot (without the
        newline); the referee never buffers more than this plus one read chunk.
    stderr_cap_bytes: stderr kept per bot process; the rest is read and counted
        but not stored, so a chatty bot can neither block nor bloat the referee.
    max_output_bytes: total stdout volume accepted over the bot's lifetime.
    address_space_mb: RLIMIT_AS.  None (default) means "memory_mb when there is
        no memory cgroup, otherwise unlimited": address-space limits break
        runtimes that reserve large virtual ranges (JVM, Go), so they are only
        used when nothing better exists.  0 disables RLIMIT_AS entirely.
    """

    cpu_seconds: int | None = None
    memory_mb: int = 512
    max_processes: int = 64
    open_files: int = 256
    file_size_mb: int = 64
    max_line_bytes: int = 1 * MiB
    stderr_cap_bytes: int = 64 * 1024
    max_output_bytes: int = 64 * MiB
    address_space_mb: int | None = None
    process_cpu_seconds: int = 3600

    def __post_init__(self) -> None:
        if self.cpu_seconds is not None and (
                not isinstance(self.cpu_seconds, int) or isinstance(self.cpu_seconds, bool) or self.cpu_seconds <= 0):
            raise ValueError(f"Limits.cpu_seconds must be a positive int or None, got {self.cpu_seconds!r}")
        for name in (
            "process_cpu_seconds", "memory_mb", "max_processes", "open_files",
            "file_size_mb", "max_line_bytes", "stderr_cap_bytes", "max_output_bytes",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"Limits.{name} must be a positive int, got {value!r}")
        if self.address_space_mb is not None and self.address_space_mb < 0:
            raise ValueError("Limits.address_space_mb must be None, 0 or positive")

    def rlimits(self, *, nproc: int | None, memory_cgroup: bool) -> list[tuple[int, int, int]]:
        """(resource, soft, hard) triples to set in the child before exec.

        Soft == hard except for CPU, where the one-second gap turns the soft
        limit's SIGXCPU (catchable) into a SIGKILL if the bot ignores it.

        ``nproc`` is the RLIMIT_NPROC to apply, or None to leave it alone (it
        counts every process of the uid, so it is only meaningful when the bot
        has a uid of its own).
        """
        out = [
            (resource.RLIMIT_CPU, self.process_cpu_seconds, self.process_cpu_seconds + 1),
            (resource.RLIMIT_NOFILE, self.open_files, self.open_files),
            (resource.RLIMIT_FSIZE, self.file_size_mb * MiB, self.file_size_mb * MiB),
            (resource.RLIMIT_CORE, 0, 0),
        ]
        if nproc is not None:
            out.append((resource.RLIMIT_NPROC, nproc, nproc))
        address_space = self.address_space_mb
        if address_space is None:
            address_space = 0 if memory_cgroup else self.memory_mb
        if address_space > 0:
            out.append((resource.RLIMIT_AS, address_space * MiB, address_space * MiB))
        return out

    def game_cpu_allowance(self, move_s: float, bank_s: float, decisions: int) -> float:
        """CPU seconds the bot may have used so far in a game in which it has answered
        ``decisions`` requests under a clock of ``move_s`` per decision plus a ``bank_s`` bank.

        ``cpu_seconds`` when set; otherwise what the clock let it think, counted
        :data:`CPU_THREADS` times, plus the bank and :data:`CPU_BASE_S`: it grows with the
        game, so a long game is never starved and a short one cannot hog a core.
        """
        if self.cpu_seconds is not None:
            return float(self.cpu_seconds)
        return CPU_BASE_S + bank_s + CPU_THREADS * move_s * max(decisions, 1)


DEFAULT_LIMITS = Limits()
