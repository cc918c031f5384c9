"""Compiles the rules engine with mypyc where it can, and the C helpers beside it (the engine's,
and the bot shell's round trip, ``arena/bots/_pipe.c``); the package works the same without them.

The engine's modules are plain, type-checked Python. Compiled by mypyc, the same source
runs two to three times faster (``bench/bench_engine.py`` says which engine it measured).
If compiling fails for any reason, the pure-Python engine is installed and a warning is
printed: installing never depends on a working C toolchain. ``arena/engine/__init__.py``
uses the compiled modules only while they match the sources they were built from.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

ENGINE = ("cards", "model", "rules", "game", "views")  # the hot path; describe.py stays Python
ENGINE_DIR = Path("arena") / "engine"
HELPERS = ("_records", "_view")  # small C helpers (records.py, views.py fall back without them)
SHELL_HELPER = Path("arena") / "bots" / "_pipe.c"  # a decision's round trip (bots/blocking.py falls back)
STAMP = "_compiled.json"
SCHEMAS = Path("protocol") / "schemas"  # installed as arena/schemas (referee/protocol.py:schema_dir)


def source_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class OptionalBuildExt(build_ext):
    """Build the compiled engine, or warn and leave the pure-Python one."""

    def run(self) -> None:
        out = ENGINE_DIR if self.inplace else Path(self.build_lib) / ENGINE_DIR
        (out / STAMP).unlink(missing_ok=True)
        try:
            super().run()
        except Exception as e:  # noqa: BLE001 - any failure means: no compiled engine
            self.warn(f"palace-arena: compiling the engine failed ({e}); using the pure-Python engine")
            return
        stamp = {name: source_digest(ENGINE_DIR / f"{name}.py") for name in ENGINE}
        out.mkdir(parents=True, exist_ok=True)
        (out / STAMP).write_text(json.dumps(stamp, indent=1) + "\n")


class BuildPyWithSchemas(build_py):
    """The protocol's JSON Schemas go with an installed package: the protocol checks and ``arena
    replay FILE`` read them, and outside a checkout there is no ``protocol/`` folder beside it. An
    editable install reads the checkout's own."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        out = Path(self.build_lib) / "arena" / "schemas"
        for path in sorted(SCHEMAS.rglob("*.json")):
            target = out / path.relative_to(SCHEMAS)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())


def extensions() -> list:
    if os.environ.get("ARENA_PURE_ENGINE"):
        return []
    try:
        from mypyc.build import mypycify
        helpers = [Extension(f"arena.engine.{name}", [str(ENGINE_DIR / f"{name}.c")]) for name in HELPERS]
        helpers.append(Extension("arena.bots._pipe", [str(SHELL_HELPER)]))
        return mypycify([str(ENGINE_DIR / f"{name}.py") for name in ENGINE], opt_level="3",
                        group_name="arena_engine") + helpers
    except (Exception, SystemExit) as e:  # noqa: BLE001 - no mypyc, or it rejects the sources (it exits then)
        print(f"palace-arena: not compiling the engine ({e!r}); using the pure-Python engine")
        return []


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt, "build_py": BuildPyWithSchemas})
