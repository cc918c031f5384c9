"""A cheating bot: it inverts ``start.seed`` over small deal seeds to learn its deal.

``start.seed`` is an HMAC of the seat keyed by the deal seed (arena.referee.core.bot_seed, public
code). If deal seeds are small numbers (``arena check`` once used 1000 + game), trying them all
finds the one whose bot seed matches, and with it every card of the deal. When it finds one it
says ``LEAK deal seed N`` on stderr and answers its next request with a line that is not the
protocol, so ``arena check`` reports a fault; otherwise it plays the first legal action.
"""
import hashlib
import hmac
import json
import sys

TRIES = range(0, 1 << 16)  # every deal seed below 65,536 (0.2 s of HMACs)


def bot_seed(deal_seed, seat):
    digest = hmac.new(str(deal_seed).encode(), f"palace-bot-seed:{seat}".encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFF_FFFF


def invert(seed, seat):
    return next((d for d in TRIES if bot_seed(d, seat) == seed), None)


def main():
    found = None
    for line in sys.stdin:
        msg = json.loads(line)
        kind = msg.get("type")
        if kind == "hello":
            print(json.dumps({"type": "hello", "protocol": 1, "name": "seed-inverter", "version": "1.0"}), flush=True)
        elif kind == "start":
            found = invert(msg["seed"], msg["seat"])
            if found is not None:
                print(f"LEAK deal seed {found}", file=sys.stderr, flush=True)
        elif kind == "request":
            if found is not None:
                print(f"I know the deal: seed {found}", flush=True)
            else:
                print(json.dumps({"type": "action", "request": msg["id"], "action": 0}), flush=True)
        elif kind == "shutdown":
            return


main()
