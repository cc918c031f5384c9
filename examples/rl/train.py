"""Train a Palace player with sb3-contrib's MaskablePPO, on the CPU, against the reference bots.

    pip install '.[train]'      # torch, stable-baselines3, sb3-contrib (and the rl extra)
    PYTHONPATH=. python examples/rl/train.py --seed 1 --steps 5000000 --minutes 55 \\
        --out examples/rl/run                          # log.csv, curve data, weights

One learning seat (a random seat each game) plays 2-player ``classic`` in
``arena.envs.PalaceSingleEnv`` against the bots named by ``--opponents`` (one environment
per entry, ``heuristic:12,lowest:4``: twelve against the JSON heuristic, four
against lowest-first). ``self`` there is self-play (``selfplay.py``): each game against one of
the run's own checkpoints, the untrained network and then each evaluation's weights (the newest
``--pool`` of them), e.g. ``--opponents heuristic:8,self:8``. The policy is a masked MLP over the 264 features of ``arena.envs.encode``
and the 631 actions of ``arena.ai.actions``; setup decisions go to the setup table
(``wrappers.py``). Every ``--eval-every`` steps the greedy policy plays ``--eval-deals``
fixed deals against ``heuristic`` from both seats (duplicate deals); the figures go to
``log.csv`` and the weights to ``weights-STEPS.json`` (the format ``arena.ai.learned``
reads without numpy or torch). Training stops after ``--steps`` or ``--minutes``,
whichever comes first; ``final.json`` is the last policy, ``best.json`` the best evaluated,
``model.zip`` the last model for ``MaskablePPO.load``.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch
from sb3_contrib import MaskablePPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import DummyVecEnv

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from selfplay import Pool, PoolOpponent  # noqa: E402
from wrappers import LearnerEnv  # noqa: E402

from arena.envs import PalaceSingleEnv  # noqa: E402

EVAL_SEED = 10_000_000  # evaluation deals: EVAL_SEED + i, never a training deal's seed


def export(policy, path: Path, meta: dict) -> None:
    """The actor's layers as JSON (``arena.ai.learned`` plays from it in pure Python)."""
    layers = [m for m in policy.mlp_extractor.policy_net if isinstance(m, torch.nn.Linear)]
    layers.append(policy.action_net)
    act = type(policy.mlp_extractor.policy_net[1]).__name__.lower()
    data = {"format": "palace-mlp-1", "activation": act, **meta,
            "layers": [{"w": np.round(m.weight.detach().numpy().astype(np.float64), 5).tolist(),
                        "b": np.round(m.bias.detach().numpy().astype(np.float64), 5).tolist()} for m in layers]}
    path.write_text(json.dumps(data, separators=(",", ":")) + "\n")


def greedy_games(model, deals: int, opponent: str = "heuristic", rules: str = "classic") -> tuple[float, float]:
    """Win rate (draws half) and 95% half-width over deals, both seats of each deal."""
    per_deal = []
    envs = [LearnerEnv(PalaceSingleEnv(rules, [opponent], seat=s)) for s in (0, 1)]
    for d in range(deals):
        score = 0.0
        for env in envs:
            obs, info = env.reset(seed=EVAL_SEED + d)
            done = False
            while not done:
                a, _ = model.predict(obs, action_masks=env.action_masks(), deterministic=True)
                obs, r, term, trunc, info = env.step(int(a))
                done = term or trunc
            res = info["result"]
            score += 0.5 if res.draw else float(info["place"] == 1)
        per_deal.append(score / 2)
    m = float(np.mean(per_deal))
    sd = float(np.std(per_deal, ddof=1)) if deals > 1 else 0.0
    return m, 1.96 * sd / math.sqrt(deals)


