"""Is there a one-ply rule that beats the engine heuristic against lowest-first? A probe.

    python bench/probe_heuristic.py                      # classic, 1500 deals, 16 rollouts, 2 jobs
    python bench/probe_heuristic.py --rules shithead --deals 500

It plays the engine heuristic (with its setup table) against lowest-first on both seats
of each deal. At about a third of the heuristic's play decisions (before turn 400, not
in a pick-up cycle) it values *every* legal action: each is followed by the same
``--rollouts`` deals of the hidden cards (stock, face-down cards, the opponent's unknown
hand cards, reshuffled among their places, so only what the seat could see is fixed) and
played to the end, heuristic against lowest-first. A rollout scores 1 for a win, 0 for a
loss, 0.5 past 400 more turns.

For each simple alternative rule (play the highest ladder card, the second-lowest rank,
a single card instead of the set, a 2 or 10 early, or the card the next player most
likely cannot answer), it prints the mean value of that rule's action minus the
heuristic's, by situation, with a 95% interval. Every rollout value is unbiased, so a
rule with a positive mean would win more if it replaced the heuristic in those
situations. ``best of the estimates`` is biased upwards (the maximum of noisy values):
it only bounds what any one-ply rule could find. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import random
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_engine import POWER, lowest_first  # noqa: E402

from arena.ai.policy import heuristic_action  # noqa: E402
from arena.engine import apply_action, legal_actions, preset, start_game  # noqa: E402
from arena.engine.cards import make_deck  # noqa: E402
from arena.engine.game import can_play  # noqa: E402

ROLLOUT_CAP = 400  # turns after which a rollout counts as a draw


def _rank(a) -> int:
    return a.cards[0] >> 2 if a.kind == "play" else -1


def _ladder(rank: int) -> int:
    """Ladder order with 2, 10 and jokers above every plain card, as lowest-first keeps them."""
    return POWER.get(rank, rank)


def determinize(state, me: int, rng: random.Random):
    """The state with every card ``me`` cannot see reshuffled among the hidden places."""
    hidden = list(state.stock) + list(state.set_aside)
    unknown = {}
    for i, s in enumerate(state.seats):
        hidden += [c for c in s.face_down if c is not None]
        if i != me:
            rest = list(s.hand)
            for c in s.known:
                rest.remove(c)
            unknown[i] = len(rest)
            hidden += rest
    rng.shuffle(hidden)
    it = iter(hidden)
    seats = []
    for i, s in enumerate(state.seats):
        down = tuple(None if c is None else next(it) for c in s.face_down)
        hand = s.hand if i == me else tuple(sorted(s.known + tuple(next(it) for _ in range(unknown[i]))))
        seats.append(s._replace(face_down=down, hand=hand))
    stock = tuple(next(it) for _ in state.stock)
    aside = tuple(next(it) for _ in state.set_aside)
    return state._replace(seats=tuple(seats), stock=stock, set_aside=aside)


def chance_no_answer(state, me: int, rank: int) -> float:
    """Chance that the next player holds nothing that goes on ``rank``, from ``me``'s view."""
    nxt = state.seats[1 - me]
    if not nxt.hand or any(can_play(state, q >> 2, 1, rank) for q in nxt.known):
        return 0.0
    unseen = [0] * 16
    for c in make_deck(state.rules.decks_for(len(state.seats)), state.rules.jokers):
        unseen[c >> 2] += 1
    seen = state.pile + state.burned + state.seats[me].hand + nxt.known
    seen += tuple(c for s in state.seats for st in s.face_up for c in st)
    for c in seen:
        unseen[c >> 2] -= 1
    total = sum(unseen)
    answer = sum(n for q, n in enumerate(unseen) if n and can_play(state, q, 1, rank))
    p = 1.0
    for i in range(len(nxt.hand) - len(nxt.known)):
        if total - i <= 0:
            break
        p *= max(0, total - answer - i) / (total - i)
    return p


def _finish(state, policies):
    stop = state.turn + ROLLOUT_CAP
    while state.result is None and state.turn < stop:
        acts = legal_actions(state)
        state = apply_action(state, acts[0] if len(acts) == 1 else policies[state.to_move](state, acts), check=False)[0]
    return state.result


def _score(result, me: int) -> float:
    if result is None or result.draw:
        return 0.5
    return 1.0 if result.winner == me else 0.0


