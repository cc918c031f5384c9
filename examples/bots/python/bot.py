#!/usr/bin/env python3
"""Palace Arena starter bot (Python, standard library only).

The referee talks to this program over stdin/stdout, one JSON object per
line (UTF-8).  stdout carries ONLY protocol lines; anything you want to log
goes to stderr.  This template plays a uniformly random legal action.

To write your own bot, replace the body of `choose(request)` below (look for
"YOUR STRATEGY GOES HERE").  Everything else is protocol plumbing that you
normally do not need to touch.

Environment:
    BOT_SEED   optional; seeds the random generator (integer or any string).
               Without it the seed is taken from the clock.
"""

import json
import os
import random
import sys
import time

BOT_NAME = "starter-python"      # keep in sync with bot.toml
BOT_VERSION = "1.0.0"
PROTOCOL = 1

# --------------------------------------------------------------------------
# I/O setup.
#
# We keep a private handle on the real stdout for protocol messages and point
# `sys.stdout` at stderr, so a stray print() in your strategy code ends up in
# the log instead of corrupting the protocol stream.
# --------------------------------------------------------------------------
sys.stdin.reconfigure(encoding="utf-8", errors="replace")
_PROTOCOL_OUT = sys.stdout
_PROTOCOL_OUT.reconfigure(encoding="utf-8")
sys.stdout = sys.stderr


def log(*parts):
    """Write one line to stderr (the bot's free-form log)."""
    print(f"[{BOT_NAME}]", *parts, file=sys.stderr, flush=True)


def send(obj):
    """Write one protocol message (one line) to the referee and flush."""
    _PROTOCOL_OUT.write(json.dumps(obj, separators=(",", ":")) + "\n")
    _PROTOCOL_OUT.flush()


def make_rng():
    seed = os.environ.get("BOT_SEED")
    if seed is None or seed == "":
        seed = time.time_ns()
    else:
        try:
            seed = int(seed)
        except ValueError:
            pass  # random.Random accepts strings too (deterministically)
    return random.Random(seed), seed


RNG, SEED = make_rng()


# ==========================================================================
# YOUR STRATEGY GOES HERE
# ==========================================================================
def choose(request):
    """Return the id (an int) of the action to play for this request.

    `request` is the decoded request message, e.g.
        {"type": "request", "id": 17, "game": "g-1", "decision": "play",
         "view": {...}, "events": [...],
         "actions": [{"id": 0, "kind": "play", "cards": ["7H"], "from": "hand"},
                     {"id": 1, "kind": "pick_up"}],
         "clock": {"move_ms": 1000, "bank_ms": 10000}}

    Action ids are always 0..len(actions)-1, in order, and every listed
    action is legal.  `view` (what you can see of the game) and `events`
    (what happened since your last request) are documented with the
    protocol; this starter ignores them and picks uniformly at random.
    """
    actions = request.get("actions") or []
    if not actions:
        log("request", request.get("id"), "has no actions; answering 0")
        return 0
    return RNG.randrange(len(actions))


def on_game_start(msg):
    """Called on "start": a new game begins (one process plays many games)."""
    log(f"game {msg.get('game')} starts: seat {msg.get('seat')} of "
        f"{msg.get('players')} players (seed {SEED})")


def on_game_end(msg):
    """Called on "end" with the final result; no answer is expected."""


# ==========================================================================
# Protocol loop (you normally do not need to change anything below).
# ==========================================================================
def main():
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            msg = json.loads(line)
        except ValueError as exc:
            log("ignoring unparsable line:", exc)
            continue
        if not isinstance(msg, dict):
            log("ignoring non-object message")
            continue

        kind = msg.get("type")
        if kind == "hello":
            send({"type": "hello", "protocol": PROTOCOL,
                  "name": BOT_NAME, "version": BOT_VERSION})
        elif kind == "start":
            on_game_start(msg)
        elif kind == "request":
            action = choose(msg)
            send({"type": "action", "request": msg.get("id"), "action": action})
        elif kind == "error":
            log("referee error:", msg.get("reason"), msg.get("message"))
        elif kind == "end":
            on_game_end(msg)
        elif kind == "shutdown":
            break
        # Any other type: ignore (forward compatibility).
    return 0  # EOF or shutdown: exit cleanly


if __name__ == "__main__":
    sys.exit(main())
