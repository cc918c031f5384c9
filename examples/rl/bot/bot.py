"""The policy ``examples/rl/train.py`` learned, as an arena bot: standard library only.

Each legal action of a request is scored with the learned weights (``theta.json``)
over the same action features the trainer used (``examples/rl/policy.py``, checked
equal by ``tests/test_envs.py``), and the best is played; ties go to the lower index of
the fixed action space, as in training. No numpy: the Python that runs sandboxed bots
may not have it.
"""

import json
import sys
from pathlib import Path

from arena.botkit import serve
from arena.envs.actions import json_index

HERE = Path(__file__).resolve().parent
THETA = json.loads((HERE / "theta.json").read_text())["theta"]
PLAY = 6  # play features: rank / 14, a 2, a 10, a joker, count / 4, from face-up
SETUP_SLOTS = 20
RANK = {ch: k + 2 for k, ch in enumerate("23456789TJQKAX")}


def features(action: dict, position: int, view: dict) -> list[float]:
    """The trainer's features of one request action (see examples/rl/policy.py)."""
    f = [0.0] * len(THETA)
    kind = action["kind"]
    if kind == "pick_up":
        f[0], f[1] = 1.0, len(view["pile"]) / 16
    elif kind == "flip":
        f[2] = 1.0
    elif kind == "play" and action.get("target") is not None:
        f[3] = 1.0
    elif kind == "play":
        rank, count = RANK[action["cards"][0][0]], len(action["cards"])
        at = 4 if view["stock"] > 0 else 4 + PLAY
        f[at:at + PLAY] = (rank / 14, float(rank == 2), float(rank == 10), float(rank == 15), count / 4,
                           float(action["from"] == "face_up"))
    elif position < SETUP_SLOTS:
        f[4 + 2 * PLAY + position] = 1.0
    return f


def score(action: dict, position: int, view: dict) -> float:
    return sum(t * x for t, x in zip(THETA, features(action, position, view)))


def choose(req: dict) -> int:
    actions = req["actions"]
    if len(actions) == 1:
        return actions[0]["id"]
    try:
        view = req["view"]
        best = max(range(len(actions)), key=lambda k: (score(actions[k], k, view), -json_index(actions[k], k)))
        return actions[best]["id"]
    except Exception as e:  # noqa: BLE001 - never forfeit over our own bug
        print(f"rl-linear: {type(e).__name__}: {e}; playing the first legal action", file=sys.stderr)
        return actions[0]["id"]


if __name__ == "__main__":
    serve(choose, "rl-linear", "1.0")
