"""The referee: the conversation with the seats of a game, the protocol it speaks, and its one loop.

- :mod:`.core`: :class:`RefereeCore`, the pure, synchronous rules of the conversation
  (messages out, answers and faults in, clock and record kept). No I/O.
- :mod:`.blocking`: :func:`~.blocking.play_game`, which moves the core's messages over bot
  processes (:class:`~.blocking.BlockingPlayer`) and people (:class:`~.blocking.PersonSeat`)
  with ``poll``, one game at a time per thread: what every arena command plays on; :mod:`.seat`
  holds what a bot's seat decides (start, handshake, faults, freezing) and the clock it times on.
- :mod:`.protocol`: the messages, built and read against ``protocol/schemas``; a bad line
  raises one of :mod:`arena.faults`, as every fault does.
- :mod:`.testing`: :class:`MockBot`, a scripted connection for tests (expect this, answer that).
"""

import importlib
from typing import Any

# Loaded on first use (PEP 562): the environments and the replay read the protocol from here
# without the bot process layer.
_WHERE = {
    "core": ["THINK_BUCKETS_MS", "GameRecord", "RefereeCore", "Request", "TimeControl", "bot_seed",
             "think_percentile"],
    "..faults": ["FAULT_REASONS", "BotFault", "FaultReason"],
    "..engine.views": ["decision_name", "reveal"],  # the engine's names for what a seat is asked and shown
}
_MODULE_OF = {name: module for module, names in _WHERE.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    where = module if module.startswith(".") else f".{module}"
    value = getattr(importlib.import_module(where, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_MODULE_OF))


__all__ = sorted(_MODULE_OF)
