"""Learn the setup table from simulated games: ``python -m arena.ai.train_setup``.

For each deal, one learner seat tries several face-up choices (the current table's
pick plus random legal others) and every branch is played to the end with the engine
heuristic for all seats, from the same deal. Comparing branches of one deal removes
the luck of the deal (a fixed-effects regression): the weights say how much each rank
face up, and each extra same-rank card face up, changes the learner's place score.
Runs in-process with the true state, which is fine for training a table: nothing is
peeked at during play, the heuristic reads only its own seat's view.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import random
import time
from pathlib import Path

from arena.engine import PRESETS, apply_action, legal_actions, new_game, with_options
from arena.engine.cards import JOKER

from .policy import heuristic_action
from .setup_table import FALLBACK, RANK_KEYS, TABLE_PATH, SetupTable
from .simulate import result_scores

N_FEATURES = len(RANK_KEYS) + 1  # one per rank (2..A, joker), then 'pair'


def features(stacks) -> list[float]:
    x = [0.0] * N_FEATURES
    counts: dict[int, int] = {}
    for st in stacks:
        for c in st:
            counts[c >> 2] = counts.get(c >> 2, 0) + 1
    for r, k in counts.items():
        x[min(r, JOKER) - 2] += k
        x[-1] += k - 1
    return x


def _finish(state, table, rng):
    while state.result is None:
        acts = legal_actions(state)
        a = acts[0] if len(acts) == 1 else heuristic_action(state, acts, table)
        state = apply_action(state, a, check=False)[0]
    return state


JOKER_VARIANTS = {"classic": {"jokers": 1, "joker": "give_pile"}, "shithead": {"jokers": 2}}


def _rules(rules_name: str):
    """A preset, or ``name+jokers``: the preset with jokers, so the default table values them."""
    if rules_name.endswith("+jokers"):
        base = rules_name[:-len("+jokers")]
        return with_options(PRESETS[base], JOKER_VARIANTS[base])
    return PRESETS[rules_name]


def deal_rows(task) -> list[tuple[list[float], float]]:
    """One deal: (features, learner score) for each face-up choice tried."""
    rules_name, players, seed, choices, base = task
    rules = _rules(rules_name)
    table = SetupTable(base)
    rng = random.Random(seed)
    state = new_game(rules, players, seed)
    learner = seed % players
    while state.phase == "setup" and state.to_move != learner:
        acts = legal_actions(state)
        state = apply_action(state, heuristic_action(state, acts, table), check=False)[0]
    if state.phase != "setup":
        return []
    acts = list(legal_actions(state))
    if acts[0].kind != "set_face_up" or len(acts) < 2:
        return []
    mine = heuristic_action(state, acts, table)
    others = [a for a in acts if a != mine]
    tried = [mine] + rng.sample(others, min(len(others), choices - 1))
    rows = []
    for a in tried:
        s = apply_action(state, a, check=False)[0]
        s = _finish(s, table, rng)
        rows.append((features(a.stacks), result_scores(s)[learner]))
    return rows


def fit(groups: list[list[tuple[list[float], float]]], ridge: float = 1.0) -> list[float]:
    """Fixed-effects least squares: within each deal, score differences on feature differences."""
    import numpy as np
    xs, ys = [], []
    for rows in groups:
        if len(rows) < 2:
            continue
        x = np.array([r[0] for r in rows])
        y = np.array([r[1] for r in rows])
        xs.append(x - x.mean(0))
        ys.append(y - y.mean())
    X = np.vstack(xs)
    Y = np.concatenate(ys)
    A = X.T @ X + ridge * np.eye(X.shape[1])
    return list(np.linalg.solve(A, X.T @ Y))


def as_entry(w: list[float], deals: int) -> dict:
    ranks = {k: round(100 * float(w[i]), 3) for i, k in enumerate(RANK_KEYS)}  # percentage points
    return {"ranks": ranks, "pair": round(100 * float(w[-1]), 3), "deals": deals}


def fill_jokers(tables: dict[str, dict]) -> None:
    """Presets without jokers never see one, so their joker weight is unlearned: take the
    default table's (learned from the joker variants) for games that add jokers by option."""
    for name, entry in tables.items():
        if name in PRESETS and not PRESETS[name].jokers:
            entry["ranks"]["X"] = tables["default"]["ranks"]["X"]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--deals", type=int, default=3000, help="deals per preset")
    p.add_argument("--choices", type=int, default=4, help="face-up choices tried per deal")
    p.add_argument("--presets", default=",".join(PRESETS))
    p.add_argument("--players", default="2,3,4")
    p.add_argument("--joker-deals", type=int, default=1500,
                   help="deals per preset with jokers added (they only inform the default table)")
    p.add_argument("--rounds", type=int, default=1, help="retrain with opponents using the new table")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--seed", type=int, default=12345)
    p.add_argument("--out", default=str(TABLE_PATH))
    opts = p.parse_args(argv)
    presets = opts.presets.split(",")
    counts = [int(x) for x in opts.players.split(",")]
    base = {"default": FALLBACK}
    t0 = time.time()
    with mp.get_context("fork").Pool(opts.jobs) as pool:
        for rnd in range(opts.rounds):
            tables: dict[str, dict] = {}
            everything: list = []
            for name in presets:
                rules = PRESETS[name]
                ns = [n for n in counts if rules.min_players <= n <= rules.max_players]
                tasks = [(name, ns[d % len(ns)], opts.seed + 7919 * rnd + d, opts.choices, base)
                         for d in range(opts.deals)]
                groups = pool.map(deal_rows, tasks, chunksize=16)
                everything += groups
                tables[name] = as_entry(fit(groups), opts.deals)
                print(f"round {rnd + 1} {name}: {tables[name]}  ({time.time() - t0:.0f} s)", flush=True)
            for base_name in JOKER_VARIANTS:
                if opts.joker_deals and base_name in presets:
                    tasks = [(base_name + "+jokers", counts[d % len(counts)], opts.seed + 7919 * rnd + 10**6 + d,
                              opts.choices, base) for d in range(opts.joker_deals)]
                    everything += pool.map(deal_rows, tasks, chunksize=16)
            tables["default"] = as_entry(fit(everything), len(everything))
            fill_jokers(tables)
            print(f"round {rnd + 1} default: {tables['default']}  ({time.time() - t0:.0f} s)", flush=True)
            base = tables
    out = {"version": 1,
           "about": "Face-up value of each rank (and of each extra same-rank face-up card), in percentage "
                    "points of place score, learned by arena.ai.train_setup from heuristic self-play.",
           "trained": {"deals_per_preset": opts.deals, "choices_per_deal": opts.choices,
                       "players": counts, "rounds": opts.rounds, "seed": opts.seed,
                       "joker_deals": opts.joker_deals},
           "tables": base}
    Path(opts.out).write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {opts.out}")


if __name__ == "__main__":
    main()
