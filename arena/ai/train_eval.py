"""Fit the playout evaluator: ``python -m arena.ai.train_eval``.

Plays 2-player heuristic self-play games per preset, takes positions at random turns
of the play phase, and fits P(seat A wins) = sigmoid(w . (f_A - f_B)) by logistic
regression (Newton steps, small L2), each position entered from both sides so the
model stays antisymmetric. The weights go to ``eval_weights.json``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import random
import time
from pathlib import Path

from arena.engine import PRESETS, apply_action, legal_actions, new_game

from .evaluate import FEATURES, WEIGHTS_PATH, seat_features
from .policy import heuristic_action


def game_rows(task) -> list[tuple[list[float], float]]:
    rules_name, seed, per_game = task
    rules = PRESETS[rules_name]
    rng = random.Random(seed)
    state = new_game(rules, 2, seed)
    snaps = []
    while state.result is None:
        if state.phase == "play" and rng.random() < 0.1:
            snaps.append([a - b for a, b in zip(seat_features(state, 0, rules.wild),
                                                seat_features(state, 1, rules.wild))])
        acts = legal_actions(state)
        a = acts[0] if len(acts) == 1 else heuristic_action(state, acts)
        state = apply_action(state, a, check=False)[0]
    if state.result.draw or not snaps:
        return []
    y = 1.0 if state.result.winner == 0 else 0.0
    picked = rng.sample(snaps, min(per_game, len(snaps)))
    return [(x, y) for x in picked]


def fit(rows, l2: float = 1.0, steps: int = 25) -> tuple[list[float], float]:
    import numpy as np
    X = np.array([r[0] for r in rows] + [[-v for v in r[0]] for r in rows], dtype=float)
    Y = np.array([r[1] for r in rows] + [1.0 - r[1] for r in rows])
    w = np.zeros(X.shape[1])
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(X @ w)))
        g = X.T @ (p - Y) + l2 * w
        H = (X * (p * (1 - p))[:, None]).T @ X + l2 * np.eye(len(w))
        w -= np.linalg.solve(H, g)
    p = 1.0 / (1.0 + np.exp(-(X @ w)))
    acc = float(((p > 0.5) == (Y > 0.5)).mean())
    return [round(float(v), 5) for v in w], acc


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--games", type=int, default=2000, help="games per preset")
    p.add_argument("--per-game", type=int, default=6, help="positions taken per game")
    p.add_argument("--presets", default=",".join(PRESETS))
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--seed", type=int, default=777)
    p.add_argument("--out", default=str(WEIGHTS_PATH))
    opts = p.parse_args(argv)
    tables, report, everything = {}, {}, []
    t0 = time.time()
    with mp.get_context("fork").Pool(opts.jobs) as pool:
        for name in opts.presets.split(","):
            tasks = [(name, opts.seed + g, opts.per_game) for g in range(opts.games)]
            rows = [r for rs in pool.map(game_rows, tasks, chunksize=16) for r in rs]
            everything += rows
            tables[name], acc = fit(rows)
            report[name] = {"positions": len(rows), "train_accuracy": round(acc, 4)}
            print(f"{name}: {dict(zip(FEATURES, tables[name]))} acc {acc:.3f} ({time.time() - t0:.0f} s)",
                  flush=True)
    tables["default"], acc = fit(everything)
    report["default"] = {"positions": len(everything), "train_accuracy": round(acc, 4)}
    out = {"version": 1, "features": list(FEATURES),
           "about": "Logistic weights: P(A beats B) = sigmoid(w . (f_A - f_B)); "
                    "learned by arena.ai.train_eval from 2-player heuristic self-play.",
           "trained": {"games_per_preset": opts.games, "positions_per_game": opts.per_game,
                       "seed": opts.seed, "fit": report},
           "tables": tables}
    Path(opts.out).write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {opts.out}")


if __name__ == "__main__":
    main()
