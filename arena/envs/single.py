"""One learning seat against arena bots: a Gymnasium environment.

The game runs through the referee's own core (:class:`arena.referee.core.RefereeCore`), so
every opponent gets exactly the messages a tournament sends (``start``, a ``request`` per
decision with its censored events and clock, ``end``) and the learner's ``info["request"]``
is the request a bot would get. Opponents are

* reference bots in process: a name (``"random"``, ``"lowest"``, ``"heuristic"``,
  ``"heuristic-setup"``, ``"learned"``, ``"montecarlo"``, ``"ismcts"``) or any object with
  ``begin(start)``/``choose(request)``/``end(end)``; an exception it raises is a bug and
  propagates;
* bot programs: :class:`arena.envs.programs.Program` (a bot directory, a bot.toml or a
  bundled name), a path, or a ``BotSpec``; each runs as a real process under the
  arena's launcher and containment, is held to the clock, and forfeits a game it faults
  in, as in the referee (:mod:`arena.envs.programs`). ``close()`` stops them.

Decisions with a single legal action are played for the learner; a step is one real
choice. Observation and action space are the AEC environment's; the reward comes at
the end (+1 first ... -1 last). ``action_masks()`` is the observation's mask as booleans
(the method sb3-contrib's maskable algorithms call).

An action outside the mask is handled by ``illegal``:

* ``"penalize"`` (the default): the learner forfeits the game, as a bot whose answer is not
  one of the request's actions forfeits under the referee. It takes the last place (reward
  -1, or its place in a first-out game), the others play the game out, and ``info["illegal"]``
  holds the action. Deterministic, so Gymnasium's ``check_env`` passes;
* ``"random_legal"``: a legal action drawn from the env's own seeded generator is played
  instead (``info["illegal"]`` holds the action asked for, ``info["played"]`` the index played);
* ``"raise"``: ``ValueError``, for learners that should never ask for one.
"""

from __future__ import annotations

import random
import time
import weakref
from collections.abc import Sequence
from enum import StrEnum
from typing import Any

import gymnasium
import numpy as np

from arena.ai.actions import N_ACTIONS, engine_index
from arena.ai.agents import reference_agent
from arena.ai.features import check_table
from arena.engine import legal_actions
from arena.engine.rules import Rules
from arena.faults import FaultReason
from arena.referee.core import Answered, RefereeCore, TimeControl

from . import programs
from .aec import board_text, make_rules, place_rewards, spaces
from .encode import encode_state

LEARNER = "learner"
REDEALS = 10  # deals a reset tries when bot programs forfeit before the learner's first decision


class Illegal(StrEnum):
    """What an action outside the mask does (see the module's docstring); a plain string with
    one of these values is accepted too."""

    PENALIZE = "penalize"
    RANDOM_LEGAL = "random_legal"
    RAISE = "raise"


