"""The game store as the tournament layer names it, and private files for exports and reports.

The store itself (its class and every query) is :mod:`arena.store.games`; it is named here too
because every command and test reaches it as ``arena.tournament.store.Store``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from . import DEFAULT_STORE
from ..store.games import (LOG_FIELDS, PRIVATE_FILE_MODE, STORE_DIR_MODE, Store, StoreError, close_store_files,
                           create_private_store, pack_log, private_store_dir, summary)

__all__ = ["DEFAULT_STORE", "LOG_FIELDS", "PRIVATE_FILE_MODE", "STORE_DIR_MODE", "Store", "StoreError", "close_store_files",
           "create_private_store", "open_private", "pack_log", "private_store_dir", "summary", "write_private_text"]


def open_private(path: str | Path, mode: str = "w", **kw: Any):
    """``open(path, mode)`` for an export or a report: a new file is created 0600, an existing
    one is truncated and keeps its mode (the operator widened it on purpose). Game logs and
    exports can hold what bots must not read, and bots may run on this machine."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, PRIVATE_FILE_MODE)
    return os.fdopen(fd, mode, **kw)


def write_private_text(path: str | Path, text: str) -> None:
    """``Path.write_text`` with :func:`open_private`'s mode rule."""
    with open_private(path, "w", encoding="utf-8") as f:
        f.write(text)


