"""Palace for learning agents: a PettingZoo AEC environment and a Gymnasium one-seat wrapper.

* :mod:`arena.envs.actions`: the fixed action space (standard library only, for bots);
* :mod:`arena.envs.features`: the fixed-size observation as plain floats (standard library, for bots);
* :mod:`arena.envs.encode`: the same as numpy arrays, and the action masks;
* :class:`PalaceEnv` (:mod:`arena.envs.aec`) and :class:`PalaceSingleEnv`
  (:mod:`arena.envs.single`): need the optional extra, ``pip install 'palace-arena[rl]'``;
* :class:`Program` (:mod:`arena.envs.programs`): a bot program as an opponent of ``PalaceSingleEnv``.

Names are loaded when first used, so importing one part never pulls in the others'
dependencies.
"""

from __future__ import annotations

import importlib

_WHERE = {"PalaceEnv": "aec", "env": "aec", "PalaceSingleEnv": "single", "N_FEATURES": "encode",
          "encode": "encode", "encode_state": "encode", "request_mask": "encode", "N_ACTIONS": "actions",
          "json_index": "actions", "engine_index": "actions", "Program": "programs", "OBS_HIGH": "encode",
          "view_features": "features", "state_features": "features"}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    raise AttributeError(name)
