#!/usr/bin/env python3
"""Palace Arena starter bot in Python, on the arena's bot kit (``arena.botkit``).

The kit runs the protocol (stdin/stdout JSON lines; ``print`` goes to stderr) and
hands ``choose`` each request as typed objects: ``req.view`` (your hand, the pile,
every seat), ``req.actions`` (the legal actions, each with the ``id`` to answer).
This template plays a uniformly random legal action.

Needs only the standard library and the ``arena`` package: the arena runs
``python3`` bots with its own interpreter, where ``arena`` is importable. To run it
by hand from a checkout: ``PYTHONPATH=/path/to/checkout python3 bot.py``.

Randomness: each game's choices are seeded from its ``start`` message's ``seed``, as
protocol/PROTOCOL.md recommends, so ``arena debug`` replays an unmodified bot exactly.

Environment:
    BOT_SEED   optional; seeds the random generator before any start message arrives (a run
               by hand; integer or any string). Without it that seed is taken from the clock.
"""

import os
import random
import sys
import time

try:
    from arena.botkit import Request, serve
except ImportError:
    sys.exit("starter-python needs the arena package (arena.botkit): run it under the arena, "
             "or by hand with PYTHONPATH set to a Palace Arena checkout")

BOT_NAME = "starter-python"  # keep in sync with bot.toml
BOT_VERSION = "1.0.0"


def make_rng():
    seed = os.environ.get("BOT_SEED")
    if not seed:
        seed = time.time_ns()
    else:
        try:
            seed = int(seed)
        except ValueError:
            pass  # random.Random accepts strings too (deterministically)
    return random.Random(seed), seed


RNG, SEED = make_rng()


def log(*parts):
    print(f"[{BOT_NAME}]", *parts, file=sys.stderr, flush=True)


# ==========================================================================
# YOUR STRATEGY GOES HERE
# ==========================================================================
def choose(req: Request) -> int:
    """Return the id of the action to play.

    Some of what a request offers (see arena/botkit/types.py and protocol/PROTOCOL.md):
        req.actions            legal actions: a.id, a.kind ("play", "pick_up", "flip", ...),
                               a.cards (Card: .name "7H", .rank 2..14, 15 joker), a.zone
        req.plays()            just the plays
        req.view.hand          your hand; req.view.pile, req.view.pile_top (rank to beat)
        req.view.players       every seat: hand_count, face_up, face_down, known_hand, place
        req.view.opponents()   the other seats still playing, from the next one on
    A lowest-card-first bot, for example:
        plays = req.plays()
        return min(plays, key=lambda a: a.rank).id if plays else req.actions[0].id
    For search, arena.botkit.Game samples whole game states consistent with what you saw.
    To say what the bot was thinking (shown in replays, scored in standings), return
    (id, {"win_prob": 0.6, "eval": 0.2, "iterations": 400, "text": "..."}) instead of the id.
    """
    actions = req.actions
    if not actions:
        log("request", req.id, "has no actions; answering 0")
        return 0
    return actions[RNG.randrange(len(actions))].id


def on_game_start(msg):
    """A new game begins (one process plays many games): seed from the game's start.seed."""
    seed = msg.get("seed", SEED)
    RNG.seed(seed)
    log(f"game {msg.get('game')} starts: seat {msg.get('seat')} of {msg.get('players')} players (seed {seed})")


def on_game_end(msg):
    """The game ended; no answer is expected."""


if __name__ == "__main__":
    sys.stdin.reconfigure(encoding="utf-8", errors="replace")
    serve(choose, BOT_NAME, BOT_VERSION, typed=True, on_start=on_game_start, on_end=on_game_end)
