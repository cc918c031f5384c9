"""Random: any legal action, uniformly. The floor of the ladder.

It reseeds from each game's ``start`` seed, so the same game plays out the same
way whichever process serves it (resumed tournaments rely on that).
"""
import random

from arena.botkit import serve
from arena.strategies import random_policy

rng = random.Random(0)
serve(random_policy(rng), "random", "1.0", on_start=lambda msg: rng.seed(msg["seed"]))
