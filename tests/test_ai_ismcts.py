"""ISMCTS options: tree reuse reads the moves since the last decision from the events exactly
as they happened, keeps only the subtree they lead to, and never keeps a root move that is
not legal now; progressive widening bounds a node's children and expands pick-ups last; the
cheaper rollout policy plays legal moves. Checked against the true game, which the tests
hold and the bots never see."""

from __future__ import annotations

import random

import pytest

import arena.ai.ismcts as ismcts_mod
from arena import protocol
from arena.ai.agents import ISMCTSAgent, PolicyAgent
from arena.ai.budget import Budget
from arena.ai.ismcts import Node, advance, ismcts, moves_in
from arena.ai.match import play
from arena.ai.observe import Observer, parse_action, rank_key
from arena.ai.policy import make_policy, rollout_action
from arena.engine import PRESETS, apply_action, legal_actions, start_game
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
    """The first play decision of seat 0 (random play otherwise) that ``want(actions)`` accepts."""
    for seed in range(200):
        rng = random.Random(seed)
        state, events = start_game(rules, 2, seed)
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


def test_widening_bounds_the_root_and_expands_pick_ups_last():
    rules = PRESETS["shithead"]  # picking up is a choice here
    obs, acts = _position(rules, lambda a: len(a) >= 5 and any(x.kind == "pick_up" for x in a))
    for n in (3, 12, 40):
        root = Node(-1)
        ismcts(obs, acts, random.Random(n), 1e18, n, make_policy(), 8, root=root, widen=(1.0, 0.5))
        assert len(root.children) <= 1 + n ** 0.5 + 1
        plays = {rank_key(a) for a in acts if a.kind == "play"}
        if ("u", None) in root.children:
            assert plays <= set(root.children), "a pick-up was expanded before every play"
    root = Node(-1)
    ismcts(obs, acts, random.Random(0), 1e18, 40, make_policy(), 8, root=root)
    assert len(root.children) == len(acts)  # without widening every move is tried


@pytest.mark.parametrize("name,rules", VARIANTS[::2], ids=[v[0] for v in VARIANTS[::2]])
def test_fast_rollout_plays_legal_moves_and_picks_up_only_when_it_must(name, rules):
    state, _ = start_game(rules, 3 if rules.max_players >= 3 else 2, 7)
    n = 0
    while state.result is None and n < 400:
        acts = legal_actions(state)
        a = rollout_action(state, acts)
        assert a in acts
        if a.kind == "pick_up" and state.phase == "play":
            assert not any(x.kind == "play" for x in acts)
        state = apply_action(state, a, check=False)[0]
        n += 1
    assert n > 20


def test_every_option_plays_whole_games():
    for k, (name, rules) in enumerate(VARIANTS[::3]):
        agent = ISMCTSAgent(Budget(iterations=8), seed=k, horizon=8, reuse=True, widen=(1.0, 0.5),
                            rollout="fast")
        g = play([agent, PolicyAgent(heuristic, "heuristic")], rules, seed=300 + k, max_turns=600)
        assert g.result is not None and agent.fallbacks == 0, name
