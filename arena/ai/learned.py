"""The learned bot: a policy network trained in ``arena.envs`` (``examples/rl/train.py``),
played in pure Python from its exported weights.

No numpy and no torch: bundled bots run under the sandbox's system Python, which has
neither. The inputs are :func:`arena.ai.features.view_features` of the request's view
(the numbers the environments fed the network while it trained) and the output is a
score for each index of the fixed action space (:mod:`arena.ai.actions`); the best
legal index is played, ties to the lower index, as the trainer's greedy policy does.
Only the legal rows of the last layer are computed, and the first layer reads only the
nonzero inputs, so a decision costs a few milliseconds.

Setup decisions (which cards go face up) are the setup table's, as in training: the fixed
space names a setup choice only by its place in the request, which a network cannot read.

Weights: ``learned.json`` beside this module (format ``palace-mlp-1``: dense layers
``{"w": [out][in], "b": [out]}``, ``activation`` between them, none after the last).
"""

from __future__ import annotations

import json
import math
import sys
from functools import cache
from operator import mul
from pathlib import Path
from typing import Any

from arena.engine.rules import Rules
from .actions import N_ACTIONS, json_index
from .agent import Agent
from .features import N_FEATURES, view_features
from .observe import parse_action
from .policy import setup_choice

WEIGHTS = Path(__file__).with_name("learned.json")
FORMAT = "palace-mlp-1"
_ACTIVATIONS = {"tanh": math.tanh, "relu": lambda v: v if v > 0.0 else 0.0}


class MLP:
    """A dense network's forward pass over lists of floats."""

    def __init__(self, data: dict[str, Any]):
        if data.get("format") != FORMAT:
            raise ValueError(f"weights in format {data.get('format')!r}, expected {FORMAT!r}")
        if data.get("activation") not in _ACTIVATIONS:
            raise ValueError(f"unknown activation {data.get('activation')!r}")
        self.act = _ACTIVATIONS[data["activation"]]
        layers = data["layers"]
        width = N_FEATURES
        for layer in layers:
            w, b = layer["w"], layer["b"]
            if len(w) != len(b) or any(len(row) != width for row in w):
                raise ValueError(f"a layer of {len(w)} x {len(w[0]) if w else 0} does not take {width} inputs")
            width = len(w)
        if width != N_ACTIONS:
            raise ValueError(f"the network scores {width} actions, not {N_ACTIONS}")
        # hidden layers transposed (one row per input): an input's row is added once, scaled
        self.hidden = [([list(col) for col in zip(*layer["w"])], list(layer["b"])) for layer in layers[:-1]]
        self.out_w, self.out_b = layers[-1]["w"], layers[-1]["b"]
        self.meta = {k: v for k, v in data.items() if k != "layers"}

    def hidden_state(self, x: list[float]) -> list[float]:
        h = x
        act = self.act
        for wt, b in self.hidden:
            acc = b[:]
            for i, v in enumerate(h):
                if v:
                    acc = [a + v * r for a, r in zip(acc, wt[i])]
            h = [act(a) for a in acc]
        return h

    def scores(self, x: list[float], indices: list[int]) -> list[float]:
        """The network's output for these action indices only."""
        h = self.hidden_state(x)
        return [self.out_b[k] + sum(map(mul, self.out_w[k], h)) for k in indices]

    def best(self, x: list[float], indices: list[int]) -> int:
        """The index with the highest score; ties to the lowest index."""
        order = sorted(indices)
        s = self.scores(x, order)
        return order[max(range(len(order)), key=lambda j: (s[j], -j))]


@cache
def load(path: str | Path = WEIGHTS) -> MLP:
    return MLP(json.loads(Path(path).read_text()))


class LearnedAgent(Agent):
    """The network's greedy choice from the request alone; the setup table for setup."""

    name = "learned"

    def __init__(self, weights: str | Path | None = None, seed: int | None = None):
        self.net = load(weights or WEIGHTS)
        self.rules: Rules | None = None
        self.players = 0
        self.fallbacks = 0

    def begin(self, msg):
        try:
            self.rules = Rules.from_options(msg["rules"])
            self.players = int(msg["players"])
        except Exception as e:  # rules this engine cannot build: play on with the JSON heuristic
            self.rules = None
            print(f"{self.name}: cannot read the rules ({e}); using the plain heuristic", file=sys.stderr)

    def choose(self, req):
        acts = req["actions"]
        if len(acts) == 1:
            return acts[0]["id"]
        try:
            if self.rules is None:
                raise ValueError("no start message")
            view = req["view"]
            if view["phase"] != "play":
                engine = [parse_action(a) for a in acts]
                return acts[engine.index(setup_choice(self.rules, engine))]["id"]
            ids = {json_index(a, pos): a["id"] for pos, a in enumerate(acts)}
            return ids[self.net.best(view_features(view, self.rules, self.players), list(ids))]
        except Exception as e:  # never forfeit over our own bug: the plain heuristic answers
            from arena.strategies import heuristic
            self.fallbacks += 1
            print(f"{self.name}: falling back to the plain heuristic: {type(e).__name__}: {e}",
                  file=sys.stderr, flush=True)
            return heuristic(req)
