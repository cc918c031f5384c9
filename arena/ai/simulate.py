"""Playouts and scoring shared by the search bots, the setup trainer and the benchmarks.

A score is place-based: 1 for first, 0 for last, linear between, so that 4-player
searches care about avoiding last place and not only about winning. Seats that share
a place (a draw) share its score; in first-out games everyone but the winner scores 0.
A playout cut off at its horizon is scored by the learned evaluator.
"""

from __future__ import annotations

from arena.engine.game import apply_action, legal_actions


def result_scores(state, evaluator=None) -> list[float]:
    """Per-seat score of a finished game, or the evaluator's estimate for an unfinished one."""
    res = state.result
    n = len(state.seats)
    if res is None:
        if evaluator is None:
            from .evaluate import default_evaluator
            evaluator = default_evaluator()
        return evaluator.scores(state)
    out = [0.0] * n
    place = 1
    for group in res.order:
        # a group shares its places: the mean score of the places it spans
        span = len(group)
        mean_place = place + (span - 1) / 2
        v = (n - mean_place) / (n - 1)
        for s in group:
            out[s] = v
        place += span
    if not res.complete and len(res.order) > 1:
        # first-out games: only the winner counts, the rest are equally beaten
        for s in res.order[-1]:
            out[s] = 0.0
    return out


def playout(state, policy, horizon: int = 10_000):
    """Play ``policy`` for every seat until the game ends or ``horizon`` more turns pass."""
    stop = state.turn + horizon
    while state.result is None and state.turn < stop:
        actions = legal_actions(state)
        a = actions[0] if len(actions) == 1 else policy(state, actions)
        state = apply_action(state, a, check=False)[0]
    return state


def play_game(rules, players: int, seed: int, policies, max_turns: int = 2000):
    """One omniscient in-process game, ``policies[seat](state, actions)``; for training only
    (a policy handed the true state could peek, so bots never run this way)."""
    from arena.engine.game import new_game
    state = new_game(rules, players, seed, max_turns=max_turns)
    while state.result is None:
        actions = legal_actions(state)
        a = actions[0] if len(actions) == 1 else policies[state.to_move](state, actions)
        state = apply_action(state, a, check=False)[0]
    return state
