"""The bot floor's C helper (``_pipe.c``: a decision's round trip, the freezer's knob), used only
where the built module is of these sources' interface.

Why: a checkout updated without rebuilding keeps the old ``_pipe`` binary. Imported as it is, an
older ``ask`` took its wait in whole milliseconds, and every seat then crashed with a TypeError at
its first decision. :data:`API` is raised with each change of a C signature, in ``_pipe.c`` and here
together; a binary of another interface is left unused (the Python paths serve, as where nothing
is built) and ``arena check`` behaves as on a machine with no compiler.
"""

from __future__ import annotations

import importlib
from types import ModuleType

API = 2
"""The interface ``_pipe.c`` declares (its module's ``API``); changed with any C signature."""


def load() -> ModuleType | None:
    """The built ``_pipe`` module where it declares :data:`API`; None where it is absent or older."""
    try:
        _pipe = importlib.import_module("arena.bots._pipe")  # (from sys.modules first: tests stand in for it)
    except ImportError:
        return None
    return _pipe if getattr(_pipe, "API", None) == API else None


pipe = load()
