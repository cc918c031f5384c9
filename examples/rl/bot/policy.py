"""A linear softmax policy over the fixed action space of ``arena.envs``: numpy only.

``logits = W @ observation + b``, masked to the legal actions. Shared by the trainer
(``train.py``) and the bot (``bot/bot.py``), so both compute exactly the same thing.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from arena.envs.encode import N_ACTIONS, N_FEATURES


class LinearPolicy:
    def __init__(self, w: np.ndarray | None = None, b: np.ndarray | None = None):
        self.w = np.zeros((N_ACTIONS, N_FEATURES), dtype=np.float32) if w is None else w
        self.b = np.zeros(N_ACTIONS, dtype=np.float32) if b is None else b

    def probs(self, obs: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(legal action indices, their probabilities)."""
        legal = np.flatnonzero(mask)
        z = self.w[legal] @ obs + self.b[legal]
        z = np.exp(z - z.max())
        return legal, z / z.sum()

    def greedy(self, obs: np.ndarray, mask: np.ndarray) -> int:
        legal = np.flatnonzero(mask)
        return int(legal[np.argmax(self.w[legal] @ obs + self.b[legal])])

    def save(self, path: Path) -> None:
        np.savez_compressed(path, w=self.w.astype(np.float16), b=self.b)

    @classmethod
    def load(cls, path: Path) -> LinearPolicy:
        with np.load(path) as f:
            return cls(f["w"].astype(np.float32), f["b"].astype(np.float32))
