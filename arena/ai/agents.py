"""Request-level bots: what a bot program runs, and what the benchmark drives in-process.

An agent gets exactly the protocol messages (``begin(start)``, ``choose(request)``,
``end(end)``) and nothing else. The search agents sample a state from those messages,
ask the engine which actions are legal in it, and map their choice back to the
request's action id through ``action_json``; whenever that cannot be done (no start
message, a view that does not add up, an action with no match) they fall back to the
heuristic so the game always goes on.
"""

from __future__ import annotations

import random
import sys
from typing import Any

from arena.engine.game import legal_actions
from arena.engine.views import action_json

from .agent import Agent
from .budget import Budget
from .observe import DeterminizationError, Observer, action_key, parse_action
from .policy import heuristic_action, make_policy, setup_choice
from .setup_table import SetupTable, default_table

HORIZON = 20  # playout turns before the evaluator scores the position (measured best of 20 vs full)
# Turns without a burn or anyone going out after which the search bots stop always playing
# their single best move. At 1 s a decision, ISMCTS and the heuristic fell into pick-up
# cycles (the same king passed back and forth for hundreds of turns) that ended as turn-cap draws.
STUCK_TURNS = 100
NEAR_BEST = 0.05  # in a cycle, any move within this much of the best score may be played


def unstick(best: int, scores: list[float], rng: random.Random) -> int:
    """A random move among those scored within NEAR_BEST of ``best``: breaks a cycle that
    two players who always answer the same way would otherwise repeat until the turn cap."""
    near = [j for j, v in enumerate(scores) if v >= scores[best] - NEAR_BEST]
    return near[rng.randrange(len(near))]


class PolicyAgent(Agent):
    """A stateless request policy from :mod:`arena.strategies`."""

    def __init__(self, policy, name: str):
        self.policy = policy
        self.name = name

    def choose(self, req):
        return self.policy(req)


class HeuristicAgent(Agent):
    """The engine heuristic plus the learned setup table, played from the request alone."""

    name = "heuristic-setup"

    infer = True  # search bots deal hidden cards through the resampler (False: uniformly, as before)

    def __init__(self, table: SetupTable | None = None, seed: int | None = None):
        self.table = table or default_table()
        self.obs = Observer()
        self.seed = seed
        self.rng = random.Random(seed)
        self.policy = make_policy(self.table)
        self.fallbacks = 0

    def begin(self, msg):
        try:
            self.obs.start(msg)
        except Exception as e:  # rules this engine cannot build: play on with the JSON heuristic
            self.obs = Observer()
            print(f"{self.name}: cannot read the rules ({e}); using the plain heuristic", file=sys.stderr)
        if msg.get("seed") is not None:  # the referee's per-game seed: games replay exactly
            self.rng = random.Random(f"{self.seed}/{msg['seed']}")

    def choose(self, req):
        acts = req["actions"]
        self.info = None  # what a search says it found (decide), sent as the reply's info
        try:
            self.obs.update(req)
            if len(acts) == 1:
                return acts[0]["id"]
            if req["view"]["phase"] != "play":
                return self._setup(req)
            state = self.obs.sample(self.rng)
            legal = legal_actions(state)
            ids = self._ids(req, legal)
            return self.decide(req, state, legal, ids)
        except Exception as e:  # never forfeit over our own bug: the plain heuristic answers
            return self.fallback(req, e)

    def decide(self, req, state, legal, ids) -> int:
        return ids[legal.index(heuristic_action(state, legal, self.table))]

    def _setup(self, req) -> int:
        if self.obs.rules is None:
            raise DeterminizationError("no start message")
        acts = req["actions"]
        engine = [parse_action(a) for a in acts]
        return acts[engine.index(setup_choice(self.obs.rules, engine, self.table))]["id"]

    @staticmethod
    def _ids(req, legal) -> list[int]:
        """The request id of every engine action, matched by its JSON; a mismatch is an error."""
        by_key = {action_key(a): a["id"] for a in req["actions"]}
        ids = [by_key.get(action_key(action_json(a))) for a in legal]
        if None in ids or len(ids) != len(by_key):
            raise DeterminizationError("sampled state's legal actions differ from the request's")
        return ids

    def fallback(self, req, why) -> int:
        """The JSON heuristic, which needs nothing but the request."""
        from arena.strategies import heuristic
        self.fallbacks += 1
        print(f"{self.name}: falling back to the plain heuristic: {type(why).__name__}: {why}",
              file=sys.stderr, flush=True)
        return heuristic(req)


def search_info(mean: float, players: int, *, iterations: int, nodes: int | None = None,
                text: str = "") -> dict[str, Any]:
    """A search's ``info`` for the reply: ``eval`` is the chosen action's mean place score
    (1 first, 0 last) over its playouts; in two-player games that is also the chance of
    winning (a draw counts half), sent as ``win_prob``."""
    info: dict[str, Any] = {"eval": round(mean, 4), "iterations": int(iterations)}
    if players == 2:
        info["win_prob"] = round(min(1.0, max(0.0, mean)), 4)
    if nodes is not None:
        info["nodes"] = int(nodes)
    if text:
        info["text"] = text
    return info


