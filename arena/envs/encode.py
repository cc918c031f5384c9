"""The observation and action mask of :mod:`arena.envs` as numpy arrays.

The numbers come from :mod:`arena.ai.features` (standard library: what a bot computes
from its request, checked equal to the environments' fast path); this module makes
arrays of them and the mask over the fixed space of :mod:`arena.ai.actions`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from arena.engine.rules import Rules

from arena.ai.actions import N_ACTIONS, json_index
from arena.ai.features import HIGH, N_FEATURES, SEAT_FEATURES, state_features, view_features  # noqa: F401

OBS_HIGH = np.array(HIGH, dtype=np.float32)  # every feature lies in [0, OBS_HIGH]


def request_mask(actions: list[dict[str, Any]]) -> tuple[np.ndarray, dict[int, int]]:
    """(mask over the fixed space, index -> the request's action id)."""
    mask = np.zeros(N_ACTIONS, dtype=np.int8)
    ids = {}
    for pos, a in enumerate(actions):
        k = json_index(a, pos)
        mask[k] = 1
        ids[k] = a["id"]
    return mask, ids


def encode(view: dict[str, Any], rules: Rules, players: int) -> np.ndarray:
    """The view as ``N_FEATURES`` floats (:func:`arena.ai.features.view_features`)."""
    return np.fromiter(view_features(view, rules, players), np.float32, N_FEATURES)


def encode_state(state, seat: int) -> np.ndarray:
    """:func:`encode` of ``seat_view(state, seat)``, from the engine state (the environments' fast path)."""
    return np.fromiter(state_features(state, seat), np.float32, N_FEATURES)  # faster than np.array on a list