def probe_deal(task) -> list[dict]:
    """Rollout values of every action at sampled decisions of one deal, both seats."""
    rules_name, seed, rollouts = task
    rules = preset(rules_name)
    low = lowest_first(random.Random(0))
    rng = random.Random(seed * 7919 + 1)
    rows = []
    for me in (0, 1):
        policies = {me: heuristic_action, 1 - me: lambda s, acts: low(acts)}
        state, _ = start_game(rules, 2, seed)
        while state.result is None:
            acts = legal_actions(state)
            choice = acts[0] if len(acts) == 1 else policies[state.to_move](state, acts)
            if (len(acts) > 1 and state.to_move == me and state.phase == "play" and acts[0].kind != "flip"
                    and state.turn < 400 and state.stale < 60 and rng.random() < 0.35):
                values = [0.0] * len(acts)
                for _ in range(rollouts):
                    det = determinize(state, me, rng)
                    for j, a in enumerate(acts):
                        after = apply_action(det, a, check=False)[0]
                        values[j] += _score(after.result or _finish(after, policies), me)
                rows.append({
                    "values": [v / rollouts for v in values], "heuristic": acts.index(choice),
                    "ranks": [_rank(a) for a in acts], "counts": [len(a.cards) if a.kind == "play" else 0 for a in acts],
                    "no_answer": [chance_no_answer(state, me, _rank(a)) if a.kind == "play" else 0.0 for a in acts],
                    "pile": len(state.pile), "stock": len(state.stock),
                    "opponent": state.seats[1 - me].card_count})
            state = apply_action(state, choice, check=False)[0]
    return rows


def _plays(row):
    return [j for j, r in enumerate(row["ranks"]) if r >= 0]


def _plain(row):
    return [j for j in _plays(row) if _ladder(row["ranks"][j]) < 20]


RULES = {
    "lowest-first's choice": lambda row: min(_plays(row), key=lambda j: (_ladder(row["ranks"][j]), -row["counts"][j]),
                                             default=None),
    "highest plain card": lambda row: max(_plain(row), key=lambda j: (row["ranks"][j], row["counts"][j]), default=None),
    "second-lowest rank": lambda row: (lambda ranks: min((j for j in _plays(row) if _ladder(row["ranks"][j]) == ranks[1]),
                                                         key=lambda j: -row["counts"][j]) if len(ranks) > 1 else None)(
        sorted({_ladder(row["ranks"][j]) for j in _plays(row)})),
    "lowest card, one copy": lambda row: min(_plays(row), key=lambda j: (_ladder(row["ranks"][j]), row["counts"][j]),
                                             default=None),
    "a 2 or 10 now": lambda row: next((j for j in _plays(row) if _ladder(row["ranks"][j]) >= 20), None),
    "likely unanswerable (p >= 0.5), biggest pile gain": lambda row: max(
        (j for j in _plays(row) if row["no_answer"][j] >= 0.5),
        key=lambda j: (row["no_answer"][j] * (row["pile"] + row["counts"][j]), -row["ranks"][j]), default=None),
    "best of the estimates (biased up)": lambda row: max(range(len(row["values"])), key=lambda j: row["values"][j]),
}


def situation(row) -> str:
    stock = "stock left" if row["stock"] else "stock empty"
    pile = "pile 0-3" if row["pile"] < 4 else "pile 4-9" if row["pile"] < 10 else "pile 10+"
    return f"{stock}, {pile}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rules", default="classic")
    ap.add_argument("--deals", type=int, default=1500)
    ap.add_argument("--rollouts", type=int, default=16)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    tasks = [(args.rules, seed, args.rollouts) for seed in range(1, args.deals + 1)]
    with mp.Pool(args.jobs) as pool:
        rows = [r for rs in pool.imap_unordered(probe_deal, tasks, chunksize=8) for r in rs]
    print(f"{args.rules}: {len(rows)} decisions of the heuristic against lowest-first, {args.deals} deals x 2 seats, "
          f"{args.rollouts} rollouts per action")
    print("value of the rule's action minus the heuristic's, in win probability (95% interval); "
          "'changed' = share of decisions where the rule picks another action")
    for name, rule in RULES.items():
        diffs = defaultdict(list)
        for row in rows:
            j = rule(row)
            if j is None:
                continue
            d = (row["values"][j] - row["values"][row["heuristic"]], j != row["heuristic"])
            diffs[situation(row)].append(d)
            diffs["all"].append(d)
        print(f"\n{name}")
        for key in sorted(diffs, key=lambda k: (k != "all", k)):
            v = [d for d, _ in diffs[key]]
            mean = sum(v) / len(v)
            half = 1.96 * math.sqrt(sum((x - mean) ** 2 for x in v) / max(1, len(v) - 1) / len(v))
            changed = sum(1 for _, other in diffs[key] if other) / len(v)
            print(f"  {key:28s} n={len(v):6d}  {100 * mean:+6.2f} ± {100 * half:4.2f} points  changed {changed:4.0%}")


if __name__ == "__main__":
    main()
