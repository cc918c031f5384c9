"""Palace as a PettingZoo AEC environment: any preset and options, 2 to 6 seats.

Each agent (``seat_0`` ...) observes a dict: ``observation``, its view encoded by
:func:`arena.envs.encode.encode` (``N_FEATURES`` floats), and ``action_mask`` over the
fixed ``N_ACTIONS`` indices (all zero when it is not its turn). ``infos[agent]["request"]``
is the protocol request a bot would be sent at that decision (view, events since its
last decision, actions with ids), so a bot's ``choose(request)`` can play in the
environment unchanged. Every engine turn is a step, forced ones included.

Rewards come at the end, by finishing place: +1 first, -1 last, linear between; tied
seats share; in first-out games every seat but the winner gets -1. A game cut by the
turn cap is truncated; every other ending (a stale draw too) terminates.
"""

from __future__ import annotations

import random
from typing import Any

import gymnasium
import numpy as np
from pettingzoo import AECEnv

from arena.ai.actions import MAX_SEATS, N_ACTIONS, engine_index
from arena.ai.features import check_table
from arena.ai.simulate import result_scores
from arena.engine import apply_action, legal_actions, start_game
from arena.engine.rules import Rules, rules_from
from arena.referee.core import Answered, RefereeCore, TimeControl

from .encode import N_FEATURES, OBS_HIGH, encode_state


ENV_CLOCK = TimeControl(move_ms=1000, bank_ms=0)
"""The clock the environment's requests announce (the learner is not held to it)."""


def make_rules(rules: str | Rules, options: list[str] | dict[str, Any] | None) -> Rules:
    return rules_from(rules, options) if isinstance(rules, str) else rules


def place_rewards(state) -> list[float]:
    """+1 first, -1 last, linear between (the engine's place scores, rescaled)."""
    return [2 * s - 1 for s in result_scores(state)]


def spaces() -> tuple[gymnasium.spaces.Dict, gymnasium.spaces.Discrete]:
    """Every feature lies in [0, ``OBS_HIGH``] (bounded, as Gymnasium's checker asks)."""
    obs = gymnasium.spaces.Dict({
        "observation": gymnasium.spaces.Box(np.zeros(N_FEATURES, np.float32), OBS_HIGH, (N_FEATURES,), np.float32),
        "action_mask": gymnasium.spaces.Box(0, 1, (N_ACTIONS,), np.int8),
    })
    return obs, gymnasium.spaces.Discrete(N_ACTIONS)


class PalaceEnv(AECEnv):
    """``PalaceEnv("shithead", players=4, options={"jokers": 1})``; ``protocol=False`` skips
    building the protocol request in ``infos`` (faster when only arrays are used)."""

    metadata = {"name": "palace_v0", "render_modes": ["ansi"], "is_parallelizable": False}

    def __init__(self, rules: str | Rules = "classic", players: int = 2,
                 options: list[str] | dict[str, Any] | None = None, *, max_turns: int = 2000,
                 protocol: bool = True, render_mode: str | None = None):
        super().__init__()
        self.rules = make_rules(rules, options)
        if not (2 <= players <= MAX_SEATS and self.rules.min_players <= players <= self.rules.max_players):
            raise ValueError(f"{self.rules.name} is for {self.rules.min_players}-"
                             f"{min(self.rules.max_players, MAX_SEATS)} players here, not {players}")
        check_table(self.rules, players)
        self.players = players
        self.max_turns = max_turns
        self.with_protocol = protocol
        self.render_mode = render_mode
        self.possible_agents = [f"seat_{i}" for i in range(players)]
        self._obs_space, self._act_space = spaces()
        self._seeder = random.Random()
        self.state = None

    def observation_space(self, agent: str) -> gymnasium.spaces.Dict:
        return self._obs_space

    def action_space(self, agent: str) -> gymnasium.spaces.Discrete:
        return self._act_space

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        if seed is not None:
            self._seeder.seed(seed)
        game_seed = self._seeder.randrange(1 << 31)
        if self.with_protocol:  # the referee's own core writes the requests, as for a bot
            self.core: RefereeCore | None = RefereeCore(
                self.rules, self.possible_agents, game_seed, game_id="env", clock=ENV_CLOCK,
                max_turns=self.max_turns, ask_forced=True, encode=False)
            self.state = self.core.state
        else:
            self.core = None
            self.state, _ = start_game(self.rules, self.players, game_seed, max_turns=self.max_turns)
        self.game_seed = game_seed
        self.agents = self.possible_agents[:]
        self.rewards = {a: 0.0 for a in self.agents}
        self._cumulative_rewards = {a: 0.0 for a in self.agents}
        self.terminations = {a: False for a in self.agents}
        self.truncations = {a: False for a in self.agents}
        self.infos: dict[str, dict[str, Any]] = {a: {} for a in self.agents}
        self._next()

    def _next(self) -> None:
        state = self.state
        self.legal = legal_actions(state)
        self.by_index = {engine_index(a, k): a for k, a in enumerate(self.legal)}
        seat = state.to_move
        self.agent_selection = self.possible_agents[seat]
        if self.core is not None:
            req = self.core.next_request()
            assert req is not None and req.seat == seat
            self.infos[self.agent_selection] = {"request": req.message}

    def observe(self, agent: str) -> dict[str, np.ndarray]:
        seat = self.possible_agents.index(agent)
        mask = np.zeros(N_ACTIONS, dtype=np.int8)
        if self.state.result is None and self.state.to_move == seat:
            mask[list(self.by_index)] = 1
        return {"observation": encode_state(self.state, seat), "action_mask": mask}

    def step(self, action: int | None) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        chosen = self.by_index.get(int(action)) if action is not None else None
        if chosen is None:
            raise ValueError(f"action {action} is not legal for {agent} now (see the action mask)")
        self._cumulative_rewards[agent] = 0.0
        if self.core is not None:
            self.core.settle(Answered(self.legal.index(chosen), 0.0))  # the learner is not on the clock
            self.state = self.core.state
        else:
            self.state, _ = apply_action(self.state, chosen, check=False)
        result = self.state.result
        if result is None:
            self._next()
        else:
            cut = result.reason == "turn_cap"
            for a, r in zip(self.agents, place_rewards(self.state)):
                self.rewards[a] = r
                self.terminations[a] = not cut
                self.truncations[a] = cut
                self.infos[a] = {"result": result}
            self.agent_selection = self.possible_agents[(self.state.to_move + 1) % self.players]
        self._accumulate_rewards()

    def render(self) -> str | None:
        if self.render_mode != "ansi" or self.state is None:
            return None
        return board_text(self.state)

    def close(self) -> None:
        pass


def board_text(state: Any) -> str:
    """The ``ansi`` render of both environments: the pile and each seat's public counts."""
    from arena.engine.cards import cards_str
    lines = [f"turn {state.turn}, pile {' '.join(cards_str(state.pile)) or '-'}"]
    for i, s in enumerate(state.seats):
        lines.append(f"seat {i}: {len(s.hand)} in hand, up {[cards_str(x) for x in s.face_up]}, "
                     f"{s.face_down_count} down")
    return "\n".join(lines)


def env(**kwargs: Any) -> PalaceEnv:
    """The environment with PettingZoo's usual wrappers (order checks, no illegal actions)."""
    from pettingzoo.utils import wrappers
    e: Any = PalaceEnv(**kwargs)
    e = wrappers.AssertOutOfBoundsWrapper(e)
    return wrappers.OrderEnforcingWrapper(e)
