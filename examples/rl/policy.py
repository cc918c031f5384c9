"""A linear softmax policy over features of each legal action: numpy only.

Each legal index of the fixed action space (``arena.envs.encode``) is described by a
few numbers: the rank it plays (as a number, and whether it is a 2, a 10 or a joker), how
many cards and from where, whether it picks up (and how big the pile is), flips, gives
the pile away, or which setup choice it is; plays are described in one block while the
stock lasts and in another after. The score of an action is ``theta @ features``; the
policy is the softmax over the legal actions. Three dozen weights, so REINFORCE learns
them from a few hundred games. Shared by the trainer and the bot.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from arena.envs.actions import FACE_UP_PLAY, FLIP, GIVE_PLAY, HAND_PLAY, MAX_COUNT, N_ACTIONS, PICK_UP, RANKS, SETUP

PILE_SIZE = 2 * RANKS + 1 + RANKS + 1  # observation index of the pile size (encode's layout)
STOCK = PILE_SIZE + 3 + 2 * RANKS  # ... of the stock size
SETUP_SLOTS = 20
PLAY = 6  # per play: rank / 14, a 2, a 10, a joker, count / 4, from face-up; once with stock, once without
N_FEATURES = 4 + 2 * PLAY + SETUP_SLOTS


def _static() -> np.ndarray:
    """Features that depend on the action index alone, one row per index (the play block in the
    stock columns; ``features`` moves it when the stock is empty)."""
    f = np.zeros((N_ACTIONS, N_FEATURES), dtype=np.float32)
    f[PICK_UP:FLIP, 0] = 1
    f[FLIP:HAND_PLAY, 2] = 1
    for base, zone in ((HAND_PLAY, 0.0), (FACE_UP_PLAY, 1.0)):
        for r in range(RANKS):
            rank = r + 2
            for c in range(MAX_COUNT):
                f[base + r * MAX_COUNT + c, 4:4 + PLAY] = (rank / 14, rank == 2, rank == 10, rank == 15,
                                                           (c + 1) / 4, zone)
    f[GIVE_PLAY:SETUP, 3] = 1
    for i in range(SETUP_SLOTS):
        f[SETUP + i, 4 + 2 * PLAY + i] = 1
    return f


STATIC = _static()


def features(obs: np.ndarray, legal: np.ndarray) -> np.ndarray:
    """One row of features per legal action index."""
    f = STATIC[legal].copy()
    f[:, 1] = f[:, 0] * obs[PILE_SIZE]  # picking up a bigger pile
    if obs[STOCK] <= 0:  # the stock is gone: plays weigh differently in the endgame
        f[:, 4 + PLAY:4 + 2 * PLAY] = f[:, 4:4 + PLAY]
        f[:, 4:4 + PLAY] = 0
    return f


class LinearPolicy:
    def __init__(self, theta: np.ndarray | None = None):
        self.theta = np.zeros(N_FEATURES, dtype=np.float64) if theta is None else theta

    def probs(self, obs: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(legal action indices, their features, their probabilities)."""
        legal = np.flatnonzero(mask)
        f = features(obs, legal)
        z = f @ self.theta
        z = np.exp(z - z.max())
        return legal, f, z / z.sum()

    def greedy(self, obs: np.ndarray, mask: np.ndarray) -> int:
        legal = np.flatnonzero(mask)
        return int(legal[np.argmax(features(obs, legal) @ self.theta)])

    def save(self, path: Path) -> None:
        """The weights as JSON: the bot reads them without numpy."""
        path.write_text(json.dumps({"features": N_FEATURES, "theta": [round(float(t), 6) for t in self.theta]}) + "\n")

    @classmethod
    def load(cls, path: Path) -> LinearPolicy:
        return cls(np.array(json.loads(path.read_text())["theta"], dtype=np.float64))
