"""One seat's memory of a game, and full states sampled from it (the engine's resampler)."""

from __future__ import annotations

import random
from typing import Any

from .types import Request


class Game:
    """Feed it the ``start`` message and every request; ask it for states consistent with all it saw.

    A sample is an engine ``State`` (:mod:`arena.engine`): play it forward with
    ``legal_actions``/``apply_action`` to evaluate a move. Importing this loads the engine,
    the rest of the botkit does not.
    """

    def __init__(self, start: dict[str, Any]):
        from arena.engine.resample import History
        from arena.engine.rules import Rules
        self.start = start
        self.rules = Rules.from_options(start["rules"])
        self.seat: int = start["seat"]
        self.players: int = start["players"]
        self.history = History(self.rules, self.players, self.seat)

    def see(self, request: Request | dict[str, Any]) -> None:
        """Take in a request (call it for every request, in order)."""
        raw = request.raw if isinstance(request, Request) else request
        self.history.see(raw.get("events") or [], raw["view"])

    def resample(self, rng: random.Random):
        """A full state consistent with the last view and every inference the events allow."""
        from arena.engine.resample import resample
        if self.history.view is None:
            raise ValueError("no request seen yet")
        return resample(self.history.view, self.history, rng)

    def engine_action(self, action):
        """The engine action of a request action (``types.Action`` or its dict), to apply to a sample."""
        from arena.ai.observe import parse_action
        return parse_action(action if isinstance(action, dict) else _json(action))


def _json(a) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": a.kind}
    if a.kind == "play":
        out.update(cards=[c.name for c in a.cards], **{"from": a.zone})
        if a.target is not None:
            out["target"] = a.target
    elif a.kind == "pick_up" and a.surrender is not None:
        out["surrender"] = a.surrender.name
    elif a.kind == "flip":
        out["position"] = a.position
    elif a.kind == "set_face_up":
        out["face_up"] = [[c.name for c in st] for st in a.face_up]
    elif a.kind == "stack":
        out["cards"] = [c.name for c in a.cards]
    return out
