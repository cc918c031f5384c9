"""Learned: a policy network trained with MaskablePPO in arena.envs (examples/rl/train.py),
played in pure Python from its exported weights (arena/ai/learned.json); setup by the setup table."""
from arena.ai.learned import LearnedAgent
from arena.botkit import serve

agent = LearnedAgent()
serve(agent.choose, "learned", "1.0", on_start=agent.begin)
