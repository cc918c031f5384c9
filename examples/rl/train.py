"""Train a linear policy over action features for Palace with REINFORCE, on the CPU, in a few minutes.

    PYTHONPATH=. python examples/rl/train.py --out examples/rl/bot/theta.json

One learning seat plays ``classic`` against the ``random`` reference bot in
``arena.envs.PalaceSingleEnv`` (a random seat each game). After each batch of games
the policy moves along the REINFORCE gradient (reward +1 win, -1 loss, minus a running
baseline). Then the greedy policy plays fresh deals against random and the win rate is
printed with a 95% interval. Needs numpy, gymnasium and pettingzoo (``pip install
'palace-arena[rl]'``); the bot it produces (``bot/``, weights in ``theta.json``) needs only
the standard library and ``arena.botkit``.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from policy import LinearPolicy  # noqa: E402

from arena.envs import PalaceSingleEnv  # noqa: E402


def episode(env, policy: LinearPolicy, rng: np.random.Generator, seed: int):
    obs, _ = env.reset(seed=seed)
    steps, reward, done = [], 0.0, False
    while not done:
        x, mask = obs["observation"], obs["action_mask"]
        legal, f, p = policy.probs(x, mask)
        k = rng.choice(len(legal), p=p)
        steps.append((f, p, k))
        obs, reward, term, trunc, _ = env.step(int(legal[k]))
        done = term or trunc
    return steps, reward


def evaluate(policy: LinearPolicy, rules: str, opponent: str, games: int, seed0: int) -> tuple[float, float]:
    env = PalaceSingleEnv(rules, [opponent], seat=None)
    wins = []
    for g in range(games):
        obs, info = env.reset(seed=seed0 + g)
        done = False
        while not done:
            obs, reward, term, trunc, info = env.step(policy.greedy(obs["observation"], obs["action_mask"]))
            done = term or trunc
        wins.append(1.0 if info["place"] == 1 and not info["result"].draw else 0.5 if info["result"].draw else 0.0)
    m = float(np.mean(wins))
    return m, 1.96 * math.sqrt(max(m * (1 - m), 1e-9) / games)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rules", default="classic")
    p.add_argument("--opponent", default="random")
    p.add_argument("--episodes", type=int, default=800)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--lr", type=float, default=0.3)
    p.add_argument("--eval-games", type=int, default=300)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=HERE / "bot" / "theta.json")
    a = p.parse_args()
    rng = np.random.default_rng(a.seed)
    env = PalaceSingleEnv(a.rules, [a.opponent], seat=None)
    policy = LinearPolicy()
    baseline, t0 = 0.0, time.perf_counter()
    grad = np.zeros_like(policy.theta)
    recent: list[float] = []
    for ep in range(1, a.episodes + 1):
        steps, reward = episode(env, policy, rng, seed=a.seed * 1_000_000 + ep)
        adv = reward - baseline
        baseline += 0.02 * (reward - baseline)
        for f, prob, k in steps:
            grad += adv * (f[k] - prob @ f)  # d log p(k) / d theta
        recent.append(reward)
        if ep % a.batch == 0:
            policy.theta += a.lr * grad / a.batch
            grad[:] = 0
        if ep % 500 == 0:
            print(f"episode {ep}: mean reward of the last 500 {np.mean(recent[-500:]):+.3f} "
                  f"({time.perf_counter() - t0:.0f} s)", flush=True)
    train_s = time.perf_counter() - t0
    win, half = evaluate(policy, a.rules, a.opponent, a.eval_games, seed0=10_000_000)
    print(f"trained {a.episodes} games in {train_s:.0f} s; greedy policy against {a.opponent}: "
          f"{100 * win:.1f}% +- {100 * half:.1f} wins over {a.eval_games} new games")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    policy.save(a.out)
    print(f"saved {a.out}")


if __name__ == "__main__":
    main()
