"""Single-observer information-set MCTS (Cowling, Powley & Whitehouse 2012).

One tree for the observer's information set. Every iteration deals a fresh
determinization and walks the tree using only the actions legal in that deal, so a
node's children are keyed by what an action *is* (kind, rank, count, zone, target:
:func:`arena.ai.observe.rank_key`), not by the physical cards, which differ between
deals. Selection is UCB1 over the children available in this deal, with the
availability count in place of the parent's visits, which keeps rarely-available
moves from being starved or over-trusted. Each node stores the reward of the seat
that made its move, so opponents in the tree play for themselves. Leaves are
finished with heuristic playouts.

Forced moves pass through without nodes, unless the tree is to be reused: then they
get nodes too (``record_forced``), so that the actions the bot is told about since its
last decision name exactly one path from the old root (:func:`advance`).
"""

from __future__ import annotations

import math
import random
import time

from arena.engine.game import apply_action, legal_actions

from .observe import Observer, card, rank_key
from .simulate import playout, result_scores


class Node:
    __slots__ = ("player", "children", "visits", "avail", "total")

    def __init__(self, player: int):
        self.player = player  # the seat that made the move into this node
        self.children: dict[tuple, Node] = {}
        self.visits = 0
        self.avail = 0
        self.total = 0.0


def ismcts(obs: Observer, root_actions, rng: random.Random, deadline: float,
           iterations: int | None, policy, horizon: int, c: float = 0.7,
           max_depth: int = 40, infer: bool = True, *, root: Node | None = None,
           record_forced: bool = False, widen_pick_ups: bool = False) -> tuple[int, dict]:
    """Index into ``root_actions`` of the most visited root move, and the root's children.

    ``infer=False`` deals hidden cards uniformly instead of through the resampler.
    ``root``: a tree kept from an earlier decision (:func:`advance`); its root moves that
    are not legal now are dropped first. ``record_forced``: give forced moves nodes too, so
    that the tree can be advanced by the moves made. ``widen_pick_ups``: progressive
    widening over pick-ups: where a play is legal, picking up is expanded only after every
    play, and only once the node's visits n allow one more child (``tried < 1 + sqrt(n)``)."""
    root = Node(-1) if root is None else root
    root_keys = [rank_key(a) for a in root_actions]
    if root.children:
        kept = root.children
        root.children = {k: kept[k] for k in root_keys if k in kept}
    n_iter = 0
    deal = obs.resample if infer else obs.sample
    while True:
        state = deal(rng)
        node = root
        path: list[Node] = []
        depth = 0
        root.visits += 1
        while state.result is None and depth < max_depth:
            actions = root_actions if node is root else legal_actions(state)
            if len(actions) == 1:
                if record_forced:
                    k = rank_key(actions[0])
                    ch = node.children.get(k)
                    if ch is None:
                        ch = node.children[k] = Node(state.to_move)
                    ch.avail += 1
                    path.append(ch)
                    node = ch
                state = apply_action(state, actions[0], check=False)[0]
                continue
            keys = root_keys if node is root else [rank_key(a) for a in actions]
            mover = state.to_move
            children = node.children
            untried = []
            best_j, best_v = -1, -1.0
            for j, k in enumerate(keys):
                ch = children.get(k)
                if ch is None:
                    untried.append(j)
                    continue
                ch.avail += 1
                v = ch.total / ch.visits + c * math.sqrt(math.log(ch.avail) / ch.visits)
                if v > best_v:
                    best_j, best_v = j, v
            if untried and widen_pick_ups:
                plays = [u for u in untried if actions[u].kind != "pick_up"]
                tried = len(actions) - len(untried)
                if plays:
                    untried = plays
                elif tried and tried >= 1 + math.sqrt(node.visits):
                    untried = []  # only pick-ups are left: not yet, the plays get the visits
            if untried:
                # expand the heuristic's choice first: good moves get looked at early
                favourite = policy(state, actions)
                j = next((u for u in untried if actions[u] == favourite), None)
                if j is None:
                    j = untried[rng.randrange(len(untried))]
                ch = Node(mover)
                ch.avail = 1
                children[keys[j]] = ch
                state = apply_action(state, actions[j], check=False)[0]
                path.append(ch)
                break
            ch = children[keys[best_j]]
            state = apply_action(state, actions[best_j], check=False)[0]
            path.append(ch)
            node = ch
            depth += 1
        if state.result is None:
            state = playout(state, policy, horizon)
        scores = result_scores(state)
        for nd in path:
            nd.visits += 1
            nd.total += scores[nd.player]
        n_iter += 1
        if iterations is not None and n_iter >= iterations:
            break
        if time.perf_counter() >= deadline:
            break
    visits = [root.children[k].visits if k in root.children else 0 for k in root_keys]
    best = max(range(len(root_actions)), key=lambda j: (visits[j], _mean(root.children.get(root_keys[j]))))
    return best, root.children


def _mean(node: Node | None) -> float:
    return node.total / node.visits if node is not None and node.visits else 0.0


def root_mean(children: dict, action) -> float:
    """Mean score of a root move in the tree :func:`ismcts` returned (0 if never tried)."""
    return _mean(children.get(rank_key(action)))


# ---------------------------------------------------------------- tree reuse

def moves_in(events) -> list[tuple[int, tuple]] | None:
    """The moves (seat, :func:`rank_key`) that ``events`` report, in order; None when a seat
    forfeited (the tree's seats no longer match the game). A failed flip's and a surrender's
    pick-up belong to the flip or the surrender; a joker's ``gave_pile`` names its target."""
    out: list[tuple[int, tuple]] = []
    pick_up_of = None  # the seat whose next picked_up is part of its last move
    for ev in events:
        k = ev.get("kind")
        if k == "played":
            cs = ev["cards"]
            out.append((ev["seat"], ("p", card(cs[0]) >> 2, len(cs), ev["zone"], None)))
        elif k == "gave_pile" and out and out[-1][0] == ev["seat"] and out[-1][1][0] == "p":
            seat, key = out[-1]
            out[-1] = (seat, key[:4] + (ev["target"],))
        elif k == "flipped":
            out.append((ev["seat"], ("f", ev["position"])))
            pick_up_of = None if ev["legal"] else ev["seat"]
        elif k == "surrendered":
            out.append((ev["seat"], ("u", card(ev["card"]) >> 2)))
            pick_up_of = ev["seat"]
        elif k == "picked_up":
            if pick_up_of == ev["seat"]:
                pick_up_of = None
            else:
                out.append((ev["seat"], ("u", None)))
        elif k == "forfeited":
            return None
    return out


def advance(root: Node, moves: list[tuple[int, tuple]] | None, me: int) -> Node | None:
    """The node under ``root`` that ``moves`` lead to, as the root of the next search, or None
    when any move (or the seat that made it) is not in the tree, or the node found is not a
    decision of ``me``. The tree must have been grown with ``record_forced``."""
    if not moves:
        return None
    node = root
    for seat, key in moves:
        node = node.children.get(key)
        if node is None or node.player != seat:
            return None
    if any(ch.player != me for ch in node.children.values()):
        return None
    node.player = -1
    return node
