"""Games between in-process agents, with messages built exactly as the referee builds them.

The benchmark and the tests need thousands of games; bot processes and pipes would
cost more than the games. So this loop copies :func:`arena.referee.run_game`'s
message flow (``protocol.start``/``request``/``end``, ``seat_view``, events censored
per seat and delivered with the next request, forced moves not asked) without trio,
processes or clocks. Agents see only those messages.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from arena import protocol
from arena.engine import apply_action, legal_actions, start_game
from arena.engine.views import action_json, event_for, result_json, seat_view
from arena.referee import decision_name, reveal


@dataclass
class MatchClock:
    move_ms: int = 1000
    bank_ms: int = 10_000

    def as_json(self) -> dict[str, int]:
        return {"move_ms": self.move_ms, "bank_ms": self.bank_ms, "handshake_ms": 10_000}


@dataclass
class Played:
    result: object  # engine Result
    turns: int
    think_s: list[float] = field(default_factory=list)
    decisions: list[int] = field(default_factory=list)


def play(agents, rules, seed: int, *, clock: MatchClock = MatchClock(), max_turns: int = 2000,
         game_id: str = "g") -> Played:
    """Play one game; ``agents[seat]`` answers that seat's requests. Illegal ids raise."""
    n = len(agents)
    state, events = start_game(rules, n, seed, max_turns=max_turns)
    names = [a.name for a in agents]
    opts = rules.options()
    pending = [[event_for(e, s) for e in events] for s in range(n)]
    for seat, a in enumerate(agents):
        a.begin(protocol.start(game_id, seat, n, names, opts, clock.as_json(),
                               (seed * 1_000_003 + seat) % (1 << 31)))  # as the referee seeds bots
    think = [0.0] * n
    decisions = [0] * n
    rid = 0
    while state.result is None:
        seat = state.to_move
        actions = legal_actions(state)
        if len(actions) == 1:
            choice = 0
        else:
            rid += 1
            msg = protocol.request(rid, game_id, decision_name(state), seat_view(state, seat), pending[seat],
                                   [action_json(a) for a in actions],
                                   {"move_ms": clock.move_ms, "bank_ms": clock.bank_ms})
            t = time.perf_counter()
            choice = agents[seat].choose(msg)
            think[seat] += time.perf_counter() - t
            decisions[seat] += 1
            pending[seat] = []
            if not (isinstance(choice, int) and 0 <= choice < len(actions)):
                raise ValueError(f"{names[seat]} answered {choice!r} to {len(actions)} actions")
        state, evs = apply_action(state, actions[choice], check=False)
        for s in range(n):
            pending[s].extend(event_for(e, s) for e in evs)
    res = result_json(state.result)
    final = reveal(state)
    for seat, a in enumerate(agents):
        a.end(protocol.end(game_id, res, final, pending[seat]))
    return Played(state.result, state.turn, think, decisions)
