"""The policy ``examples/rl/train.py`` learned, as an arena bot.

It encodes each request exactly as the training environment did
(``arena.envs.encode``: the view as numbers, the actions as fixed indices) and plays
the legal action with the highest score. Needs numpy and the ``arena`` package, both
there when the arena runs it. If a request cannot be encoded (rules it cannot read),
it plays the first legal action and says why on stderr.
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from policy import LinearPolicy  # noqa: E402

from arena.botkit import serve  # noqa: E402
from arena.engine.rules import Rules  # noqa: E402
from arena.envs.encode import encode, request_mask  # noqa: E402

POLICY = LinearPolicy.load(HERE / "policy.npz")
game = {"rules": None, "players": 2}


def on_start(msg):
    try:
        game["rules"], game["players"] = Rules.from_options(msg["rules"]), msg["players"]
    except Exception as e:  # noqa: BLE001 - play on, first legal action
        game["rules"] = None
        print(f"rl-linear: cannot read the rules ({e}); playing the first legal action", file=sys.stderr)


def choose(req):
    actions = req["actions"]
    if len(actions) == 1 or game["rules"] is None:
        return actions[0]["id"]
    try:
        mask, ids = request_mask(actions)
        return ids[POLICY.greedy(encode(req["view"], game["rules"], game["players"]), mask)]
    except Exception as e:  # noqa: BLE001 - never forfeit over our own bug
        print(f"rl-linear: {type(e).__name__}: {e}; playing the first legal action", file=sys.stderr)
        return actions[0]["id"]


serve(choose, "rl-linear", "1.0", on_start=on_start)
