"""Your own checkpoint as a bot: copy a weights file of examples/rl/train.py (its best.json, or any
weights-STEPS.json) here as weights.json, then `arena match examples/rl/mybot learned`. It plays
like the bundled `learned` (the same pure-Python network and setup table), from these weights;
the package's own arena/ai/learned.json is left as it is. Change name or version in bot.toml for
each checkpoint you keep, so their games stay apart in the store."""
import sys
from pathlib import Path

from arena.ai.learned import LearnedAgent
from arena.botkit import serve

WEIGHTS = Path(__file__).with_name("weights.json")
if not WEIGHTS.exists():
    sys.exit(f"{WEIGHTS} is missing: copy a checkpoint of examples/rl/train.py here (cp RUN/best.json {WEIGHTS})")
agent = LearnedAgent(WEIGHTS)
serve(agent.choose, "my-learned", "0.1", on_start=agent.begin)
