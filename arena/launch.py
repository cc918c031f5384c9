"""From a bot manifest to a running, limited bot process: build once, then start.

``python3``/``python`` as a manifest's first word runs the arena's own
interpreter, so Python bots see the same installed packages as the arena.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field, fields
from pathlib import Path
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


ARENA_SOURCE = Path(__file__).resolve().parent.parent  # holds the ``arena`` package


def _others_can_use(path: Path, need: int = stat.S_IXOTH) -> bool:
    """Whether any other user can reach ``path`` (x on every directory) and has ``need`` on it."""
    p = path.resolve()
    if not p.exists() or not os.stat(p).st_mode & need:
        return False
    return all(os.stat(d).st_mode & stat.S_IXOTH for d in p.parents)


@functools.cache
def _system_python() -> str | None:
    """A Python 3.11+ that any uid can run, for bots when ours lives somewhere private."""
    for cand in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if _others_can_use(Path(cand)):
            try:
                out = subprocess.run([cand, "-c", "import sys; print(sys.version_info >= (3, 11))"],
                                     capture_output=True, text=True, timeout=10).stdout.strip()
            except (OSError, subprocess.TimeoutExpired):
                continue
            if out == "True":
                return cand
    return None


def python_for(isolated: bool) -> tuple[str, dict[str, str]] | None:
    """The interpreter for ``python3`` in a manifest, and the environment it needs.

    Our own interpreter when the bot's uid can run it (same packages as the arena);
    otherwise the system's, with the arena source on PYTHONPATH so reference bots
    still import ``arena``. None when no interpreter is usable by an isolated bot.
    """
    ours = Path(sys.executable)
    if not isolated or (_others_can_use(ours) and str(ours.resolve()).startswith("/usr/")):
        return sys.executable, {}
    system = _system_python()
    if system is None:
        return None
    source = _reachable_source()
    return system, {"PYTHONPATH": str(source)} if source is not None else {}


@functools.cache
def _reachable_source() -> Path | None:
    """A directory holding the ``arena`` package that other uids can read: ARENA_SOURCE itself,
    or, when it sits somewhere private (a 0700 checkout), a world-readable copy made once per
    process and removed at exit. None if neither can be had."""
    if _others_can_use(ARENA_SOURCE / "arena" / "__init__.py", stat.S_IROTH):
        return ARENA_SOURCE
    try:
        libs = tuple(ARENA_SOURCE.glob("arena_engine__mypyc*"))  # the compiled engine's shared library
        root = world_readable_copy(ARENA_SOURCE / "arena", "palace-arena-src-", extra=libs).parent
    except OSError:
        return None
    return root if _others_can_use(root / "arena" / "__init__.py", stat.S_IROTH) else None


def world_readable_copy(directory: Path, prefix: str, *, extra: tuple[Path, ...] = ()) -> Path:
    """A copy of ``directory`` (and ``extra`` files beside it) that every user can read, in a
    new temporary directory removed when this process exits. Returns the copied directory."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, root, True)
    copy = root / directory.name
    shutil.copytree(directory, copy, ignore=shutil.ignore_patterns("__pycache__"))
    for path in extra:
        shutil.copy2(path, root)
    for path in [root, *root.rglob("*")]:
        path.chmod(0o755 if path.is_dir() or os.access(path, os.X_OK) else 0o644)
    return copy


def argv(spec: BotSpec, python: str = sys.executable) -> list[str]:
    cmd = list(spec.command)
    if cmd and cmd[0] in ("python3", "python"):
        cmd[0] = python
    return cmd


@dataclass
class Launcher:
    """Starts bots for a tournament; builds each bot at most once per run."""

    limits: Limits = field(default_factory=Limits)
    sandbox: bool = False
    # Run each bot under a private uid when the referee is root (None: whenever possible).
    # docs/SANDBOX.md says what a bot can reach either way.
    isolate_user: bool | None = None
    warnings: list[str] = field(default_factory=list)
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
        from .botproc import BotStartError, start_bot
        await self.build(spec)
        isolate = os.geteuid() == 0 if self.isolate_user is None else self.isolate_user
        env: dict[str, str] = {}
        python = sys.executable
        if spec.command and spec.command[0] in ("python3", "python") and spec.python:
            python = spec.python  # bot.toml's interpreter or venv: the author's choice
        elif spec.command and spec.command[0] in ("python3", "python"):
            found = python_for(isolate or self.sandbox)
            if found is None and (self.sandbox or self.isolate_user):
                raise BuildError("no Python 3.11+ that an isolated bot may run (install python3 in /usr/bin)")
            if found is None:
                isolate = False
                self._warn("no system Python 3.11+ for isolated Python bots: they run as the referee's user")
            else:
                python, env = found
        binds = [Path(env["PYTHONPATH"])] if env.get("PYTHONPATH") else []
        try:
            return await start_bot(argv(spec, python), spec.workdir, limits=limits_for(spec, self.limits),
                                   sandbox=self.sandbox, run_as="auto" if isolate else None,
                                   extra_env={**spec.env, **env} or None, ro_binds=binds)
        except BotStartError as e:
            if not isolate or self.sandbox or self.isolate_user:
                raise
            # Isolation was only "where possible": a bot kept where other users cannot read
            # (a private home directory) still runs, as the referee's user, and we say so.
            self._warn(f"{spec.label} runs as the referee's user: {e}")
            return await start_bot(argv(spec), spec.workdir, limits=limits_for(spec, self.limits),
                                   sandbox=False, run_as=None)

    def _warn(self, text: str) -> None:
        if text not in self.warnings:
            self.warnings.append(text)
            print(f"warning: {text}", file=sys.stderr)
