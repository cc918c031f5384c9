"""One learning seat against arena bots: a Gymnasium environment.

The opponents are request-level agents (:mod:`arena.ai.agents`), given exactly the
messages the referee would send them (``start``, then a ``request`` per decision with
their censored events), so they play as they do in a tournament, in process. Name
them (``"random"``, ``"lowest"``, ``"heuristic"``, ``"heuristic-setup"``, ``"montecarlo"``,
``"ismcts"``) or pass objects with ``begin(start)``/``choose(request)``/``end(end)``.

Decisions with a single legal action are played for the learner; a step is one real
choice. Observation and action space are the AEC environment's; the reward comes at
the end (+1 first ... -1 last).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import gymnasium
import numpy as np

from arena.ai.agents import reference_agent
from arena.engine import apply_action, legal_actions, start_game
from arena.engine.rules import Rules
from arena.engine.views import action_json, event_for, result_json, seat_view
from arena.referee import protocol

from .actions import N_ACTIONS, engine_index
from .aec import make_rules, place_rewards, spaces
from .encode import encode_state


class PalaceSingleEnv(gymnasium.Env):
    """``PalaceSingleEnv("classic", opponents=["heuristic"])``: the learner and one bot per other seat.

    ``seat``: the learner's seat, or None for a random seat each game.
    """

    metadata = {"render_modes": []}

    def __init__(self, rules: str | Rules = "classic", opponents: Sequence[Any] = ("random",),
                 options: list[str] | dict[str, Any] | None = None, *, seat: int | None = 0,
                 max_turns: int = 2000):
        self.rules = make_rules(rules, options)
        self.players = len(opponents) + 1
        self.opponent_specs = list(opponents)
        self.seat_choice = seat
        self.max_turns = max_turns
        self.observation_space, self.action_space = spaces()
        self._seeder = random.Random()
        self.state = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        if seed is not None:
            self._seeder.seed(seed)
        game_seed = self._seeder.randrange(1 << 31)
        n = self.players
        self.seat = self._seeder.randrange(n) if self.seat_choice is None else self.seat_choice
        self.state, events = start_game(self.rules, n, game_seed, max_turns=self.max_turns)
        self.pending = [[event_for(e, s) for e in events] for s in range(n)]
        others = [s for s in range(n) if s != self.seat]
        self.bots: dict[int, Any] = {}
        for k, s in enumerate(others):
            spec = self.opponent_specs[k]
            bot = reference_agent(spec, seed=game_seed + s) if isinstance(spec, str) else spec
            bot.begin(protocol.start("env", s, n, ["learner" if i == self.seat else "bot" for i in range(n)],
                                     self.rules.options(), {"move_ms": 1000, "bank_ms": 0},
                                     (game_seed * 1_000_003 + s) % (1 << 31)))
            self.bots[s] = bot
        self._rid = 0
        self._run_others()
        return self._observe(), self._info()

    def _request(self, seat: int) -> dict[str, Any]:
        self._rid += 1
        req = protocol.request(self._rid, "env", "setup" if self.state.phase == "setup" else "play",
                               seat_view(self.state, seat), self.pending[seat],
                               [action_json(a) for a in self.legal], {"move_ms": 1000, "bank_ms": 0})
        self.pending[seat] = []
        return req

    def _apply(self, action) -> None:
        self.state, events = apply_action(self.state, action, check=False)
        for s in range(self.players):
            self.pending[s].extend(event_for(e, s) for e in events)

    def _run_others(self) -> None:
        """Play the bots' turns and the learner's forced moves until the learner must choose."""
        while self.state.result is None:
            self.legal = legal_actions(self.state)
            seat = self.state.to_move
            if len(self.legal) == 1:
                self._apply(self.legal[0])
            elif seat == self.seat:
                self.by_index = {engine_index(a, k): a for k, a in enumerate(self.legal)}
                self.request = self._request(seat)
                return
            else:
                choice = self.bots[seat].choose(self._request(seat))
                self._apply(self.legal[choice])
        result = result_json(self.state.result)
        for s, bot in self.bots.items():
            bot.end(protocol.end("env", result, [], self.pending[s]))

    def _observe(self) -> dict[str, np.ndarray]:
        mask = np.zeros(N_ACTIONS, dtype=np.int8)
        if self.state.result is None:
            mask[list(self.by_index)] = 1
        return {"observation": encode_state(self.state, self.seat), "action_mask": mask}

    def _info(self) -> dict[str, Any]:
        if self.state.result is None:
            return {"request": self.request}
        return {"result": self.state.result, "place": self.state.result.place_of(self.seat)}

    def step(self, action: int):
        chosen = self.by_index.get(int(action)) if self.state.result is None else None
        if chosen is None:
            raise ValueError(f"action {action} is not legal now (see the action mask)")
        self._apply(chosen)
        self._run_others()
        reward, terminated, truncated = 0.0, False, False
        if self.state.result is not None:
            reward = place_rewards(self.state)[self.seat]
            truncated = self.state.result.reason == "turn_cap"
            terminated = not truncated
        return self._observe(), reward, terminated, truncated, self._info()
