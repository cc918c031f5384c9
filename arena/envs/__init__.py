"""Palace for learning agents: a PettingZoo AEC environment and a Gymnasium one-seat wrapper.

* :mod:`arena.ai.actions`: the fixed action space (standard library only, for bots);
* :mod:`arena.ai.features`: the fixed-size observation as plain floats (standard library, for bots);
  both live in :mod:`arena.ai`, below the environments, since the learned bot reads them too;
* :mod:`arena.envs.encode`: the same as numpy arrays, and the action masks;
* :class:`PalaceEnv` (:mod:`arena.envs.aec`) and :class:`PalaceSingleEnv`
  (:mod:`arena.envs.single`): need the optional extra, ``pip install 'palace-arena[rl]'``;
* :class:`Program` (:mod:`arena.envs.programs`): a bot program as an opponent of ``PalaceSingleEnv``.

Names are loaded when first used, so importing one part never pulls in the others'
dependencies. Importing this package registers the one-seat env with Gymnasium as ``Palace-v0``
(``gymnasium.make("Palace-v0", opponents=[...])``) where Gymnasium is installed: by a string
entry point, so the env's module and the engine load only at ``make``.
"""

from __future__ import annotations

import importlib
import importlib.util

_WHERE = {"PalaceEnv": "aec", "env": "aec", "PalaceSingleEnv": "single", "N_FEATURES": "encode",
          "encode": "encode", "encode_state": "encode", "request_mask": "encode", "N_ACTIONS": "..ai.actions",
          "json_index": "..ai.actions", "engine_index": "..ai.actions", "Program": "programs", "OBS_HIGH": "encode",
          "view_features": "..ai.features", "state_features": "..ai.features"}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name in _WHERE:
        where = _WHERE[name]
        return getattr(importlib.import_module(where if where.startswith(".") else f".{where}", __name__), name)
    raise AttributeError(name)


if importlib.util.find_spec("gymnasium") is not None:
    import gymnasium

    if "Palace-v0" not in gymnasium.registry:
        gymnasium.register(id="Palace-v0", entry_point="arena.envs.single:PalaceSingleEnv")
