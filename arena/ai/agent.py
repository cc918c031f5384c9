"""What every agent is: a bot program's brain, given the protocol messages and nothing else.

Its own module, below :mod:`.agents` (the heuristic and search agents, and the bundled bots by
name) and :mod:`.learned` (the trained network), which both build on it.
"""

from __future__ import annotations

from typing import Any


class Agent:
    name = "agent"
    info: dict[str, Any] | None = None  # what the last choice's search found, if it searched

    def begin(self, msg: dict[str, Any]) -> None:
        pass

    def choose(self, req: dict[str, Any]) -> int:
        raise NotImplementedError

    def end(self, msg: dict[str, Any]) -> None:
        pass
