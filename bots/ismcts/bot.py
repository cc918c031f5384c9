"""ISMCTS: single-observer information-set Monte Carlo tree search with a fresh
card-counted determinization per iteration and heuristic playouts.

Budget per decision: ISMCTS_MS (milliseconds, e.g. 1000) or ISMCTS_ITERATIONS;
by default 30% of the request's move_ms, never more than 80% of it.
"""
from arena.ai.agents import ISMCTSAgent
from arena.botkit import serve

agent = ISMCTSAgent()


def choose(req):
    """The agent's choice, with what its search found (sent as the reply's info)."""
    action = agent.choose(req)
    return action, agent.info


serve(choose, "ismcts", "1.0", on_start=agent.begin, on_end=agent.end)
