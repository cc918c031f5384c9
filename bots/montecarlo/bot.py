"""Monte Carlo: every legal action tried on many card-counted deals of the hidden cards,
each followed by heuristic playouts; the best average place wins.

Budget per decision: MC_MS (milliseconds) or MC_ITERATIONS (rounds over all actions);
by default 30% of the request's move_ms, never more than 80% of it.
"""
from arena.ai.agents import MonteCarloAgent
from arena.botkit import serve

agent = MonteCarloAgent()


def choose(req):
    """The agent's choice, with what its search found (sent as the reply's info)."""
    action = agent.choose(req)
    return action, agent.info


serve(choose, "montecarlo", "1.0", on_start=agent.begin, on_end=agent.end)