class PalaceSingleEnv(gymnasium.Env):
    """``PalaceSingleEnv("classic", opponents=["heuristic"])``: the learner and one bot per other seat.

    ``seat``: the learner's seat, or None for a random seat each game. ``clock``: what every
    request announces and what bot programs are held to (default: the tournament default,
    1000 ms a move plus a 10 s bank). ``launcher``: starts bot programs (default: an
    ``arena.bots.launch.Launcher()``, the tournament's containment; pass ``Launcher(containment=Containment.TRUSTED)``
    to run them as your own user on purpose). ``illegal``: what an action outside the mask
    does (``"penalize"``, ``"random_legal"`` or ``"raise"``; see the module's docstring).
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(self, rules: str | Rules = "classic", opponents: Sequence[Any] = ("random",),
                 options: list[str] | dict[str, Any] | None = None, *, seat: int | None = 0,
                 max_turns: int = 2000, clock: TimeControl | None = None, launcher: Any = None,
                 illegal: Illegal | str = Illegal.PENALIZE, render_mode: str | None = None):
        if illegal not in tuple(Illegal):
            raise ValueError(f"illegal must be one of {', '.join(Illegal)}, not {illegal!r}")
        if render_mode not in (None, *self.metadata["render_modes"]):
            raise ValueError(f"render_mode must be None or 'ansi', not {render_mode!r}")
        self.render_mode = render_mode
        self.illegal = Illegal(illegal)
        self.rules = make_rules(rules, options)
        self.players = len(opponents) + 1
        check_table(self.rules, self.players)
        self.opponent_specs = list(opponents)
        self.seat_choice = seat
        self.max_turns = max_turns
        self.clock = clock or TimeControl()
        self.observation_space, self.action_space = spaces()
        self._seeder = random.Random()
        self.core: RefereeCore | None = None
        self.program_opponents: dict[int, Any] = {}  # opponent index -> ProgramOpponent, kept across games
        self._host = None
        program_specs = {k: spec for k, spec in enumerate(self.opponent_specs) if programs.is_program(spec)}
        if program_specs:
            self._host = programs.BotHost()
            self._finalizer = weakref.finalize(self, self._host.close)  # processes never outlive the env
            launcher = launcher or programs.default_launcher()
            specs = {k: programs.load(ref) for k, ref in program_specs.items()}
            programs.preflight(self._host, launcher, specs.values())
            self.program_opponents = {k: programs.ProgramOpponent(spec, launcher, self.clock, self._host)
                             for k, spec in specs.items()}

    @property
    def state(self):
        """The engine state of the game in play (None before the first reset)."""
        return None if self.core is None else self.core.state

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """A new game. A deal that a bot program's fault ends before the learner's first
        decision is no game to learn from: the next deal is played instead (its faults are
        in ``info["forfeited_before_learner"]``), and after ``REDEALS`` such deals in a row
        the opponent cannot play at all and ``RuntimeError`` says why."""
        super().reset(seed=seed)
        if seed is not None:
            self._seeder.seed(seed)
        if self.core is not None and not self.core.over:
            for p in self.program_opponents.values():
                p.abandon()
        skipped: list[dict[str, Any]] = []
        for _ in range(REDEALS):
            self._deal()
            if not self.core.over:
                info = self._info()
                if skipped:
                    info["forfeited_before_learner"] = skipped
                return self._observe(), info
            rec = self.core.record
            skipped += [{**f, "stderr": rec.stderr[f["seat"]][-3:]} for f in rec.faults]
        last = skipped[-1] if skipped else {"bot": "?", "reason": "none", "message": "", "stderr": []}
        why = f"{last['bot']}: {last['reason']}: {last['message']}; its stderr: {' | '.join(last['stderr'])}"
        raise RuntimeError(f"bot programs forfeited {REDEALS} games in a row before the learner's first "
                           f"decision ({why})")

    def _deal(self) -> None:
        game_seed = self._seeder.randrange(1 << 31)
        n = self.players
        self.seat = self._seeder.randrange(n) if self.seat_choice is None else self.seat_choice
        others = [s for s in range(n) if s != self.seat]
        self.bots: dict[int, Any] = {}
        self._program_seats: set[int] = set()
        names = [LEARNER] * n
        for k, s in enumerate(others):
            spec = self.opponent_specs[k]
            if k in self.program_opponents:
                bot = self.program_opponents[k]
                self._program_seats.add(s)
            elif isinstance(spec, str):
                bot = reference_agent(spec, seed=game_seed + s)
            else:
                bot = spec
            self.bots[s] = bot
            names[s] = getattr(bot, "name", "bot")
        self.core = core = RefereeCore(self.rules, names, game_seed, game_id=f"env-{game_seed}",
                                       clock=self.clock, max_turns=self.max_turns, encode=False)
        for s, bot in self.bots.items():
            fault = bot.begin(core.start_message(s))
            if s in self._program_seats and fault is not None:
                core.start_fault(s, fault.reason, fault.message, fault.stderr)
        self._run_others()

    def _run_others(self) -> None:
        """Play the bots' turns until the learner must choose (the core plays forced moves)."""
        core = self.core
        while (req := core.next_request()) is not None:
            if req.seat == self.seat:
                self.legal = legal_actions(core.state)
                self.by_index = {engine_index(a, k): k for k, a in enumerate(self.legal)}
                self.request = req.message
                return
            bot = self.bots[req.seat]
            if req.seat in self._program_seats:
                core.settle(bot.decide(req))
                continue
            t = time.perf_counter()
            choice = bot.choose(req.message)
            core.settle(Answered(choice, time.perf_counter() - t))
        for s, message in core.end_messages():
            if s != self.seat:
                self.bots[s].end(message)

    def _observe(self) -> dict[str, np.ndarray]:
        mask = np.zeros(N_ACTIONS, dtype=np.int8)
        if self.state.result is None:
            mask[list(self.by_index)] = 1
        return {"observation": encode_state(self.state, self.seat), "action_mask": mask}

    def _info(self) -> dict[str, Any]:
        if self.state.result is None:
            return {"request": self.request}
        info: dict[str, Any] = {"result": self.state.result, "place": self.state.result.place_of(self.seat)}
        if self.core.record.faults:
            info["faults"] = list(self.core.record.faults)  # seats that forfeited (the learner too, for an illegal action), and why
        return info

    def render(self) -> str | None:
        """``render_mode="ansi"``: the pile and every seat's public counts, as text."""
        if self.render_mode != "ansi" or self.state is None:
            return None
        return board_text(self.state)

    def action_masks(self) -> np.ndarray:
        """The legal actions now, as booleans over the fixed space (none once the game is over)."""
        mask = np.zeros(N_ACTIONS, dtype=bool)
        if self.state is not None and self.state.result is None:
            mask[list(self.by_index)] = True
        return mask

    def step(self, action: int):
        if self.state is None or self.state.result is not None:
            raise RuntimeError("the game is over: call reset()")
        k = self.by_index.get(int(action))
        illegal: dict[str, Any] = {}
        if k is None:
            if self.illegal is Illegal.RAISE:
                raise ValueError(f"action {action} is not legal now (see the action mask)")
            illegal["illegal"] = int(action)
            if self.illegal is Illegal.RANDOM_LEGAL:
                played = sorted(self.by_index)[int(self.np_random.integers(len(self.by_index)))]
                illegal["played"] = played
                k = self.by_index[played]
        if k is None:  # penalize: an answer outside the request forfeits, as under the referee
            self.core.fault(FaultReason.ILLEGAL_ACTION, f"action {action} is not one of the legal actions", 0.0)
        else:
            self.core.answer(k, 0.0)  # the learner is not on the clock
        self._run_others()
        reward, terminated, truncated = 0.0, False, False
        if self.state.result is not None:
            reward = place_rewards(self.state)[self.seat]
            truncated = self.state.result.reason == "turn_cap"
            terminated = not truncated
        return self._observe(), reward, terminated, truncated, {**self._info(), **illegal}

    def close(self) -> None:
        """Stop the bot programs (each gets the referee's shutdown grace)."""
        if self._host is not None:
            self._finalizer()
        super().close()
