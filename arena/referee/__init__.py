"""The referee: the conversation with the seats of a game, and the trio driver that carries it.

- :mod:`.core`: :class:`RefereeCore`, the pure, synchronous rules of the conversation
  (messages out, answers and faults in, clock and record kept). No I/O.
- :mod:`.driver`: :func:`run_game` and :class:`BotPlayer`, which move the core's messages
  over bot processes with trio and real clocks.
- :mod:`.testing`: :class:`MockBot`, a scripted connection for tests (expect this, answer that).
"""

from ..engine.views import decision_name, reveal
from ..faults import FAULT_REASONS, BotFault, FaultReason
from .core import (
    THINK_BUCKETS_MS, GameRecord, RefereeCore, Request, TimeControl, bot_seed, think_percentile,
)
from .driver import BotPlayer, Connection, Launcher, Player, as_fault, run_game

__all__ = ["FAULT_REASONS", "THINK_BUCKETS_MS", "BotFault", "BotPlayer", "Connection", "FaultReason",
           "GameRecord", "Launcher", "Player", "RefereeCore", "Request", "TimeControl", "as_fault",
           "bot_seed", "decision_name", "reveal", "run_game", "think_percentile"]
