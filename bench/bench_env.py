"""AEC environment steps per second against the bare engine's turns per second.

    python bench/bench_env.py --rules classic --players 2 --seconds 5

The same uniformly random play, five ways, one after the other in one process (compare
the ratios, not the absolute figures, on a shared machine):

* ``engine``: ``legal_actions`` + ``apply_action``, nothing else;
* ``env step``: ``PalaceEnv(protocol=False)``, the action drawn from the legal indices,
  no observation built (what a step itself costs);
* ``env last+step``: the usual loop, ``env.last()`` (the encoded view and the mask) then ``step``;
* ``env last+step, protocol``: the same with the protocol request in ``infos`` (view,
  events, actions as JSON-ready dicts).
* ``single-seat env``: ``PalaceSingleEnv`` against in-process random bots, every game through
  the referee core, counted in game turns (the learner's and the opponents'), and the same
  against the bundled random bot run as processes (``Program("random")``: a round trip per
  opponent decision, on the blocking shell). Its floor is printed beside it: the game turns
  per second of the time the opponents' answers alone took (from the write of a request to its
  reply, the bot's own work included), what any environment with process opponents waits for.
* ``training env``: what ``examples/rl/train.py`` steps (``examples/rl/wrappers.py`` around
  ``PalaceSingleEnv`` against the JSON ``heuristic``; setup by the table), in learner decisions
  and in game turns. With ``--train-log run/log.csv`` the training loop's own decisions per
  second (its last row) are printed beside it: their ratio is the share of a training step
  that the environment costs.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from arena.engine import IMPLEMENTATION, apply_action, legal_actions, new_game, rules_from  # noqa: E402
from arena.envs import PalaceEnv, PalaceSingleEnv  # noqa: E402
from arena.envs.programs import Program  # noqa: E402


def bare(rules, players: int, seconds: float) -> float:
    rng = random.Random(1)
    turns, seed = 0, 0
    t0 = time.perf_counter()
    c0 = time.process_time()
    while time.perf_counter() - t0 < seconds:
        seed += 1
        s = new_game(rules, players, seed)
        while s.result is None:
            acts = legal_actions(s)
            s = apply_action(s, acts[int(rng.random() * len(acts))], check=False)[0]
            turns += 1
    CPU["engine"] = turns / (time.process_time() - c0)
    return turns / (time.perf_counter() - t0)


CPU: dict[str, float] = {}
FLOOR: dict[str, float] = {}  # game turns per second of the opponents' answer time alone
"""Turns per second of this process's CPU, per row: on a shared machine the wall-clock rates
move with the load, these barely do (a program opponent's own CPU is not in them)."""


def env_rate(rules, players: int, seconds: float, *, observe: bool, protocol: bool) -> float:
    rng = random.Random(1)
    e = PalaceEnv(rules, players, protocol=protocol)
    steps, seed = 0, 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        seed += 1
        e.reset(seed=seed)
        while e.agents:
            if e.terminations[e.agent_selection] or e.truncations[e.agent_selection]:
                e.step(None)
                continue
            if observe:
                obs = e.last()[0]
                legal = np.flatnonzero(obs["action_mask"])
            else:
                legal = list(e.by_index)
            e.step(int(legal[int(rng.random() * len(legal))]))
            steps += 1
    return steps / (time.perf_counter() - t0)


def single_rate(rules, players: int, seconds: float, program: bool = False) -> float:
    """Game turns per second (the learner's and the random opponents') through
    ``PalaceSingleEnv``, which runs every game through the referee core; with ``program`` the
    opponents are the bundled random bot as processes (the blocking shell, the default
    containment), else the same bot in process."""
    rng = random.Random(1)
    opponent = Program("random") if program else "random"
    e = PalaceSingleEnv(rules, opponents=[opponent] * (players - 1))
    e.reset(seed=0)  # the processes start here, outside the measurement
    turns, seed, waited_ms = 0, 0, 0.0
    t0 = time.perf_counter()
    c0 = time.process_time()
    while time.perf_counter() - t0 < seconds:
        seed += 1
        obs, _ = e.reset(seed=seed)
        done = False
        while not done:
            legal = np.flatnonzero(obs["action_mask"])
            obs, _, terminated, truncated, _ = e.step(int(legal[int(rng.random() * len(legal))]))
            done = terminated or truncated
        turns += e.core.state.turn
        waited_ms += sum(ms for seat, ms in enumerate(e.core.record.think_ms) if seat != e.seat)
    rate = turns / (time.perf_counter() - t0)
    CPU["program" if program else "single"] = turns / (time.process_time() - c0)
    if program:  # the opponents' answers alone (write to reply, the bot's own work included)
        FLOOR["program"] = turns / (waited_ms / 1000)
    e.close()
    return rate


def training_rate(rules, players: int, seconds: float) -> tuple[float, float]:
    """(learner decisions/s, game turns/s) of the training example's env, random legal play."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "rl"))
    from wrappers import LearnerEnv
    rng = random.Random(1)
    e = LearnerEnv(PalaceSingleEnv(rules, opponents=["heuristic"] * (players - 1), seat=None))
    steps, turns, seed = 0, 0, 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        seed += 1
        e.reset(seed=seed)
        done = False
        while not done:
            legal = np.flatnonzero(e.action_masks())
            _, _, terminated, truncated, _ = e.step(int(legal[int(rng.random() * len(legal))]))
            done, steps = terminated or truncated, steps + 1
        turns += e.unwrapped.core.state.turn
    t = time.perf_counter() - t0
    return steps / t, turns / t


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rules", default="classic")
    p.add_argument("--players", type=int, default=2)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--train-log", type=Path, default=None, help="a training run's log.csv (examples/rl/train.py)")
    a = p.parse_args()
    rules = rules_from(a.rules)
    print(f"{a.rules}, {a.players} players, random play, {IMPLEMENTATION} engine, {a.seconds:g} s each")
    base = bare(rules, a.players, a.seconds)
    print(f"| engine | {base:,.0f} turns/s | 1.00 |")
    program = single_rate(rules, a.players, a.seconds, program=True)
    for label, kw in (("env step", dict(observe=False, protocol=False)),
                      ("env last+step", dict(observe=True, protocol=False)),
                      ("env last+step, protocol", dict(observe=True, protocol=True))):
        r = env_rate(rules, a.players, a.seconds, **kw)
        print(f"| {label} | {r:,.0f} steps/s | {r / base:.2f} |", flush=True)
    r = single_rate(rules, a.players, a.seconds)
    print(f"| single-seat env, random opponents (game turns) | {r:,.0f} turns/s | {r / base:.2f} |", flush=True)
    print(f"| single-seat env, random opponents as processes (game turns) | {program:,.0f} turns/s | "
          f"{program / base:.2f} |", flush=True)
    floor = FLOOR["program"]
    print(f"| the same, if nothing but the opponents' round trips took time (game turns) | {floor:,.0f} turns/s | "
          f"{floor / base:.2f} | the env reaches {program / floor:.2f} of it |", flush=True)
    print("turns per second of this process's CPU: " + ", ".join(
        f"{k} {v:,.0f} ({v / CPU['engine']:.2f})" for k, v in CPU.items()))
    d, t = training_rate(rules, a.players, a.seconds)
    print(f"| training env vs heuristic (learner decisions) | {d:,.0f} steps/s | {d / base:.3f} |")
    print(f"| training env vs heuristic (game turns) | {t:,.0f} turns/s | {t / base:.2f} |", flush=True)
    if a.train_log:
        import csv
        last = list(csv.DictReader(a.train_log.open()))[-1]
        sps = float(last["steps_per_s"])
        print(f"| training loop, {a.train_log} (learner decisions) | {sps:,.0f} steps/s | {sps / base:.3f} "
              f"| the env's share of a step: {sps / d:.0%} |")


if __name__ == "__main__":
    main()
