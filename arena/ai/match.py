"""Games between in-process agents, through the same referee core as bot processes.

The benchmark and the tests need thousands of games; bot processes and pipes would
cost more than the games. So agents are driven by :class:`arena.referee.RefereeCore`
directly, without trio, processes or a clock that forfeits: they are sent exactly the
messages a bot would be (``start``, ``request`` with its pending events, ``end``) and
see nothing else. Each answer's time is charged to the seat's bank as the referee does.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from arena.referee.core import Answered, RefereeCore, TimeControl

MatchClock = TimeControl  # the name the benchmarks use


@dataclass
class Played:
    result: object  # engine Result
    turns: int
    think_s: list[float] = field(default_factory=list)
    decisions: list[int] = field(default_factory=list)


def play(agents, rules, seed: int, *, clock: TimeControl = TimeControl(), max_turns: int = 2000,
         game_id: str = "g") -> Played:
    """Play one game; ``agents[seat]`` answers that seat's requests. Illegal ids raise."""
    names = [a.name for a in agents]
    core = RefereeCore(rules, names, seed, game_id=game_id, clock=clock, max_turns=max_turns, encode=False)
    for seat, a in enumerate(agents):
        a.begin(core.start_message(seat))
    while (req := core.next_request()) is not None:
        t = time.perf_counter()
        choice = agents[req.seat].choose(req.message)
        seconds = time.perf_counter() - t
        if not (isinstance(choice, int) and not isinstance(choice, bool) and 0 <= choice < req.n_actions):
            raise ValueError(f"{names[req.seat]} answered {choice!r} to {req.n_actions} actions")
        core.settle(Answered(choice, seconds))
    for seat, message in core.end_messages():
        agents[seat].end(message)
    rec = core.record
    return Played(core.state.result, core.state.turn, [ms / 1000 for ms in rec.think_ms], rec.decisions)