class MonteCarloAgent(HeuristicAgent):
    """Flat Monte Carlo over heuristic playouts (:mod:`arena.ai.montecarlo`)."""

    name = "montecarlo"

    def __init__(self, budget: Budget | None = None, seed: int | None = None,
                 table: SetupTable | None = None, horizon: int = HORIZON):
        super().__init__(table, seed)
        self.budget = budget or Budget.from_env("MC")
        self.horizon = horizon

    def decide(self, req, state, legal, ids) -> int:
        from .montecarlo import monte_carlo
        deadline, iters = self.budget.deadline(req)
        fav = legal.index(heuristic_action(state, legal, self.table))
        best, means = monte_carlo(self.obs, legal, self.rng, deadline, iters, self.policy, self.horizon, fav,
                                  infer=self.infer)
        if self.obs.stale > STUCK_TURNS:
            best = unstick(best, [m for m, _ in means], self.rng)
        mean, rounds = means[best]
        self.info = search_info(mean, len(state.seats), iterations=rounds, nodes=sum(c for _, c in means),
                                text=f"{len(legal)} actions x {rounds} deals")
        return ids[best]


class ISMCTSAgent(HeuristicAgent):
    """Single-observer information-set MCTS (:mod:`arena.ai.ismcts`).

    ``reuse``: keep the subtree under the moves made since the last decision (they are read
    from the request's events) instead of starting each search from an empty tree.
    ``widen_pick_ups``: progressive widening over pick-ups (:func:`arena.ai.ismcts.ismcts`)."""

    name = "ismcts"

    def __init__(self, budget: Budget | None = None, seed: int | None = None,
                 table: SetupTable | None = None, horizon: int = HORIZON, c: float = 0.7, *,
                 reuse: bool = False, widen_pick_ups: bool = False):
        super().__init__(table, seed)
        self.budget = budget or Budget.from_env("ISMCTS")
        self.horizon = horizon
        self.c = c
        self.reuse = reuse
        self.widen_pick_ups = widen_pick_ups
        self.tree = None  # with reuse: the root of the last search
        self._kept = None
        self.reused = 0  # searches that started from a kept subtree (for tests and benchmarks)

    def begin(self, msg):
        self.tree = None
        super().begin(msg)

    def choose(self, req):
        tree, self.tree = self.tree, None  # only a search that just ran may leave a tree behind
        self._kept = tree
        return super().choose(req)

    def decide(self, req, state, legal, ids) -> int:
        from .ismcts import Node, advance, ismcts, moves_in, rank_key, root_mean
        deadline, iters = self.budget.deadline(req)
        root = None
        if self.reuse and self._kept is not None:
            root = advance(self._kept, moves_in(req.get("events", ())), self.obs.seat)
            self.reused += root is not None
        root = root if root is not None else Node(-1)
        best, children = ismcts(self.obs, legal, self.rng, deadline, iters, self.policy, self.horizon, self.c,
                                infer=self.infer, root=root, record_forced=self.reuse,
                                widen_pick_ups=self.widen_pick_ups)
        if self.reuse:
            self.tree = root
        if self.obs.stale > STUCK_TURNS:
            best = unstick(best, [root_mean(children, a) for a in legal], self.rng)
        chosen = children.get(rank_key(legal[best]))
        self.info = search_info(root_mean(children, legal[best]), len(state.seats), iterations=root.visits,
                                text=f"{chosen.visits if chosen else 0} of {root.visits} visits")
        return ids[best]


REFERENCE = ("random", "highest", "lowest", "heuristic", "heuristic-setup", "learned", "montecarlo", "ismcts")


def reference_agent(name: str, seed: int | None = None, budget: Budget | None = None) -> Agent:
    """One of the bundled bots, in process, by its name in ``bots/`` (what ``arena.envs`` plays against)."""
    from arena import strategies
    if name == "random":
        return PolicyAgent(strategies.random_policy(random.Random(seed)), name)
    if name in ("highest", "lowest", "heuristic"):
        return PolicyAgent({"highest": strategies.highest_first, "lowest": strategies.lowest_first,
                            "heuristic": strategies.heuristic}[name], name)
    if name == "heuristic-setup":
        return HeuristicAgent(seed=seed)
    if name == "learned":
        from .learned import LearnedAgent  # the network's weights are read on first use
        return LearnedAgent(seed=seed)
    if name == "montecarlo":
        return MonteCarloAgent(budget or Budget(ms=10), seed=seed)
    if name == "ismcts":
        return ISMCTSAgent(budget or Budget(ms=10), seed=seed)
    raise ValueError(f"unknown reference bot {name!r}; known: {', '.join(REFERENCE)}")
