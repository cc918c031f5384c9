"""Replays: re-simulate any logged game, check it against its log, and show it.

* :mod:`.simulate` rebuilds every state from the deal and the logged actions,
  reports each mismatch, and rebuilds the requests a seat was sent;
* :mod:`.terminal` steps through a game with rich (interactive on a TTY);
* :mod:`.html` writes one self-contained HTML replay, or a tournament report;
* :mod:`.cli` adds ``arena replay`` and ``arena report``.
"""

from .load import load_file, load_game
from .simulate import (
    Decision, Frame, Mismatch, Replay, ReplayError, conversation_for, end_for, requests_for, simulate,
    start_for,
)

__all__ = ["Decision", "Frame", "Mismatch", "Replay", "ReplayError", "conversation_for", "end_for",
           "load_file", "load_game", "requests_for", "simulate", "start_for"]
