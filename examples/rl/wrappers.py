"""The learner's view of ``arena.envs.PalaceSingleEnv`` for a maskable policy-gradient library.

Needs numpy and gymnasium (``pip install 'palace-arena[rl]'``), not torch, so the suite can
test it without the training stack.

* the observation is the flat feature vector (a bounded ``Box``), and ``action_masks()``
  gives the legal actions, the interface sb3-contrib's ``MaskablePPO`` asks for;
* ``info`` leaves out the protocol request (a vectorized env deep-copies every info at every
  step, and the request was half the cost of a training step);
* setup decisions (which cards go face up) are made by the arena's setup table
  (``arena.ai.setup_table``), as the bot does when it plays: the fixed action space names a
  setup choice only by its place in the request, which a network cannot read, so the policy
  learns the play only.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np

from arena.ai.policy import setup_choice
from arena.envs import PalaceSingleEnv
from arena.ai.actions import engine_index


class LearnerEnv(gymnasium.Wrapper):
    """``LearnerEnv(PalaceSingleEnv("classic", ["heuristic"], seat=None))``."""

    def __init__(self, env: PalaceSingleEnv):
        super().__init__(env)
        self.observation_space = env.observation_space["observation"]
        self.action_space = env.action_space
        self._mask = np.zeros(env.action_space.n, dtype=bool)

    def _skip_setup(self, obs, reward, terminated, truncated, info):
        """Play the learner's setup decisions with the setup table until a play decision."""
        env: PalaceSingleEnv = self.env.unwrapped
        while not (terminated or truncated) and env.state.phase == "setup":
            action = setup_choice(env.rules, env.legal)
            obs, r, terminated, truncated, info = env.step(engine_index(action, env.legal.index(action)))
            reward += r
        self._mask = obs["action_mask"].astype(bool)
        info.pop("request", None)  # vectorized envs copy every info at every step: keep them small
        return obs["observation"], reward, terminated, truncated, info

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        obs, _, _, _, info = self._skip_setup(obs, 0.0, False, False, info)
        return obs, info

    def step(self, action):
        return self._skip_setup(*self.env.step(action))

    def action_masks(self) -> np.ndarray:
        return self._mask
