"""How long a search may think: a time or an iteration count, sized to the request clock.

A bot must answer within ``move_ms`` (overruns drain a bank, then forfeit), and the
referee's clock includes process and pipe overhead, so the default spends only a
fraction of it. An environment variable overrides the default for matches and
benchmarks; it is still capped below ``move_ms``.
"""

from __future__ import annotations

import os
import time

DEFAULT_FRACTION = 0.3  # of move_ms
MAX_FRACTION = 0.8
SAFETY_MS = 30.0


class Budget:
    """``ms`` of thinking, or ``iterations`` (exact, machine-independent), or both."""

    def __init__(self, ms: float | None = None, iterations: int | None = None):
        self.ms = ms
        self.iterations = iterations

    @classmethod
    def from_env(cls, prefix: str) -> Budget:
        """``<PREFIX>_MS`` and ``<PREFIX>_ITERATIONS`` (e.g. ``ISMCTS_MS=1000``)."""
        ms = os.environ.get(f"{prefix}_MS")
        it = os.environ.get(f"{prefix}_ITERATIONS")
        return cls(float(ms) if ms else None, int(it) if it else None)

    def deadline(self, req: dict) -> tuple[float, int | None]:
        """(perf_counter deadline, iteration cap) for this request."""
        move_ms = float((req.get("clock") or {}).get("move_ms") or 1000)
        cap = max(1.0, move_ms * MAX_FRACTION - SAFETY_MS)
        if self.ms is not None:
            ms = min(self.ms, cap)
        elif self.iterations is not None:
            ms = cap  # iterations decide; the clock only guards
        else:
            ms = max(1.0, move_ms * DEFAULT_FRACTION)
        return time.perf_counter() + ms / 1000.0, self.iterations
