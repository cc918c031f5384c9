"""Which engine runs: the modules mypyc compiled, or their Python sources.

``setup.py`` compiles the engine's hot modules and records a digest of each source it
compiled (``_compiled.json``). The compiled modules are used only while every digest
still matches its source. After an edit (editing does not rebuild an editable install)
the sources run, with a warning, so a stale build can never play different rules.
``ARENA_PURE_ENGINE=1`` forces the sources, for debugging and for comparing the two.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.util
import json
import os
import sys
import warnings
from importlib.machinery import EXTENSION_SUFFIXES, ModuleSpec
from pathlib import Path

HERE = Path(__file__).resolve().parent
STAMP = HERE / "_compiled.json"
PACKAGE = __name__.rpartition(".")[0]


def check_compiled(stamp_path: Path = STAMP, here: Path = HERE) -> tuple[bool, str]:
    """(usable, why): whether every compiled module exists and matches its source."""
    if os.environ.get("ARENA_PURE_ENGINE"):
        return False, "ARENA_PURE_ENGINE is set"
    try:
        stamp = json.loads(stamp_path.read_text())
    except (OSError, ValueError):
        return False, "not compiled"
    for name, digest in stamp.items():
        if not any((here / f"{name}{suffix}").exists() for suffix in EXTENSION_SUFFIXES):
            return False, f"{name} was not compiled"
        source = here / f"{name}.py"
        if not source.is_file() or hashlib.sha256(source.read_bytes()).hexdigest() != digest:
            return False, f"stale: {name}.py changed after it was compiled (reinstall to recompile)"
    return True, "compiled by mypyc"


class PreferSources(importlib.abc.MetaPathFinder):
    """Import this package's modules from their ``.py`` files even where a compiled one sits beside."""

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> ModuleSpec | None:
        package, _, name = fullname.rpartition(".")
        source = HERE / f"{name}.py"
        if package == PACKAGE and source.is_file():
            return importlib.util.spec_from_file_location(fullname, source)
        return None


USABLE, WHY = check_compiled()
IMPLEMENTATION = "compiled" if USABLE else "python"
BUILT = any(f.name.endswith(tuple(EXTENSION_SUFFIXES)) for f in HERE.iterdir())
if not USABLE and BUILT and not any(isinstance(f, PreferSources) for f in sys.meta_path):
    sys.meta_path.insert(0, PreferSources())
    if WHY.startswith("stale"):
        warnings.warn(f"arena.engine: running the Python sources, the compiled engine is {WHY}", stacklevel=2)
