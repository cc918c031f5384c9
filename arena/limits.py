"""Resource limits applied to one bot process (and everything it spawns).

The numbers are per bot *process*, which lives for one game.  Where each limit
is enforced (cgroup, rlimit, reader) is described in docs/SANDBOX.md.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass

MiB = 1 << 20


@dataclass(frozen=True)
class Limits:
    """Caps for one bot.  All fields must be positive.

    cpu_seconds: RLIMIT_CPU of every process of the bot (SIGXCPU at the soft
        limit, SIGKILL one second later).  Per-turn wall-clock limits are the
        referee's job (``receive_line(timeout=...)``); this only stops a bot
        that burns a core for the whole game.
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

    cpu_seconds: int = 60
    memory_mb: int = 512
    max_processes: int = 64
    open_files: int = 256
    file_size_mb: int = 64
    max_line_bytes: int = 1 * MiB
    stderr_cap_bytes: int = 64 * 1024
    max_output_bytes: int = 64 * MiB
    address_space_mb: int | None = None

    def __post_init__(self) -> None:
        for name in (
            "cpu_seconds", "memory_mb", "max_processes", "open_files",
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
            (resource.RLIMIT_CPU, self.cpu_seconds, self.cpu_seconds + 1),
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


DEFAULT_LIMITS = Limits()