class Progress(BaseCallback):
    def __init__(self, a, out: Path, meta: dict, pool: Pool):
        super().__init__()
        self.a, self.out, self.meta, self.pool = a, out, meta, pool
        self.t0 = time.perf_counter()
        self.next_eval = 0
        self.best = -1.0
        self.best_steps = 0
        self.env_s = 0.0
        self.log = (out / "log.csv").open("w", newline="")
        self.csv = csv.writer(self.log)
        self.csv.writerow(["steps", "train_s", "steps_per_s", "win_vs_heuristic", "half_width", "eval_s"])

    def _on_step(self) -> bool:
        if self.num_timesteps >= self.next_eval:
            self.evaluate()
            self.next_eval += self.a.eval_every
        return time.perf_counter() - self.t0 - self.env_s < self.a.minutes * 60

    def evaluate(self) -> None:
        t = time.perf_counter()
        win, half = greedy_games(self.model, self.a.eval_deals)
        eval_s = time.perf_counter() - t
        self.env_s += eval_s  # evaluation time does not count against the training budget
        train_s = t - self.t0 - (self.env_s - eval_s)
        sps = self.num_timesteps / train_s if train_s > 0 else 0.0
        self.csv.writerow([self.num_timesteps, f"{train_s:.1f}", f"{sps:.0f}", f"{win:.4f}", f"{half:.4f}", f"{eval_s:.1f}"])
        self.log.flush()
        print(f"{self.num_timesteps:>9} steps  {train_s:7.0f} s  {sps:5.0f} steps/s  "
              f"vs heuristic {100 * win:5.1f}% +- {100 * half:.1f}  (eval {eval_s:.0f} s)", flush=True)
        meta = {**self.meta, "steps": self.num_timesteps}
        export(self.model.policy, self.out / f"weights-{self.num_timesteps}.json", meta)
        self.pool.add(self.out / f"weights-{self.num_timesteps}.json")  # self-play's next opponents
        if win > self.best:
            self.best, self.best_steps = win, self.num_timesteps
            export(self.model.policy, self.out / "best.json", meta)

    def _on_training_end(self) -> None:
        self.evaluate()
        export(self.model.policy, self.out / "final.json", {**self.meta, "steps": self.num_timesteps})
        self.model.save(self.out / "model.zip")  # to resume, or to read back with MaskablePPO.load
        self.log.close()
        print(f"done: the best policy is {self.out / 'best.json'} ({100 * self.best:.1f}% vs heuristic at "
              f"{self.best_steps} steps); the last is {self.out / 'final.json'}. Play it as a bot: "
              f"cp {self.out / 'best.json'} examples/rl/mybot/weights.json; arena match examples/rl/mybot heuristic",
              flush=True)


def make_env(rules: str, opponent: str, seed: int, pool: Pool):
    def thunk():
        bot = PoolOpponent(pool, seed) if opponent == "self" else opponent
        env = LearnerEnv(PalaceSingleEnv(rules, [bot], seat=None))
        env.reset(seed=seed)
        return env
    return thunk


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rules", default="classic")
    p.add_argument("--opponents", default="heuristic:12,lowest:4",
                   help="name:environments,...; the name self plays the run's own checkpoints")
    p.add_argument("--pool", type=int, default=8, help="self-play draws from the newest N checkpoints (0: all)")
    p.add_argument("--steps", type=int, default=3_000_000, help="learner decisions to train on (default: 3,000,000)")
    p.add_argument("--minutes", type=float, default=55.0, help="training time cap (evaluations excluded; default: 55)")
    p.add_argument("--hidden", default="128,128")
    p.add_argument("--n-steps", type=int, default=128, help="steps per environment per update")
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--ent", type=float, default=0.01)
    p.add_argument("--eval-every", type=int, default=100_000)
    p.add_argument("--eval-deals", type=int, default=100)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", type=Path, default=HERE / "run")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.distributions.Distribution.set_default_validate_args(False)  # checks cost more than the step
    a.out.mkdir(parents=True, exist_ok=True)
    pool = Pool(a.pool)
    fns = []
    for part in a.opponents.split(","):
        name, _, n = part.partition(":")
        fns += [make_env(a.rules, name, a.seed * 1000 + len(fns) + k, pool) for k in range(int(n or 1))]
    venv = DummyVecEnv(fns)
    hidden = [int(x) for x in a.hidden.split(",")]
    model = MaskablePPO("MlpPolicy", venv, n_steps=a.n_steps, batch_size=a.batch, n_epochs=a.epochs,
                        learning_rate=a.lr, gamma=a.gamma, gae_lambda=0.95, ent_coef=a.ent, seed=a.seed,
                        policy_kwargs={"net_arch": {"pi": hidden, "vf": hidden}}, device="cpu", verbose=0)
    meta = {"rules": a.rules, "opponents": a.opponents, "seed": a.seed, "hidden": hidden,
            "setup": "table", "trainer": "sb3-contrib MaskablePPO"}
    (a.out / "args.json").write_text(json.dumps(vars(a), default=str, indent=1) + "\n")
    export(model.policy, a.out / "untrained.json", {**meta, "steps": 0})
    pool.add(a.out / "untrained.json")  # self-play's first opponent
    print(f"training {a.steps} steps or {a.minutes} min, {len(fns)} environments, torch threads "
          f"{torch.get_num_threads()}", flush=True)
    model.learn(total_timesteps=a.steps, callback=Progress(a, a.out, meta, pool))


if __name__ == "__main__":
    main()
