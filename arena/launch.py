"""From a bot manifest to a running, limited bot process: build once, then start.

``python3``/``python`` as a manifest's first word runs the arena's own
interpreter, so Python bots see the same installed packages as the arena.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field, fields
from typing import Any

import trio

from .limits import Limits
from .manifest import BotSpec

BUILD_TIMEOUT_S = 300


class BuildError(RuntimeError):
    """A bot's build command failed; the message carries the tail of its output."""


def limits_for(spec: BotSpec, base: Limits) -> Limits:
    """Tournament limits, tightened (never loosened) by the manifest's ``[limits]`` table."""
    known = {f.name for f in fields(Limits)}
    changes: dict[str, Any] = {}
    for key, value in spec.limits.items():
        if key in known and isinstance(value, int) and value > 0:
            current = getattr(base, key)
            changes[key] = value if current is None else min(value, current)
    return Limits(**{**{f.name: getattr(base, f.name) for f in fields(Limits)}, **changes})


def argv(spec: BotSpec) -> list[str]:
    cmd = list(spec.command)
    if cmd and cmd[0] in ("python3", "python"):
        cmd[0] = sys.executable
    return cmd


@dataclass
class Launcher:
    """Starts bots for a tournament; builds each bot at most once per run."""

    limits: Limits = field(default_factory=Limits)
    sandbox: bool = False
    # Run each bot under a private uid (root referees only). Off by default because a
    # bot's interpreter may live where other users cannot read it (e.g. under /root);
    # --sandbox turns it on. docs/SANDBOX.md says what a bot can reach either way.
    isolate_user: bool | None = None
    built: dict[str, bool] = field(default_factory=dict)
    build_lock: trio.Lock = field(default_factory=trio.Lock)

    async def build(self, spec: BotSpec) -> None:
        if spec.build is None or self.built.get(spec.label):
            return
        async with self.build_lock:
            if self.built.get(spec.label):
                return
            cmd = list(spec.build)

            def run() -> subprocess.CompletedProcess:
                return subprocess.run(cmd, cwd=spec.workdir, capture_output=True, text=True,
                                      timeout=BUILD_TIMEOUT_S)
            try:
                done = await trio.to_thread.run_sync(run)
            except (OSError, subprocess.TimeoutExpired) as e:
                raise BuildError(f"{spec.label}: build {' '.join(cmd)!r} failed: {e}") from None
            if done.returncode != 0:
                tail = (done.stdout + done.stderr)[-2000:]
                raise BuildError(f"{spec.label}: build exited {done.returncode}:\n{tail}")
            self.built[spec.label] = True

    async def __call__(self, spec: BotSpec):
        from .botproc import start_bot
        await self.build(spec)
        isolate = self.sandbox if self.isolate_user is None else self.isolate_user
        return await start_bot(argv(spec), spec.workdir, limits=limits_for(spec, self.limits),
                               sandbox=self.sandbox, run_as="auto" if isolate else None)
