"""Heuristic-setup: the engine heuristic with face-up cards chosen by a learned table.

The table (arena/ai/setup_table.json) was learned from simulated games; play keeps
2s, 10s and jokers for hopeless piles, lays low cards and whole sets first, finishes
four-of-a-kinds and blocks a player down to table cards. It sees only the requests.
"""
from arena.ai.agents import HeuristicAgent
from arena.botkit import serve

agent = HeuristicAgent()
serve(agent.choose, "heuristic-setup", "1.0", on_start=agent.begin, on_end=agent.end)
