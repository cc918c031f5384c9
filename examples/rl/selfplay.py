"""Self-play for ``train.py``: opponents drawn from the run's own checkpoints.

``--opponents heuristic:8,self:8`` gives eight environments a :class:`PoolOpponent`: at the start
of each game it takes one checkpoint from the run's :class:`Pool` (the untrained network at
first, then every ``weights-STEPS.json`` the run writes at an evaluation) and plays the game as
the bundled ``learned`` bot plays those weights (the setup table for setup, the network's greedy
choice for play, from the request alone). The reference opponents beside them keep the learner
from drifting into play that only beats itself.

Needs numpy, not torch: the opponent's forward pass is numpy's over the exported weights, so the
opponents cost little beside the learner's own network, and the suite tests this module without
the training stack.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np

from arena.ai.learned import MLP, LearnedAgent


class NumpyMLP(MLP):
    """:class:`arena.ai.learned.MLP`'s greedy choice, computed with numpy (same weights, same ties)."""

    def __init__(self, data: dict):
        super().__init__(data)  # checks the format and the shapes
        self.layers = [(np.asarray(layer["w"], dtype=np.float64), np.asarray(layer["b"], dtype=np.float64))
                       for layer in data["layers"]]
        self.np_act = np.tanh if data["activation"] == "tanh" else (lambda v: np.maximum(v, 0.0))

    def best(self, x: list[float], indices: list[int]) -> int:
        h = np.asarray(x, dtype=np.float64)
        for w, b in self.layers[:-1]:
            h = self.np_act(w @ h + b)
        w, b = self.layers[-1]
        order = sorted(indices)
        scores = w[order] @ h + b[order]
        return order[int(np.argmax(scores))]  # the first of equal scores: the lowest index


class Pool:
    """The checkpoints self-play opponents draw from: the newest ``size`` added (all, with 0)."""

    def __init__(self, size: int = 0):
        self.size = size
        self.paths: list[Path] = []
        self._nets: dict[Path, NumpyMLP] = {}

    def add(self, path: Path) -> None:
        self.paths.append(Path(path))
        if self.size:
            for old in self.paths[:-self.size]:
                self._nets.pop(old, None)
            del self.paths[:-self.size]

    def net(self, path: Path) -> NumpyMLP:
        if path not in self._nets:
            self._nets[path] = NumpyMLP(json.loads(path.read_text()))
        return self._nets[path]


class PoolOpponent(LearnedAgent):
    """An opponent for ``PalaceSingleEnv`` that plays each game as one checkpoint of the pool,
    drawn uniformly at the game's start (``self.checkpoint`` says which). A game begun while the
    pool is still empty (the vectorized env's first reset, before the untrained network is
    written) is played with uniformly random legal actions."""

    name = "self"

    def __init__(self, pool: Pool, seed: int = 0):
        self.pool = pool
        self.rng = random.Random(seed)
        self.rules = None
        self.players = 0
        self.fallbacks = 0
        self.checkpoint: Path | None = None

    def begin(self, msg):
        self.checkpoint = self.rng.choice(self.pool.paths) if self.pool.paths else None
        if self.checkpoint is not None:
            self.net = self.pool.net(self.checkpoint)
        return super().begin(msg)

    def choose(self, req):
        if self.checkpoint is None:
            return self.rng.choice(req["actions"])["id"]
        return super().choose(req)
