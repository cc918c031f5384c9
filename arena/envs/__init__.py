"""Palace for learning agents: a PettingZoo AEC environment and a Gymnasium one-seat wrapper.

Needs the optional extra: ``pip install 'palace-arena[rl]'`` (pettingzoo, gymnasium).
:mod:`arena.envs.encode` (the fixed action space and observation) needs only numpy,
so a trained policy can run as a bot without them.
"""

from .encode import N_ACTIONS, N_FEATURES, encode, json_index, request_mask

__all__ = ["N_ACTIONS", "N_FEATURES", "PalaceEnv", "PalaceSingleEnv", "encode", "env", "json_index",
           "request_mask"]


def __getattr__(name: str):
    if name in ("PalaceEnv", "env"):
        from . import aec
        return getattr(aec, name)
    if name == "PalaceSingleEnv":
        from .single import PalaceSingleEnv
        return PalaceSingleEnv
    raise AttributeError(name)
