"""ISMCTS tree reuse: the moves since the last decision are read from the events exactly as
they happened (checked against the true game, which the tests hold and the bots never see),
only the subtree they lead to is kept, and a kept root never holds a move not legal now.
Widening over pick-ups expands a pick-up only after every play, and only once visits allow."""

from __future__ import annotations

import random

import pytest

import arena.ai.ismcts as ismcts_mod
from arena.referee import protocol
from arena.ai.agents import ISMCTSAgent, PolicyAgent
from arena.ai.budget import Budget
from arena.ai.ismcts import Node, advance, ismcts, moves_in
from arena.ai.match import play
from arena.ai.observe import Observer, parse_action, rank_key
from arena.ai.policy import make_policy
from arena.engine import PRESETS, legal_actions
from arena.referee.core import RefereeCore, TimeControl
from arena.strategies import heuristic
from tests.test_ai import VARIANTS


def true_moves(steps) -> list[tuple[int, tuple]]:
    return [(st["seat"], rank_key(parse_action(st["act"]))) for st in steps if st["phase"] == "play"]


@pytest.mark.parametrize("name,rules", VARIANTS, ids=[v[0] for v in VARIANTS])
def test_moves_in_events_are_the_moves_played(name, rules):
    """At every request of seat 0: the moves its events report are all the play-phase moves
    since its last request (its own first, forced ones too), and a forfeit gives None."""
    players = min(rules.max_players, 2 + len(name) % 3)
    checked = 0
    for seed in range(3):
        rng = random.Random(seed)
        core = RefereeCore(rules, [f"p{s}" for s in range(players)], seed, game_id="g",
                           clock=TimeControl(move_ms=1000, bank_ms=0), encode=False)
        since = 0
        forfeit_at = 40 if seed == 2 else None
        while (req := core.next_request()) is not None:
            if forfeit_at is not None and core.state.turn >= forfeit_at and req.seat == 0:
                core.fault("crash", "test", 0.0)  # seat 0 forfeits: nothing more to check for it
                forfeit_at = None
                since = None
                continue
            if req.seat == 0 and since is not None:
                steps = core.record.steps[since:]
                got = moves_in(req.message["events"])
                if any(e["kind"] == "forfeited" for e in req.message["events"]):
                    assert got is None
                else:
                    assert got == true_moves(steps)
                    checked += bool(got)
                since = len(core.record.steps)
            core.answer(rng.randrange(req.n_actions), 0.0)
    assert checked > 5


def tree(me: int = 0, opp: int = 1) -> Node:
    """root -(me: play a 5)-> A -(opp: pick up)-> B -> my two moves."""
    root = Node(-1)
    a = root.children[("p", 5, 1, "hand", None)] = Node(me)
    b = a.children[("u", None)] = Node(opp)
    b.children[("p", 7, 1, "hand", None)] = Node(me)
    b.children[("p", 9, 2, "hand", None)] = Node(me)
    a.children[("p", 8, 1, "hand", None)] = Node(opp)
    return root


def test_advance_follows_only_the_moves_made():
    mine, theirs = (0, ("p", 5, 1, "hand", None)), (1, ("u", None))
    root = tree()
    b = root.children[mine[1]].children[theirs[1]]
    assert advance(root, [mine, theirs], 0) is b and b.player == -1
    assert advance(tree(), [mine, (0, ("u", None))], 0) is None  # the right move by the wrong seat
    assert advance(tree(), [mine, (1, ("p", 6, 1, "hand", None))], 0) is None  # a move never expanded
    assert advance(tree(), [mine], 0) is None  # the node found is the opponent's decision
    assert advance(tree(), [], 0) is None and advance(tree(), None, 0) is None


@pytest.mark.parametrize("name", ["classic", "shithead", "classic+0", "powers+2"])
def test_reused_tree_never_keeps_a_move_not_legal_now(name, monkeypatch):
    """Whole games with reuse: a kept subtree is found and carries visits, every root child
    after a search is a legal move of the real state, and every answer is legal."""
    rules = dict(VARIANTS)[name]
    seen = {"reused": 0, "prior": 0}
    search = ismcts_mod.ismcts

    def checked(obs, root_actions, *args, root=None, **kw):
        prior = root.visits if root is not None else 0
        best, children = search(obs, root_actions, *args, root=root, **kw)
        assert set(children) <= {rank_key(a) for a in root_actions}
        seen["prior"] += prior
        return best, children

    monkeypatch.setattr(ismcts_mod, "ismcts", checked)
    for seed in range(3):
        agent = ISMCTSAgent(Budget(iterations=40), seed=seed, horizon=8, reuse=True)
        play([agent, PolicyAgent(heuristic, "heuristic")], rules, seed=seed, max_turns=600)
        assert agent.fallbacks == 0
        seen["reused"] += agent.reused
    assert seen["reused"] > 10 and seen["prior"] > 0


def _position(rules, want):
    """Seat 0's first play decision (random play otherwise) whose actions ``want`` accepts."""
    for seed in range(200):
        rng = random.Random(seed)
        obs = Observer()
        obs.start(protocol.start("g", 0, 2, ["a", "b"], rules.options(), {"move_ms": 1000}, seed))
        core = RefereeCore(rules, ["a", "b"], seed, game_id="g", clock=TimeControl(bank_ms=0), encode=False)
        while (req := core.next_request()) is not None:
            if req.seat == 0:
                obs.update(req.message)
                acts = legal_actions(core.state)
                if core.state.phase == "play" and want(acts):
                    return obs, acts
            core.answer(rng.randrange(req.n_actions), 0.0)
    raise AssertionError("no such position")


def test_pick_ups_wait_for_every_play_and_for_visits():
    rules = PRESETS["shithead"]  # picking up is a choice here
    obs, acts = _position(rules, lambda a: len(a) >= 4 and any(x.kind == "pick_up" for x in a))
    plays = {rank_key(a) for a in acts if a.kind == "play"}
    for n in (len(plays), len(plays) + 1, 3 * len(acts), 200):
        root = Node(-1)
        ismcts(obs, acts, random.Random(n), 1e18, n, make_policy(), 8, root=root, widen_pick_ups=True)
        assert set(root.children) <= plays | {("u", None)}
        if n <= len(plays) + 1:
            assert set(root.children) == plays, "every play is tried before a pick-up"
        if ("u", None) in root.children:
            assert plays <= set(root.children) and n >= (len(plays) - 1) ** 2
    root = Node(-1)
    ismcts(obs, acts, random.Random(0), 1e18, len(acts), make_policy(), 8, root=root)
    assert len(root.children) == len(acts)  # without widening every move is tried at once


def test_reuse_plays_every_rule_set():
    """With and without widening, three and four seats too: whole legal games, no fallbacks, kept subtrees found."""
    reused = 0
    for k, (name, rules) in enumerate(VARIANTS):
        players = 2 + k % 3 if rules.max_players >= 4 else 2
        agent = ISMCTSAgent(Budget(iterations=8), seed=k, horizon=8, reuse=True, widen_pick_ups=k % 2 == 0)
        others = [PolicyAgent(heuristic, "heuristic") for _ in range(players - 1)]
        g = play([agent] + others, rules, seed=300 + k, max_turns=600)
        assert g.result is not None and agent.fallbacks == 0, name
        reused += agent.reused
    assert reused > 0
