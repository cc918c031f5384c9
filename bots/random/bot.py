"""Random: any legal action, uniformly. The floor of the ladder."""
import os
import random

from arena.botkit import serve
from arena.strategies import random_policy

serve(random_policy(random.Random(os.environ.get("BOT_SEED"))), "random", "1.0")
